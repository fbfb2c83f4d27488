package rebalanceloop

import (
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
)

// episode is one stretch of instability of a group.
type episode struct {
	active      bool
	start, last time.Time
	// unsettledSince is when the group last became unsettled (zero when
	// settled); settledAt when it last settled.
	unsettledSince, settledAt time.Time
	unsettled, longest        time.Duration
	genFirst, genLast         int32
	rebalances                int // generations completed (classic) and fences (KIP-848)
	joined, left, fences      int
	joinReqs                  int
	errors                    int64
	codes                     tally.Codes
	named                     []string
	conns                     tally.Conns
	ev                        detectors.Sampler[evid]
}

// disturb marks the group unsettled at t, beginning an episode if there
// is none or if the group had been settled for hold.
func (r *rule) disturb(g *group, t time.Time, c *flows.ConnInfo, ev evid, keep bool) {
	e := &g.cur
	if e.active && e.unsettledSince.IsZero() && !e.settledAt.IsZero() && t.Sub(e.settledAt) >= r.p.Hold {
		r.finish(g)
	}
	if !e.active {
		*e = episode{active: true, start: t, unsettledSince: t, named: e.named[:0]}
		clear(g.fenced)
	} else if e.unsettledSince.IsZero() {
		e.unsettledSince = t
	}
	if t.After(e.last) {
		e.last = t
	}
	e.conns.Add(c)
	if keep {
		e.ev.Add(ev)
	}
}

// leave counts a member leaving: it explains the rebalance that follows,
// but the group is not unsettled until the coordinator says so.
func (r *rule) leave(g *group, t time.Time, c *flows.ConnInfo, ev evid) {
	e := &g.cur
	if e.active && e.unsettledSince.IsZero() && !e.settledAt.IsZero() && t.Sub(e.settledAt) >= r.p.Hold {
		r.finish(g)
	}
	if !e.active {
		*e = episode{active: true, start: t, last: t, settledAt: t, named: e.named[:0]}
		clear(g.fenced)
	}
	e.conns.Add(c)
	e.ev.Add(ev)
}

// fail counts a rebalance error code answered to src.
func (r *rule) fail(g *group, t time.Time, x *detectors.Exchange, code int16, src cluster.Client) {
	if !rebalanceError(code) {
		return
	}
	r.disturb(g, t, x.Conn, evid{}, false)
	e := &g.cur
	e.errors++
	e.codes.Add(code)
	e.ev.Add(evidOf(x.Resp, code, 0))
	if fencing(code) && len(g.fenced) < 64 {
		g.fenced[src] = true
	}
}

// settle marks the group settled at t.
func (r *rule) settle(g *group, t time.Time) {
	e := &g.cur
	if !e.active || e.unsettledSince.IsZero() {
		return
	}
	d := t.Sub(e.unsettledSince)
	e.unsettled += d
	e.longest = max(e.longest, d)
	e.unsettledSince, e.settledAt = time.Time{}, t
	if t.After(e.last) {
		e.last = t
	}
}

// finish closes the current episode, keeping it if it is the worst yet.
func (r *rule) finish(g *group) {
	e := g.cur
	g.cur.active = false
	if !r.reportable(&e) {
		return
	}
	g.episodes++
	if worse(r, &e, &g.best) {
		g.best = e
		g.best.named = append([]string(nil), e.named...)
	}
}

// unexplained is the rebalances that members joining and leaving do not
// explain.
func unexplained(e *episode) int {
	return max(e.rebalances-e.joined-e.left, 0)
}

func (r *rule) loop(e *episode) bool {
	return unexplained(e) >= r.p.MinRebalances || e.errors >= int64(r.p.MinErrors)+explainedErrors(e)
}

// explainedErrors is the rebalance errors that members joining and leaving
// explain: each join or leave makes a rebalance in which every member of
// the group (at most every member that joined) may be answered
// REBALANCE_IN_PROGRESS once. Eight members joining and then leaving one
// by one are answered it about forty times (kgo, recorded:
// fixtures/pcaps/clients/group-churn-kgo), a healthy group, not a loop.
func explainedErrors(e *episode) int64 {
	return int64(e.joined+e.left) * int64(e.joined)
}

func (r *rule) reportable(e *episode) bool {
	return e.active && (r.loop(e) || unexplained(e) > 0)
}

func worse(r *rule, a, b *episode) bool {
	if !b.active {
		return true
	}
	if la, lb := r.loop(a), r.loop(b); la != lb {
		return la
	}
	return a.last.Sub(a.start) > b.last.Sub(b.start)
}
