package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/export"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/metrics"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
)

// exportConfig is --export's flags (docs/export.md).
type exportConfig struct {
	URL           string
	FindingsTopic string
	Agent         string
	Buffer        int
	FlushTimeout  time.Duration
	Compression   string
	Spool         string
	SpoolSize     string
	Timeout       time.Duration
	spoolBytes    int64
	sec           *securityFlags
	// Prints ships record fingerprints; KeyFile (--fingerprint-key,
	// read by a correlator too) holds the key they are made with,
	// printKey.
	Prints   bool
	KeyFile  string
	printKey []byte

	brokers []string
	topic   string
}

func addExportFlags(fs *pflag.FlagSet) *exportConfig {
	c := &exportConfig{}
	fs.StringVar(&c.URL, "export", "", "ship every exchange, connection event and finding to Kafka, `kafka://HOST:PORT[,HOST:PORT]/TOPIC` (docs/export.md); the capture never waits for the sink")
	fs.StringVar(&c.FindingsTopic, "export-findings-topic", "", "with --export: the findings' `TOPIC` (default: the export topic + .findings)")
	fs.StringVar(&c.Agent, "agent-id", "", "with --export: this host's `NAME` in every record (default: the hostname)")
	fs.IntVar(&c.Buffer, "export-buffer", export.DefaultBuffer, "with --export: records that may wait for the sink; past it they are dropped and counted")
	fs.DurationVar(&c.FlushTimeout, "export-flush-timeout", 10*time.Second, "with --export: how long the end of the run waits for the sink to take what is buffered")
	fs.StringVar(&c.Spool, "export-spool", "", "with --export: a `DIR` where records past --export-buffer wait on disk while the sink is down or slow, read back in order (and by the next run, if this one ends first); without it they are dropped")
	fs.StringVar(&c.SpoolSize, "export-spool-size", "1G", "with --export-spool: the spool's bound on disk, `SIZE` in bytes or with K, M, G (KiB, MiB, GiB); past it records are dropped and counted")
	fs.DurationVar(&c.Timeout, "export-timeout", 30*time.Second, "with --export: how long the sink may take to answer at the start before kfsniff gives up (exit 2)")
	fs.StringVar(&c.Compression, "export-compression", "zstd", "with --export: the batches' `CODEC`: zstd, lz4 (less CPU, larger batches), snappy, gzip or none")
	c.sec = addSecurityFlags(fs, "export", "--export", "the sink", "producer", ", which other users cannot read in the process list")
	fs.BoolVar(&c.Prints, "export-fingerprints", true, "with --export: ship a fingerprint of each record of produced and fetched batches, for a correlator's duplicate-batches (records re-batched by MirrorMaker 2); without --fingerprint-key a short record value can be guessed from its fingerprint (docs/export.md)")
	fs.StringVar(&c.KeyFile, "fingerprint-key", "", "with --export and -r kafka://: a `FILE` holding the key (at least 16 bytes) record fingerprints are made with, the same for every agent and correlator; without it they are keyless")
	return c
}

// exportFlagsWithout are the flags that mean nothing without --export.
var exportFlagsWithout = []string{"export-findings-topic", "agent-id", "export-buffer", "export-flush-timeout", "export-compression", "export-config",
	"export-spool", "export-spool-size", "export-timeout", "export-fingerprints",
	"export-tls", "export-ca", "export-cert", "export-key", "export-sasl-mechanism", "export-sasl-user", "export-sasl-password"}

// validate checks the flags at parse time and reads the properties file.
func (c *exportConfig) validate(fs *pflag.FlagSet, stderr io.Writer) error {
	if c.KeyFile != "" {
		key, err := readPrintKey(c.KeyFile)
		if err != nil {
			return err
		}
		c.printKey = key
	}
	if c.URL == "" {
		if set := changed(fs, exportFlagsWithout...); len(set) > 0 {
			return fmt.Errorf("%s needs --export", set[0])
		}
		return nil
	}
	var err error
	if c.brokers, c.topic, err = export.ParseURL(c.URL); err != nil {
		return fmt.Errorf("--export %v", err)
	}
	if fs.Changed("export-findings-topic") && !export.ValidTopic(c.FindingsTopic) {
		return fmt.Errorf("--export-findings-topic %q is not a Kafka topic name", c.FindingsTopic)
	}
	if c.FindingsTopic == c.topic && c.topic != "" {
		return fmt.Errorf("--export-findings-topic %q is the export topic: findings would be mixed with the exchanges", c.FindingsTopic)
	}
	if c.Buffer <= 0 {
		return fmt.Errorf("--export-buffer must be positive, got %d", c.Buffer)
	}
	if _, err := export.Codec(c.Compression); err != nil {
		return fmt.Errorf("--export-compression: %v", err)
	}
	if c.FlushTimeout < 0 {
		return fmt.Errorf("--export-flush-timeout must not be negative, got %s", c.FlushTimeout)
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("--export-timeout must be positive, got %s", c.Timeout)
	}
	if c.spoolBytes, err = parseSize(c.SpoolSize); err != nil || c.spoolBytes < 1<<20 {
		return fmt.Errorf("--export-spool-size %q: want a size of at least 1M (bytes, or with K, M, G)", c.SpoolSize)
	}
	if fs.Changed("export-spool-size") && c.Spool == "" {
		return errors.New("--export-spool-size needs --export-spool")
	}
	if !c.Prints && c.KeyFile != "" {
		return errors.New("--fingerprint-key with --export-fingerprints=false: no fingerprint is made")
	}
	if c.Agent == "" {
		if c.Agent, err = os.Hostname(); err != nil || c.Agent == "" {
			return errors.New("--export: the hostname is unknown; give --agent-id")
		}
	}
	return c.sec.settle(stderr)
}

// exporter is a run's shipping, nil without --export.
type exporter struct {
	x    *export.Exporter
	live bool
}

// securityFlags are a Kafka client's security flags, the same for
// --export's producer and -r kafka://'s consumer: --PREFIX-config, -tls,
// -ca, -cert, -key, -sasl-mechanism, -sasl-user and -sasl-password.
type securityFlags struct {
	export.Security
	ConfigFile string
	// prefix starts the flags' names, input names the flag they go with
	// (--export, -r kafka://), role the client (producer, consumer).
	prefix, input, role string
	// tls and mech are what settle built.
	tls  *tls.Config
	mech sasl.Mechanism
}

// addSecurityFlags registers the flags; tlsTo says where TLS goes,
// better ends the password flag's advice.
func addSecurityFlags(fs *pflag.FlagSet, prefix, input, tlsTo, role, better string) *securityFlags {
	s := &securityFlags{prefix: prefix, input: input, role: role}
	with := "with " + input + ": "
	fs.StringVar(&s.ConfigFile, prefix+"-config", "", with+"a Kafka client properties `FILE` (security.protocol, sasl.*, ssl.*; docs/export.md); flags win")
	fs.BoolVar(&s.TLS, prefix+"-tls", false, with+"TLS to "+tlsTo)
	fs.StringVar(&s.CAFile, prefix+"-ca", "", with+"PEM `FILE` of the CAs to trust (implies --"+prefix+"-tls)")
	fs.StringVar(&s.CertFile, prefix+"-cert", "", with+"client certificate PEM `FILE` (implies --"+prefix+"-tls)")
	fs.StringVar(&s.KeyFile, prefix+"-key", "", with+"client key PEM `FILE`")
	fs.StringVar(&s.Mechanism, prefix+"-sasl-mechanism", "", with+"SASL `MECHANISM`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&s.User, prefix+"-sasl-user", "", with+"SASL `USER`")
	fs.StringVar(&s.Password, prefix+"-sasl-password", "", with+"SASL `PASSWORD` (better: $KFSNIFF_"+strings.ToUpper(prefix)+"_SASL_PASSWORD or --"+prefix+"-config"+better+")")
	return s
}

// settle completes the security settings flags gave: the password from
// $KFSNIFF_PREFIX_SASL_PASSWORD when no flag gave one, TLS when a CA or
// certificate file is named, then the properties file of --PREFIX-config,
// under the flags; the file's settings kfsniff sets itself (for its
// role's client) are said on stderr and ignored. It builds the client's
// TLS and SASL settings.
func (s *securityFlags) settle(stderr io.Writer) error {
	s.Password = cmp.Or(s.Password, os.Getenv("KFSNIFF_"+strings.ToUpper(s.prefix)+"_SASL_PASSWORD"))
	if s.CAFile != "" || s.CertFile != "" {
		s.TLS = true
	}
	if s.ConfigFile != "" {
		flag := "--" + s.prefix + "-config"
		f, err := os.Open(s.ConfigFile)
		if err != nil {
			return fmt.Errorf("%s: %v", flag, err)
		}
		fileSec, ignored, err := export.ReadProperties(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s %s: %v", flag, s.ConfigFile, err)
		}
		if len(ignored) > 0 {
			fmt.Fprintf(stderr, "kfsniff: %s: ignored %s (kfsniff sets its own %s settings)\n", flag, report.Clean(strings.Join(ignored, ", ")), s.role)
		}
		s.Security = fileSec.Merge(s.Security)
	}
	var err error
	if s.tls, s.mech, err = s.Build(); err != nil {
		return fmt.Errorf("%s: %v", s.input, err)
	}
	return nil
}

// start makes the exporter (its client connects lazily: an unreachable
// sink is counted, not fatal) and says where it ships.
func (c *exportConfig) start(live bool, stderr io.Writer) (*exporter, error) {
	if c.URL == "" {
		return nil, nil
	}
	x, err := export.New(export.Config{
		Brokers: c.brokers, Topic: c.topic, FindingsTopic: c.FindingsTopic,
		Agent: c.Agent, Buffer: c.Buffer, FlushTimeout: c.FlushTimeout, Compression: c.Compression,
		TLS: c.sec.tls, SASL: c.sec.mech, SpoolDir: c.Spool, SpoolSize: c.spoolBytes, NoPrints: !c.Prints, PrintKey: c.printKey,
		Notify: func(s string) { fmt.Fprintf(stderr, "kfsniff: --export: %s\n", report.CleanText(s)) },
		Waiting: func(pending int64, upTo time.Duration) {
			fmt.Fprintf(stderr, "kfsniff: --export: waiting up to %s for the sink to take %d buffered records (--export-flush-timeout; Ctrl-C to stop waiting)\n", upTo.Round(time.Second), pending)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("--export: %v", err)
	}
	// A sink that never answers, or will not take the records, is an
	// error now rather than a report of records failed at the end.
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	err = x.Reach(ctx)
	cancel()
	if err != nil {
		x.CloseAbort(closed)
		return nil, fmt.Errorf("--export: %v (--export-timeout %s)", err, c.Timeout)
	}
	st := x.Stats()
	fmt.Fprintf(stderr, "kfsniff: shipping to %s (findings to %s) as agent %s\n", report.Clean(st.Sink), st.FindingsTopic, report.Clean(c.Agent))
	return &exporter{x: x, live: live}, nil
}

// wrap adds the exporter to a run's handlers and, live, ships findings
// as the detectors' snapshots raise them (chained before the front
// end's own callback; a live capture runs on one worker anyway).
func (e *exporter) wrap(o *pipeline.Options) {
	if e == nil {
		return
	}
	o.Handlers = append(o.Handlers, flows.Handler(e.x))
	if !e.live {
		return
	}
	chainFindings(o, e.x.LiveFindings)
}

// chainFindings calls f with the live findings, before the callback
// already set, if any.
func chainFindings(o *pipeline.Options, f func([]detectors.Finding)) {
	findings := o.LiveFindings
	o.LiveFindings = func(fs []detectors.Finding) {
		f(fs)
		if findings != nil {
			findings(fs)
		}
	}
}

// metrics registers the shipping counters on the metrics endpoint.
func (e *exporter) metrics(ms *metricsServer) {
	if e == nil || ms == nil {
		return
	}
	ms.m.Shipping(func() metrics.ShippingCounts {
		s := e.x.Stats()
		return metrics.ShippingCounts{Records: s.Records, Dropped: s.Dropped, Failed: s.Failed, Pending: s.Pending,
			Oldest: s.Oldest, Spilled: s.Spilled, Spooled: s.Spooled, SpoolBytes: s.SpoolBytes, Up: s.Up}
	})
}

// dropped is the status line's count (nil without --export).
func (e *exporter) dropped() func() int64 {
	if e == nil {
		return nil
	}
	return e.x.Dropped
}

// finish ships the report's findings, waits for the sink (up to the
// flush timeout) and puts the counts in the report.
func (e *exporter) finish(res *pipeline.Result) {
	if e == nil {
		return
	}
	if res != nil && res.Stats != nil {
		e.x.End(res.Stats.FirstTime, res.Stats.LastTime, res.Stats.Packets)
	}
	if res != nil && res.Report != nil {
		e.x.Findings(res.Report.Findings)
	}
	abort, stop := interrupts()
	s := e.x.CloseAbort(abort)
	stop()
	if res != nil && res.Report != nil {
		res.Report.Export = &report.Export{
			Sink: s.Sink, Topic: s.Topic, FindingsTopic: s.FindingsTopic,
			Records: s.Records, Findings: s.Findings, Dropped: s.Dropped, Failed: s.Failed, LastError: s.LastError,
			SpoolDir: s.SpoolDir, Spilled: s.Spilled, Spooled: s.Spooled,
		}
	}
}

// say puts the shipping counts on stderr, for the views that print no
// report (--frames, --records, --expect): the report's line was all that
// told of records dropped or never delivered.
func (e *exporter) say(res *pipeline.Result, stderr io.Writer) {
	if e == nil || res == nil || res.Report == nil || res.Report.Export == nil {
		return
	}
	x := res.Report.Export
	fmt.Fprintf(stderr, "kfsniff: --export to %s: %d records shipped (%d findings to %s), %d dropped (buffer full), %d failed",
		report.Clean(x.Sink), x.Records, x.Findings, report.Clean(x.FindingsTopic), x.Dropped, x.Failed)
	if x.LastError != "" {
		fmt.Fprintf(stderr, " (last error: %s)", report.Clean(x.LastError))
	}
	fmt.Fprintln(stderr)
}

// closed is a channel closed: a Close that does not wait.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// parseSize reads a size in bytes, or with K, M or G (binary) after it.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for i, unit := range []string{"K", "M", "G"} {
		if num, ok := strings.CutSuffix(strings.ToUpper(s), unit); ok {
			s, mult = num, 1<<(10*(i+1))
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<50)/mult {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// close closes the client if finish was not reached.
func (e *exporter) close() {
	if e != nil {
		e.x.Close()
	}
}

// interrupts returns a channel closed by the next SIGINT or SIGTERM, until
// stop: while the exporter waits for the sink, Ctrl-C (a second one, if the
// first ended the capture) stops the wait, which main's signal context
// would swallow.
func interrupts() (abort <-chan struct{}, stop func()) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return ctx.Done(), stop
}

// readPrintKey reads --fingerprint-key's file: its bytes but a trailing
// line end (a key written by `openssl rand -hex 32 >FILE`), at least
// decode.PrintKeyMin of them.
func readPrintKey(name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("--fingerprint-key: %v", err)
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) < decode.PrintKeyMin {
		return nil, fmt.Errorf("--fingerprint-key %s: %d bytes, want at least %d (e.g. openssl rand -hex 32 >%s)", name, len(b), decode.PrintKeyMin, name)
	}
	return b, nil
}
