// Command kfsniff analyses Kafka traffic in packet captures: it decodes
// every request and response, pairs them, and reports what is wrong.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Config is what the command line asks for.
type Config struct {
	Files    []string
	Ports    string
	MaxFrame int
	Frames   bool
	JSON     bool
	Verbose  bool
	APIs     string
	ClientID string
	Conns    []string
	Errors   bool
	FailOn   string
	List     bool
	Settings []string
}

// Validate checks the settings that flags cannot check by type.
func (c *Config) Validate() error {
	if c.FailOn != "" {
		if _, err := detectors.ParseSeverity(c.FailOn); err != nil {
			return fmt.Errorf("--fail-on: %v", err)
		}
	}
	if len(c.Files) == 0 {
		return errors.New("no input: give a capture file with -r FILE (or -r - for standard input)")
	}
	if c.MaxFrame <= 0 {
		return fmt.Errorf("--max-frame must be positive, got %d", c.MaxFrame)
	}
	stdin := 0
	for _, f := range c.Files {
		if f == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return errors.New("standard input (-r -) can be read only once")
	}
	return nil
}

const usageHead = `kfsniff: Kafka-aware packet capture analyser

Usage:
  kfsniff -r FILE [-r FILE...] [flags]
  kfsniff --list-detectors

Reads pcap or pcapng captures (gzip-compressed or not; "-" is standard input),
reassembles TCP, decodes every Kafka request and response, pairs them by
correlation id and prints a report. Several -r files are merged into one
timeline by timestamp.

Flags:
`

const usageTail = `
Exit codes:
  0  analysis done
  1  failure while running (e.g. output could not be written)
  2  usage error, or an input that cannot be read at all
     (missing file, not a capture, unsupported link type)
  3  a finding at or above --fail-on's severity (for CI:
     kfsniff -r incident.pcap --fail-on warning)
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cfg Config
	fs := pflag.NewFlagSet("kfsniff", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringArrayVarP(&cfg.Files, "read", "r", nil, "read packets from `FILE` (pcap, pcapng, .gz; - for stdin); repeatable")
	fs.StringVar(&cfg.Ports, "ports", flows.DefaultPorts, "TCP `ports` treated as Kafka without content checks (other ports are recognised by content)")
	fs.IntVar(&cfg.MaxFrame, "max-frame", flows.DefaultConfig().MaxFrame, "largest Kafka frame in `bytes`; larger size prefixes are framing errors")
	fs.BoolVar(&cfg.Frames, "frames", false, "print one line per request and response instead of the report")
	fs.BoolVar(&cfg.JSON, "json", false, "print the report as one JSON document (with --frames: JSON Lines)")
	fs.BoolVarP(&cfg.Verbose, "verbose", "v", false, "with --frames: also print every decoded field")
	fs.StringVar(&cfg.APIs, "api", "", "with --frames: only these APIs (comma list of names or keys, e.g. Fetch,Metadata or 1,3)")
	fs.StringVar(&cfg.ClientID, "client-id", "", "with --frames: only frames whose client id contains `TEXT`")
	fs.StringArrayVar(&cfg.Conns, "conn", nil, "with --frames: only connection `ID` or endpoint (ip or ip:port); repeatable")
	fs.BoolVar(&cfg.Errors, "errors", false, "with --frames: only responses carrying error codes, and undecodable frames")
	fs.StringVar(&cfg.FailOn, "fail-on", "", "exit 3 if a finding of at least this `severity` (info, warning, error) exists")
	fs.BoolVar(&cfg.List, "list-detectors", false, "describe the detectors and their thresholds, then exit")
	fs.StringArrayVarP(&cfg.Settings, "option", "o", nil, "set a detector threshold, `detector.param=value` (see --list-detectors); repeatable")
	help := fs.BoolP("help", "h", false, "show this help")
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHead)
		fs.PrintDefaults()
		fmt.Fprint(stderr, usageTail)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "kfsniff: %v (see kfsniff --help)\n", err)
		return exitUsage
	}
	if *help {
		fs.SetOutput(stdout)
		fmt.Fprint(stdout, usageHead)
		fs.PrintDefaults()
		fmt.Fprint(stdout, usageTail)
		return exitOK
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kfsniff: unexpected argument %q (capture files go after -r)\n", fs.Arg(0))
		return exitUsage
	}
	if cfg.List {
		fmt.Fprint(stdout, detectors.Describe(detectors.Specs()))
		return exitOK
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitUsage
	}
	fcfg := flows.DefaultConfig()
	ports, err := flows.ParsePorts(cfg.Ports)
	if err != nil {
		fmt.Fprintf(stderr, "kfsniff: --ports: %v\n", err)
		return exitUsage
	}
	fcfg.Ports = ports
	fcfg.MaxFrame = cfg.MaxFrame
	var filter report.FrameFilter
	if cfg.APIs != "" {
		if filter.APIs, err = report.ParseAPIs(cfg.APIs); err != nil {
			fmt.Fprintf(stderr, "kfsniff: --api: %v\n", err)
			return exitUsage
		}
	}
	filter.ClientID, filter.Conns, filter.Errors = cfg.ClientID, cfg.Conns, cfg.Errors

	overrides := map[string]float64{}
	for _, o := range cfg.Settings {
		if err := detectors.ParseOverride(o, overrides); err != nil {
			fmt.Fprintf(stderr, "kfsniff: -o: %v\n", err)
			return exitUsage
		}
	}
	dets, err := detectors.New(overrides)
	if err != nil {
		fmt.Fprintf(stderr, "kfsniff: -o: %v\n", err)
		return exitUsage
	}

	files := make([]*capture.File, 0, len(cfg.Files))
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for i, name := range cfg.Files {
		var f *capture.File
		if name == "-" {
			f, err = capture.NewFile("-", i, stdin)
		} else {
			f, err = capture.Open(name, i)
		}
		if err != nil {
			fmt.Fprintf(stderr, "kfsniff: %s\n", strings.TrimPrefix(err.Error(), capture.ErrUnusable.Error()+": "))
			return exitUsage
		}
		files = append(files, f)
	}

	var handlers []flows.Handler
	var frames *report.FrameWriter
	if cfg.Frames {
		frames = report.NewFrameWriter(stdout, filter, cfg.JSON, cfg.Verbose)
		handlers = append(handlers, frames)
	}
	res := pipeline.Run(ctx, files, pipeline.Options{
		Flows:     fcfg,
		Handlers:  handlers,
		Detectors: dets,
		Warn: func(err error) {
			fmt.Fprintf(stderr, "kfsniff: warning: %v; analysed the packets before it\n", err)
		},
	})
	if res.Interrupted {
		fmt.Fprintln(stderr, "kfsniff: interrupted; reporting what was read")
	}

	rep := res.Report
	if frames != nil {
		if err := frames.Flush(); err != nil {
			fmt.Fprintf(stderr, "kfsniff: writing output: %v\n", err)
			return exitFailure
		}
		return failOn(cfg.FailOn, rep, stderr)
	}
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = report.WriteText(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kfsniff: writing output: %v\n", err)
		return exitFailure
	}
	return failOn(cfg.FailOn, rep, stderr)
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
