package legacy

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/hist"
	"github.com/kfsniff/kfsniff/internal/text"
)

// slow-responses: responses that took far longer than the API usually
// takes in the same capture: more than factor × the API's median latency
// and more than min-latency-s, at least min-count times.
//
// Latency is counted as the time the broker took beyond what it may hold a
// request for:
//   - a Fetch (or ShareFetch) is a long poll, answered when data arrives or
//     when MaxWaitMillis expires: only the time beyond MaxWaitMillis
//     counts, so the expired long polls of a quiet partition (500 ms with
//     maxWait 500) are never slow, and a Fetch answered within
//     MaxWaitMillis + min-latency-s cannot be;
//   - a response that old protocol versions held back for a quota
//     (throttleTimeMs before KIP-219) has the throttle time taken off, as
//     that is the throttled detector's business;
//   - JoinGroup is left out: the coordinator holds it until the group has
//     rebalanced, which takes as long as the slowest member.

func slowResponsesSpec() Spec {
	return Spec{
		ID:       "slow-responses",
		Severity: Warning,
		Summary: "Responses far slower than their API's median in the same capture: more than factor × the " +
			"median and more than min-latency-s, at least min-count of them. A Fetch counts only the time beyond " +
			"its MaxWaitMillis (an expired long poll is not slow); JoinGroup, held for the rebalance, is left out.",
		Params: []Param{
			{Name: "factor", Default: 10, Meaning: "how many times the API's median latency a response must take to be slow"},
			{Name: "min-latency-s", Default: 1, Meaning: "seconds a response must take at least to be slow (beyond MaxWaitMillis for a Fetch)"},
			{Name: "min-count", Default: 3, Meaning: "slow responses of one API before it is reported"},
		},
		New: func(p Params) Detector { return newSlowResponses(p) },
	}
}

const (
	// slowMaxCandidates bounds the exchanges over min-latency kept
	// exactly; past it, exchanges are judged against the median so far.
	slowMaxCandidates = 16384
	slowWorst         = 4
)

type slowResponses struct {
	factor   float64
	minLat   time.Duration
	minCount int64
	apis     map[int16]*slowAPI
	byKey    [128]*slowAPI // apis by key, for the usual keys: no map lookup per exchange
	kept     int
}

func newSlowResponses(p Params) *slowResponses {
	return &slowResponses{
		factor:   p.Float("factor"),
		minLat:   p.Seconds("min-latency-s"),
		minCount: int64(max(p.Int("min-count"), 1)),
		apis:     make(map[int16]*slowAPI),
	}
}

type slowAPI struct {
	key   int16
	h     hist.Histogram // counted latency of every exchange
	cands []slowExchange // counted latency over min-latency, in order
	// Past slowMaxCandidates: exchanges judged as they come.
	late       int64
	lateFirst  slowExchange
	lateLast   slowExchange
	lateConns  opsConns
	lateIDs    map[string]bool
	worst      []slowExchange // the slowest, slowest first
	fetchWaits bool           // some exchanges had a MaxWaitMillis taken off
}

type slowExchange struct {
	counted  time.Duration // latency beyond what the broker may hold it
	latency  time.Duration
	maxWait  time.Duration
	t        time.Time
	ev       Evidence
	conn     *flows.Conn
	clientID string
}

// OnExchange implements flows.ExchangeHandler.
func (d *slowResponses) OnExchange(x *flows.Exchange) {
	if x.Req == nil || x.Resp == nil || x.Req.Key == int16(kmsg.JoinGroup) {
		return
	}
	lat := x.Latency()
	if lat < 0 {
		return
	}
	counted := lat
	var wait time.Duration
	switch r := x.Req.Req.(type) {
	case *kmsg.FetchRequest:
		wait = time.Duration(max(r.MaxWaitMillis, 0)) * time.Millisecond
	case *kmsg.ShareFetchRequest:
		wait = time.Duration(max(r.MaxWaitMillis, 0)) * time.Millisecond
	case nil:
		if k := kmsg.Key(x.Req.Key); k == kmsg.Fetch || k == kmsg.ShareFetch {
			return // its MaxWaitMillis is unknown
		}
	}
	counted -= wait
	if tr, ok := x.Resp.Resp.(kmsg.ThrottleResponse); ok {
		if ms, after := tr.Throttle(); ms > 0 && !after {
			counted -= time.Duration(ms) * time.Millisecond
		}
	}
	counted = max(counted, 0)
	var a *slowAPI
	if k := x.Req.Key; k >= 0 && int(k) < len(d.byKey) {
		a = d.byKey[k]
	} else {
		a = d.apis[k]
	}
	if a == nil {
		a = &slowAPI{key: x.Req.Key}
		d.apis[x.Req.Key] = a
		if k := x.Req.Key; k >= 0 && int(k) < len(d.byKey) {
			d.byKey[k] = a
		}
	}
	a.h.Add(counted)
	if wait > 0 {
		a.fetchWaits = true
	}
	if counted <= d.minLat {
		return
	}
	e := slowExchange{counted: counted, latency: lat, maxWait: wait, t: x.Resp.Time, conn: x.Conn, clientID: x.Req.ClientID,
		ev: evidence(x.Resp, fmt.Sprintf("%s v%d corr %d answered after %s", x.Req.Name(), x.Req.Version, x.Req.Correlation, text.Duration(lat)))}
	if wait > 0 {
		e.ev.What += fmt.Sprintf(" (MaxWaitMillis %d)", wait.Milliseconds())
	}
	if d.kept < slowMaxCandidates {
		d.kept++
		a.cands = append(a.cands, e)
	} else if counted > d.threshold(a) {
		// Judged against the median so far.
		if a.late == 0 {
			a.lateFirst = e
			a.lateIDs = make(map[string]bool)
		}
		a.late++
		a.lateLast = e
		a.lateConns.add(e.conn)
		if len(a.lateIDs) < 64 {
			a.lateIDs[e.clientID] = true
		}
	}
	a.keepWorst(e, slowWorst)
}

func (a *slowAPI) keepWorst(e slowExchange, n int) {
	i := sort.Search(len(a.worst), func(i int) bool { return a.worst[i].counted < e.counted })
	if i >= n {
		return
	}
	a.worst = append(a.worst, slowExchange{})
	copy(a.worst[i+1:], a.worst[i:])
	a.worst[i] = e
	if len(a.worst) > n {
		a.worst = a.worst[:n]
	}
}

// threshold is the latency above which an exchange of a is slow.
func (d *slowResponses) threshold(a *slowAPI) time.Duration {
	return max(d.minLat, time.Duration(d.factor*float64(a.h.Quantile(0.5))))
}

// Findings implements Detector.
func (d *slowResponses) Findings(env *Env) []Finding {
	keys := make([]int16, 0, len(d.apis))
	for k := range d.apis {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var out []Finding
	for _, k := range keys {
		if f, ok := d.finding(env, d.apis[k]); ok {
			out = append(out, f)
		}
	}
	return out
}

func (d *slowResponses) finding(env *Env, a *slowAPI) (Finding, bool) {
	thr := d.threshold(a)
	var slow []slowExchange
	for _, e := range a.cands {
		if e.counted > thr {
			slow = append(slow, e)
		}
	}
	n := int64(len(slow)) + a.late
	if n < d.minCount {
		return Finding{}, false
	}
	var conns opsConns
	ids := map[string]bool{}
	var maxLat time.Duration
	for _, e := range slow {
		conns.add(e.conn)
		ids[e.clientID] = true
		maxLat = max(maxLat, e.latency)
	}
	first, last := slowExchange{}, slowExchange{}
	if len(slow) > 0 {
		first, last = slow[0], slow[len(slow)-1]
	}
	if a.late > 0 {
		for _, c := range a.lateConns.list {
			conns.add(c)
		}
		for id := range a.lateIDs {
			ids[id] = true
		}
		if len(slow) == 0 {
			first = a.lateFirst
		}
		last = a.lateLast
	}
	var worst []slowExchange
	for _, e := range a.worst {
		if e.counted > thr {
			worst = append(worst, e)
			maxLat = max(maxLat, e.latency)
		}
	}
	// Evidence: the first and last slow responses and the slowest.
	ev := []Evidence{first.ev}
	for _, e := range append(worst, last) {
		if !opsHasPacket(ev, e.ev) {
			ev = append(ev, e.ev)
		}
	}
	sort.SliceStable(ev, func(i, j int) bool {
		if ev[i].File != ev[j].File {
			return ev[i].File < ev[j].File
		}
		return ev[i].Packet < ev[j].Packet
	})
	api := decode.Name(a.key)
	p50 := a.h.Quantile(0.5)
	clientIDs := text.SortedKeys(ids)
	servers := conns.serverLabels(env.Nodes)
	beyond := ""
	if a.fetchWaits {
		beyond = " beyond MaxWaitMillis"
	}
	summary := fmt.Sprintf("%d %s responses took over %s%s (median %s, slowest %s) from %s", n, api,
		text.Duration(thr), beyond, text.Duration(p50), text.Duration(maxLat), text.List(servers, 3))
	expl := fmt.Sprintf("Of %d %s responses, %d took more than %s%s, which is over %g times the median of %s and over "+
		"%s, from %s to %s. The slowest: %s. Responses this far from the usual are a broker pausing (GC, disk, "+
		"overloaded request handlers or network threads, a slow follower holding acks=all produces) rather than "+
		"the work of the request.", a.h.Count(), api, n, text.Duration(thr), beyond, d.factor, text.Duration(p50),
		text.Duration(d.minLat), text.Clock(first.t), text.Clock(last.t), opsWorst(worst))
	if a.fetchWaits {
		expl += " A Fetch is counted only for the time past its MaxWaitMillis, as the broker may hold a long " +
			"poll that long when there is no data."
	}
	next := fmt.Sprintf("kfsniff -r <capture> --frames --api %s%s lists the exchanges with their latency. On the "+
		"broker at those times: its log and GC log, the request metrics (kafka.network:type=RequestMetrics,"+
		"name=TotalTimeMs|RequestQueueTimeMs|LocalTimeMs|RemoteTimeMs,request=%s) to tell queueing from "+
		"disk from waiting on replicas, RequestHandlerAvgIdlePercent, and disk latency.", api,
		opsClientFilter(clientIDs), api)
	return Finding{
		Severity: Warning,
		Summary:  summary,
		First:    first.t,
		Last:     last.t,
		Conns:    conns.ids(),
		Nodes:    conns.nodes(env.Nodes),
		Counts: map[string]int64{
			"slow":      n,
			"responses": int64(a.h.Count()),
		},
		Fields: map[string]any{
			"api":          api,
			"p50_ms":       text.Millis(p50),
			"threshold_ms": text.Millis(thr),
			"max_ms":       text.Millis(maxLat),
			"client_ids":   clientIDs,
			"clients":      conns.clients(),
			"servers":      conns.servers(),
		},
		Evidence:    ev,
		Explanation: expl,
		Next:        next,
	}, true
}

func opsWorst(worst []slowExchange) string {
	parts := make([]string, len(worst))
	for i, e := range worst {
		parts[i] = fmt.Sprintf("packet %d, %s", e.ev.Packet, text.Duration(e.latency))
	}
	return strings.Join(parts, "; ")
}
