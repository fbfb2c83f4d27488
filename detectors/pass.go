package detectors

import (
	"net/netip"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
)

// Pass is what the pipeline knows, for a rule to consult: handed to every
// hook and to Findings.
type Pass struct {
	// Nodes are the node identities and topic names learned so far.
	Nodes *cluster.Nodes
	// Ports are the run's Kafka ports (--ports).
	Ports *flows.Ports
	// Start and End bound the capture in time: at an event, End is the
	// time of the event; at Findings, the capture's last packet.
	Start, End time.Time
	// AgentEnd, set for records read back from agents (kfsniff -r
	// kafka://), is where the capture of an agent's connections
	// (flows.Conn.Agent) ended, on the reference clock: the end the agent
	// shipped, else its last record's time (false for an agent not read).
	// A rule settling what was still open at the end of the capture
	// settles a connection of an agent at its end, not at End.
	AgentEnd func(agent string) (time.Time, bool)
	// Conns are the connections with their final counters: set for
	// Findings and Snapshot only, read-only.
	Conns []*flows.Conn
	// Listeners are the endpoints seen accepting a connection (a
	// SYN-ACK), Kafka or not: set for Findings and Snapshot only; nil
	// when not known.
	Listeners *flows.Listeners
	// MaxFindings, at Findings and Snapshot, is how many findings the
	// Set lists of one rule (0: no limit). A rule that makes one finding
	// per key may stop keeping them past it, counting the rest in a
	// NotListed whose Summary it returns with them: the Set lists at
	// most that many anyway, and this way they are never all in memory.
	MaxFindings int
	// KeepClosed is flows.Config.KeepClosed (live: --keep-closed): a
	// connection closed for longer is folded into the totals and no
	// longer listed. A rule keeping state per connection or naming
	// connections per client may drop what belongs to connections closed
	// that long, counting it, so that its tables level in a live capture
	// as the connections table does; 0 (-r by default): keep it all.
	KeepClosed time.Duration
}

// Label shows a server address with its node id when known.
func (p *Pass) Label(ap netip.AddrPort) string {
	if p.Nodes == nil {
		return ap.String()
	}
	return p.Nodes.Label(ap, true)
}

// Exchange is a flows.Exchange as a rule sees it: the messages, and the
// connection's identity rather than the live connection, whose counters
// the analyzer goes on changing (see flows.ConnInfo). Valid only during the
// hook's call, like the messages' frames.
type Exchange struct {
	Conn       *flows.ConnInfo
	Req, Resp  *flows.Message
	Unanswered bool // no response by the end, or a later request answered first
	NoResponse bool // Produce with acks=0: none expected
	OneSided   bool // no packet from the server in the capture: not known
	Again      bool // handed over before with another partition (flows.Exchange.Again)
	// ConnGaps is how many holes the connection had when the exchange
	// was made.
	ConnGaps int
	// Lag are the lag samples of the exchange (flows.LagTable.Samples),
	// for a rule that follows lag (LagHook).
	Lag []flows.LagSample

	// answers is Answers once asked (answered), in buf when the Set
	// made the exchange.
	answers  []decode.PartitionAnswer
	answered bool
	buf      *answerBuf
	// keyer is PartitionKey's, its Names set at the first ask.
	keyer    cluster.Keyer
	keyNames bool
}

// PartitionKey is p.Key(x.Conn.Nodes()): p as state is kept by it. The
// names of topic ids are looked up once in the exchange for every rule
// that asks, not once per partition and rule.
func (x *Exchange) PartitionKey(p cluster.Partition) cluster.Partition {
	if p.Topic != "" { // the common case, inlined
		return cluster.Partition{Topic: p.Topic, Num: p.Num}
	}
	return x.idKey(p)
}

func (x *Exchange) idKey(p cluster.Partition) cluster.Partition {
	if !x.keyNames {
		x.keyer.Names, x.keyNames = x.Conn.Nodes(), true
	}
	return x.keyer.Key(p)
}

// answerBuf is the Set's buffer for Answers, reused from exchange to
// exchange, and how many times it was filled (for the tests).
type answerBuf struct {
	a        []decode.PartitionAnswer
	computed int64
	// p is the exchange's Produced once asked (produced).
	p        []Produced
	produced bool
}

// Answers is what the response says of each partition of a Produce or
// Fetch (decode.PartitionAnswers), in wire order; nil for another
// response or none. It is computed at the first ask and the same slice
// handed to every rule that asks in the exchange: a rule reads it and
// never changes or keeps it (valid only during the hook's call, like the
// Exchange).
func (x *Exchange) Answers() []decode.PartitionAnswer {
	if x.answered {
		return x.answers
	}
	x.answered = true
	if x.Resp == nil {
		return nil
	}
	var a []decode.PartitionAnswer
	if x.buf != nil {
		a = x.buf.a[:0]
		x.buf.computed++
	}
	decode.PartitionAnswers(x.Resp.Resp, func(p decode.PartitionAnswer) { a = append(a, p) })
	if x.buf != nil {
		x.buf.a = a
	}
	x.answers = a
	return a
}

// Produced is a batch of a Produce request and what the response says
// of it (flows.ProducedBatches): I is its index in the request's
// Batches, Base the offset the broker gave it, -1 if the partition was
// refused (Code) or the broker gave none.
type Produced struct {
	I    int
	B    *flows.BatchRef
	Base int64
	Code int16
}

// Produced is flows.ProducedBatches of the exchange, in request order;
// nil without a request and a Produce response. Like Answers, it is
// computed at the first ask and the same slice handed to every rule that
// asks in the exchange (read, never changed or kept): replica-divergence
// and duplicate-batches both read every produced batch.
func (x *Exchange) Produced() []Produced {
	var p []Produced
	if x.buf != nil {
		if x.buf.produced {
			return x.buf.p
		}
		x.buf.produced = true
		p = x.buf.p
	}
	flows.ProducedBatches(x.Req, x.Resp, func(i int, b *flows.BatchRef, base int64, code int16) {
		p = append(p, Produced{I: i, B: b, Base: base, Code: code})
	})
	if x.buf != nil {
		x.buf.p = p
	}
	return p
}

// release empties the buffers after an exchange, dropping what they
// point to in it (its request's batches) and keeping their memory.
func (b *answerBuf) release() {
	for i := range b.p {
		b.p[i].B = nil
	}
	b.p, b.produced = b.p[:0], false
}

// Latency is the time from the request's last packet to the response's.
func (x *Exchange) Latency() time.Duration {
	if x.Req == nil || x.Resp == nil {
		return 0
	}
	return x.Resp.Time.Sub(x.Req.Time)
}

// Key is the exchange's API key, -1 if its request was not captured.
func (x *Exchange) Key() int16 {
	if x.Req != nil {
		return x.Req.Key
	}
	return -1
}

// ConnEvent is a flows.ConnEvent as a rule sees it: Conn is nil for
// connection attempts that never carried data (refused, unanswered).
type ConnEvent struct {
	Kind           flows.ConnEventKind
	Conn           *flows.ConnInfo
	Client, Server netip.AddrPort
	File           int
	Packet         uint64
	Time           time.Time
	Attempts       int
}

// EvidenceAt points at a message's packet.
func EvidenceAt(m *flows.Message, what string) Evidence {
	return Evidence{File: m.File, Packet: m.Packet, Conn: m.Conn.ID, What: what}
}

// ErrorName is the Kafka name of an error code.
func ErrorName(code int16) string { return decode.ErrorName(code) }
