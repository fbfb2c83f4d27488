// Package consumerfallingbehind reports consumers falling behind: a consumer whose
// lag on a partition (the high watermark a Fetch response gives minus the
// fetch offset its request asked from, flows.LagTable) keeps growing over a
// window while it keeps fetching. Producers write faster than it reads:
// records wait longer and longer, and once they outlive retention they are
// lost to it.
//
// A consumer's lag goes up and down with every fetch (a fetch that brings
// records lowers it, the records written meanwhile raise it), so growth is
// judged on its floor: per consumer (client id and host) and partition,
// time is cut into slices of a fifth of the window, and a slice's floor is
// its lowest lag. A growth episode begins at a floor and lasts while each
// later floor stays above the start by at least half of the rise so far; a
// floor at or below the start, or below that half, ends it (the consumer
// caught up) and begins the next. An episode qualifies when its floor rose
// by MinGrowth records or more, over Window or more from its start to its
// last fetch, in MinFetches fetches or more. A consumer idle at the high
// watermark (lag 0), one keeping up with lag going up and down, and one
// catching up (lag shrinking) never open one. Severity follows
// detectors.Grade over the time the consumer was behind; an episode whose
// floor is still MinGrowth above its start at the end has not healed.
package consumerfallingbehind

import (
	"cmp"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/lagev"
	"github.com/kfsniff/kfsniff/flows"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "consumer-falling-behind",
	Recorded: []string{"fixtures/pcaps/injected/slow-consumer-kgo-kfake.pcap"},
	Severity: detectors.Error,
	Doc: "A consumer's lag on a partition (high watermark in the Fetch response minus the request's fetch offset) " +
		"keeps growing: its floor (the lowest lag of each fifth of the window) rose by min-growth records or more, " +
		"over window or more, while it fetched min-fetches times or more. Per consumer (client id and host, with its " +
		"group), the partitions falling behind. Severity by the policy over the time it was behind: a warning from " +
		"3 s (the window makes that at least 10 s), an error from 30 s, or when its floor is still min-growth " +
		"records higher at the end after 10 s. A consumer idle at the high watermark, keeping up, or catching up " +
		"gives nothing.",
}, Params{Window: 10 * time.Second, MinGrowth: 500, MinFetches: 5}, New)

// Params are the rule's thresholds.
type Params struct {
	Window     time.Duration `param:"window" doc:"how long a partition's lag must keep growing"`
	MinGrowth  int           `param:"min-growth" doc:"records the lag's floor must rise by over that time"`
	MinFetches int           `param:"min-fetches" doc:"fetches of the partition during the growth: the consumer keeps fetching"`
}

// slices is how many slices a window holds.
const slices = 5

// New makes the rule.
func New(p Params) detectors.Rule {
	r := &rule{p: Params{Window: max(p.Window, slices*time.Millisecond), MinGrowth: max(p.MinGrowth, 1), MinFetches: max(p.MinFetches, 2)}}
	r.slice = r.p.Window / slices
	return r
}

type rule struct {
	p     Params
	slice time.Duration
	// table is the Delivery's (UseLag): consumers' series are followed
	// within its bound for consumers alone.
	table *flows.LagTable
	// tracks are the consumers' series, by flows.LagSeries.RoleIndex.
	tracks flows.LagStates[track]
}

// track is one consumer partition: the slice under way, the episode under
// way and the worst finished one that qualified.
type track struct {
	sl        slice
	cur, best Episode
}

// slice is the samples of one slice of time: its lowest point (the
// floor), how many samples came from it on and the highest of them, and
// all samples, the highest and the last.
type slice struct {
	index         int64
	low, last     flows.LagPoint
	high, highLow flows.LagPoint // highest of all, highest from low on
	n, fromLow    int
}

func (s *slice) add(p flows.LagPoint) {
	if s.n == 0 || p.Lag < s.low.Lag {
		s.low, s.highLow, s.fromLow = p, p, 0
	}
	if s.n == 0 || p.Lag > s.high.Lag {
		s.high = p
	}
	if p.Lag > s.highLow.Lag {
		s.highLow = p
	}
	s.n++
	s.fromLow++
	s.last = p
}

// Episode is a stretch of rising floors: its start (the floor it began
// at), its highest and its latest floor, the highest lag and the last
// point in it, and, once it ended, the floor that ended it.
type Episode struct {
	Start, Floor, Latest, Peak, Last, End flows.LagPoint
	fetches                               int
}

func (e *Episode) open() bool { return e.fetches > 0 }

// rise is how far its floor rose.
func (e *Episode) rise() int64 { return e.Floor.Lag - e.Start.Lag }

// behind is how long the consumer was behind: from the start to the last
// fetch of the episode.
func (e *Episode) behind() time.Duration { return e.Last.Time.Sub(e.Start.Time) }

func (r *rule) qualifies(e *Episode) bool {
	return e.fetches >= r.p.MinFetches && e.rise() >= int64(r.p.MinGrowth) && e.behind() >= r.p.Window
}

// step closes slice s into the episode cur: the episode goes on, or ends
// (returned as ended, if it was open) and a new one begins at s's floor.
func step(cur Episode, s *slice) (next, ended Episode) {
	if cur.open() && s.low.Lag > cur.Start.Lag && s.low.Lag >= cur.Start.Lag+(cur.rise()+1)/2 {
		cur.fetches += s.n
		cur.Last = s.last
		if s.high.Lag > cur.Peak.Lag {
			cur.Peak = s.high
		}
		if s.low.Lag > cur.Floor.Lag {
			cur.Floor = s.low
		}
		cur.Latest = s.low
		return cur, Episode{}
	}
	if cur.open() {
		cur.End = s.low
	}
	return Episode{Start: s.low, Floor: s.low, Latest: s.low, Peak: s.highLow, Last: s.last, fetches: s.fromLow}, cur
}

// UseLag implements detectors.LagHook.
func (r *rule) UseLag(t *flows.LagTable) { r.table = t }

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	for i := range x.Lag {
		s := &x.Lag[i]
		if s.S.Key.Replica >= 0 {
			continue // a follower's
		}
		r.add(r.tracks.At(s.S.RoleIndex), s.P)
	}
}

func (r *rule) add(t *track, p flows.LagPoint) {
	i := p.Time.UnixNano() / int64(r.slice)
	if t.sl.n > 0 && i != t.sl.index {
		var ended Episode
		t.cur, ended = step(t.cur, &t.sl)
		r.keep(t, &ended)
		t.sl = slice{}
	}
	t.sl.index = i
	t.sl.add(p)
}

// keep keeps an ended episode if it qualifies and is the worst so far.
func (r *rule) keep(t *track, e *Episode) {
	if e.open() && r.qualifies(e) && worse(e, &t.best) {
		t.best = *e
	}
}

// worse reports whether a is a worse episode than b: longer behind, or as
// long with a larger rise.
func worse(a, b *Episode) bool {
	return !b.open() || a.behind() > b.behind() || a.behind() == b.behind() && a.rise() > b.rise()
}

// part is a partition's episode to report.
type part struct {
	s       *flows.LagSeries
	e       Episode
	ongoing bool
	sev     detectors.Severity
}

// worst orders a consumer's parts: most severe, then the largest rise.
func worst(a, b *part) bool {
	return cmp.Or(cmp.Compare(b.sev, a.sev), cmp.Compare(b.e.rise(), a.e.rise())) < 0
}

// Findings implements detectors.Rule: one per consumer (client id and
// host) with a partition falling behind. It changes nothing (the slice
// under way is closed on a copy), so it may be called while the capture
// runs.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	var consumers lagev.Groups[flows.LagKey, part]
	for _, s := range r.table.Series(cluster.RoleConsumer) {
		tp := r.tracks.Get(s.RoleIndex)
		if tp == nil {
			continue // its samples never reached the rule (a handler before panicked)
		}
		t := *tp
		cur, ended := step(t.cur, &t.sl)
		r.keep(&t, &ended)
		pt := part{s: s}
		switch {
		case r.qualifies(&cur) && cur.Latest.Lag-cur.Start.Lag >= int64(r.p.MinGrowth):
			// The floor is still MinGrowth above the start: not healed.
			pt.e, pt.ongoing = cur, true
		case r.qualifies(&cur) && worse(&cur, &t.best):
			pt.e = cur
		case t.best.open():
			pt.e = t.best
		default:
			continue
		}
		pt.sev = detectors.Grade(pt.e.behind(), pt.ongoing)
		consumers.Add(flows.LagKey{Client: s.Key.Client}, pt)
	}
	var out []detectors.Finding
	consumers.Each(worst, func(k flows.LagKey, parts []part) { out = append(out, r.finding(p, k, parts)) })
	return out
}
