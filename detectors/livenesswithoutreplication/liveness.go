// Package livenesswithoutreplication reports a KRaft broker whose heartbeats to the
// controller succeed while its raft fetches of the metadata log fail or
// go to nodes other than the leader. The controller sees a live broker;
// the broker's metadata is frozen. Both facts are stated side by side,
// since each alone misleads.
//
// Per node id, heartbeats (BrokerHeartbeat, broker id in the body, client
// id "68") are counted as they come; raft fetches (Fetch of
// __cluster_metadata, client id raft-client-<id> or replica state) form
// failure runs: unbroken sequences of raft fetches with no successful
// answer. A run that is long enough, during which enough heartbeats were
// answered without error, is reported, graded by how long the raft
// fetches failed (detectors.Grade).
package livenesswithoutreplication

import (
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/episode"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
	"github.com/kfsniff/kfsniff/detectors/internal/spell"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "liveness-without-replication",
	Recorded: []string{"fixtures/pcaps/kafka/kraft-observer-loop.pcap.gz", "fixtures/pcaps/kafka/kraft-observer-loop-b3.pcap.gz"},
	Severity: detectors.Error,
	Doc: "A broker's heartbeats to the controller are answered without error while its raft fetches of the " +
		"metadata log get no successful answer: errors, no answer, or fetches sent to nodes that are not the " +
		"leader (they answer NOT_LEADER_OR_FOLLOWER). Alive to the controller, frozen metadata; reported with " +
		"both facts side by side. Graded by how long the raft fetches failed, from the first failed one to the " +
		"success that ended the run (or to the last failure): from min-duration (10 s) a warning; 30 s or more, " +
		"or still failing when the capture ended, an error. Below 10 s nothing: no client request fails, and " +
		"KRaft's 2 s fetch and request timeouts make a few seconds of failed raft fetches a normal controller " +
		"failover.",
}, Params{MinHeartbeats: 3, MinRaftFetches: 5, MinDuration: 10 * time.Second}, New)

// Params are the rule's thresholds.
type Params struct {
	MinHeartbeats  int           `param:"min-heartbeats" doc:"heartbeats answered without error during the raft failure run"`
	MinRaftFetches int           `param:"min-raft-fetches" doc:"raft fetches in a row with no successful answer (fetches that time out at KRaft's 2 s request timeout make 5 in 10 s)"`
	MinDuration    time.Duration `param:"min-duration" doc:"how long the raft fetches must fail, from the first failed one to the success that ends the run (or to the last failure), before it is reported, as a warning (a controller election settles well within this)"`
}

// maxNodes bounds the node table.
const maxNodes = 4096

// New makes the rule.
func New(p Params) detectors.Rule {
	r := &rule{p: p, nodes: make(map[int32]*node)}
	r.runs = episode.New(episode.Rule[int32, int32, run]{
		Max:       maxNodes,
		Client:    func(id int32) int32 { return id },
		Size:      func(e *run) int64 { return e.fetches },
		Qualifies: r.qualifies,
	})
	return r
}

type rule struct {
	p     Params
	nodes map[int32]*node
	// runs are the nodes' failure runs, by node id.
	runs *episode.Table[int32, int32, run]
}

// node is what one node id's traffic says.
type node struct {
	id int32
	// Heartbeats, cumulative.
	hbClientID      string
	hbOK, hbErr     int64
	hbServers       peers.Servers
	hbConns         tally.Conns
	hbFirst, hbLast beat
	metaOffset      int64     // currentMetadataOffset of the last heartbeat
	metaChanged     time.Time // when it last changed (zero: never)
	beats           points
	caughtUp        bool // the last answer's isCaughtUp
	fenced          bool // the last answer's isFenced
	hbAnswered      bool

	raftClientID string
}

// run is an unbroken run of raft fetches with no successful answer.
type run struct {
	node          *node
	first, last   time.Time
	fetches       int64
	errors        int64
	unanswered    int64
	codes         tally.Codes
	servers       peers.Servers
	conns         tally.Conns
	leader, epoch int32
	leaderEP      string
	offset        int64
	hasOffset     bool
	// healed is the answer of the successful raft fetch that ended the
	// run; zero if none did.
	healed time.Time
	ev     detectors.Sampler[detectors.Evidence]
	// beats, hbFirst, hbLast: the heartbeats answered while the run was
	// open. What the broker reported then is the evidence, not what it
	// reported after the run healed (real Kafka: currentMetadataOffset
	// stays at the last applied offset through the run and jumps once a
	// raft fetch succeeds).
	beats           int64
	hbFirst, hbLast beat
}

func (r *run) duration() time.Duration { return r.last.Sub(r.first) }

// held is how long the run's raft fetches failed: to the success that
// ended it (healed), or to the last failure if none followed promptly
// (spell.Ended).
func (r *run) held() (d time.Duration, healed bool) { return spell.Ended(r.first, r.last, r.healed) }

// beat is the evidence of one heartbeat, formatted if it is listed.
type beat struct {
	file             int32
	packet           uint64
	conn             int32
	version          int16
	corr             int32
	server           netip.AddrPort
	broker           int32
	metaOffset       int64
	code             int16
	caughtUp, fenced bool
}

// Evidence implements detectors.Evidencer.
func (b beat) Evidence() detectors.Evidence {
	answer := decode.ErrorName(b.code)
	if b.code == 0 {
		answer = fmt.Sprintf("ok, isCaughtUp %v, isFenced %v", b.caughtUp, b.fenced)
	}
	return detectors.Evidence{File: int(b.file), Packet: b.packet, Conn: int(b.conn), What: fmt.Sprintf(
		"BrokerHeartbeat v%d corr %d to %s: broker %d, currentMetadataOffset %d: %s",
		b.version, b.corr, peers.Addr(b.server), b.broker, b.metaOffset, answer)}
}

func (r *rule) node(id int32) *node {
	n := r.nodes[id]
	if n == nil && len(r.nodes) < maxNodes {
		n = &node{id: id, metaOffset: -1}
		n.hbConns.Max = peers.MaxConns
		r.nodes[id] = n
	}
	return n
}

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.BrokerHeartbeat, kmsg.Fetch}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil {
		return
	}
	switch kmsg.Key(x.Req.Key) {
	case kmsg.BrokerHeartbeat:
		r.heartbeat(x)
	case kmsg.Fetch:
		if x.Req.Role == cluster.RoleRaft {
			r.raftFetch(x)
		}
	}
}

func (r *rule) heartbeat(x *detectors.Exchange) {
	req, ok := x.Req.Req.(*kmsg.BrokerHeartbeatRequest)
	if !ok || x.Resp == nil {
		return // unanswered (or cut by the capture's end): neither way
	}
	resp, ok := x.Resp.Resp.(*kmsg.BrokerHeartbeatResponse)
	if !ok {
		return
	}
	n := r.node(req.BrokerID)
	if n == nil {
		return
	}
	n.hbClientID = x.Req.Client.ID
	if resp.ErrorCode == 0 {
		n.hbOK++
	} else {
		n.hbErr++
	}
	n.hbServers.Add(x.Conn.Server, 1, 0)
	n.hbConns.Add(x.Conn)
	if n.metaOffset >= 0 && n.metaOffset != req.CurrentMetadataOffset {
		n.metaChanged = x.Resp.Time
	}
	n.metaOffset = req.CurrentMetadataOffset
	n.beats.add(x.Resp.Time, n.hbOK, n.hbErr)
	n.caughtUp, n.fenced = resp.IsCaughtUp, resp.IsFenced
	n.hbLast = beat{file: int32(x.Resp.File), packet: x.Resp.Packet, conn: int32(x.Conn.ID), version: x.Req.Version,
		corr: x.Req.Correlation, server: x.Conn.Server, broker: req.BrokerID, metaOffset: req.CurrentMetadataOffset,
		code: resp.ErrorCode, caughtUp: resp.IsCaughtUp, fenced: resp.IsFenced}
	if !n.hbAnswered {
		n.hbFirst, n.hbAnswered = n.hbLast, true
	}
	if e := r.runs.Open(req.BrokerID); e != nil {
		if e.beats == 0 {
			e.hbFirst = n.hbLast
		}
		e.hbLast = n.hbLast
		e.beats++
	}
}

func (r *rule) raftFetch(x *detectors.Exchange) {
	id := x.Req.Fetcher.ID()
	if id < 0 {
		return
	}
	n := r.node(id)
	if n == nil {
		return
	}
	n.raftClientID = x.Req.Client.ID
	var resp *kmsg.FetchResponse
	if x.Resp != nil {
		if resp, _ = x.Resp.Resp.(*kmsg.FetchResponse); resp == nil {
			return // an answer that could not be decoded: no verdict either way
		}
	} else if !x.Unanswered {
		return
	}
	// The first error of the answer, top level first.
	var code int16
	if resp != nil {
		code = resp.ErrorCode
		for _, a := range x.Answers() {
			if code == 0 {
				code = a.ErrorCode
			}
		}
		if code == 0 {
			if e := r.runs.Open(id); e != nil {
				e.healed = x.Resp.Time
				r.runs.Finish(id)
			}
			return
		}
	}
	e := r.runs.Open(id)
	if e == nil {
		e = &run{node: n, first: x.Req.Time, last: x.Req.Time, leader: -1, epoch: -1}
		e.conns.Max = peers.MaxConns
		r.runs.Start(id, e)
	}
	e.fetches++
	peers.Widen(&e.first, &e.last, x)
	e.servers.Add(x.Conn.Server, 1, 0)
	e.conns.Add(x.Conn)
	if req, ok := x.Req.Req.(*kmsg.FetchRequest); ok {
		decode.FetchOffsets(req, func(_ cluster.Partition, offset int64) { e.offset, e.hasOffset = offset, true })
	}
	what := fmt.Sprintf("raft Fetch v%d corr %d to %s: ", x.Req.Version, x.Req.Correlation, peers.Addr(x.Conn.Server))
	if x.Unanswered {
		e.unanswered++
		what += "no answer"
	} else {
		e.errors++
		e.codes.Add(code)
		what += decode.ErrorName(code)
	}
	if resp != nil {
		for _, a := range x.Answers() {
			if a.Leader >= 0 {
				e.leader, e.epoch = a.Leader, a.Epoch
				what += fmt.Sprintf(", leader %d epoch %d", e.leader, e.epoch)
			}
		}
		if ep := cluster.NodeEndpoint(resp, e.leader); ep != "" {
			e.leaderEP = ep
		}
		e.ev.Add(detectors.EvidenceAt(x.Resp, what))
	} else {
		e.ev.Add(detectors.EvidenceAt(x.Req, what))
	}
}

// qualifies says whether a run is worth reporting: long enough, with
// enough heartbeats answered during it (to the end of the capture if it
// is still open).
func (r *rule) qualifies(e *run, open bool) bool {
	ok, bad := e.node.beats.during(e, open, e.node.hbOK, e.node.hbErr)
	held, _ := e.held()
	return e.fetches >= int64(r.p.MinRaftFetches) && held >= r.p.MinDuration && ok >= int64(r.p.MinHeartbeats) && bad < ok
}

// Findings implements detectors.Rule: one per node, its longest run.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	var out []detectors.Finding
	for _, k := range r.runs.Report(func(a, b *run) bool { return a.node.id < b.node.id }) {
		out = append(out, finding(p, k.E, k.Open))
	}
	return out
}

// points are a node's cumulative heartbeat counts over time, thinned as
// they grow, so that the heartbeats of any time span can be counted even
// for raft fetches delivered late (unanswered ones come at the end).
type points struct {
	list []point
	step int64
}

// point is the cumulative heartbeat counts at a time.
type point struct {
	t       time.Time
	ok, err int64
}

// maxPoints bounds the points; past it every other point is dropped.
const maxPoints = 1024

func (ps *points) add(t time.Time, ok, err int64) {
	if ps.step == 0 {
		ps.step = 1
	}
	if (ok+err)%ps.step != 0 {
		return
	}
	ps.list = append(ps.list, point{t, ok, err})
	if len(ps.list) > maxPoints {
		kept := ps.list[:0]
		for i, p := range ps.list {
			if i%2 == 1 {
				kept = append(kept, p)
			}
		}
		ps.list = kept
		ps.step *= 2
	}
}

// at returns the heartbeats answered at or before t (a lower bound once
// the points were thinned).
func (ps *points) at(t time.Time) (ok, err int64) {
	i := sort.Search(len(ps.list), func(i int) bool { return ps.list[i].t.After(t) })
	if i == 0 {
		return 0, 0
	}
	p := ps.list[i-1]
	return p.ok, p.err
}

// during counts the heartbeats during run e; an open run takes every
// heartbeat to the end of the capture (ok, bad: the counts now).
func (ps *points) during(e *run, open bool, ok, bad int64) (int64, int64) {
	ok0, bad0 := ps.at(e.first)
	if !open {
		ok, bad = ps.at(e.last)
	}
	return ok - ok0, bad - bad0
}
