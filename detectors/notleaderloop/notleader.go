// Package notleaderloop reports a client that keeps getting
// NOT_LEADER_OR_FOLLOWER (6) or FENCED_LEADER_EPOCH (74) for one partition
// and never reaches the leader.
//
// Per client (host and client id) and partition, a run is an unbroken
// sequence of those answers that name the same leader and epoch (or no
// leader, -1/-1, as responses before KIP-951 do). A successful answer for
// the partition ends it, and so does an answer naming another leader or
// epoch: a client that follows a leadership change makes a few short
// runs, a loop makes one long one. A run of at least MinResponses answers
// holding the client up for at least MinDuration (or of BurstResponses
// answers however short) is then read in one of two shapes (verdict.go):
//
//   - the answers (or the Metadata the client refreshes) name a leader and
//     the client never sends the partition's requests to it (the KRaft
//     observer of KAFKA-19354 does this with raft Fetch);
//   - the node answering NOT_LEADER_OR_FOLLOWER is the one the client's
//     Metadata (stable leader id) names as leader, or the one the answer
//     itself names, so the client retries the same node forever.
//
// How long a run held the client up is from its first refused request to
// the success that ended it (or to its last refusal, if no success
// followed within spell.Prompt); the severity is detectors.Grade's, what
// the client felt, and at least a warning for a burst (no retry backoff).
// The runs of one client that loop the same way over several partitions
// of a topic are one finding (merge.go).
package notleaderloop

import (
	"net/netip"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
	"github.com/kfsniff/kfsniff/detectors/internal/spell"
	"github.com/kfsniff/kfsniff/detectors/internal/table"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name: "not-leader-loop",
	Recorded: []string{"fixtures/pcaps/kafka/kraft-observer-loop.pcap.gz", "fixtures/pcaps/kafka/kraft-listener-conflict.pcap.gz", "fixtures/pcaps/clients/notleader-kgo.pcap", "fixtures/pcaps/clients/notleader-kgo-nobackoff.pcap", "fixtures/pcaps/clients/notleader-sarama.pcap", "fixtures/pcaps/clients/notleader-kafka-go.pcap", "fixtures/pcaps/clients/notleader-kafkajs.pcap",
		"fixtures/pcaps/clients/notleader-8s-kgo.pcap", "fixtures/pcaps/clients/notleader-8s-sarama.pcap", "fixtures/pcaps/clients/notleader-8s-kafka-go.pcap"},
	Severity: detectors.Error,
	Doc: "A client keeps getting NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH for one partition, with no " +
		"success in between, while the answers name the same leader and epoch and the client never sends to " +
		"that leader (KAFKA-19354 for a KRaft observer), or while the Metadata it refreshes names the very " +
		"broker that refuses (it retries the same node forever). Graded by how long the client was held up, " +
		"from its first refused request to the success that ended the loop (or to its last refusal): " +
		"min-responses answers holding it up min-duration (3 s) or more is a warning; 30 s or more, or still " +
		"refused when the capture ended after 10 s or more, an error. A burst of burst-responses answers in less " +
		"than 3 s is a warning too: the client retries without backoff, a misconfiguration that turns every " +
		"leadership change into a request storm (KIP-580). A leadership change a client with a backoff follows " +
		"within 3 s is not reported. A client that did try the named leader, with connection attempts or requests " +
		"there that got no answer at all, is told apart (shape leader-unreachable): the leader cannot be reached " +
		"from that host, as Apache Kafka 4.1's KRaft observer shows when its path to the active controller is cut.",
}, Params{MinResponses: 2, MinDuration: detectors.FeltAfter, BurstResponses: 100}, New)

// Params are the rule's thresholds.
type Params struct {
	MinResponses   int           `param:"min-responses" doc:"not-leader answers for one client and partition, with no success and no change of the named leader in between, before it is a loop: refused, retried and refused again (kgo without a leader hint retries at its next metadata refresh, 5 s on: 8.5 s of refusals are 2 answers per partition)"`
	MinDuration    time.Duration `param:"min-duration" doc:"how long the run held the client up (first refused request to the success that ended it, or to its last refusal) before it is reported, as a warning; a leadership change clients follow settles within a second"`
	BurstResponses int           `param:"burst-responses" doc:"not-leader answers that make a loop however short the run, and at least a warning: a client retrying with no backoff sends thousands a second, a client following a leadership change a handful; 0: off"`
}

// New makes the rule.
func New(p Params) detectors.Rule {
	r := &rule{p: p}
	r.runs = peers.NewEpisodes(func(e *run) int64 { return e.notLeader }, r.qualifies)
	return r
}

type rule struct {
	p    Params
	runs *peers.Episodes[run]
	// meta holds the leader each client's Metadata names, per
	// partition, at most peers.MaxKeys.
	meta  table.CPIndex[meta]
	nMeta int
	// tries are attempts that got no answer at all, to tell a leader the
	// client cannot reach from one it never tries (unreached.go).
	tries tries
}

// meta is the leader of one partition in the Metadata a client gets.
type meta struct {
	leader, epoch int32
	refreshes     int64 // Metadata responses naming this partition
	changes       int64 // times the leader id changed
	server        netip.AddrPort
}

// run is one run of not-leader answers naming the same leader.
type run struct {
	key           peers.Key
	api           int16
	leader, epoch int32 // named by the answers; -1 if not named
	leaderEP      string
	first, last   time.Time
	requests      int64
	notLeader     int64
	fenced        int64
	otherErrors   int64
	unanswered    int64
	servers       peers.Servers
	conns         tally.Conns
	fetcher       int32 // the node the client's requests speak for, -1 if none

	offset, firstOffset int64
	hasOffset           bool
	replicaID           int32
	replicaEpoch        int64
	hasReplica          bool

	metaSeen      bool
	metaUnstable  bool
	metaLeader    int32
	metaEpoch     int32
	metaStart     int64 // refreshes when the run began
	metaEnd       int64
	metaChangeAt0 int64 // leader changes when the run began
	metaServer    netip.AddrPort

	// healed is the answer of the success that ended the run (zero if
	// none did: still open, or ended by an answer naming another
	// leader).
	healed time.Time

	ev detectors.Sampler[answer]
}

func (e *run) duration() time.Duration { return e.last.Sub(e.first) }

// held is how long the run held the client up: from its first refused
// request to the success that ended it (healed), or to its last refusal
// if no success followed promptly (spell.Ended).
func (e *run) held() (d time.Duration, healed bool) { return spell.Ended(e.first, e.last, e.healed) }

// cpKey is the key of a client's topic in the Metadata table.
func cpKey(c cluster.Client, p cluster.Partition) table.CPKey {
	return table.CPKey{Host: c.Host, ClientID: c.ID, Topic: p.Topic, TopicID: p.TopicID}
}

// metaOf returns the leader client c's Metadata names for k's partition,
// or nil.
func (r *rule) metaOf(conn int, k peers.Key) *meta {
	ck := cpKey(k.C, k.P)
	return r.meta.Topic(conn, &ck, false).Part(k.P.Num)
}

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.Metadata, kmsg.Fetch, kmsg.Produce}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil {
		return
	}
	switch kmsg.Key(x.Req.Key) {
	case kmsg.Metadata:
		if x.Resp != nil {
			if resp, ok := x.Resp.Resp.(*kmsg.MetadataResponse); ok {
				r.metadata(x, resp)
			}
		}
	case kmsg.Fetch, kmsg.Produce:
		if x.Unanswered {
			r.tries.add(try{client: cluster.Client{Host: x.Conn.Client.Addr(), ID: x.Req.Client.ID}, server: x.Conn.Server, t: x.Req.Time, n: 1})
			r.unanswered(x)
			return
		}
		if x.Resp != nil {
			r.answers(x)
		}
	}
}

// metadata keeps the leader that each partition's Metadata names.
func (r *rule) metadata(x *detectors.Exchange, resp *kmsg.MetadataResponse) {
	c := x.Req.Client
	server := peers.Addr(x.Conn.Server)
	nodes := x.Conn.Nodes()
	// The topic's key is found once, then each partition by number.
	var topic cluster.Partition
	var key table.CPKey
	var ct *table.CPTopic[meta]
	started := false
	decode.LeaderHints(resp, func(h decode.LeaderHint) {
		if !started || h.Topic != topic.Topic || h.TopicID != topic.TopicID {
			started, topic = true, h.Partition
			key = cpKey(c, h.Partition.Key(nodes))
			ct = r.meta.Topic(x.Conn.ID, &key, false)
		}
		m := ct.Part(h.Partition.Num)
		if m == nil {
			if r.nMeta >= peers.MaxKeys {
				return
			}
			if ct == nil {
				ct = r.meta.Topic(x.Conn.ID, &key, true)
			}
			m = ct.Add(h.Partition.Num)
			*m = meta{leader: h.Leader}
			r.nMeta++
		}
		if m.leader != h.Leader {
			m.changes++
		}
		m.leader, m.epoch = h.Leader, h.Epoch
		m.refreshes++
		m.server = server
	})
}

// anyNotLeader reports whether a response carries NOT_LEADER_OR_FOLLOWER
// or FENCED_LEADER_EPOCH.
func anyNotLeader(m *flows.Message) bool {
	for _, e := range m.ErrorCodes {
		if e.Code == cluster.NotLeaderOrFollower || e.Code == cluster.FencedLeaderEpoch {
			return true
		}
	}
	return false
}

// answers reads a Produce or Fetch response partition by partition.
func (r *rule) answers(x *detectors.Exchange) {
	refused := anyNotLeader(x.Resp)
	if r.runs.Len() == 0 && !refused {
		return // nothing to follow: the common, healthy case
	}
	c := x.Req.Client
	if r.runs.Idle(c) && !refused {
		return // every partition a success or another error, no run to end or count in
	}
	o := obs{x: x, replicaID: -1, fetcher: x.Req.Fetcher.ID()}
	if req, ok := x.Req.Req.(*kmsg.FetchRequest); ok {
		o.req = req
	}
	if f := x.Req.Fetcher; f.How == cluster.Declared {
		o.replicaID, o.replicaEpoch, o.hasReplica = f.Node, f.Epoch, true
	}
	answers := x.Answers()
	for i := range answers {
		a := &answers[i]
		if r.runs.Len() == 0 && a.ErrorCode != cluster.NotLeaderOrFollower && a.ErrorCode != cluster.FencedLeaderEpoch {
			continue // nothing to follow
		}
		o.key = peers.Key{C: c, P: x.PartitionKey(a.Partition)}
		o.a = *a
		r.observe(&o)
	}
}

// obs is one partition's answer in one exchange.
type obs struct {
	x            *detectors.Exchange
	req          *kmsg.FetchRequest // a Fetch's request: its offsets
	key          peers.Key
	a            decode.PartitionAnswer
	fetcher      int32
	replicaID    int32
	replicaEpoch int64
	hasReplica   bool
}

func (r *rule) observe(o *obs) {
	e := peers.OpenNamed(r.runs, o.key, o.a.Partition, func(e *run) { e.key = o.key })
	x := o.x
	switch o.a.ErrorCode {
	case cluster.NotLeaderOrFollower, cluster.FencedLeaderEpoch:
		if e != nil && (e.leader != o.a.Leader || e.epoch != o.a.Epoch) {
			r.runs.Finish(o.key)
			e = nil
		}
		m := r.metaOf(x.Conn.ID, o.key)
		if e == nil {
			e = &run{key: o.key, api: x.Req.Key, leader: o.a.Leader, epoch: o.a.Epoch, first: x.Req.Time, replicaID: -1, fetcher: -1}
			e.conns.Max = peers.MaxConns
			if m != nil {
				e.metaStart, e.metaChangeAt0 = m.refreshes, m.changes
			}
			if !r.runs.Start(o.key, e) {
				return
			}
		}
		e.requests++
		e.notLeader++
		if o.a.ErrorCode == cluster.FencedLeaderEpoch {
			e.fenced++
		}
		e.last = x.Resp.Time
		if ep := cluster.NodeEndpointOr(x.Resp.Resp, o.a.Leader, e.leaderEP); ep != "" {
			e.leaderEP = ep
		}
		e.servers.Add(x.Conn.Server, 1, 1)
		e.conns.Add(x.Conn)
		if o.fetcher >= 0 {
			e.fetcher = o.fetcher
		}
		if o.req != nil {
			if off, ok := decode.FetchOffsetAt(o.req, o.a.TopicIndex, o.a.Index, o.a.Partition); ok {
				if !e.hasOffset {
					e.firstOffset = off
				}
				e.offset, e.hasOffset = off, true
			}
		}
		if o.hasReplica {
			e.replicaID, e.replicaEpoch, e.hasReplica = o.replicaID, o.replicaEpoch, true
		}
		if m != nil {
			if !e.metaSeen {
				e.metaSeen, e.metaLeader, e.metaEpoch = true, m.leader, m.epoch
			} else if m.leader != e.metaLeader || m.changes != e.metaChangeAt0 {
				e.metaUnstable = true
			}
			e.metaEnd, e.metaServer = m.refreshes, m.server
		}
		e.ev.Add(answer{file: int32(x.Resp.File), packet: x.Resp.Packet, conn: x.Conn, key: x.Req.Key,
			version: x.Req.Version, corr: x.Req.Correlation, code: o.a.ErrorCode, leader: o.a.Leader, epoch: o.a.Epoch})
	case cluster.None:
		if e != nil {
			e.healed = x.Resp.Time
			r.runs.Finish(o.key)
		}
	default:
		if e != nil {
			e.requests++
			e.otherErrors++
			e.last = x.Resp.Time
			e.servers.Add(x.Conn.Server, 1, 0)
			e.conns.Add(x.Conn)
		}
	}
}

// unanswered counts a request that got no answer towards the runs of its
// partitions.
func (r *rule) unanswered(x *detectors.Exchange) {
	c := x.Req.Client
	if r.runs.Idle(c) {
		return
	}
	nodes := x.Conn.Nodes()
	decode.RequestPartitions(x.Req.Req, func(p cluster.Partition) {
		k := peers.Key{C: c, P: p.Key(nodes)}
		if e := peers.OpenNamed(r.runs, k, p, func(e *run) { e.key = k }); e != nil {
			// Not among the servers the run reached: a request to the
			// leader that got no answer did not reach it (tries holds it
			// for the leader-unreachable verdict).
			e.requests++
			e.unanswered++
			e.conns.Add(x.Conn)
		}
	})
}

// qualifies says whether a run is a loop.
func (r *rule) qualifies(e *run) bool {
	if r.p.BurstResponses > 0 && e.notLeader >= int64(r.p.BurstResponses) {
		return true
	}
	held, _ := e.held()
	return e.notLeader >= int64(r.p.MinResponses) && held >= r.p.MinDuration
}

// Findings implements detectors.Rule: one per loop, those of a client
// over several partitions of a topic merged.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	m := newMerger(p.MaxFindings)
	for _, k := range r.runs.Report(func(a, b *run) bool {
		if !a.first.Equal(b.first) {
			return a.first.Before(b.first)
		}
		return a.key.Less(b.key)
	}) {
		if v, ok := verdictOf(p, k.E, int64(r.p.MinResponses)); ok {
			if v.Shape == ShapeHintIgnored && v.Leader >= 0 {
				if v.Unreached = r.tries.to(p, k.E, v); v.Unreached.any() {
					v.Shape = ShapeUnreachable
				}
			}
			burst := r.p.BurstResponses > 0 && k.E.notLeader >= int64(r.p.BurstResponses)
			f := finding(p, k.E, v, k.Open, burst)
			m.add(&f)
		}
	}
	return m.done()
}
