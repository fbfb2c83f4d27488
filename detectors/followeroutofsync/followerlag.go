// Package followeroutofsync reports followers out of sync: a replica whose
// replica fetch offset (a Fetch with a replica id, flows.Message.Fetcher) trails
// the high watermark its leader's response gives, for long. The leader
// counts a follower's fetch offset before it advances the high watermark,
// so a follower in the ISR never trails it: one that does has dropped out
// of the ISR (or, being new, never joined it) and the partition is
// under-replicated, seen on the wire.
//
// Per follower node, leader and partition, an episode is an unbroken run
// of samples trailing by MinLag records or more; a sample at or past the
// high watermark less MinLag ends it. An episode of MinDuration or more is
// reported. Severity follows detectors.Grade over its duration, still
// trailing at the end being not healed; a follower catching up (its trail
// at the end of the episode at most half its largest) heals by itself:
// info when it caught up, not "ongoing" while it still catches up.
package followeroutofsync

import (
	"cmp"
	"net/netip"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/lagev"
	"github.com/kfsniff/kfsniff/flows"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:        "follower-out-of-sync",
	NotRecorded: "followers' replica fetches are broker-to-broker traffic kfake does not make; fixtures/pcaps/scenarios/follower-out-of-sync.pcap is built with fixtures/gen.",
	Severity:    detectors.Error,
	Doc: "A follower's replica fetch offset trails the high watermark in its leader's Fetch response by min-lag " +
		"records or more for min-duration or more: an in-sync follower never trails it, so the follower is out of " +
		"the ISR and the partition under-replicated. Per follower node and leader, the partitions trailing. " +
		"Severity by the policy over how long it trailed: a warning from 3 s (min-duration makes that at least " +
		"10 s), an error from 30 s or when still trailing at the end after 10 s; a follower that caught up with " +
		"its trail shrinking (after a restart) is info, and one still catching up at the end is not counted as " +
		"unhealed.",
}, Params{MinLag: 1, MinDuration: 10 * time.Second}, New)

// Params are the rule's thresholds.
type Params struct {
	MinLag      int           `param:"min-lag" doc:"records the follower's fetch offset must trail the leader's high watermark by"`
	MinDuration time.Duration `param:"min-duration" doc:"how long it must trail without a break"`
}

// New makes the rule.
func New(p Params) detectors.Rule {
	return &rule{p: Params{MinLag: max(p.MinLag, 1), MinDuration: p.MinDuration}}
}

type rule struct {
	p Params
	// table is the Delivery's (UseLag): followers' series are followed
	// within its bound for followers alone.
	table *flows.LagTable
	// tracks are the followers' series, by flows.LagSeries.RoleIndex.
	tracks flows.LagStates[track]
}

// track is one follower partition: the run under way and the worst
// finished one that qualified.
type track struct {
	cur, best Run
}

// Run is an unbroken stretch of trailing samples: the first, the one
// trailing most, the last, and the sample that ended it.
type Run struct {
	First, Most, Last, End flows.LagPoint
	fetches                int
}

func (u *Run) open() bool               { return u.fetches > 0 }
func (u *Run) length() time.Duration    { return u.Last.Time.Sub(u.First.Time) }
func (r *rule) qualifies(u *Run) bool   { return u.fetches >= 2 && u.length() >= r.p.MinDuration }
func (u *Run) catchingUp() bool         { return u.Last.Lag*2 <= u.Most.Lag && u.Last.Time.After(u.Most.Time) }
func (u *Run) longer(v *Run) bool       { return !v.open() || u.length() > v.length() }
func (r *rule) trailing(lag int64) bool { return lag >= int64(r.p.MinLag) }

// UseLag implements detectors.LagHook.
func (r *rule) UseLag(t *flows.LagTable) { r.table = t }

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	for i := range x.Lag {
		s := &x.Lag[i]
		if s.S.Key.Replica < 0 {
			continue // a consumer's
		}
		r.add(r.tracks.At(s.S.RoleIndex), s.P)
	}
}

func (r *rule) add(t *track, p flows.LagPoint) {
	u := &t.cur
	switch {
	case r.trailing(p.Lag) && u.open():
		u.Last = p
		u.fetches++
		if p.Lag > u.Most.Lag {
			u.Most = p
		}
	case r.trailing(p.Lag):
		*u = Run{First: p, Most: p, Last: p, fetches: 1}
	case u.open():
		u.End = p
		if r.qualifies(u) && u.longer(&t.best) {
			t.best = *u
		}
		*u = Run{}
	}
}

// part is a partition's run to report.
type part struct {
	s       *flows.LagSeries
	u       Run
	ongoing bool
	sev     detectors.Severity
}

// follower names one follower node's fetching from one leader.
type follower struct {
	node   int32
	leader netip.AddrPort
}

// worst orders a follower's parts: most severe, longest, furthest behind.
func worst(a, b *part) bool {
	return cmp.Or(cmp.Compare(b.sev, a.sev), cmp.Compare(b.u.length(), a.u.length()), cmp.Compare(b.u.Most.Lag, a.u.Most.Lag)) < 0
}

// Findings implements detectors.Rule: one per follower node and leader
// with a partition out of sync. It changes nothing.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	var followers lagev.Groups[follower, part]
	for _, s := range r.table.Series(cluster.RoleReplication) {
		t := r.tracks.Get(s.RoleIndex)
		if t == nil {
			continue // its samples never reached the rule (a handler before panicked)
		}
		pt := part{s: s}
		switch {
		case r.qualifies(&t.cur):
			pt.u, pt.ongoing = t.cur, !t.cur.catchingUp()
		case t.best.open():
			pt.u = t.best
		default:
			continue
		}
		pt.sev = detectors.Grade(pt.u.length(), pt.ongoing)
		if !pt.ongoing && pt.u.End.Packet != 0 && pt.u.catchingUp() {
			pt.sev = detectors.Info // caught up, as after a restart
		}
		followers.Add(follower{s.Key.Replica, s.Server}, pt)
	}
	var out []detectors.Finding
	followers.Each(worst, func(fl follower, parts []part) { out = append(out, r.finding(p, fl, parts)) })
	return out
}
