package main

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/spf13/pflag"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

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
	// UIKeep is --ui-keep: megabytes of the most recent packets the UI's
	// w key can save.
	UIKeep   int
	Ports    string
	MaxFrame int
	Workers  int
	// BufferBudget and MaxWaiting are the totals across connections
	// (flows.Config.BufferBudget, MaxPendingTotal).
	BufferBudget int
	MaxWaiting   int
	// KeepClosed is --keep-closed (flows.Config.KeepClosed): live
	// capture, or -r if given.
	KeepClosed time.Duration
	Frames     bool
	JSON       bool
	Verbose    bool
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
	// MetricsLinger is how long a -r run goes on serving its final
	// metrics, until a scrape has read them.
	MetricsLinger time.Duration
	// MemoryLimit is --memory-limit: the Go runtime's soft memory limit
	// (runtime/debug.SetMemoryLimit), memoryLimit its bytes (0: none).
	MemoryLimit string
	memoryLimit int64
}

// command is one run of kfsniff: the flags as parse read them, then what
// validate made of them, for plan, execute and write.
type command struct {
	cfg    Config
	fs     *pflag.FlagSet
	limits findingLimits
	recs   *recordsConfig
	exp    *exportConfig
	cr     *correlateConfig
	// progressEvery is how often the progress line is redrawn (hidden
	// --progress-interval: tests draw it at every check of the pipeline).
	progressEvery time.Duration
	// inform, when set, is all the run does: --help, --version,
	// --list-detectors, -D.
	inform func(stdout, stderr io.Writer) int

	// The run's standard streams; out is standard output watched for
	// its reader going away (watchPipe).
	out      *pipeOut
	stdin    io.Reader
	stderr   io.Writer
	warnJSON *jsonWarner

	// What validate makes of the flags.
	filter       *capture.Filter
	flows        flows.Config
	filterFrames report.FrameFilter
	// settings are the detector settings (-o, after the --expect file's),
	// parsed once; dets is the run's Set made from them.
	settings map[string]map[string]string
	dets     *detectors.Set
}

// parse reads the command line into a command; a flag that does not
// parse is a usage error.
func parse(args []string, stderr io.Writer) (*command, error) {
	c := &command{settings: map[string]map[string]string{}}
	cfg := &c.cfg
	fs := pflag.NewFlagSet("kfsniff", pflag.ContinueOnError)
	c.fs = fs
	fs.SetOutput(stderr)
	fs.StringArrayVarP(&cfg.Files, "read", "r", nil, "read packets from `FILE` (pcap, pcapng, .gz; - for stdin); repeatable")
	fs.StringVar(&cfg.Ports, "ports", flows.DefaultPorts, "TCP `ports` treated as Kafka without content checks (other ports are recognised by content)")
	fs.IntVar(&cfg.MaxFrame, "max-frame", flows.DefaultConfig().MaxFrame, "largest Kafka frame in `bytes`; larger size prefixes are framing errors")
	fs.IntVar(&cfg.BufferBudget, "buffer-budget", flows.DefaultConfig().BufferBudget, "`bytes` of partial frames buffered across all connections; over it the largest is dropped (skipped as budget); 0: no bound")
	fs.IntVar(&cfg.MaxWaiting, "max-waiting", flows.DefaultConfig().MaxPendingTotal, "requests waiting for a response across all connections; over it the oldest are counted unanswered; 0: no bound")
	fs.DurationVar(&cfg.KeepClosed, "keep-closed", defaultKeepClosed, "live capture: a connection closed for longer than this `DURATION` is no longer listed, its counts folded into the report's totals (a capture left running keeps the connections open and recently closed, not every short-lived one of the last hours); 0: keep them all, up to 100000; -r keeps them all unless given")
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
	fs.StringVar(&cfg.MemoryLimit, "memory-limit", "0", "a soft limit on kfsniff's memory, `SIZE` in bytes or with K, M, G (KiB, MiB, GiB): the garbage collector runs more often as the memory nears it, trading CPU for RSS; it is not a cap (what the analysis holds, within its bounds, is kept). 0: none, Go's default (GOMEMLIMIT, if set, applies)")
	fs.IntVar(&cfg.UIKeep, "ui-keep", 256, "MB of the most recent packets the UI keeps on disk (in $TMPDIR) for its w key, older ones dropped as tcpdump -C/-W does; 0: w is off")
	fs.BoolVar(&cfg.NoTUI, "no-tui", false, "no terminal UI: print the report at the end (and --frames as they are decoded)")
	fs.StringVar(&cfg.Expect.File, "expect", "", "compare the analysis with the expectation `FILE` (docs/expect.md), analysing with its settings; print the differences instead of the report; exit 4 if it does not hold")
	fs.StringVar(&cfg.Expect.Write, "write-expect", "", "also write what this analysis finds to `FILE` as an expectation (with the -o and analysis flags given), to trim and use with --expect or kfsniff check")
	fs.StringVar(&cfg.HTML, "html", "", "also write the report as one self-contained HTML page to `FILE` (charts over time, a map of who talks to whom, sortable tables)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", metricsUsage)
	fs.DurationVar(&cfg.MetricsLinger, "metrics-linger", 0, "with --metrics-addr and -r: once the analysis is done, serve the final metrics until a scrape has read them, at most this `DURATION` (a stream piped to -r - that ended)")
	c.limits.register(fs)
	help := fs.BoolP("help", "h", false, "show this help")
	c.recs = addRecordFlags(fs)
	c.exp = addExportFlags(fs)
	c.cr = addCorrelateFlags(fs)
	fs.DurationVar(&c.progressEvery, "progress-interval", 250*time.Millisecond, "how often the progress line on a terminal is redrawn")
	fs.MarkHidden("progress-interval")
	version := fs.Bool("version", false, "print the version, commit and Go release kfsniff was built with, then exit")
	fs.Usage = func() { printUsage(stderr, fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			c.inform = func(io.Writer, io.Writer) int { return exitOK }
			return c, nil
		}
		return nil, seeHelp(err)
	}
	switch {
	case *help:
		c.inform = func(stdout, _ io.Writer) int {
			fs.SetOutput(stdout)
			printUsage(stdout, fs)
			return exitOK
		}
	case *version:
		c.inform = func(stdout, _ io.Writer) int {
			info, ok := debug.ReadBuildInfo()
			writeVersion(stdout, info, ok)
			return exitOK
		}
	case cfg.List:
		c.inform = func(stdout, _ io.Writer) int {
			fmt.Fprint(stdout, detectors.Describe(all.Analyzers()))
			return exitOK
		}
	case *listIfaces:
		c.inform = listInterfaces
	}
	return c, nil
}

func printUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprint(w, usageHead)
	fs.PrintDefaults()
	fmt.Fprint(w, usageTail)
}
