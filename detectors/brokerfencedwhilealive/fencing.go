// Package brokerfencedwhilealive reports KRaft brokers fenced while alive, and heartbeats
// that come close to it (KAFKA-15019). A KRaft broker sends BrokerHeartbeat
// to the active controller every broker.heartbeat.interval.ms (2 s); the
// controller fences a broker whose heartbeat it has not processed for
// broker.session.timeout.ms (9 s): the broker loses its leaderships and
// leaves every ISR. An overloaded controller that processes heartbeats
// late fences brokers that never stopped sending them.
//
// Per broker id (the heartbeat's brokerId), from its heartbeats on any
// connection:
//   - fenced while alive: a response with isFenced to a heartbeat that did
//     not ask to be fenced (wantFence false), after a response had found
//     the broker unfenced: from the first such response to the next
//     unfenced one, or the end. At least a warning (its leaderships moved);
//     detectors.Grade over its length, still fenced at the end being not
//     healed. A broker kept fenced since the capture began (starting up,
//     catching up with the metadata log) is info once that lasts a session
//     timeout, nothing before.
//   - told to shut down unasked: shouldShutDown to a heartbeat without
//     wantShutDown (a controlled shutdown asks for it): an error.
//   - session expired: a gap between two heartbeats of a session timeout
//     or more: the controller heard none in between and fenced the broker,
//     whether or not an answer says so; at least a warning, graded by the
//     gap.
//   - approaching the session timeout: a round trip, or a gap between two
//     heartbeats, of Near x SessionTimeout or more (the broker's own
//     heartbeat request times out at half the session timeout), or a
//     heartbeat the controller timed out (REQUEST_TIMED_OUT): a warning.
package brokerfencedwhilealive

import (
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "broker-fenced-while-alive",
	Recorded: []string{"fixtures/pcaps/kafka/kraft-fenced-while-alive.pcap.gz"},
	Severity: detectors.Error,
	Doc: "KRaft BrokerHeartbeat, per broker id: responses with isFenced to a broker that kept heartbeating and did " +
		"not ask to be fenced, after it had been unfenced (KAFKA-15019): at least a warning, an error from 30 s " +
		"fenced or when still fenced at the end after 10 s; shouldShutDown it did not ask for: an error; heartbeat " +
		"round trips or gaps between heartbeats of near x session-timeout or more, or heartbeats the controller " +
		"timed out (REQUEST_TIMED_OUT): a warning; a gap between heartbeats of session-timeout or more: the controller fenced " +
		"it whether or not an answer says so (Apache Kafka 4.1.1 unfences a caught-up broker at its next heartbeat, so no " +
		"answer shows isFenced), at least a warning, an error from 30 s. A broker fenced since the capture began (starting up) is info " +
		"once that lasts session-timeout.",
}, Params{SessionTimeout: 9 * time.Second, Near: 0.5}, New)

// Params are the rule's thresholds.
type Params struct {
	SessionTimeout time.Duration `param:"session-timeout" unit:"ms" doc:"the controllers' broker.session.timeout.ms: a broker whose heartbeat they have not processed for this long is fenced"`
	Near           float64       `param:"near" range:"0,1" doc:"fraction of session-timeout from which a heartbeat's round trip, or the gap between two heartbeats of a broker, is approaching it"`
}

// New makes the rule.
func New(p Params) detectors.Rule {
	if p.Near <= 0 || p.Near > 1 {
		p.Near = 0.5
	}
	return &rule{p: p, near: time.Duration(float64(p.SessionTimeout) * p.Near), brokers: map[int32]*Broker{}}
}

// maxBrokers bounds the broker ids followed.
const maxBrokers = 4096

type rule struct {
	p       Params
	near    time.Duration
	brokers map[int32]*Broker
	dropped int64
}

// Point is a heartbeat exchange's place and what it showed; its
// evidence's words are written when it is reported.
type Point struct {
	Evidence   detectors.Evidence
	At         time.Time
	Wait       time.Duration // the round trip or gap it shows
	prev       uint64        // a gap's previous heartbeat's packet
	unanswered bool          // a round trip still waiting at the end
	Answer     Answer
}

// Answer is a heartbeat's answer and what it asked.
type Answer struct {
	CaughtUp, fenced, shutdown, wantFence, wantShutdown bool
}

func (p Point) set() bool { return p.Evidence.Packet != 0 }

// Broker is what one broker id's heartbeats show.
type Broker struct {
	id                  int32
	heartbeats, fenced  int64
	unfencedSeen        bool
	lastReq             time.Time
	lastPacket          uint64
	lastConn            *flows.ConnInfo
	lastGaps            int
	Slowest, Widest     Point // longest round trip, longest gap
	Slow, Gaps, Timeout int64 // round trips and gaps approaching the timeout, heartbeats timed out
	// firstSlow and lastSlow are when the first and the last of those
	// heartbeats were sent.
	firstSlow, lastSlow time.Time
	codes               tally.Codes
	// cur is the fenced-while-alive episode under way; longest the
	// longest; episodes counts them.
	cur, longest Episode
	episodes     int
	Startup      Episode // fenced since the capture began, not asked
	shutdown     Point   // shouldShutDown not asked for
	Shutdowns    int64
	conns        tally.Conns
	clientIDs    map[string]bool
	first, last  time.Time
}

// Episode is a stretch of fenced responses: the first, the last, and the
// unfenced response that ended it.
type Episode struct {
	First, Last, End Point
	N                int64
}

func (e *Episode) open() bool { return e.N > 0 && !e.End.set() }
func (e *Episode) length() time.Duration {
	if e.End.set() {
		return e.End.At.Sub(e.First.At)
	}
	return e.Last.At.Sub(e.First.At)
}

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.BrokerHeartbeat}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(p *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.Req.Key != int16(kmsg.BrokerHeartbeat) {
		return
	}
	q, ok := x.Req.Req.(*kmsg.BrokerHeartbeatRequest)
	if !ok {
		return
	}
	b := r.brokers[q.BrokerID]
	if b == nil {
		if len(r.brokers) >= maxBrokers {
			r.dropped++
			return
		}
		b = &Broker{id: q.BrokerID, clientIDs: map[string]bool{}}
		r.brokers[q.BrokerID] = b
	}
	b.heartbeats++
	b.conns.Add(x.Conn)
	if len(b.clientIDs) < 8 {
		b.clientIDs[x.Req.Client.ID] = true
	}
	if b.first.IsZero() {
		b.first = x.Req.Time
	}
	b.last = x.Req.Time
	// A gap across segments the capture lost on the connection may hide
	// heartbeats: it is not measured.
	lost := x.Conn == b.lastConn && x.ConnGaps > b.lastGaps
	if !b.lastReq.IsZero() && !lost {
		if gap := x.Req.Time.Sub(b.lastReq); gap > 0 {
			if gap >= r.near {
				b.Gaps++
				b.sawSlow(x.Req.Time)
			}
			if gap > b.Widest.Wait {
				b.Widest = Point{Evidence: detectors.EvidenceAt(x.Req, ""), At: x.Req.Time, Wait: gap, prev: b.lastPacket}
			}
		}
	}
	b.lastReq, b.lastPacket, b.lastConn, b.lastGaps = x.Req.Time, x.Req.Packet, x.Conn, x.ConnGaps
	switch {
	case x.Unanswered:
		// Waited at least until the end.
		r.roundTrip(b, x, p.End.Sub(x.Req.Time), true)
		return
	case x.Resp == nil:
		return
	}
	b.last = x.Resp.Time
	r.roundTrip(b, x, x.Latency(), false)
	resp, ok := x.Resp.Resp.(*kmsg.BrokerHeartbeatResponse)
	if !ok {
		return
	}
	if resp.ErrorCode != 0 {
		b.codes.Add(resp.ErrorCode)
		if resp.ErrorCode == cluster.RequestTimedOut { // the controller gave up on it
			b.Timeout++
			b.sawSlow(x.Req.Time)
		}
		return
	}
	at := Point{Evidence: detectors.EvidenceAt(x.Resp, ""), At: x.Resp.Time, Answer: Answer{CaughtUp: resp.IsCaughtUp,
		fenced: resp.IsFenced, shutdown: resp.ShouldShutdown, wantFence: q.WantFence, wantShutdown: q.WantShutdown}}
	if resp.ShouldShutdown && !q.WantShutdown {
		b.Shutdowns++
		if !b.shutdown.set() {
			b.shutdown = at
		}
	}
	switch {
	case !resp.IsFenced:
		if b.cur.open() {
			b.cur.End = at
			r.keep(b)
		}
		if b.Startup.N > 0 && !b.Startup.End.set() {
			b.Startup.End = at
		}
		b.unfencedSeen = true
	case q.WantFence:
		// Asked for: starting up, or shutting down.
	case b.unfencedSeen:
		b.fenced++
		if !b.cur.open() {
			b.cur = Episode{First: at}
			b.episodes++
		}
		b.cur.Last = at
		b.cur.N++
	default:
		if b.Startup.N == 0 {
			b.Startup.First = at
		}
		b.Startup.Last = at
		b.Startup.N++
	}
}

func (b *Broker) sawSlow(t time.Time) {
	if b.firstSlow.IsZero() {
		b.firstSlow = t
	}
	b.lastSlow = t
}

func (r *rule) roundTrip(b *Broker, x *detectors.Exchange, d time.Duration, unanswered bool) {
	if d >= r.near {
		b.Slow++
		b.sawSlow(x.Req.Time)
	}
	if d <= b.Slowest.Wait {
		return
	}
	m := x.Resp
	if unanswered {
		m = x.Req
	}
	b.Slowest = Point{Evidence: detectors.EvidenceAt(m, ""), At: x.Req.Time, Wait: d, unanswered: unanswered}
}

// keep keeps the fenced episode under way as the longest, if it is.
func (r *rule) keep(b *Broker) {
	if b.longest.N == 0 || b.cur.length() > b.longest.length() {
		b.longest = b.cur
	}
}

// Verdict is what a broker's heartbeats add up to.
type Verdict struct {
	Broker  *Broker
	Fenced  Episode // the longest fenced-while-alive episode, the one under way counted
	ongoing bool
	Startup bool // kept fenced since the capture began for a session timeout
	Slow    bool
	// expired: two heartbeats a session timeout or more apart (the
	// controller heard none in between): it fenced the broker though
	// no answer says so (Apache Kafka 4.1.1 unfences a caught-up broker
	// at its first heartbeat after, so the answers never show isFenced:
	// fixtures/pcaps/kafka/kraft-fenced-while-alive)
	Expired bool
	// silent: the gap is the broker's own: it sent no heartbeat, none of
	// its heartbeats waited long (Apache Kafka 4.1.1 with its controller
	// quorum down sends none: fixtures/pcaps/kafka/kraft-election-stall)
	Silent   bool
	severity detectors.Severity
}

func (r *rule) judge(b *Broker) (Verdict, bool) {
	v := Verdict{Broker: b, Fenced: b.longest}
	if b.cur.open() && (v.Fenced.N == 0 || b.cur.length() >= v.Fenced.length()) {
		v.Fenced, v.ongoing = b.cur, true
	}
	v.Startup = b.Startup.N > 0 && b.Startup.length() >= r.p.SessionTimeout
	v.Slow = b.Slowest.Wait >= r.near || b.Widest.Wait >= r.near || b.Timeout > 0
	v.Expired = b.Widest.Wait >= r.p.SessionTimeout
	v.Silent = v.Expired && b.Slowest.Wait < r.near
	switch {
	case v.Fenced.N > 0:
		v.severity = max(detectors.Warning, detectors.Grade(v.Fenced.length(), v.ongoing))
	case v.Expired:
		v.severity = max(detectors.Warning, detectors.Grade(b.Widest.Wait, false))
	case v.Slow:
		v.severity = detectors.Warning
	case v.Startup:
		v.severity = detectors.Info
	default:
		if b.Shutdowns == 0 {
			return v, false
		}
	}
	if b.Shutdowns > 0 {
		v.severity = detectors.Error
	}
	return v, true
}

// Findings implements detectors.Rule: one per broker whose heartbeats show
// a problem. It changes nothing.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	var out []detectors.Finding
	for _, id := range slices.Sorted(maps.Keys(r.brokers)) {
		if v, ok := r.judge(r.brokers[id]); ok {
			out = append(out, r.finding(p, &v))
		}
	}
	return out
}
