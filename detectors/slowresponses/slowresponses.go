// Package slowresponses reports responses that took far longer than the
// API usually takes in the same capture: more than Factor × the API's
// median latency and more than MinLatency, or that kept its client waiting
// MinWait (3 s) or more however slow the API usually is (a broker slow on
// every request is felt too); at least MinCount times (a pattern, not one
// pause).
//
// It is graded by the longest a client waited for one response
// (detectors.Grade): info under MinWait, a warning from it, an error from
// 30 s.
//
// Latency is counted as the time the broker took beyond what it may hold a
// request for:
//   - a Fetch (or ShareFetch) is a long poll, answered when data arrives or
//     when MaxWaitMillis expires: only the time beyond MaxWaitMillis
//     counts, so the expired long polls of a quiet partition (500 ms with
//     maxWait 500) are never slow, and a Fetch answered within
//     MaxWaitMillis + MinLatency cannot be;
//   - a response that old protocol versions held back for a quota
//     (throttleTimeMs before KIP-219) has the throttle time taken off, as
//     that is the throttled rule's business;
//   - JoinGroup is left out: the coordinator holds it until the group has
//     rebalanced, which takes as long as the slowest member.
package slowresponses

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/hist"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "slow-responses",
	Recorded: []string{"fixtures/pcaps/clients/slow-kgo.pcap", "fixtures/pcaps/clients/slow-sarama.pcap"},
	Severity: detectors.Error,
	// Generic: a throttled finding for the same client and broker explains
	// its waits (Subject.Waits).
	Generic: true,
	Doc: "Responses far slower than their API's median in the same capture (more than factor × the " +
		"median and more than min-latency) or that kept their client waiting min-wait or more whatever the " +
		"median, at least min-count of them. A Fetch counts only the time beyond its MaxWaitMillis (an expired " +
		"long poll is not slow); JoinGroup, held for the rebalance, is left out. Graded by the longest wait: info " +
		"under min-wait (3 s), warning from it, error from 30 s. Generic: a throttled finding for the same client ids at the same broker, at least as severe, explains its waits, and it drops to info.",
}, Params{Factor: 10, MinLatency: time.Second, MinCount: 3, MinWait: detectors.FeltAfter}, New)

// Params are the rule's thresholds.
type Params struct {
	Factor     float64       `param:"factor" doc:"how many times the API's median latency a response must take to be slow"`
	MinLatency time.Duration `param:"min-latency" unit:"s" alias:"min-latency-s" doc:"how long a response must take at least to be slow (beyond MaxWaitMillis for a Fetch)"`
	MinCount   int           `param:"min-count" doc:"slow responses of one API before it is reported"`
	MinWait    time.Duration `param:"min-wait" unit:"s" doc:"how long one response must keep its client waiting (beyond MaxWaitMillis for a Fetch) to be slow whatever the API's median, and a warning"`
}

const (
	// maxCandidates bounds the exchanges over MinLatency kept exactly;
	// past it, exchanges are judged against the median so far.
	maxCandidates = 16384
	// worstKept is how many of the slowest an API keeps to name.
	worstKept = 4
	// maxLateIDs bounds the client ids of exchanges judged late.
	maxLateIDs = 64
)

// New makes the rule.
func New(p Params) detectors.Rule {
	p.MinCount = max(p.MinCount, 1)
	return &rule{p: p, apis: make(map[int16]*api)}
}

type rule struct {
	p     Params
	apis  map[int16]*api
	byKey [128]*api // apis by key, for the usual keys: no map lookup per exchange
	kept  int
	// unknown counts exchanges of keys kmsg does not know, not judged.
	unknown int64
}

// Cut implements detectors.Bounded.
func (r *rule) Cut() map[string]int64 {
	return map[string]int64{"unknown_api_exchanges": r.unknown}
}

// api is what is known of one API's exchanges.
type api struct {
	key   int16
	h     hist.Histogram // counted latency of every exchange
	cands []Exchange     // counted latency over MinLatency, in order
	// Past maxCandidates: exchanges judged as they come.
	late                int64
	lateFirst, lateLast Exchange
	lateConns           tally.Conns
	lateIDs             map[string]bool
	worst               []Exchange // the slowest by counted latency, slowest first
	fetchWaits          bool       // some exchanges had a MaxWaitMillis taken off
}

// Exchange is one exchange over MinLatency.
type Exchange struct {
	Counted  time.Duration // latency beyond what the broker may hold it
	Latency  time.Duration
	t        time.Time
	Evidence detectors.Evidence
	conn     *flows.ConnInfo
	clientID string
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.Resp == nil || x.Req.Key == int16(kmsg.JoinGroup) || x.Again {
		return // Again: this exchange was judged with another partition
	}
	if !decode.KnownKey(x.Req.Key) {
		// Keys from the wire would be a histogram each: an API kmsg
		// does not know is not judged, only counted (Cut).
		r.unknown++
		return
	}
	lat := x.Latency()
	if lat < 0 {
		return
	}
	wait, longPoll := decode.MaxWait(x.Req.Req)
	if k := kmsg.Key(x.Req.Key); !longPoll && (k == kmsg.Fetch || k == kmsg.ShareFetch) {
		return // its body, and so its MaxWaitMillis, is unknown
	}
	counted := lat - wait
	if tr, ok := x.Resp.Resp.(kmsg.ThrottleResponse); ok {
		if ms, after := tr.Throttle(); ms > 0 && !after {
			counted -= time.Duration(ms) * time.Millisecond
		}
	}
	counted = max(counted, 0)
	a := r.api(x.Req.Key)
	a.h.Add(counted)
	if wait > 0 {
		a.fetchWaits = true
	}
	if counted <= r.p.MinLatency && counted < r.p.MinWait {
		return
	}
	e := Exchange{Counted: counted, Latency: lat, t: x.Resp.Time, conn: x.Conn, clientID: x.Req.Client.ID,
		Evidence: detectors.EvidenceAt(x.Resp, fmt.Sprintf("%s v%d corr %d answered after %s", x.Req.Name(), x.Req.Version,
			x.Req.Correlation, text.Duration(lat)))}
	if wait > 0 {
		e.Evidence.What += fmt.Sprintf(" (MaxWaitMillis %d)", wait.Milliseconds())
	}
	if r.kept < maxCandidates {
		r.kept++
		a.cands = append(a.cands, e)
	} else if r.slow(a, counted) {
		// Judged against the median so far.
		if a.late == 0 {
			a.lateFirst = e
			a.lateIDs = make(map[string]bool)
		}
		a.late++
		a.lateLast = e
		a.lateConns.Add(e.conn)
		if len(a.lateIDs) < maxLateIDs {
			a.lateIDs[e.clientID] = true
		}
	}
	a.keepWorst(e)
}

func (r *rule) api(key int16) *api {
	var a *api
	if key >= 0 && int(key) < len(r.byKey) {
		a = r.byKey[key]
	} else {
		a = r.apis[key]
	}
	if a == nil {
		a = &api{key: key}
		r.apis[key] = a
		if key >= 0 && int(key) < len(r.byKey) {
			r.byKey[key] = a
		}
	}
	return a
}

func (a *api) keepWorst(e Exchange) {
	i := sort.Search(len(a.worst), func(i int) bool { return a.worst[i].Counted < e.Counted })
	if i >= worstKept {
		return
	}
	a.worst = append(a.worst, Exchange{})
	copy(a.worst[i+1:], a.worst[i:])
	a.worst[i] = e
	if len(a.worst) > worstKept {
		a.worst = a.worst[:worstKept]
	}
}

// threshold is the counted latency above which an exchange of a is slow
// for its API (MinWait makes any slow).
func (r *rule) threshold(a *api) time.Duration {
	return max(r.p.MinLatency, time.Duration(r.p.Factor*float64(a.h.Quantile(0.5))))
}

// slow says whether an exchange of a that counted that long is slow.
func (r *rule) slow(a *api, counted time.Duration) bool {
	return counted > r.threshold(a) || counted >= r.p.MinWait
}

// Findings implements detectors.Rule: one per API with slow responses.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	var out []detectors.Finding
	for _, k := range slices.Sorted(maps.Keys(r.apis)) {
		if f, ok := r.finding(p, r.apis[k]); ok {
			out = append(out, f)
		}
	}
	return out
}

func (r *rule) finding(p *detectors.Pass, a *api) (detectors.Finding, bool) {
	thr := r.threshold(a)
	var slow []Exchange
	for _, e := range a.cands {
		if r.slow(a, e.Counted) {
			slow = append(slow, e)
		}
	}
	n := int64(len(slow)) + a.late
	// The longest a client waited, beyond what the broker may hold it.
	var waited time.Duration
	if len(a.worst) > 0 {
		waited = a.worst[0].Counted
	}
	if n < int64(r.p.MinCount) {
		return detectors.Finding{}, false
	}
	sev := detectors.Info
	if waited >= r.p.MinWait {
		sev = max(detectors.Warning, detectors.Grade(waited, false))
	}
	var conns tally.Conns
	ids := map[string]bool{}
	var maxLat time.Duration
	for _, e := range slow {
		conns.Add(e.conn)
		ids[e.clientID] = true
		maxLat = max(maxLat, e.Latency)
	}
	var first, last Exchange
	if len(slow) > 0 {
		first, last = slow[0], slow[len(slow)-1]
	}
	if a.late > 0 {
		for _, c := range a.lateConns.List() {
			conns.AddKey(c)
		}
		for id := range a.lateIDs {
			ids[id] = true
		}
		if len(slow) == 0 {
			first = a.lateFirst
		}
		last = a.lateLast
	}
	var worst []Exchange
	for _, e := range a.worst {
		if r.slow(a, e.Counted) {
			worst = append(worst, e)
			maxLat = max(maxLat, e.Latency)
		}
	}
	// Evidence: the first and last slow responses and the slowest.
	ev := []detectors.Evidence{first.Evidence}
	for _, e := range append(worst, last) {
		if !slices.ContainsFunc(ev, func(x detectors.Evidence) bool { return x.File == e.Evidence.File && x.Packet == e.Evidence.Packet }) {
			ev = append(ev, e.Evidence)
		}
	}
	detectors.SortEvidence(ev)
	p50 := a.h.Quantile(0.5)
	f := &Finding{
		API: decode.Name(a.key), MedianMs: text.Millis(p50), ThresholdMs: text.Millis(min(thr, r.p.MinWait)), MaxMs: text.Millis(maxLat),
		WaitedMs:  text.Millis(waited),
		ClientIDs: text.SortedKeys(ids), Clients: conns.Clients(), Servers: conns.Servers(),
		Slow: n, Responses: int64(a.h.Count()), Threshold: thr, Median: p50, Max: maxLat, Waited: waited, First: first.t, Last: last.t,
		Worst: worst, BeyondWait: a.fetchWaits, ServerLabels: conns.ServerLabels(p.Nodes), Params: r.p, Severity: sev,
	}
	return detectors.Finding{
		Severity: sev,
		First:    first.t,
		Last:     last.t,
		Conns:    conns.IDs(),
		Nodes:    conns.Nodes(p.Nodes),
		Evidence: ev,
		Subject:  detectors.Subject{ClientIDs: f.ClientIDs, Clients: conns.ClientAddrs(), Servers: conns.ServerAddrs(), Waits: true},
		Detail:   f,
	}, true
}
