// Package pipeline wires the parts together: a packet source (capture
// files, or a live capture) into the flows analyzer, its events into the
// report collector and any extra handlers, and out comes a Report. The
// command, the tests and the benchmarks all run the analysis through it, so
// offline and live runs are the same code.
package pipeline

import (
	"context"
	"errors"
	"io"
	"slices"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/collect"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// Options configure a run.
type Options struct {
	Flows flows.Config
	// Handlers receive the analyzer's events besides the collector, on
	// the goroutine running the analysis.
	Handlers []flows.Handler
	// Detectors, if set, receive every event and report findings at
	// the end.
	Detectors *detectors.Set
	// Warn is called for each input that broke before its end (the
	// packets before the break are analysed). May be nil.
	Warn func(error)

	// Filter, if set, drops the packets it does not match before
	// anything sees them (a live capture filters in the kernel instead).
	Filter *capture.Filter
	// Sinks receive every packet analysed, before the analyzer, e.g.
	// the -w writer. A sink's error ends the run (Result.Err).
	Sinks []capture.Sink
	// Count ends the run after this many packets (0: no limit), like
	// tcpdump -c.
	Count int64
	// Duration ends the run after this much wall-clock time (0: none).
	Duration time.Duration
	// Progress, if set, is called on the goroutine running the analysis
	// about every ProgressEvery (default 250ms) of wall-clock time, and
	// once more at the end with Done set.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// LiveFindings, if set (with Detectors), is called on the goroutine
	// running the analysis about every LiveFindingsEvery (default 2s) of
	// wall-clock time with the findings as they stand
	// (detectors.Set.Snapshot over the connections and nodes so far). It
	// is not called at the end: the final findings are in the report.
	LiveFindings      func([]detectors.Finding)
	LiveFindingsEvery time.Duration
	// Workers is how many goroutines analyse connections, each its share
	// of them (0: one per CPU, at most 8; one for files under 16 MiB, see
	// defaultWorkers). The output is the same as with
	// one, except when connection bounds are reached (see shard.go).
	// Live captures and runs with LiveFindings use one.
	Workers int
}

// Progress is a snapshot of a running analysis, for status lines.
type Progress struct {
	Packets, Bytes int64 // analysed so far
	Kafka          int   // Kafka connections so far
	// Live holds the kernel's counters of a live capture (nil otherwise).
	Live        *capture.LiveStats
	First, Last time.Time     // capture time of the first and last packet
	Elapsed     time.Duration // wall clock since the run began
	Done        bool
	// Tables are the analyzer's growing tables (flows.Analyzer.Tables)
	// when one analyzer runs on the reading goroutine (live capture),
	// nil when sharded.
	Tables []flows.Table
}

// Stop says why a run stopped reading.
type Stop uint8

const (
	StopEnd         Stop = iota // the input ended
	StopInterrupted             // the context was cancelled (Ctrl-C)
	StopCount                   // Options.Count packets were read
	StopDuration                // Options.Duration passed
	StopError                   // the input broke or a sink failed
)

func (s Stop) String() string {
	return [...]string{"end of input", "interrupted", "packet count reached", "duration reached", "error"}[s]
}

// Result is what a run produced.
type Result struct {
	Report *report.Report
	// Stats, Conns and Nodes are what the analysis found, over all
	// workers.
	Stats *flows.Stats
	Conns []*flows.Conn
	Nodes *cluster.Nodes
	// Workers is how many workers analysed the connections.
	Workers int
	Stop    Stop
	// Interrupted is Stop == StopInterrupted.
	Interrupted bool
	// Live holds the kernel's final counters of a live capture.
	Live *capture.LiveStats
	// Err is the error of the sink that failed (Stop is StopError);
	// inputs that break are reported through Options.Warn and the
	// report's file entry.
	Err error
}

var errDuration = errors.New("duration reached")

// stopped says why ctx, done, stopped the run: Options.Duration or an
// interruption.
func stopped(ctx context.Context) Stop {
	if errors.Is(context.Cause(ctx), errDuration) {
		return StopDuration
	}
	return StopInterrupted
}

// liveSource is a live capture: it has kernel counters and returns
// capture.ErrIdle when no packet came for a while.
type liveSource interface {
	capture.Source
	Stats() (capture.LiveStats, error)
}

// engine is what analyses the packets: one flows.Analyzer, or several
// sharded by connection.
type engine interface {
	Packet(p *capture.Packet)
	// Tick lets time pass without packets (live captures).
	Tick(now time.Time)
	Close()
	// progress figures, on the reading goroutine
	progress() (packets, bytes int64, kafka int, first, last time.Time)
	// the results, once closed (for one analyzer, also while running)
	results() (*flows.Stats, []*flows.Conn, *cluster.Nodes)
	// the endpoints seen accepting connections
	accepting() *flows.Listeners
}

// single is one analyzer on the reading goroutine.
type single struct{ *flows.Analyzer }

func (s single) progress() (int64, int64, int, time.Time, time.Time) {
	st := s.Stats()
	return st.Packets, st.Bytes, len(s.Conns()), st.FirstTime, st.LastTime
}

func (s single) results() (*flows.Stats, []*flows.Conn, *cluster.Nodes) {
	return s.Stats(), s.Conns(), s.Nodes()
}

func (s single) accepting() *flows.Listeners { return s.Listeners() }

func (s *sharded) progress() (int64, int64, int, time.Time, time.Time) {
	return s.packets, s.bytes, int(s.kafka.Load()), s.first, s.last
}

func (s *sharded) results() (*flows.Stats, []*flows.Conn, *cluster.Nodes) {
	return &s.stats, s.conns, s.dl.Nodes()
}

func (s *sharded) accepting() *flows.Listeners { return s.listeners }

// flusher is a sink that buffers.
type flusher interface{ Flush() error }

// Run reads every packet of files (merged by time when there are several),
// analyses them and builds the report. It stops early, still reporting,
// when ctx is cancelled, at Options.Count or Options.Duration.
func Run(ctx context.Context, files []*capture.File, opt Options) *Result {
	var src capture.Source
	switch len(files) {
	case 0:
	case 1:
		src = files[0]
	default:
		srcs := make([]capture.Source, len(files))
		for i, f := range files {
			srcs[i] = f
		}
		src = capture.Merge(srcs...)
	}
	rfiles := make([]report.File, len(files))
	for i, f := range files {
		rfiles[i] = report.File{Name: f.Name, Format: f.Format, LinkTypes: linkNames(f.Links)}
	}
	if opt.Workers == 0 {
		opt.Workers = defaultWorkers(files)
	}
	opt.Flows.TLSKeys = FileKeys(files, opt.Flows.TLSKeys)
	return run(ctx, src, rfiles, opt)
}

// RunSource analyses the packets of one source, a live capture
// (capture.Live) or any other, until the source ends, ctx is cancelled
// (Ctrl-C), or Options.Count or Options.Duration is reached, and builds
// the report, the same as Run's. A live source's idle periods flush the
// sinks; its kernel counters end up in Result.Live and the report.
func RunSource(ctx context.Context, src capture.Source, opt Options) *Result {
	in := report.File{Name: "packets", Format: "source"}
	switch s := src.(type) {
	case *capture.File:
		in = report.File{Name: s.Name, Format: s.Format, LinkTypes: linkNames(s.Links)}
	case *capture.Live:
		in = report.File{Name: s.Name, Format: s.Format, LinkTypes: linkNames(s.Links)}
	}
	return run(ctx, src, []report.File{in}, opt)
}

func linkNames(links []capture.LinkType) []string {
	out := make([]string, len(links))
	for i, l := range links {
		out[i] = l.String()
	}
	return out
}

// schedule bounds ctx by Duration and returns the intervals of progress
// and live findings, defaults filled in: files, live captures and records
// read back (RunRemote) keep the same clocks.
func (o Options) schedule(ctx context.Context) (context.Context, context.CancelFunc, time.Duration, time.Duration) {
	cancel := context.CancelFunc(func() {})
	if o.Duration > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, o.Duration, errDuration)
	}
	progress, findings := o.ProgressEvery, o.LiveFindingsEvery
	if progress <= 0 {
		progress = 250 * time.Millisecond
	}
	if findings <= 0 {
		findings = 2 * time.Second
	}
	return ctx, cancel, progress, findings
}

func run(ctx context.Context, src capture.Source, rfiles []report.File, opt Options) *Result {
	collector := collect.NewCollector()
	handlers := append([]flows.Handler{collector}, opt.Handlers...)
	if opt.Detectors != nil {
		opt.Detectors.SetKeepClosed(opt.Flows.KeepClosed)
		handlers = append(handlers, opt.Detectors)
	}
	live, _ := src.(liveSource)
	var an engine
	nw := workers(opt.Workers)
	if live != nil || opt.LiveFindings != nil {
		nw = 1
	}
	if nw > 1 {
		sh := newSharded(nw, opt.Flows, handlers)
		if bs, ok := src.(interface{ UseBlocks(capture.Blocks) bool }); ok {
			// Packets read from now on stay until their round is
			// delivered: the rounds refer to them instead of copies.
			sh.views = bs.UseBlocks(&sh.pool)
		}
		an = sh
	} else {
		an = single{flows.New(opt.Flows, handlers...)}
	}
	res := &Result{Workers: nw}
	ctx, cancel, every, findingsEvery := opt.schedule(ctx)
	defer cancel()
	// Files are checked for cancellation and progress every 256 packets;
	// live captures at every packet, however slow the traffic.
	checkMask := int64(255)
	if live != nil {
		checkMask = 0
	}
	began := time.Now()
	lastProgress, lastFindings := began, began
	pass := func() detectors.Pass {
		st, conns, nodes := an.results()
		return detectors.Pass{Nodes: nodes, Conns: conns, Listeners: an.accepting(), Ports: opt.Flows.Ports, Start: st.FirstTime, End: st.LastTime,
			KeepClosed: opt.Flows.KeepClosed}
	}
	progress := func(done bool) {
		if opt.Progress == nil {
			return
		}
		packets, bytes, kafka, first, last := an.progress()
		pr := Progress{Packets: packets, Bytes: bytes, Kafka: kafka, First: first, Last: last, Elapsed: time.Since(began), Done: done}
		if s, ok := an.(single); ok {
			pr.Tables = s.Tables()
		}
		if live != nil {
			if ls, err := live.Stats(); err == nil {
				pr.Live = &ls
			}
		}
		opt.Progress(pr)
	}
	done := ctx.Done()
	var p capture.Packet
	var n int64
	check := true
	stop := StopEnd
read:
	for src != nil {
		if check || n&checkMask == 0 {
			check = false
			select {
			case <-done:
				stop = stopped(ctx)
				break read
			default:
			}
			if opt.Progress != nil && time.Since(lastProgress) >= every {
				lastProgress = time.Now()
				progress(false)
			}
			if opt.LiveFindings != nil && opt.Detectors != nil && time.Since(lastFindings) >= findingsEvery {
				opt.LiveFindings(opt.Detectors.Snapshot(pass()))
				lastFindings = time.Now() // the snapshot's own time is not counted
			}
		}
		err := src.Next(&p)
		if err == capture.ErrIdle {
			// Nothing came for a while: push out what waits.
			an.Tick(time.Now())
			if err := flushSinks(opt.Sinks); err != nil {
				res.Err, stop = err, StopError
				break
			}
			check = true // look at the context and the clock now
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil && ctx.Err() != nil {
			// A source that gives up when the run is stopped (a read
			// blocked on a pipe): stopped, not broken.
			stop = stopped(ctx)
			break
		}
		if err != nil {
			fileErr(rfiles, err)
			if opt.Warn != nil {
				opt.Warn(err)
			}
			var re *capture.ReadError
			if len(rfiles) == 1 || !errors.As(err, &re) {
				stop = StopError
				break
			}
			continue
		}
		if opt.Filter != nil && !opt.Filter.Match(&p) {
			continue
		}
		for _, s := range opt.Sinks {
			if err := s.WritePacket(&p); err != nil {
				res.Err, stop = err, StopError
				break read
			}
		}
		n++
		if p.File < len(rfiles) {
			rfiles[p.File].Packets++
		}
		an.Packet(&p)
		if opt.Count > 0 && n >= opt.Count {
			stop = StopCount
			break
		}
	}
	if sh, ok := an.(*sharded); ok && stop == StopInterrupted {
		sh.interrupt()
	}
	an.Close()
	if err := flushSinks(opt.Sinks); err != nil && res.Err == nil {
		res.Err, stop = err, StopError
	}
	res.Stop, res.Interrupted = stop, stop == StopInterrupted
	if live != nil {
		if ls, err := live.Stats(); err == nil {
			res.Live = &ls
		}
	}
	progress(true)
	var findings []detectors.Finding
	if opt.Detectors != nil {
		findings = opt.Detectors.Findings(pass())
	}
	res.Stats, res.Conns, res.Nodes = an.results()
	collectBeforeBuild(len(res.Conns))
	res.Report = collector.Build(rfiles, res.Stats, res.Conns, res.Nodes, findings)
	collect.SetTLS(res.Report, res.Stats, opt.Flows.TLSKeys)
	if opt.Detectors != nil {
		for k, n := range opt.Detectors.Cut() {
			res.Report.Totals.BoundsReached[k] += n
		}
	}
	if res.Live != nil {
		d := res.Live.Dropped
		res.Report.Capture.Drops = &d
	}
	res.Report.Capture.Partial = partial(res, &opt, live != nil)
	return res
}

// partial says what the run left out of its input: the rest of the
// files when it stopped before their end, what bounds kept out; nil
// when nothing.
func partial(res *Result, opt *Options, live bool) *report.Partial {
	p := &report.Partial{}
	if !live {
		switch res.Stop {
		case StopInterrupted:
			p.Stop = "interrupted"
		case StopCount:
			p.Stop, p.Count = "count", opt.Count
		case StopDuration:
			p.Stop, p.Duration = "duration", opt.Duration.Seconds()
		case StopError:
			p.Stop = "output error"
		}
		for _, f := range res.Report.Capture.Files {
			if f.Error != "" && (p.Stop == "" || res.Err == nil) {
				p.Stop = "input error"
			}
		}
	}
	for k := range res.Report.Totals.BoundsReached {
		p.Bounds = append(p.Bounds, k)
	}
	slices.Sort(p.Bounds)
	if p.Stop == "" && len(p.Bounds) == 0 {
		return nil
	}
	return p
}

// fileErr notes where an input broke, once per input.
func fileErr(rfiles []report.File, err error) {
	i := 0
	var re *capture.ReadError
	if errors.As(err, &re) {
		i = re.File
	}
	if i < len(rfiles) && rfiles[i].Error == "" {
		rfiles[i].Error = err.Error()
	}
}

func flushSinks(sinks []capture.Sink) error {
	for _, s := range sinks {
		if f, ok := s.(flusher); ok {
			if err := f.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}
