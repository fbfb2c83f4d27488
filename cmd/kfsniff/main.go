// Command kfsniff analyses Kafka traffic, captured live or read from packet
// captures: it decodes every request and response, pairs them, and reports
// what is wrong.
//
// A run goes through stages, each in its own file: parse (parse.go: the
// flags into a command), validate (validate.go: every check of the flags
// together, and the settings turned into typed values), plan (plan.go:
// the inputs and outputs opened, the pipeline's options), execute and
// write (execute.go: the analysis, then the report and the exit code).
// A stage that fails returns an error; run alone prints it (exitWith).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/report"
)

// Exit codes, documented in the README and --help.
const (
	exitOK       = 0
	exitFailure  = 1
	exitUsage    = 2 // bad flags, or input that cannot be read at all
	exitFindings = 3 // --fail-on matched a finding
)

func main() {
	// The signals stay caught to the end: os.Exit ends the process, and
	// giving them back (NotifyContext's stop) cost two hand-offs with the
	// runtime's signal thread (start-up, BENCHMARKS.md).
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	catchSIGPIPE()
	warmGC()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usageHead = `kfsniff: Kafka-aware packet capture analyser

Usage:
  kfsniff -i IFACE [flags] [FILTER EXPRESSION]
  kfsniff -r FILE [-r FILE...] [flags] [FILTER EXPRESSION]
  kfsniff -r kafka://HOST:PORT[,HOST:PORT]/TOPIC [--group NAME] [--until-end] [flags]
  kfsniff -D
  kfsniff --list-detectors
  kfsniff check [--junit FILE] [--jobs N] DIR...   (kfsniff check --help)
  kfsniff --version

Captures live (-i, Linux AF_PACKET; needs root or CAP_NET_RAW) or reads pcap
or pcapng captures (gzip-compressed or not; "-" is standard input),
reassembles TCP, decodes every Kafka request and response, pairs them by
correlation id and prints a report. Several -r files are merged into one
timeline by timestamp. A trailing tcpdump-style filter expression (host, net,
port, portrange, src/dst, ip, ip6, tcp, udp, vlan, and/or/not, parentheses)
selects packets, live in the kernel and from files alike:
  kfsniff -i eth0 port 9092 or port 8081
A live capture runs until Ctrl-C, -c or --duration, then prints the report.

Flags:
`

const usageTail = `
Exit codes:
  0  analysis done
  1  failure while running (e.g. output could not be written)
  2  usage error, or an input that cannot be read at all
     (missing file, not a capture, unsupported link type, bad filter
     expression, unknown interface, no privilege to capture)
  3  a finding at or above --fail-on's severity (for CI:
     kfsniff -r incident.pcap --fail-on warning)
  4  the --expect file does not hold (kfsniff check: a capture's
     expectation does not hold or could not be checked)
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "check" {
		return runCheck(ctx, args[1:], stdout, stderr)
	}
	c, err := parse(args, stderr)
	if err != nil {
		return exitWith(stderr, err)
	}
	c.cr.args = args
	if c.inform != nil {
		return c.inform(stdout, stderr)
	}
	ctx, out := watchPipe(ctx, stdout)
	c.out, c.stdin, c.stderr = out, stdin, stderr
	c.warnJSON = &jsonWarner{w: stderr}
	defer c.warnJSON.done()
	if err := c.validate(); err != nil {
		return exitWith(stderr, err)
	}
	if c.cfg.memoryLimit > 0 {
		// The process's: a limit set by an earlier run in the same
		// process (tests) is replaced, not restored.
		debug.SetMemoryLimit(c.cfg.memoryLimit)
	}
	p, err := c.plan(ctx)
	defer p.close()
	if err != nil {
		return exitWith(stderr, err)
	}
	res, err := c.execute(ctx, p)
	if err != nil {
		return exitWith(stderr, err)
	}
	code := c.write(ctx, p, res)
	// After the report: partitions a killed member of the group left
	// unreported are taken over, each time in a report of their own
	// written after this one, to the same output.
	left, taken := c.cr.settle(stderr, func(args []string) int {
		return run(ctx, args, strings.NewReader(""), stdout, stderr)
	})
	switch {
	case left && code == exitOK:
		code = exitFailure
	case taken != exitOK && code == exitOK:
		code = taken
	}
	return code
}

// exitError is how a stage ends the run: the message run prints after
// "kfsniff: ", and the exit code.
type exitError struct {
	code int
	err  error
	// seeHelp adds " (see kfsniff --help)" to the message.
	seeHelp bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usage is a usage error: bad flags, or an input that cannot be read at
// all (exit 2).
func usage(err error) error {
	if _, ok := err.(*exitError); ok {
		return err
	}
	return &exitError{code: exitUsage, err: err}
}

// usagef is usage(fmt.Errorf(format, a...)).
func usagef(format string, a ...any) error { return usage(fmt.Errorf(format, a...)) }

// seeHelp is a usage error whose remedy is in --help.
func seeHelp(err error) error { return &exitError{code: exitUsage, err: err, seeHelp: true} }

// failure is an error while running (exit 1).
func failure(err error) error { return &exitError{code: exitFailure, err: err} }

// exitWith prints err, as "kfsniff: message", and returns its exit code:
// the one place a stage's error reaches the user. An error of no stage
// (not an exitError) is a usage error.
func exitWith(stderr io.Writer, err error) int {
	e, ok := err.(*exitError)
	if !ok {
		e = &exitError{code: exitUsage, err: err}
	}
	if e.seeHelp {
		fmt.Fprintf(stderr, "kfsniff: %v (see kfsniff --help)\n", e.err)
	} else {
		fmt.Fprintf(stderr, "kfsniff: %v\n", e.err)
	}
	return e.code
}

// failOn returns exitFindings if a finding reaches the --fail-on severity.
func failOn(level string, rep *report.Report, stderr io.Writer) int {
	if level == "" {
		return exitOK
	}
	min, _ := detectors.ParseSeverity(level)
	n := 0
	for _, f := range rep.Findings {
		if f.Severity >= min {
			n++
		}
	}
	if n == 0 {
		return exitOK
	}
	fmt.Fprintf(stderr, "kfsniff: %d finding(s) at or above %s\n", n, min)
	return exitFindings
}
