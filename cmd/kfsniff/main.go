// Command kfsniff analyses Kafka traffic, captured live or read from packet
// captures: it decodes every request and response, pairs them, and reports
// what is wrong.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	catchSIGPIPE()
	warmGC()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Config is what the command line asks for.
type Config struct {
	Files []string
	Live  LiveConfig
	// Filter is the trailing tcpdump-style expression.
	Filter   string
	Write    string
	Count    int64
	Duration time.Duration
	TUI      bool
	NoTUI    bool
	Ports    string
	MaxFrame int
	Workers  int
	// BufferBudget and MaxWaiting are the totals across connections
	// (flows.Config.BufferBudget, MaxPendingTotal).
	BufferBudget int
	MaxWaiting   int
	Frames       bool
	JSON         bool
	Verbose      bool
	// ShowSecrets shows credentials from the wire (--show-secrets).
	ShowSecrets bool
	// TLSKeyLogs are the --tls-keylog files.
	TLSKeyLogs []string
	APIs       string
	ClientID   string
	Conns      []string
	Errors     bool
	FailOn     string
	List       bool
	Settings   []string
	Expect     ExpectConfig
	// HTML is the --html page's file (html.go).
	HTML        string
	MetricsAddr string
}

// Validate checks the settings that flags cannot check by type.
func (c *Config) Validate() error {
	if c.FailOn != "" {
		if _, err := detectors.ParseSeverity(c.FailOn); err != nil {
			return fmt.Errorf("--fail-on: %v", err)
		}
	}
	if len(c.Files) > 0 && c.Live.Interface != "" {
		return errors.New("give -i IFACE to capture live or -r FILE to read a capture, not both")
	}
	if len(c.Files) == 0 && c.Live.Interface == "" {
		return errors.New("no input: capture live with -i IFACE (kfsniff -D lists interfaces) or read a capture with -r FILE (- for standard input)")
	}
	if err := c.Live.Validate(); err != nil {
		return err
	}
	if c.Count < 0 {
		return fmt.Errorf("-c must not be negative, got %d", c.Count)
	}
	if c.Duration < 0 {
		return fmt.Errorf("--duration must not be negative, got %s", c.Duration)
	}
	if c.Write == "-" {
		return errors.New("-w -: writing the capture to standard output is not supported (the report goes there); give a file name")
	}
	if c.TUI && c.NoTUI {
		return errors.New("--tui and --no-tui contradict each other")
	}
	if c.MaxFrame <= 0 {
		return fmt.Errorf("--max-frame must be positive, got %d", c.MaxFrame)
	}
	if c.Workers < 0 {
		return fmt.Errorf("--workers must not be negative, got %d", c.Workers)
	}
	if c.BufferBudget < 0 || c.MaxWaiting < 0 {
		return fmt.Errorf("--buffer-budget and --max-waiting must not be negative, got %d and %d", c.BufferBudget, c.MaxWaiting)
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
	if err := validMetricsAddr(c.MetricsAddr); err != nil {
		return err
	}
	return c.validateExpect()
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
	var cfg Config
	fs := pflag.NewFlagSet("kfsniff", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringArrayVarP(&cfg.Files, "read", "r", nil, "read packets from `FILE` (pcap, pcapng, .gz; - for stdin); repeatable")
	fs.StringVar(&cfg.Ports, "ports", flows.DefaultPorts, "TCP `ports` treated as Kafka without content checks (other ports are recognised by content)")
	fs.IntVar(&cfg.MaxFrame, "max-frame", flows.DefaultConfig().MaxFrame, "largest Kafka frame in `bytes`; larger size prefixes are framing errors")
	fs.IntVar(&cfg.BufferBudget, "buffer-budget", flows.DefaultConfig().BufferBudget, "`bytes` of partial frames buffered across all connections; over it the largest is dropped (skipped as budget); 0: no bound")
	fs.IntVar(&cfg.MaxWaiting, "max-waiting", flows.DefaultConfig().MaxPendingTotal, "requests waiting for a response across all connections; over it the oldest are counted unanswered; 0: no bound")
	fs.IntVar(&cfg.Workers, "workers", 0, "analyse connections on `N` goroutines (0: one per CPU, at most 8; files under 16 MiB and live capture use 1); the output is the same")
	fs.BoolVar(&cfg.Frames, "frames", false, "print one line per request and response instead of the report")
	fs.BoolVar(&cfg.JSON, "json", false, "print the report as one JSON document (with --frames: JSON Lines)")
	fs.BoolVarP(&cfg.Verbose, "verbose", "v", false, "with --frames: also print every decoded field")
	fs.StringVar(&cfg.APIs, "api", "", "with --frames: only these APIs (comma list of names or keys, e.g. Fetch,Metadata or 1,3)")
	fs.StringVar(&cfg.ClientID, "client-id", "", "with --frames: only frames whose client id contains `TEXT`")
	fs.StringArrayVar(&cfg.Conns, "conn", nil, "with --frames: only connection `ID` or endpoint (ip or ip:port); repeatable")
	fs.StringArrayVar(&cfg.TLSKeyLogs, "tls-keylog", nil, "decrypt TLS connections with the secrets of this NSS key log `FILE` (SSLKEYLOGFILE, Go's KeyLogWriter); repeatable")
	fs.BoolVar(&cfg.ShowSecrets, "show-secrets", false, "show the credentials the wire carries (SASL passwords, SCRAM proofs, OAUTHBEARER tokens, delegation token HMACs, sensitive config values) in --frames -v and the UI; redacted by default")
	fs.BoolVar(&cfg.Errors, "errors", false, "with --frames: only responses carrying error codes, and undecodable frames")
	fs.StringVar(&cfg.FailOn, "fail-on", "", "exit 3 if a finding of at least this `severity` (info, warning, error) exists")
	fs.BoolVar(&cfg.List, "list-detectors", false, "describe the detectors and their thresholds, then exit")
	fs.StringArrayVarP(&cfg.Settings, "option", "o", nil, "set a detector threshold, `detector.param=value` (see --list-detectors); repeatable")
	fs.StringVarP(&cfg.Live.Interface, "interface", "i", "", "capture live on `IFACE` (a name, an index from -D, or any)")
	listIfaces := fs.BoolP("list-interfaces", "D", false, "list the interfaces -i can capture on, then exit")
	fs.IntVarP(&cfg.Live.Snaplen, "snapshot-length", "s", capture.DefaultSnaplen, "keep at most `bytes` of each captured packet (0: 262144)")
	fs.IntVarP(&cfg.Live.BufferKiB, "buffer-size", "B", capture.DefaultBufferSize>>10, "kernel capture ring size in `KiB`")
	fs.BoolVarP(&cfg.Live.NoPromisc, "no-promiscuous-mode", "p", false, "do not put the interface in promiscuous mode")
	fs.Int64VarP(&cfg.Count, "count", "c", 0, "stop after `N` packets (0: no limit)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "stop after this long, e.g. 30s or 5m (0: until Ctrl-C)")
	fs.StringVarP(&cfg.Write, "write", "w", "", "also write every packet analysed to `FILE` (pcapng if it ends in .pcapng, pcap otherwise)")
	fs.BoolVar(&cfg.TUI, "tui", false, "open the terminal UI (the default for live capture on a terminal), also for -r")
	fs.BoolVar(&cfg.NoTUI, "no-tui", false, "no terminal UI: print the report at the end (and --frames as they are decoded)")
	addExpectFlags(fs, &cfg.Expect)
	fs.StringVar(&cfg.HTML, "html", "", "also write the report as one self-contained HTML page to `FILE` (charts over time, a map of who talks to whom, sortable tables)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", metricsUsage)
	var limits findingLimits
	limits.register(fs)
	help := fs.BoolP("help", "h", false, "show this help")
	recs := addRecordFlags(fs)
	exp := addExportFlags(fs)
	cr := addCorrelateFlags(fs)
	progCfg := addProgressFlags(fs)
	version := fs.Bool("version", false, "print the version, commit and Go release kfsniff was built with, then exit")
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
	if *version {
		info, ok := debug.ReadBuildInfo()
		writeVersion(stdout, info, ok)
		return exitOK
	}
	if cfg.List {
		fmt.Fprint(stdout, detectors.Describe(all.Analyzers()))
		return exitOK
	}
	if *listIfaces {
		return listInterfaces(stdout, stderr)
	}
	cfg.Filter = strings.Join(fs.Args(), " ")
	if err := applyExpect(&cfg, fs); err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitUsage
	}
	filter, err := capture.ParseFilter(cfg.Filter)
	if err != nil {
		if fs.NArg() == 1 {
			if _, serr := os.Stat(fs.Arg(0)); serr == nil {
				fmt.Fprintf(stderr, "kfsniff: unexpected argument %q (capture files go after -r)\n", fs.Arg(0))
				return exitUsage
			}
		}
		fmt.Fprintf(stderr, "kfsniff: bad filter expression %q: %v\n", cfg.Filter, err)
		return exitUsage
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitUsage
	}
	if err := checkHTML(cfg); err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitUsage
	}
	if err := checkModes(cfg, fs); err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v (see kfsniff --help)\n", err)
		return exitUsage
	}
	if err := refuseOverwrite(cfg, stdin); err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitUsage
	}
	if err := refuseSameOutput(cfg); err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitUsage
	}
	if err := refuseMissingDir(cfg); err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitUsage
	}
	ctx, out := watchPipe(ctx, stdout)
	stdout = out
	warnJSON := &jsonWarner{w: stderr}
	defer warnJSON.done()
	if err := recs.validate(&cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitUsage
	}
	if err := exp.validate(fs, stderr); err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitUsage
	}
	if err := cr.validate(&cfg, fs, exp, stderr); err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitUsage
	}
	if cfg.TUI && !haveTUI() {
		fmt.Fprintln(stderr, "kfsniff: TUI not available in this build")
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
	fcfg.BufferBudget, fcfg.MaxPendingTotal = cfg.BufferBudget, cfg.MaxWaiting
	if fcfg.TLSKeys, err = readKeyLogs(cfg.TLSKeyLogs, cfg.Live.Interface == "", stderr); err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitUsage
	}
	var filterFrames report.FrameFilter
	if cfg.APIs != "" {
		if filterFrames.APIs, err = report.ParseAPIs(cfg.APIs); err != nil {
			fmt.Fprintf(stderr, "kfsniff: --api: %v\n", err)
			return exitUsage
		}
	}
	filterFrames.ClientID, filterFrames.Conns, filterFrames.Errors = cfg.ClientID, cfg.Conns, cfg.Errors

	settings := map[string]map[string]string{}
	for _, o := range cfg.Settings {
		if err := detectors.ParseSetting(o, settings); err != nil {
			fmt.Fprintf(stderr, "kfsniff: -o: %v\n", err)
			return exitUsage
		}
	}
	dets, err := detectors.NewSet(all.Analyzers(), settings)
	if err != nil {
		fmt.Fprintf(stderr, "kfsniff: -o: %v\n", err)
		return exitUsage
	}
	if err := limits.apply(dets); err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v (see kfsniff --help)\n", err)
		return exitUsage
	}
	cr.detectors(all.Analyzers(), settings, dets)

	opt := pipeline.Options{
		Flows:     fcfg,
		Detectors: dets,
		Count:     cfg.Count,
		Duration:  cfg.Duration,
		Workers:   cfg.Workers,
		Warn: func(err error) {
			fmt.Fprintf(stderr, "kfsniff: warning: %v; analysed the packets before it\n", err)
		},
	}
	var (
		files []*capture.File
		live  *capture.Live
		links []capture.LinkType
	)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if cfg.Live.Interface != "" {
		live, err = openLive(cfg.Live, filter)
		if err != nil {
			fmt.Fprintf(stderr, "kfsniff: %v\n", err)
			return exitUsage
		}
		defer live.Close()
		links = live.Links
	} else if !cr.on() {
		opt.Filter = filter
		for i, name := range cfg.Files {
			var f *capture.File
			if name == "-" {
				f, err = capture.NewFile("-", i, newInterruptible(ctx, stdin))
			} else {
				f, err = capture.Open(name, i)
			}
			if err != nil {
				fmt.Fprintf(stderr, "kfsniff: %s\n", strings.TrimPrefix(err.Error(), capture.ErrUnusable.Error()+": "))
				return exitUsage
			}
			files = append(files, f)
			for _, l := range f.Links {
				if !slices.Contains(links, l) {
					links = append(links, l)
				}
			}
		}
	}
	if live != nil && fcfg.TLSKeys != nil {
		fctx, stopFollowing := context.WithCancel(ctx)
		defer stopFollowing()
		if err := followKeyLogs(fctx, fcfg.TLSKeys, cfg.TLSKeyLogs, 200*time.Millisecond, stderr); err != nil {
			fmt.Fprintf(stderr, "kfsniff: %v\n", err)
			return exitUsage
		}
	}
	// pcapng Decryption Secrets Blocks before the first packet decrypt
	// as --tls-keylog does.
	fcfg.TLSKeys = pipeline.FileKeys(files, fcfg.TLSKeys)
	opt.Flows.TLSKeys = fcfg.TLSKeys
	var writer *capture.Writer
	if cfg.Write != "" {
		writer, err = createWriter(cfg, live, links, secretsBlock(cfg.Write, fcfg.TLSKeys)...)
		if err != nil {
			fmt.Fprintf(stderr, "kfsniff: -w %v\n", err)
			return exitUsage
		}
		defer writer.Close()
		opt.Sinks = append(opt.Sinks, writer)
	}
	ms, err := startMetrics(cfg.MetricsAddr, live != nil, dets, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitUsage
	}
	defer ms.close()
	xs, err := exp.start(live != nil, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitUsage
	}
	defer xs.close()
	xs.metrics(ms)
	if cr.on() {
		if err := cr.open(stderr); err != nil {
			fmt.Fprintf(stderr, "kfsniff: %v\n", err)
			return exitUsage
		}
		defer cr.close(stderr)
	}
	start := func(ctx context.Context, add uiAdditions) *pipeline.Result {
		o := opt
		o.Handlers = append(append([]flows.Handler{}, opt.Handlers...), add.Handlers...)
		o.Sinks = append(append([]capture.Sink{}, opt.Sinks...), add.Sinks...)
		o.Progress = add.Progress
		o.LiveFindings = add.LiveFindings
		ms.wrap(&o)
		xs.wrap(&o)
		if live != nil {
			return pipeline.RunSource(ctx, live, o)
		}
		if cr.on() {
			return cr.run(ctx, o)
		}
		return pipeline.Run(ctx, files, o)
	}

	// The terminal UI: asked for, or by default for a live capture on a
	// terminal when no other output was asked for.
	var res *pipeline.Result
	if cfg.TUI || (live != nil && !cfg.NoTUI && !cfg.Frames && !cfg.JSON && haveTUI() && isTerminal(stdout)) {
		res, err = runTUI(ctx, uiSession{ShowSecrets: cfg.ShowSecrets, Source: describeInput(cfg, live), Filter: cfg.Filter, Live: live != nil, Inputs: cfg.Files, Stdin: stdin, Start: start, ExportDropped: xs.dropped()})
		if err != nil {
			fmt.Fprintf(stderr, "kfsniff: %v\n", err)
			return exitFailure
		}
		cfg.Frames = false // the report follows the UI
	} else {
		var handlers []flows.Handler
		var frames *report.FrameWriter
		if cfg.Frames {
			frames = report.NewFrameWriter(stdout, filterFrames, cfg.JSON, cfg.Verbose)
			frames.ShowSecrets = cfg.ShowSecrets
			frames.Warn = warnJSON.frame
			handlers = append(handlers, frames)
			if live != nil || cr.on() {
				// Stream: each line goes out as it is decoded.
				handlers = append(handlers, lineFlusher{frames})
			}
		}
		handlers = append(handlers, recs.handlers()...)
		if live != nil {
			fmt.Fprintf(stderr, "kfsniff: listening on %s, link-type %s, snapshot length %d bytes\n", live.Name, live.Links[0], live.Snaplen)
		}
		pl := newProgress(&cfg, recs, files, stdout, stderr)
		opt.ProgressEvery, opt.Warn = progCfg.every, pl.around(opt.Warn)
		res = start(ctx, uiAdditions{Handlers: handlers, Progress: pl.callback()})
		if frames != nil {
			if err := frames.Flush(); err != nil && !out.broken() {
				fmt.Fprintf(stderr, "kfsniff: writing output: %v\n", err)
				return exitFailure
			}
		}
	}
	ms.finish(res)
	xs.finish(res)
	cr.say(res, stderr)
	if cr.failed(res, stderr) {
		return exitUsage
	}
	if cfg.Frames || recs.w != nil || cfg.Expect.File != "" {
		xs.say(res, stderr)
	}
	if res.Interrupted && live == nil && !out.broken() {
		fmt.Fprintln(stderr, "kfsniff: interrupted; reporting what was read")
	}
	code := exitOK
	if writer != nil {
		if err := writer.Close(); err != nil && res.Err == nil {
			res.Err = err
		}
	}
	if res.Err != nil {
		fmt.Fprintf(stderr, "kfsniff: writing the capture: %v; the report covers the packets before it\n", res.Err)
		code = exitFailure
	}

	rep := res.Report
	if cfg.Filter != "" {
		rep.Capture.Filter = &report.Filter{Expression: cfg.Filter}
	}
	// The files asked for are written whatever became of standard output.
	outputs := func(code int) int {
		if cfg.HTML != "" {
			if err := writeHTML(cfg.HTML, rep); err != nil {
				fmt.Fprintf(stderr, "kfsniff: --html: %v\n", err)
				return exitFailure
			}
		}
		if cfg.Expect.Write != "" && code == exitOK {
			if err := writeExpect(cfg, analysisOf(&cfg, fs), rep, res.Interrupted, stderr); err != nil {
				fmt.Fprintf(stderr, "kfsniff: --write-expect: %v\n", err)
				return exitFailure
			}
		}
		return code
	}
	if out.broken() {
		pipeClosed(stderr, cfg, recs, res, writer, live != nil)
		return outputs(code)
	}
	if recs.w != nil {
		return outputs(max(recs.finish(ctx, &cfg, opt, res, stderr), code))
	}
	if cfg.Expect.File != "" {
		return outputs(compareExpect(cfg, rep, code, stdout, stderr))
	}
	if !cfg.Frames {
		if cfg.JSON {
			err = report.WriteJSONWarn(stdout, rep, warnJSON.report)
		} else {
			err = report.WriteText(stdout, rep)
		}
		if out.broken() {
			pipeClosed(stderr, cfg, recs, res, writer, live != nil)
			return outputs(code)
		}
		if err != nil {
			fmt.Fprintf(stderr, "kfsniff: writing output: %v\n", err)
			return exitFailure
		}
	}
	if live != nil {
		liveSummary(stderr, res)
	}
	if code = outputs(code); code != exitOK {
		return code
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
