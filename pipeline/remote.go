package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/collect"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// RemoteSource is records shipped by agents read back as events
// (correlate.Source, adapted by the command).
type RemoteSource interface {
	// Next waits a little for records and returns those ready, io.EOF
	// at the end of the input (with the last ones).
	Next(ctx context.Context) (RemoteBatch, error)
	// Flush returns every record still held.
	Flush() RemoteBatch
	Name() string
	Nodes() *cluster.Nodes
	Conns() []*flows.Conn
	// Records and Bytes read so far; First and Last their capture times.
	Read() (records, bytes int64, first, last time.Time)
	// End is where an agent's capture ended (detectors.Pass.AgentEnd).
	End(agent string) (time.Time, bool)
}

// ErrRemoteFatal wraps a RemoteSource's error that ends the run (a
// cluster that never answered): RunRemote stops with StopError instead
// of trying again.
var ErrRemoteFatal = errors.New("cannot read")

// RemoteBatch is what Next gives: the lanes whose state goes (partitions
// revoked), then the records to deliver, in order.
type RemoteBatch struct {
	Revoked []int32
	Items   []RemoteItem
}

// RemoteItem is one record's events and its lane: Opened (a connection
// seen for the first time: for the handlers listing connections), Req
// (once per exchange), X and Conn; each may be nil.
type RemoteItem struct {
	Lane                 int32
	Opened, Req, X, Conn *flows.Event
}

// lane is the detectors of one Kafka partition of the export topic in a
// consumer group (one lane for all without a group): when the partition
// is revoked, its state goes with it, so that the correlator taking the
// partition over reports its findings, and this one does not.
type lane struct {
	set *detectors.Set
	d   *flows.Delivery
}

// interruptGrace is how long records are still delivered after Ctrl-C.
const interruptGrace = 500 * time.Millisecond

// RunRemote analyses the records an export topic holds (kfsniff -r
// kafka://...) as Run analyses packets: the rebuilt exchanges and
// connection events go to the collector and opt.Handlers (--frames, the
// TUI, metrics) through one Delivery, and to the detectors through a
// Delivery per lane. Without a group, opt.Detectors is the one lane; in a
// group, lanes are made by newSet, one per partition held. It stops at
// the end of the input (UntilEnd), ctx, Options.Count records or
// Options.Duration; then it delivers what the merge still holds and
// builds the report.
func RunRemote(ctx context.Context, src RemoteSource, group bool, newSet func() *detectors.Set, opt Options) *Result {
	collector := collect.NewCollector()
	nodes := src.Nodes()
	shared := flows.NewRemoteDelivery(nodes, append([]flows.Handler{collector}, opt.Handlers...)...)
	lanes := map[int32]*lane{}
	laneOf := func(id int32) *lane {
		if l := lanes[id]; l != nil {
			return l
		}
		set := opt.Detectors
		if group && newSet != nil {
			set = newSet()
		}
		if set == nil {
			return nil
		}
		l := &lane{set: set, d: flows.NewRemoteDelivery(nodes, set)}
		lanes[id] = l
		return l
	}
	res := &Result{Workers: 1}
	ctx, cancel, every, findingsEvery := opt.schedule(ctx)
	defer cancel()
	began := time.Now()
	lastProgress, lastFindings := began, began
	stats := func() *flows.Stats {
		records, bytes, first, last := src.Read()
		st := &flows.Stats{Packets: records, Bytes: bytes, FirstTime: first, LastTime: last}
		if ev, ok := src.(interface{ Evicted() flows.EvictedConns }); ok {
			st.Evicted = ev.Evicted() // connections folded past the table's bound
		}
		return st
	}
	pass := func() detectors.Pass {
		st := stats()
		return detectors.Pass{Nodes: nodes, Conns: src.Conns(), Listeners: flows.NewListeners(), Ports: opt.Flows.Ports, Start: st.FirstTime, End: st.LastTime,
			AgentEnd: src.End}
	}
	findings := func(snapshot bool) []detectors.Finding {
		var out []detectors.Finding
		for _, id := range slices.Sorted(maps.Keys(lanes)) {
			if snapshot {
				out = append(out, lanes[id].set.Snapshot(pass())...)
			} else {
				out = append(out, lanes[id].set.Findings(pass())...)
			}
		}
		detectors.Sort(out)
		return out
	}
	progress := func(done bool) {
		if opt.Progress == nil {
			return
		}
		st := stats()
		opt.Progress(Progress{Packets: st.Packets, Bytes: st.Bytes, Kafka: len(src.Conns()), First: st.FirstTime, Last: st.LastTime,
			Elapsed: time.Since(began), Done: done})
	}
	var n, unread int64
	// halted: Ctrl-C (or --duration) came more than interruptGrace ago.
	// Records are delivered one at a time and a rule's work per record is
	// bounded, so that a batch, or the merge's flush, however large, stops
	// within a second; what is left is counted, not analysed.
	var interrupted time.Time
	halted := func() bool {
		if ctx.Err() == nil {
			return false
		}
		if interrupted.IsZero() {
			interrupted = time.Now()
		}
		return time.Since(interrupted) > interruptGrace
	}
	deliver := func(b RemoteBatch) bool {
		for _, id := range b.Revoked {
			delete(lanes, id)
		}
		for i := range b.Items {
			if halted() {
				unread += int64(len(b.Items) - i)
				return true
			}
			it := &b.Items[i]
			if it.Opened != nil {
				shared.Deliver(it.Opened)
			}
			l := laneOf(it.Lane)
			for _, e := range []*flows.Event{it.Req, it.X, it.Conn} {
				if e == nil {
					continue
				}
				if e != it.Opened {
					shared.Deliver(e)
				}
				if l != nil {
					l.d.Deliver(e)
				}
			}
			n++
			if opt.Count > 0 && n >= opt.Count {
				return false
			}
		}
		return true
	}
	stop := StopEnd
read:
	for {
		select {
		case <-ctx.Done():
			stop = stopped(ctx)
			break read
		default:
		}
		b, err := src.Next(ctx)
		if !deliver(b) {
			stop = StopCount
			break
		}
		if err == io.EOF {
			break
		}
		if errors.Is(err, ErrRemoteFatal) {
			stop = StopError
			break
		}
		if err != nil && ctx.Err() == nil {
			if opt.Warn != nil {
				opt.Warn(err)
			}
			time.Sleep(time.Second) // Kafka unreachable: try again
		}
		now := time.Now()
		if opt.Progress != nil && now.Sub(lastProgress) >= every {
			lastProgress = now
			progress(false)
		}
		if opt.LiveFindings != nil && now.Sub(lastFindings) >= findingsEvery {
			opt.LiveFindings(findings(true))
			lastFindings = time.Now()
		}
	}
	if stop != StopCount {
		deliver(src.Flush())
	}
	if unread > 0 && opt.Warn != nil {
		opt.Warn(fmt.Errorf("%d records read but not analysed: stopped", unread))
	}
	res.Stop, res.Interrupted = stop, stop == StopInterrupted
	progress(true)
	fs := findings(false)
	res.Stats, res.Conns, res.Nodes = stats(), src.Conns(), nodes
	in := []report.File{{Name: src.Name(), Format: "kafka", Packets: res.Stats.Packets}}
	res.Report = collector.Build(in, res.Stats, res.Conns, nodes, fs)
	for _, l := range lanes {
		for k, v := range l.set.Cut() {
			res.Report.Totals.BoundsReached[k] += v
		}
	}
	return res
}
