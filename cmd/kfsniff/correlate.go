package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/kfsniff/kfsniff/correlate"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/export"
	"github.com/kfsniff/kfsniff/metrics"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
)

// correlateConfig is -r kafka://HOST:PORT/TOPIC: the records agents
// shipped with --export read back as the input (docs/export.md,
// "Correlating").
type correlateConfig struct {
	URL            string
	Group          string
	UntilEnd       bool
	Window         time.Duration
	SessionTimeout time.Duration
	CoverWait      time.Duration
	Timeout        time.Duration
	sec            *securityFlags

	brokers []string
	topic   string
	// newSet makes a lane's detectors, as the command line set them.
	newSet func() *detectors.Set
	src    *correlate.Source
	stats  *correlate.Stats
	// done is set once the run has ended normally: its offsets may be
	// committed after the report.
	done bool
	// ended is set when the input ended (--until-end), not stopped.
	ended bool
	// committed is set once the offsets were committed (settle).
	committed bool
	// takeoverSpec (--takeover, hidden) is what settle gives the run
	// that reports partitions taken over: "P:FROM-TO,.../MEMBER";
	// takeover it parsed.
	takeoverSpec string
	takeover     *correlate.Takeover
	// args are the command line, for settle's takeover runs.
	args []string
	// printKey is --fingerprint-key's key (read with --export's flags).
	printKey []byte
	// fatal is the source's error that ended the run (no answer).
	fatal error
	// snap is the metrics' snapshot (with --metrics-addr), taken at
	// snapAt.
	snap   *atomic.Pointer[metrics.Correlation]
	snapAt time.Time
}

func addCorrelateFlags(fs *pflag.FlagSet) *correlateConfig {
	c := &correlateConfig{}
	fs.StringVar(&c.Group, "group", "", "with -r kafka://: share the topic's partitions with the other correlators of consumer group `NAME` (offsets committed after the report)")
	fs.BoolVar(&c.UntilEnd, "until-end", false, "with -r kafka://: stop when every partition read has reached the end offset it had when assigned (in a group: no rebalance came for --group-session-timeout + 2s and every other partition was read to its end by a member, see --group-wait)")
	fs.DurationVar(&c.Window, "reorder-window", correlate.DefaultReorderWindow, "with -r kafka://: how far apart in capture time records may arrive and still be merged in order (later ones are counted late)")
	fs.DurationVar(&c.SessionTimeout, "group-session-timeout", 45*time.Second, "with --group: the group session timeout: how soon the partitions of a correlator that died go to the others")
	fs.DurationVar(&c.CoverWait, "group-wait", correlate.DefaultCoverWait, "with --group --until-end: how long, once its partitions are read, a correlator waits for the group's other partitions to be read to their end by a member (or to come to it when a dead member is evicted); past it, it names those left and exits 1")
	fs.StringVar(&c.takeoverSpec, "takeover", "", "internal: the partitions, offsets and member a --group --until-end correlator takes over after its report (docs/export.md, \"The end\")")
	fs.MarkHidden("takeover")
	fs.DurationVar(&c.Timeout, "read-timeout", correlate.DefaultTimeout, "with -r kafka://: how long the cluster may take to answer at the start before kfsniff gives up (exit 2)")
	c.sec = addSecurityFlags(fs, "read", "-r kafka://", "the Kafka read from", "consumer", "")
	return c
}

// correlateFlags mean nothing without a kafka:// input.
var correlateFlags = []string{"group", "until-end", "reorder-window", "group-session-timeout", "group-wait", "takeover", "read-timeout", "read-config", "read-tls", "read-ca",
	"read-cert", "read-key", "read-sasl-mechanism", "read-sasl-user", "read-sasl-password"}

// isKafkaURL tells a topic to read back from a capture file's name.
func isKafkaURL(name string) bool { return strings.HasPrefix(name, "kafka://") }

// on reports a kafka:// input.
func (c *correlateConfig) on() bool { return c != nil && c.URL != "" }

// validate finds a kafka:// input among the -r's, checks what goes with
// it and reads the properties file; a kafka:// input clears cfg.Files.
func (c *correlateConfig) validate(cfg *Config, fs *pflag.FlagSet, exp *exportConfig, stderr io.Writer) error {
	url := slices.IndexFunc(cfg.Files, isKafkaURL)
	if url < 0 {
		if fs.Changed("fingerprint-key") && exp.URL == "" {
			return errors.New("--fingerprint-key needs --export or -r kafka://HOST:PORT/TOPIC")
		}
		if set := changed(fs, correlateFlags...); len(set) > 0 {
			return fmt.Errorf("%s needs -r kafka://HOST:PORT/TOPIC", set[0])
		}
		return nil
	}
	if len(cfg.Files) > 1 {
		return errors.New("-r kafka://...: read one topic, and no capture file beside it")
	}
	c.URL = cfg.Files[url]
	c.printKey = exp.printKey
	var err error
	if c.brokers, c.topic, err = export.ParseURL(c.URL); err != nil {
		return fmt.Errorf("-r %v", err)
	}
	switch {
	case cfg.Filter != "":
		return fmt.Errorf("-r kafka://: a packet filter (%q) selects packets; the records have none", cfg.Filter)
	case cfg.Write != "":
		return errors.New("-r kafka:// with -w: the records carry no packets to write")
	case fs.Changed("records") || fs.Changed("finding"):
		return errors.New("-r kafka:// with --records: the records shipped carry no payload (docs/export.md)")
	case exp.URL != "":
		return errors.New("-r kafka:// with --export: the correlator would ship the records back")
	case c.Window < 0:
		return fmt.Errorf("--reorder-window must not be negative, got %s", c.Window)
	case c.SessionTimeout <= 0:
		return fmt.Errorf("--group-session-timeout must be positive, got %s", c.SessionTimeout)
	case c.CoverWait <= 0:
		return fmt.Errorf("--group-wait must be positive, got %s", c.CoverWait)
	case c.Timeout <= 0:
		return fmt.Errorf("--read-timeout must be positive, got %s", c.Timeout)
	}
	if c.takeoverSpec != "" {
		t, err := parseTakeover(c.takeoverSpec)
		if err != nil || c.Group == "" || !c.UntilEnd {
			return fmt.Errorf("--takeover %q: not what a --group --until-end correlator gives (%v)", c.takeoverSpec, err)
		}
		c.takeover = t
		// The member's own run has the metrics address and wrote its
		// files: the takeover's report goes to files of its own.
		cfg.MetricsAddr, cfg.TUI = "", false
		if cfg.HTML != "" {
			ext := filepath.Ext(cfg.HTML)
			cfg.HTML = fmt.Sprintf("%s-takeover-%d%s", strings.TrimSuffix(cfg.HTML, ext), t.Ranges[0].Partition, ext)
		}
		cfg.Expect.Write = ""
	}
	if err := c.sec.settle(stderr); err != nil {
		return err
	}
	cfg.Files = nil
	return nil
}

// detectors sets how each lane's detectors are made: as dets, from the
// same settings (in a group, a partition's findings go with it when it
// is revoked, so each has its own).
func (c *correlateConfig) detectors(analyzers []*detectors.Analyzer, settings map[string]map[string]string, dets *detectors.Set) {
	if !c.on() {
		return
	}
	c.newSet = func() *detectors.Set {
		s, err := detectors.NewSet(analyzers, settings)
		if err != nil {
			return nil // checked when dets was made
		}
		s.SetLimits(dets.Limits())
		return s
	}
}

// open makes the consumer; nothing is read before the analysis starts.
func (c *correlateConfig) open(stderr io.Writer) error {
	group := c.Group
	var ranges []correlate.Range
	if c.takeover != nil {
		group, ranges = "", c.takeover.Ranges
	}
	src, err := correlate.Open(correlate.SourceConfig{
		Brokers: c.brokers, Topic: c.topic, Group: group, UntilEnd: c.UntilEnd, Ranges: ranges,
		SessionTimeout: c.SessionTimeout, CoverWait: c.CoverWait, Window: c.Window, TLS: c.sec.tls, SASL: c.sec.mech, Timeout: c.Timeout,
		PrintKey: c.printKey,
		Warn: func(err error) {
			fmt.Fprintf(stderr, "kfsniff: warning: %s\n", report.Clean(err.Error()))
		},
		Note: func(msg string) {
			fmt.Fprintf(stderr, "kfsniff: group %s: %s\n", report.Clean(c.Group), report.Clean(msg))
		},
		Assigned: func(assigned, revoked []int32) {
			if len(assigned) > 0 {
				fmt.Fprintf(stderr, "kfsniff: group %s: reading partitions %s of %s\n", report.Clean(c.Group), partList(assigned), report.Clean(c.topic))
			}
			if len(revoked) > 0 {
				fmt.Fprintf(stderr, "kfsniff: group %s: partitions %s of %s went to another correlator; their findings are its\n", report.Clean(c.Group), partList(revoked), report.Clean(c.topic))
			}
		},
	})
	if err != nil {
		return fmt.Errorf("-r %s: %v", report.Clean(c.URL), err)
	}
	c.stats = correlate.NewStats(correlate.Limits{})
	src.Observe, src.Unreadable = c.stats.Add, c.stats.Unreadable
	src.Skew = c.stats.Skew().Offset
	c.src = src
	how := "every partition from the start"
	switch {
	case c.takeover != nil:
		how = fmt.Sprintf("partitions %s taken over in consumer group %s from member %s", partList(c.takeover.Partitions()),
			report.Clean(c.Group), report.Clean(c.takeover.Member))
	case c.Group != "":
		how = "in consumer group " + report.Clean(c.Group)
	}
	fmt.Fprintf(stderr, "kfsniff: correlating %s, %s\n", report.Clean(c.URL), how)
	return nil
}

func partList(ps []int32) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ",")
}

// run is the analysis over the topic, as pipeline.Run's over files.
func (c *correlateConfig) run(ctx context.Context, o pipeline.Options) *pipeline.Result {
	warn := o.Warn
	o.Warn = func(err error) {
		if warn != nil {
			warn(fmt.Errorf("-r %s: %w (trying again)", report.Clean(c.URL), err))
		}
	}
	res := pipeline.RunRemote(ctx, remoteSource{c.src, &c.fatal, c.snapshot}, c.Group != "", c.newSet, o)
	// The final values, whatever the last snapshot's age.
	c.snapAt = time.Time{}
	c.snapshot()
	res.Report.Correlation = c.stats.Section()
	for k, v := range c.src.Bounds() {
		if res.Report.Totals.BoundsReached == nil {
			res.Report.Totals.BoundsReached = map[string]int64{}
		}
		res.Report.Totals.BoundsReached[k] += v
	}
	if t := c.takeover; t != nil {
		tk := &report.Takeover{Group: c.Group, Member: t.Member}
		for _, r := range t.Ranges {
			tk.Partitions = append(tk.Partitions, report.TakenOver{Partition: r.Partition, From: r.From, To: r.To})
		}
		res.Report.Capture.Takeover = tk
	}
	if u := c.src.Uncovered(); len(u) > 0 {
		if res.Report.Capture.Partial == nil {
			res.Report.Capture.Partial = &report.Partial{}
		}
		res.Report.Capture.Partial.Uncovered = u
	}
	// -c leaves records read but not reported: nothing is committed.
	c.done = res.Stop != pipeline.StopCount
	c.ended = res.Stop == pipeline.StopEnd
	return res
}

// metrics registers the correlator's metrics (lag, clocks, latency),
// read from a snapshot the run's goroutine takes (snapshot).
func (c *correlateConfig) metrics(ms *metricsServer) {
	if ms == nil || !c.on() {
		return
	}
	c.snap = new(atomic.Pointer[metrics.Correlation])
	ms.m.Correlator(c.snap.Load)
}

// snapshot takes the correlator's metrics, at most every half second,
// on the run's goroutine (Source and Stats are not safe to read from the
// scrape's).
func (c *correlateConfig) snapshot() {
	if c.snap == nil || time.Since(c.snapAt) < 500*time.Millisecond {
		return
	}
	c.snapAt = time.Now()
	n := c.src.Counts()
	s := &metrics.Correlation{Lag: c.src.Lag(), Records: n.Records, Unreadable: n.Malformed + n.Version + n.Unusable, Late: n.Late, Duplicates: n.Duplicates}
	est := c.stats.Skew().Estimates()
	for _, a := range slices.Sorted(maps.Keys(est)) {
		s.Clocks = append(s.Clocks, metrics.Clock{Agent: a, Offset: est[a].Offset, Spread: est[a].Spread})
	}
	bounds := make([]time.Duration, len(metrics.E2EBuckets))
	for i, b := range metrics.E2EBuckets {
		bounds[i] = time.Duration(b * float64(time.Second))
	}
	for _, t := range c.stats.E2E().Topics() {
		if t.Latency == nil {
			continue
		}
		name := t.Topic
		if t.Cluster != "" {
			name = t.Cluster + "/" + t.Topic
		}
		s.Latency = append(s.Latency, metrics.TopicLatency{Topic: name, Count: t.Latency.Count(), Sum: t.Latency.Sum(), Buckets: t.Latency.Cumulative(bounds)})
	}
	c.snap.Store(s)
}

// say puts what the correlator read on stderr.
func (c *correlateConfig) say(res *pipeline.Result, stderr io.Writer) {
	if !c.on() || res == nil {
		return
	}
	n := c.src.Counts()
	agents := "agents"
	if len(n.Agents) == 1 {
		agents = "agent"
	}
	fmt.Fprintf(stderr, "kfsniff: correlated %d records of %d %s (%d exchanges, %d connection events)", n.Records, len(n.Agents), agents, n.Exchanges, n.ConnEvents)
	if bad := n.Malformed + n.Version + n.Unusable; bad > 0 {
		fmt.Fprintf(stderr, ", %d unusable (%d malformed, %d of another schema version, %d not rebuilt)", bad, n.Malformed, n.Version, n.Unusable)
	}
	if n.Twice > 0 {
		fmt.Fprintf(stderr, ", %d seen by two agents (counted once)", n.Twice)
	}
	if n.Duplicates > 0 {
		fmt.Fprintf(stderr, ", %d read again (skipped)", n.Duplicates)
	}
	if n.Late > 0 {
		fmt.Fprintf(stderr, ", %d later than --reorder-window (merged out of order)", n.Late)
	}
	if n.Dropped > 0 {
		fmt.Fprintf(stderr, ", %d held for partitions revoked", n.Dropped)
	}
	fmt.Fprintf(stderr, " (%s)\n", res.Stop)
}

// uncovered says, when a group's run ended without some partitions of
// the topic (no member read them within --group-wait), which: the
// report covers the others only (exit 1).
func (c *correlateConfig) uncovered(stderr io.Writer) bool {
	if !c.on() || c.src == nil {
		return false
	}
	u := c.src.Uncovered()
	if len(u) == 0 {
		return false
	}
	fmt.Fprintf(stderr, "kfsniff: group %s: partitions %s of %s were read to their end by no member of the group within --group-wait %s (a member still running without --until-end, or one that died and was not evicted): the report does not cover them\n",
		report.Clean(c.Group), partList(u), report.Clean(c.topic), c.CoverWait)
	return true
}

// failed is, when the cluster never answered (within --read-timeout,
// or before Ctrl-C), the usage error that the input could not be read:
// exit 2, not an empty report that --fail-on would pass.
func (c *correlateConfig) failed(res *pipeline.Result) error {
	if !c.on() || c.src == nil || c.src.Answered() {
		return nil
	}
	why := c.fatal
	if why == nil {
		why = fmt.Errorf("no answer from %s before the run stopped (%s)", strings.Join(c.brokers, ","), res.Stop)
	}
	return usagef("-r %s: %s", report.Clean(c.URL), report.Clean(why.Error()))
}

// close commits, in a group, the offsets of what the report covered, and
// leaves: deferred, it runs after the report is written. A run that did
// not end normally commits nothing.
func (c *correlateConfig) close(stderr io.Writer) {
	if !c.on() || c.src == nil {
		return
	}
	if c.done && c.Group != "" && !c.committed {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := c.src.Commit(ctx); err != nil {
			fmt.Fprintf(stderr, "kfsniff: group %s: committing the offsets read: %v (the next correlator of the group reads them again)\n", report.Clean(c.Group), err)
		}
		cancel()
	}
	c.src.Close()
}

// settle, at the end of a group's --until-end run, once the report is
// written, commits the offsets read and stays in the group (up to
// --group-wait) until every partition of the topic is reported. The
// partitions of a member that left the group after marking them read
// and before its report (killed), when the group gives them to this
// one, are taken over: read again and reported in a report of their own
// written after this one (again), by a run of the same command line
// with --takeover. It returns whether partitions were left unreported
// (said: exit 1), and the takeover reports' exit code.
func (c *correlateConfig) settle(stderr io.Writer, again func(args []string) int) (bool, int) {
	code := exitOK
	if !c.on() || c.src == nil || !c.done || !c.ended || c.Group == "" || c.takeover != nil || len(c.src.Uncovered()) > 0 {
		return false, code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := c.src.Commit(ctx)
	cancel()
	if err != nil {
		return false, code // close says it, trying again
	}
	c.committed = true
	ctx, cancel = context.WithTimeout(context.Background(), c.CoverWait)
	left := c.src.Settle(ctx, func(t correlate.Takeover) error {
		fmt.Fprintf(stderr, "kfsniff: group %s: partitions %s of %s were read to their end by member %s, which left the group before its report (killed?): taking them over, in a report of their own after this one\n",
			report.Clean(c.Group), partList(t.Partitions()), report.Clean(c.topic), report.Clean(t.Member))
		switch sc := again(append(slices.Clone(c.args), "--takeover", takeoverSpec(t))); sc {
		case exitOK:
		case exitFindings:
			code = exitFindings
		default:
			return fmt.Errorf("its report ended with exit %d", sc)
		}
		return nil
	})
	cancel()
	if len(left) == 0 {
		return false, code
	}
	fmt.Fprintf(stderr, "kfsniff: group %s: partitions %s of %s were reported by no member within --group-wait %s (read to their end by a member that ended before its report and was not evicted, or whose takeover failed): no report covers them; the group's next run reads them\n",
		report.Clean(c.Group), partList(left), report.Clean(c.topic), c.CoverWait)
	return true, code
}

// takeoverSpec is --takeover's value for t: "P:FROM-TO,.../MEMBER".
func takeoverSpec(t correlate.Takeover) string {
	rs := make([]string, len(t.Ranges))
	for i, r := range t.Ranges {
		rs[i] = fmt.Sprintf("%d:%d-%d", r.Partition, r.From, r.To)
	}
	return strings.Join(rs, ",") + "/" + t.Member
}

// parseTakeover reads takeoverSpec's form.
func parseTakeover(spec string) (*correlate.Takeover, error) {
	ranges, member, ok := strings.Cut(spec, "/")
	if !ok || member == "" {
		return nil, errors.New("no member")
	}
	t := &correlate.Takeover{Member: member}
	for _, r := range strings.Split(ranges, ",") {
		var rg correlate.Range
		if _, err := fmt.Sscanf(r, "%d:%d-%d", &rg.Partition, &rg.From, &rg.To); err != nil || rg.From < 0 || rg.To < rg.From {
			return nil, fmt.Errorf("range %q", r)
		}
		t.Ranges = append(t.Ranges, rg)
	}
	return t, nil
}

// remoteSource adapts correlate.Source to what the pipeline reads; the
// error that ends the run is kept in fatal.
type remoteSource struct {
	*correlate.Source
	fatal *error
	// snap, when set, is called after each read, on the run's goroutine
	// (the metrics' snapshot).
	snap func()
}

func batchOf(r correlate.Ready) pipeline.RemoteBatch {
	b := pipeline.RemoteBatch{Revoked: r.Revoked, Items: make([]pipeline.RemoteItem, len(r.Items))}
	for i, it := range r.Items {
		ev := it.Events
		b.Items[i] = pipeline.RemoteItem{Lane: it.Lane, Opened: ev.Opened, Req: ev.Req, X: ev.X, Conn: ev.Conn}
	}
	return b
}

func (s remoteSource) Next(ctx context.Context) (pipeline.RemoteBatch, error) {
	r, err := s.Source.Next(ctx)
	if s.snap != nil {
		s.snap()
	}
	if errors.Is(err, correlate.ErrNoAnswer) {
		*s.fatal = err
		err = fmt.Errorf("%w: %w", pipeline.ErrRemoteFatal, err)
	}
	return batchOf(r), err
}

func (s remoteSource) Flush() pipeline.RemoteBatch { return batchOf(s.Source.Flush()) }

func (s remoteSource) Read() (records, bytes int64, first, last time.Time) {
	n := s.Source.Counts()
	first, last = s.Source.Span()
	return n.Records, n.Bytes, first, last
}
