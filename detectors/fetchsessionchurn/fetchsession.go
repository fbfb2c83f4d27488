// Package fetchsessionchurn reports fetch-session churn (KIP-227): Fetch
// answered FETCH_SESSION_ID_NOT_FOUND (the broker evicted or lost the
// session) or INVALID_FETCH_SESSION_EPOCH (client and broker disagree on
// the session's epoch) again and again, each answer costing the client a
// round trip and a full fetch of all its partitions (KAFKA-9137, KAFKA-6946,
// KAFKA-20713). Per client and broker: the storms of session errors, the
// rate of session resets, the full and incremental fetches, and the
// clients that opened sessions at the broker meanwhile, which fill its
// session cache.
package fetchsessionchurn

import (
	"cmp"
	"maps"
	"net/netip"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "fetch-session-churn",
	Recorded: []string{"fixtures/pcaps/clients/fetch-session-churn-kgo.pcap"},
	Severity: detectors.Error,
	Doc: "Fetch answered FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH in storms: incremental fetch " +
		"sessions (KIP-227) evicted or out of step, each error costing a round trip and a full fetch. Per client id, " +
		"host and broker: the storms (errors no more than max-gap apart, at least min-errors of them), sessions reset " +
		"per second, full and incremental fetches, and the clients that opened sessions at the broker meanwhile. " +
		"Graded by the longest storm (info below 3 s, warning from 3 s, error from 30 s or when still going after 10 s " +
		"at the end), and at least a warning however short when its errors come 50 or more at 100 a second or more, " +
		"faster than any client's backoff allows (a storm still raging at the end of a short capture has an unknown " +
		"length); a session evicted now and then, the client opening a new one at once, is not reported.",
}, Params{MinErrors: 3, MaxGap: 5 * time.Second}, New)

// Params are the rule's thresholds.
type Params struct {
	MinErrors int           `param:"min-errors" doc:"session errors in one storm of one client at one broker before it is reported"`
	MaxGap    time.Duration `param:"max-gap" unit:"s" doc:"session errors further apart than this start a new storm"`
}

// Bounds: client and broker pairs followed, session creators per broker.
const (
	maxKeys     = 2048
	maxCreators = 256
)

// New makes the rule.
func New(p Params) detectors.Rule {
	p.MinErrors = max(p.MinErrors, 1)
	return &rule{p: p, keys: map[pair]*churn{}, brokers: map[netip.AddrPort]*broker{}}
}

type rule struct {
	p       Params
	keys    map[pair]*churn
	brokers map[netip.AddrPort]*broker
	dropped int64
}

// pair is a client at a broker.
type pair struct {
	cluster.Client
	server netip.AddrPort
}

// churn is one client's fetch sessions at one broker, from its first
// session error on.
type churn struct {
	pair
	fetcher                 int32 // the follower's node id, -1 for a consumer
	fetches, full, sessions int64
	codes                   tally.Codes
	first, last             time.Time
	lastGood                time.Time // last incremental fetch answered without error
	cur, worst              storm
	storms                  int // storms of MinErrors or more
	conns                   tally.Conns
	ev                      detectors.Sampler[detectors.Evidence]
}

// storm is a run of session errors no more than MaxGap apart.
type storm struct {
	first, last time.Time
	n           int64
}

func (s storm) span() time.Duration { return s.last.Sub(s.first) }

// broker is who opened fetch sessions at a broker since its first session
// error.
type broker struct {
	created map[cluster.Client]int64
	more    int64
}

func sessionError(code int16) bool {
	return code == cluster.FetchSessionIDNotFound || code == cluster.InvalidFetchSessionEpoch
}

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.Fetch}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.Resp == nil || x.Req.Key != int16(kmsg.Fetch) {
		return
	}
	resp, ok := x.Resp.Resp.(*kmsg.FetchResponse)
	req, _ := x.Req.Req.(*kmsg.FetchRequest)
	if !ok || req == nil || req.Version < 7 {
		return
	}
	bad := sessionError(resp.ErrorCode)
	if !bad && len(r.keys) == 0 {
		return
	}
	c := x.Req.Client
	k := pair{c, x.Conn.Server}
	if b := r.brokers[k.server]; b != nil && req.SessionEpoch == 0 && resp.ErrorCode == 0 && resp.SessionID != 0 {
		b.opened(c)
	}
	ch := r.keys[k]
	if ch == nil && bad {
		ch = tally.Entry(r.keys, k, maxKeys, &r.dropped, func() *churn {
			if r.brokers[k.server] == nil {
				r.brokers[k.server] = &broker{created: map[cluster.Client]int64{}}
			}
			return &churn{pair: k, fetcher: x.Req.Fetcher.ID(), first: x.Resp.Time}
		})
	}
	if ch == nil {
		return
	}
	ch.fetches++
	if req.SessionEpoch <= 0 {
		ch.full++
	}
	if req.SessionEpoch == 0 && resp.ErrorCode == 0 && resp.SessionID != 0 {
		ch.sessions++
	}
	if req.SessionEpoch > 0 && resp.ErrorCode == 0 {
		ch.lastGood = x.Resp.Time
	}
	if bad {
		r.failed(ch, resp.ErrorCode, x, req)
	}
}

func (b *broker) opened(c cluster.Client) {
	if _, ok := b.created[c]; !ok && len(b.created) >= maxCreators {
		b.more++
		return
	}
	b.created[c]++
}

func (r *rule) failed(ch *churn, code int16, x *detectors.Exchange, req *kmsg.FetchRequest) {
	t := x.Resp.Time
	if ch.cur.n > 0 && t.Sub(ch.cur.last) > r.p.MaxGap {
		ch.end(r.p.MinErrors)
	}
	if ch.cur.n == 0 {
		ch.cur.first = t
	}
	ch.cur.n++
	ch.cur.last, ch.last = t, t
	ch.codes.Add(code)
	ch.conns.Add(x.Conn)
	ch.ev.Add(detectors.EvidenceAt(x.Resp, "Fetch answer: "+detectors.ErrorName(code)+" for session "+strconv.Itoa(int(req.SessionID))+
		" epoch "+strconv.Itoa(int(req.SessionEpoch))))
}

// end closes the current storm, keeping it if it is the worst.
func (ch *churn) end(minErrors int) {
	if ch.cur.n >= int64(minErrors) {
		ch.storms++
		if ch.cur.span() > ch.worst.span() || ch.worst.n == 0 {
			ch.worst = ch.cur
		}
	}
	ch.cur = storm{}
}

// verdict is the worst storm and whether the last one was still going at
// end: its last error no more than MaxGap before, and no incremental fetch
// answered well since.
func (r *rule) verdict(ch *churn, end time.Time) (worst storm, storms int, held time.Duration, ongoing bool) {
	worst, storms = ch.worst, ch.storms
	held = worst.span()
	if ch.cur.n >= int64(r.p.MinErrors) {
		storms++
		ongoing = end.Sub(ch.cur.last) <= r.p.MaxGap && !ch.lastGood.After(ch.cur.last)
		d := ch.cur.span()
		if ongoing {
			d = end.Sub(ch.cur.first)
		}
		if d >= held || worst.n == 0 {
			worst, held = ch.cur, d
		}
	}
	return worst, storms, held, ongoing
}

// Findings implements detectors.Rule: one per client and broker with a
// storm of at least MinErrors session errors.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	return detectors.FindingsOf(maps.Values(r.keys), func(ch *churn) bool {
		_, storms, _, _ := r.verdict(ch, p.End)
		return storms > 0
	}, func(a, b *churn) bool {
		return cmp.Or(a.first.Compare(b.first), cmp.Compare(a.ID, b.ID), a.server.Compare(b.server)) < 0
	}, func(ch *churn) detectors.Finding { return r.finding(p, ch) })
}
