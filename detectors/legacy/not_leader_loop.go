package legacy

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// not-leader-loop: one client keeps getting NOT_LEADER_OR_FOLLOWER (6) or
// FENCED_LEADER_EPOCH (74) for one partition and never reaches the leader.
//
// Per client (host and client id) and partition, an episode is an unbroken
// run of those answers that name the same leader and epoch (or no leader,
// -1/-1, as responses before KIP-951 do). A successful answer for the
// partition ends it, and so does an answer naming another leader or epoch:
// a client that follows a leadership change makes a few short episodes, a
// loop makes one long one. An episode of at least min-responses answers
// lasting at least min-duration is then read in one of two shapes:
//
//   - the answers (or the Metadata the client refreshes) name a leader and
//     the client never sends the partition's requests to it (the KRaft
//     observer of KAFKA-19354 does this with raft Fetch);
//   - the node answering NOT_LEADER_OR_FOLLOWER is the one the client's
//     Metadata (stable leader id) names as leader, or the one the answer
//     itself names, so the client retries the same node forever.
const (
	nlNotLeader    = 6
	nlFencedLeader = 74
)

func notLeaderLoopSpec() Spec {
	return Spec{
		ID:       "not-leader-loop",
		Severity: Error,
		Summary: "A client keeps getting NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH for one partition, with no " +
			"success in between, while the answers name the same leader and epoch and the client never sends to " +
			"that leader (KAFKA-19354 for a KRaft observer), or while the Metadata it refreshes names the very " +
			"broker that refuses (it retries the same node forever). A leadership change the client follows is " +
			"a few short episodes and is not reported.",
		Params: []Param{
			{Name: "min-responses", Default: 6, Meaning: "not-leader answers for one client and partition, with no success and no change of the named leader in between, before it is a loop (kafkajs retrying every few seconds for a minute makes 12 or more)"},
			{Name: "min-duration", Default: 10, Meaning: "seconds from the first request to the last answer of the run; a leadership change settles well within this"},
			{Name: "burst-responses", Default: 100, Meaning: "not-leader answers that make a loop however short the run (a client retrying with no backoff sends thousands a second; a client following a leadership change, a handful)"},
		},
		New: func(p Params) Detector {
			return &notLeaderLoop{
				minResponses: int64(p.Int("min-responses")),
				minDuration:  p.Seconds("min-duration"),
				burst:        int64(p.Int("burst-responses")),
				episodes:     make(map[nlKey]*nlEpisode),
				open:         make(map[nlClient]int),
				done:         make(map[nlKey]*nlEpisode),
				reqParts:     make(map[nlTP]nlReqPart),
			}
		},
	}
}

// nlMaxKeys bounds each per-partition table against hostile or huge traffic.
const nlMaxKeys = 65536

// nlMaxServers bounds the servers remembered per episode.
const nlMaxServers = 32

// nlClient is one client: its host and client id.
type nlClient struct {
	host netip.Addr
	id   string
}

// nlTP is a topic-partition, by name when known, else by topic id.
type nlTP struct {
	topic string
	id    [16]byte
	part  int32
}

func (tp nlTP) String() string {
	if tp.topic != "" {
		return tp.topic + "-" + strconv.Itoa(int(tp.part))
	}
	return "topic id " + base64.RawURLEncoding.EncodeToString(tp.id[:]) + " partition " + strconv.Itoa(int(tp.part))
}

// name is the topic for the fields: its name, or its id in Kafka's base64.
func (tp nlTP) name() string {
	if tp.topic != "" {
		return tp.topic
	}
	return base64.RawURLEncoding.EncodeToString(tp.id[:])
}

type nlKey struct {
	c  nlClient
	tp nlTP
}

// nlTopics names topic ids through the names flows learned from Metadata,
// as the connection of the exchange being read knows them.
type nlTopics struct{ conn *flows.Conn }

// tp builds the key of a partition named by topic name or id.
func (t *nlTopics) tp(name string, id [16]byte, part int32) nlTP {
	switch {
	case id == decode.ClusterMetadataTopicID:
		return nlTP{topic: flows.ClusterMetadataTopic, part: part}
	case name != "":
		return nlTP{topic: name, part: part}
	}
	if nodes := t.conn.Nodes(); nodes != nil {
		if n, ok := nodes.TopicName(id); ok {
			return nlTP{topic: n, part: part}
		}
	}
	return nlTP{id: id, part: part}
}

// nlClientOf is the client of an exchange.
func nlClientOf(x *flows.Exchange) nlClient {
	return nlClient{host: x.Conn.Client.Addr().Unmap(), id: x.Req.ClientID}
}

// nlAddr is an address as Kafka advertises it (no IPv4-mapped IPv6).
func nlAddr(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// nlServerCount is requests and not-leader answers at one server.
type nlServerCount struct {
	addr      netip.AddrPort
	requests  int64
	notLeader int64
}

// nlServers counts per server in bounded memory; over the bound, the rest
// is counted as other.
type nlServers struct {
	list  []nlServerCount
	other int64
}

func (s *nlServers) add(ap netip.AddrPort, requests, notLeader int64) {
	ap = nlAddr(ap)
	for i := range s.list {
		if s.list[i].addr == ap {
			s.list[i].requests += requests
			s.list[i].notLeader += notLeader
			return
		}
	}
	if len(s.list) >= nlMaxServers {
		s.other += requests
		return
	}
	s.list = append(s.list, nlServerCount{ap, requests, notLeader})
}

// strings returns the servers as ip:port, sorted.
func (s *nlServers) strings() []string {
	out := make([]string, 0, len(s.list))
	for _, c := range s.list {
		out = append(out, c.addr.String())
	}
	sort.Strings(out)
	return out
}

// nlConnSet is a bounded set of connection ids.
type nlConnSet []int

func (s *nlConnSet) add(id int) {
	for _, c := range *s {
		if c == id {
			return
		}
	}
	if len(*s) < 64 {
		*s = append(*s, id)
	}
}

func (s nlConnSet) sorted() []int {
	out := append([]int(nil), s...)
	sort.Ints(out)
	return out
}

// nlMeta is the leader of one partition in the Metadata a client gets.
type nlMeta struct {
	leader, epoch int32
	refreshes     int64 // Metadata responses naming this partition
	changes       int64 // times the leader id changed
	server        netip.AddrPort
}

// nlEpisode is one run of not-leader answers naming the same leader.
type nlEpisode struct {
	key           nlKey
	api           int16
	leader, epoch int32 // named by the answers; -1 if not named
	leaderEP      string
	first, last   time.Time
	requests      int64
	notLeader     int64
	fenced        int64
	otherErrors   int64
	unanswered    int64
	servers       nlServers
	conns         nlConnSet

	offset, firstOffset int64
	hasOffset           bool
	replicaID           int32
	replicaEpoch        int64
	hasReplica          bool

	metaSeen      bool
	metaUnstable  bool
	metaLeader    int32
	metaEpoch     int32
	metaStart     int64 // refreshes when the episode began
	metaEnd       int64
	metaChangeAt0 int64 // leader changes when the episode began
	metaServer    netip.AddrPort

	ev sampler[nlEv]
}

// nlEv is the evidence of one not-leader answer, formatted if it is listed.
type nlEv struct {
	packet        uint64
	file          int32
	conn          int32
	corr          int32
	key, version  int16
	code          int16
	leader, epoch int32
	server        netip.AddrPort
}

func (e nlEv) evidence() Evidence {
	what := fmt.Sprintf("%s v%d corr %d to %s: %s", decode.Name(e.key), e.version, e.corr,
		nlAddr(e.server), decode.ErrorName(e.code))
	if e.leader >= 0 {
		what += fmt.Sprintf(", leader %d epoch %d", e.leader, e.epoch)
	} else {
		what += ", no leader named"
	}
	return Evidence{File: int(e.file), Packet: e.packet, Conn: int(e.conn), What: what}
}

func (e *nlEpisode) duration() time.Duration { return e.last.Sub(e.first) }

// nlReqPart is what a request says about one partition.
type nlReqPart struct {
	offset    int64
	hasOffset bool
}

type notLeaderLoop struct {
	minResponses int64
	minDuration  time.Duration
	burst        int64

	topics   nlTopics
	episodes map[nlKey]*nlEpisode
	open     map[nlClient]int     // episodes open per client
	done     map[nlKey]*nlEpisode // the largest finished episode per key that qualified
	// meta holds the leader each client's Metadata names, per
	// partition, at most nlMaxKeys.
	meta     cpIndex[nlMeta]
	nMeta    int
	reqParts map[nlTP]nlReqPart // scratch, one exchange
	reqBuilt bool               // reqParts holds this exchange's request
}

// metaOf returns the leader client c's Metadata names for tp, or nil.
func (d *notLeaderLoop) metaOf(conn int, k nlKey) *nlMeta {
	ck := cpKey{c: k.c, topic: k.tp.topic, id: k.tp.id}
	return d.meta.topic(conn, &ck, false).part(k.tp.part)
}

// OnExchange implements flows.ExchangeHandler.
func (d *notLeaderLoop) OnExchange(x *flows.Exchange) {
	if x.Req == nil {
		return
	}
	d.topics.conn = x.Conn // its Nodes are read only for a topic named by id
	switch kmsg.Key(x.Req.Key) {
	case kmsg.Metadata:
		if x.Resp != nil {
			if r, ok := x.Resp.Resp.(*kmsg.MetadataResponse); ok {
				d.metadata(x, r)
			}
		}
	case kmsg.Fetch, kmsg.Produce:
		if x.Unanswered {
			d.unanswered(x)
			return
		}
		if x.Resp == nil {
			return
		}
		switch r := x.Resp.Resp.(type) {
		case *kmsg.FetchResponse:
			d.fetch(x, r)
		case *kmsg.ProduceResponse:
			d.produce(x, r)
		}
	}
}

func (d *notLeaderLoop) metadata(x *flows.Exchange, r *kmsg.MetadataResponse) {
	c := nlClientOf(x)
	server := nlAddr(x.Conn.Server)
	for i := range r.Topics {
		t := &r.Topics[i]
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		// The topic's key is found once, then each partition by number.
		tp := d.topics.tp(name, t.TopicID, 0)
		key := cpKey{c: c, topic: tp.topic, id: tp.id}
		ct := d.meta.topic(x.Conn.ID, &key, false)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			m := ct.part(p.Partition)
			if m == nil {
				if d.nMeta >= nlMaxKeys {
					continue
				}
				if ct == nil {
					ct = d.meta.topic(x.Conn.ID, &key, true)
				}
				m = ct.add(p.Partition)
				*m = nlMeta{leader: p.Leader}
				d.nMeta++
			}
			if m.leader != p.Leader {
				m.changes++
			}
			m.leader, m.epoch = p.Leader, p.LeaderEpoch
			m.refreshes++
			m.server = server
		}
	}
}

// nlObs is one partition's answer in one exchange.
type nlObs struct {
	x             *flows.Exchange
	key           nlKey
	code          int16
	leader, epoch int32
	fetch         bool // a Fetch: its request has the offsets
	replicaID     int32
	replicaEpoch  int64
	hasReplica    bool
}

// nlAnyNotLeader reports whether a response carries error 6 or 74.
func nlAnyNotLeader(m *flows.Message) bool {
	for _, e := range m.ErrorCodes {
		if e.Code == nlNotLeader || e.Code == nlFencedLeader {
			return true
		}
	}
	return false
}

// quiet reports an exchange that changes nothing: its client has no
// episode open and no answer in it is not-leader, so every partition is
// either a success or another error with no episode to end or count in.
func (d *notLeaderLoop) quiet(x *flows.Exchange, c nlClient) bool {
	return (len(d.episodes) == 0 || d.open[c] == 0) && !nlAnyNotLeader(x.Resp)
}

// reqPart returns what the request of x says about partition tp,
// indexing the request on first use in an exchange.
func (d *notLeaderLoop) reqPart(x *flows.Exchange, tp nlTP) nlReqPart {
	if !d.reqBuilt {
		d.reqBuilt = true
		clear(d.reqParts)
		if req, _ := x.Req.Req.(*kmsg.FetchRequest); req != nil {
			for i := range req.Topics {
				t := &req.Topics[i]
				for j := range t.Partitions {
					p := &t.Partitions[j]
					if len(d.reqParts) < nlMaxKeys {
						d.reqParts[d.topics.tp(t.Topic, t.TopicID, p.Partition)] = nlReqPart{p.FetchOffset, true}
					}
				}
			}
		}
	}
	return d.reqParts[tp]
}

func (d *notLeaderLoop) fetch(x *flows.Exchange, r *kmsg.FetchResponse) {
	if len(d.episodes) == 0 && !nlAnyNotLeader(x.Resp) {
		return // nothing to follow: the common, healthy case
	}
	c := nlClientOf(x)
	if d.quiet(x, c) {
		return
	}
	req, _ := x.Req.Req.(*kmsg.FetchRequest)
	d.reqBuilt = false
	o := nlObs{x: x, replicaID: -1, fetch: true}
	if req != nil {
		if req.Version >= 15 && req.ReplicaState.ID >= 0 {
			o.replicaID, o.replicaEpoch, o.hasReplica = req.ReplicaState.ID, req.ReplicaState.Epoch, true
		} else if req.Version <= 14 && req.ReplicaID >= 0 {
			o.replicaID, o.replicaEpoch, o.hasReplica = req.ReplicaID, -1, true
		}
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if len(d.episodes) == 0 && p.ErrorCode != nlNotLeader && p.ErrorCode != nlFencedLeader {
				continue // nothing to follow: the common, healthy case
			}
			o.key = nlKey{c, d.topics.tp(t.Topic, t.TopicID, p.Partition)}
			o.code = p.ErrorCode
			o.leader, o.epoch = p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch
			d.observe(&o)
		}
	}
}

func (d *notLeaderLoop) produce(x *flows.Exchange, r *kmsg.ProduceResponse) {
	if len(d.episodes) == 0 && !nlAnyNotLeader(x.Resp) {
		return
	}
	c := nlClientOf(x)
	if d.quiet(x, c) {
		return
	}
	o := nlObs{x: x, replicaID: -1}
	for i := range r.Topics {
		t := &r.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if len(d.episodes) == 0 && p.ErrorCode != nlNotLeader && p.ErrorCode != nlFencedLeader {
				continue
			}
			o.key = nlKey{c, d.topics.tp(t.Topic, t.TopicID, p.Partition)}
			o.code = p.ErrorCode
			o.leader, o.epoch = p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch
			d.observe(&o)
		}
	}
}

// unanswered counts a request that got no answer towards the episodes of
// its partitions.
func (d *notLeaderLoop) unanswered(x *flows.Exchange) {
	if len(d.episodes) == 0 {
		return
	}
	c := nlClientOf(x)
	if d.open[c] == 0 {
		return
	}
	each := func(tp nlTP) {
		if e := d.episodes[nlKey{c, tp}]; e != nil {
			e.requests++
			e.unanswered++
			e.servers.add(x.Conn.Server, 1, 0)
			e.conns.add(x.Conn.ID)
		}
	}
	switch r := x.Req.Req.(type) {
	case *kmsg.FetchRequest:
		for i := range r.Topics {
			for _, p := range r.Topics[i].Partitions {
				each(d.topics.tp(r.Topics[i].Topic, r.Topics[i].TopicID, p.Partition))
			}
		}
	case *kmsg.ProduceRequest:
		for i := range r.Topics {
			for _, p := range r.Topics[i].Partitions {
				each(d.topics.tp(r.Topics[i].Topic, r.Topics[i].TopicID, p.Partition))
			}
		}
	}
}

// nlLeaderEP is the endpoint a response gives for leader, if any.
func nlLeaderEP(resp kmsg.Response, leader int32) string {
	ep := ""
	switch r := resp.(type) {
	case *kmsg.FetchResponse:
		for _, b := range r.Brokers {
			if b.NodeID == leader && leader >= 0 {
				ep = flows.Endpoint(b.Host, b.Port)
			}
		}
	case *kmsg.ProduceResponse:
		for _, b := range r.Brokers {
			if b.NodeID == leader && leader >= 0 {
				ep = flows.Endpoint(b.Host, b.Port)
			}
		}
	}
	return ep
}

func (d *notLeaderLoop) observe(o *nlObs) {
	e := d.episodes[o.key]
	x := o.x
	switch o.code {
	case nlNotLeader, nlFencedLeader:
		leaderEP := nlLeaderEP(x.Resp.Resp, o.leader)
		var req nlReqPart
		if o.fetch {
			req = d.reqPart(x, o.key.tp)
		}
		if e != nil && (e.leader != o.leader || e.epoch != o.epoch) {
			d.finish(e)
			e = nil
		}
		meta := d.metaOf(x.Conn.ID, o.key)
		if e == nil {
			if len(d.episodes) >= nlMaxKeys {
				return
			}
			e = &nlEpisode{key: o.key, api: x.Req.Key, leader: o.leader, epoch: o.epoch, first: x.Req.Time, replicaID: -1}
			if meta != nil {
				e.metaStart, e.metaChangeAt0 = meta.refreshes, meta.changes
			}
			d.episodes[o.key] = e
			d.open[o.key.c]++
		}
		e.requests++
		e.notLeader++
		if o.code == nlFencedLeader {
			e.fenced++
		}
		e.last = x.Resp.Time
		if leaderEP != "" {
			e.leaderEP = leaderEP
		}
		e.servers.add(x.Conn.Server, 1, 1)
		e.conns.add(x.Conn.ID)
		if req.hasOffset {
			if !e.hasOffset {
				e.firstOffset = req.offset
			}
			e.offset, e.hasOffset = req.offset, true
		}
		if o.hasReplica {
			e.replicaID, e.replicaEpoch, e.hasReplica = o.replicaID, o.replicaEpoch, true
		}
		if m := meta; m != nil {
			if !e.metaSeen {
				e.metaSeen, e.metaLeader, e.metaEpoch = true, m.leader, m.epoch
			} else if m.leader != e.metaLeader || m.changes != e.metaChangeAt0 {
				e.metaUnstable = true
			}
			e.metaEnd, e.metaServer = m.refreshes, m.server
		}
		e.ev.add(nlEv{file: int32(x.Resp.File), packet: x.Resp.Packet, conn: int32(x.Resp.Conn.ID), key: x.Req.Key,
			version: x.Req.Version, corr: x.Req.Correlation, server: x.Conn.Server, code: o.code, leader: o.leader, epoch: o.epoch})
	case 0:
		if e != nil {
			d.finish(e)
		}
	default:
		if e != nil {
			e.requests++
			e.otherErrors++
			e.last = x.Resp.Time
			e.servers.add(x.Conn.Server, 1, 0)
			e.conns.add(x.Conn.ID)
		}
	}
}

func (d *notLeaderLoop) qualifies(e *nlEpisode) bool {
	if d.burst > 0 && e.notLeader >= d.burst {
		return true
	}
	return e.notLeader >= d.minResponses && e.duration() >= d.minDuration
}

// finish ends an episode, keeping it if it is a loop.
func (d *notLeaderLoop) finish(e *nlEpisode) {
	delete(d.episodes, e.key)
	if d.open[e.key.c]--; d.open[e.key.c] == 0 {
		delete(d.open, e.key.c)
	}
	if !d.qualifies(e) {
		return
	}
	if old := d.done[e.key]; old != nil && old.notLeader >= e.notLeader {
		return
	}
	if _, ok := d.done[e.key]; ok || len(d.done) < nlMaxKeys {
		d.done[e.key] = e
	}
}

// Shapes of a loop.
const (
	nlShapeHintIgnored = "leader-not-followed"    // a leader is named, the client never goes there
	nlShapeMetaSelf    = "metadata-names-refuser" // Metadata names the very broker that refuses
	nlShapeHintSelf    = "leader-names-itself"    // the refusing broker names itself as leader
	nlShapeUnknown     = "leader-unknown"         // nothing in the capture names the leader
)

// nlVerdict is how an episode reads once node identities are known.
type nlVerdict struct {
	shape         string
	leader, epoch int32
	source        string // "response" or "metadata"
	endpoint      string
	toLeader      int64 // requests to the leader's endpoint
	fromLeader    int64 // not-leader answers from the leader itself
	resolved      bool  // every server's identity relative to the leader is known
}

// isNode says whether the server at ap is node id, and whether that is
// known: by an advertised endpoint equal to ap, or by the node id learned
// for ap. eps are the node's endpoints.
func nlIsNode(env *Env, ap netip.AddrPort, id int32, eps []string) (is, known bool) {
	s := nlAddr(ap).String()
	for _, ep := range eps {
		if ep == s {
			return true, true
		}
	}
	if env.Nodes != nil {
		if n := env.Nodes.Server(ap); n >= 0 {
			return n == id, true
		}
	}
	if len(eps) == 0 {
		return false, false
	}
	for _, ep := range eps {
		if _, err := netip.ParseAddrPort(ep); err != nil {
			return false, false // a host name: cannot tell
		}
	}
	return false, true
}

func nlEndpoints(env *Env, id int32, known string) []string {
	var eps []string
	if known != "" {
		eps = append(eps, known)
	}
	if env.Nodes != nil && id >= 0 {
		for _, ep := range env.Nodes.EndpointsOf(id) {
			if ep != known {
				eps = append(eps, ep)
			}
		}
	}
	return eps
}

// tally counts requests to and not-leader answers from node id.
func nlTally(env *Env, e *nlEpisode, id int32, eps []string) (to, from int64, resolved bool) {
	resolved = true
	for _, s := range e.servers.list {
		is, known := nlIsNode(env, s.addr, id, eps)
		if !known {
			resolved = false
		}
		if is {
			to += s.requests
			from += s.notLeader
		}
	}
	return to, from, resolved
}

func (d *notLeaderLoop) verdict(env *Env, e *nlEpisode) (nlVerdict, bool) {
	metaOK := e.metaSeen && !e.metaUnstable && e.metaLeader >= 0
	if metaOK {
		eps := nlEndpoints(env, e.metaLeader, "")
		to, from, res := nlTally(env, e, e.metaLeader, eps)
		if from >= d.minResponses {
			ep := ""
			if len(eps) > 0 {
				ep = eps[0]
			}
			return nlVerdict{shape: nlShapeMetaSelf, leader: e.metaLeader, epoch: e.metaEpoch, source: "metadata",
				endpoint: ep, toLeader: to, fromLeader: from, resolved: res}, true
		}
	}
	if e.leader >= 0 {
		eps := nlEndpoints(env, e.leader, e.leaderEP)
		to, from, res := nlTally(env, e, e.leader, eps)
		ep := ""
		if len(eps) > 0 {
			ep = eps[0]
		}
		v := nlVerdict{leader: e.leader, epoch: e.epoch, source: "response", endpoint: ep, toLeader: to, fromLeader: from, resolved: res}
		switch {
		case from >= d.minResponses:
			v.shape = nlShapeHintSelf
			return v, true
		case to == 0:
			v.shape = nlShapeHintIgnored
			return v, true
		}
		// The client does reach the named leader: whatever goes wrong
		// there, it is not this loop.
		return v, false
	}
	if metaOK {
		eps := nlEndpoints(env, e.metaLeader, "")
		to, from, res := nlTally(env, e, e.metaLeader, eps)
		ep := ""
		if len(eps) > 0 {
			ep = eps[0]
		}
		v := nlVerdict{shape: nlShapeHintIgnored, leader: e.metaLeader, epoch: e.metaEpoch, source: "metadata",
			endpoint: ep, toLeader: to, fromLeader: from, resolved: res}
		return v, to == 0
	}
	return nlVerdict{shape: nlShapeUnknown, leader: -1, epoch: -1}, true
}

// Findings implements Detector.
func (d *notLeaderLoop) Findings(env *Env) []Finding {
	var eps []*nlEpisode
	for k, e := range d.done {
		if open := d.episodes[k]; open != nil && d.qualifies(open) && open.notLeader > e.notLeader {
			continue
		}
		eps = append(eps, e)
	}
	for k, e := range d.episodes {
		if !d.qualifies(e) {
			continue
		}
		if old := d.done[k]; old != nil && old.notLeader >= e.notLeader {
			continue
		}
		eps = append(eps, e)
	}
	sort.Slice(eps, func(i, j int) bool {
		a, b := eps[i], eps[j]
		if !a.first.Equal(b.first) {
			return a.first.Before(b.first)
		}
		if a.key.c.host != b.key.c.host {
			return a.key.c.host.Less(b.key.c.host)
		}
		if a.key.c.id != b.key.c.id {
			return a.key.c.id < b.key.c.id
		}
		if a.key.tp.name() != b.key.tp.name() {
			return a.key.tp.name() < b.key.tp.name()
		}
		return a.key.tp.part < b.key.tp.part
	})
	var out []Finding
	for _, e := range eps {
		v, ok := d.verdict(env, e)
		if !ok {
			continue
		}
		out = append(out, d.finding(env, e, v))
	}
	return nlMerge(out)
}

// nlClientNode is the node id a client speaks for, if any.
func nlClientNode(env *Env, c nlClient, replicaID int32) int32 {
	if id, ok := flows.FetcherNode(c.id); ok {
		return id
	}
	if replicaID >= 0 {
		return replicaID
	}
	if env.Nodes != nil {
		return env.Nodes.Host(c.host)
	}
	return -1
}

// nlServerLabel renders a server with its node id when known.
func nlServerLabel(env *Env, ap netip.AddrPort) string {
	if env.Nodes != nil {
		return env.Nodes.Label(nlAddr(ap), true)
	}
	return nlAddr(ap).String()
}

func nlErrorName(e *nlEpisode) string {
	if e.fenced*2 > e.notLeader {
		return decode.ErrorName(nlFencedLeader)
	}
	return decode.ErrorName(nlNotLeader)
}

func (d *notLeaderLoop) finding(env *Env, e *nlEpisode, v nlVerdict) Finding {
	c := e.key.c
	dur := e.duration()
	rate := text.Rate(e.requests, dur)
	errName := nlErrorName(e)
	api := decode.Name(e.api)
	who := c.id
	if who == "" {
		who = "client"
	}
	who += " (" + c.host.String() + ")"
	raft := strings.HasPrefix(c.id, "raft-client-") && e.key.tp.topic == flows.ClusterMetadataTopic

	nodes := idSet{}
	clientNode := nlClientNode(env, c, e.replicaID)
	nodes.add(clientNode)
	nodes.add(v.leader)
	for _, s := range e.servers.list {
		if env.Nodes != nil {
			nodes.add(env.Nodes.Server(s.addr))
		}
	}

	fields := map[string]any{
		"client":     c.host.String(),
		"client_id":  c.id,
		"topic":      e.key.tp.name(),
		"partition":  e.key.tp.part,
		"error":      errName,
		"servers":    e.servers.strings(),
		"duration_s": text.Seconds(dur),
		"rate_per_s": rate,
		"shape":      v.shape,
		"leader_id":  v.leader,
	}
	if v.leader >= 0 {
		fields["leader_epoch"] = v.epoch
		fields["leader_source"] = v.source
		if v.endpoint != "" {
			fields["leader_endpoint"] = v.endpoint
		}
	}
	if e.hasOffset {
		fields["fetch_offset"] = e.offset
		if e.firstOffset != e.offset {
			fields["first_fetch_offset"] = e.firstOffset
		}
	}
	if e.hasReplica {
		fields["replica_id"] = e.replicaID
		fields["replica_epoch"] = e.replicaEpoch
	}
	if e.metaSeen {
		fields["metadata_leader_id"] = e.metaLeader
		if e.metaServer.IsValid() {
			fields["metadata_server"] = e.metaServer.String()
		}
	}
	if raft {
		fields["known_issue"] = "KAFKA-19354"
	}
	counts := map[string]int64{
		"requests":             e.requests,
		"not_leader_responses": e.notLeader,
	}
	if v.leader >= 0 {
		counts["requests_to_leader"] = v.toLeader
	}
	if e.fenced > 0 {
		counts["fenced_leader_epoch"] = e.fenced
	}
	if e.otherErrors > 0 {
		counts["other_errors"] = e.otherErrors
	}
	if e.unanswered > 0 {
		counts["unanswered"] = e.unanswered
	}
	if e.metaSeen {
		counts["metadata_refreshes"] = e.metaEnd - e.metaStart
	}

	// The servers tried, with their share.
	list := append([]nlServerCount(nil), e.servers.list...)
	sort.Slice(list, func(i, j int) bool {
		if list[i].requests != list[j].requests {
			return list[i].requests > list[j].requests
		}
		return list[i].addr.String() < list[j].addr.String()
	})
	var tried []string
	for _, s := range list {
		tried = append(tried, fmt.Sprintf("%d to %s", s.requests, nlServerLabel(env, s.addr)))
	}
	if e.servers.other > 0 {
		tried = append(tried, fmt.Sprintf("%d to other servers", e.servers.other))
	}
	triedText := strings.Join(tried, ", ")
	leaderText := ""
	if v.leader >= 0 {
		leaderText = fmt.Sprintf("node %d", v.leader)
		if v.endpoint != "" {
			leaderText += " (" + v.endpoint + ")"
		}
	}
	offsetText := ""
	if e.hasOffset {
		offsetText = fmt.Sprintf(" at fetchOffset %d", e.offset)
		if e.firstOffset != e.offset {
			offsetText = fmt.Sprintf(" at fetchOffset %d..%d", e.firstOffset, e.offset)
		}
	}
	replicaText := ""
	if e.hasReplica {
		replicaText = fmt.Sprintf(", replica %d epoch %d,", e.replicaID, e.replicaEpoch)
	}
	span := text.Duration(dur)
	f := Finding{
		Severity: Error,
		First:    e.first,
		Last:     e.last,
		Conns:    e.conns.sorted(),
		Nodes:    nodes.sorted(),
		Counts:   counts,
		Fields:   fields,
		Evidence: e.ev.list(),
	}
	tp := e.key.tp.String()
	nServers := len(e.servers.list)
	switch v.shape {
	case nlShapeHintIgnored:
		named := fmt.Sprintf("naming leader %s epoch %d", leaderText, v.epoch)
		if v.source == "metadata" {
			named = fmt.Sprintf("while the client's Metadata names %s as leader (epoch %d)", leaderText, v.epoch)
		}
		if raft {
			f.Summary = fmt.Sprintf("%s loops %s of %s on %d non-leader controller(s): %d %s %s in %s, none sent to the leader (KAFKA-19354 observer fetch loop)",
				who, api, tp, nServers, e.notLeader, errName, named, span)
		} else {
			f.Summary = fmt.Sprintf("%s keeps sending %s for %s to %d non-leader(s): %d %s %s in %s, none sent to the leader",
				who, api, tp, nServers, e.notLeader, errName, named, span)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s%s sent %d %s requests for %s%s over %s (%.1f/s): %s. ",
			who, replicaText, e.requests, api, tp, offsetText, span, rate, triedText)
		if v.source == "response" {
			fmt.Fprintf(&b, "All %d answers were %s and named the same leader, %s, at epoch %d, ", e.notLeader, errName, leaderText, v.epoch)
		} else {
			fmt.Fprintf(&b, "All %d answers were %s, and the Metadata the client got names %s as leader (epoch %d) throughout, ", e.notLeader, errName, leaderText, v.epoch)
		}
		if v.resolved {
			fmt.Fprintf(&b, "yet not one request went to the leader. ")
		} else {
			fmt.Fprintf(&b, "yet no request went to an address known to be the leader (the leader's endpoint %q could not be matched to captured addresses, so check that too). ", v.endpoint)
		}
		fmt.Fprintf(&b, "The client does not act on the leader it is told about, so the partition never advances.")
		if raft {
			fmt.Fprintf(&b, " This is the pattern of KAFKA-19354: after a fetch timeout a KRaft observer (Kafka 3.9.x) keeps choosing "+
				"among the bootstrap controllers (pollFollowerAsObserver -> maybeSendFetchToAnyBootstrap), and a "+
				"NOT_LEADER_OR_FOLLOWER that names the leader it already knows, at the same epoch, changes no state, so the loop never ends.")
			f.Next = fmt.Sprintf("Confirm the leader and this node's lag: kafka-metadata-quorum.sh --bootstrap-controller %s describe --status "+
				"and describe --replication (node %d's LogEndOffset and Lag). On node %d watch kafka.server:type=broker-metadata-metrics "+
				"last-applied-record-lag-ms (rising) and raft-metrics fetch-records-rate (0) and high-watermark (frozen). Restarting the "+
				"node clears the loop; the fix is the KAFKA-19354 patch (pollFollowerAsObserver always uses maybeSendFetchToBestNode): "+
				"upgrade or backport it.", text.Or(v.endpoint, leaderText), clientNode, clientNode)
		} else {
			f.Next = fmt.Sprintf("Check which leader the cluster reports: kafka-topics.sh --bootstrap-server %s --describe --topic %s "+
				"(leader of partition %d). Then check the client: its version and whether it refreshes metadata on %s and honours "+
				"the KIP-951 leader hint; its logs for metadata refresh errors; whether it can reach %s at all (DNS of the advertised "+
				"listener, routing, firewall, a connection-refused finding).", text.Or(v.endpoint, "<broker>"), e.key.tp.name(),
				e.key.tp.part, errName, text.Or(v.endpoint, "the leader"))
		}
		f.Explanation = b.String()
	case nlShapeMetaSelf, nlShapeHintSelf:
		if v.shape == nlShapeMetaSelf {
			f.Summary = fmt.Sprintf("metadata names broker %d as leader of %s but it answers %s: %s retried it %d times in %s (%.1f/s)",
				v.leader, tp, errName, who, v.fromLeader, span, rate)
		} else {
			f.Summary = fmt.Sprintf("broker %d answers %s for %s while naming itself as leader (epoch %d): %s retried it %d times in %s (%.1f/s)",
				v.leader, errName, tp, v.epoch, who, v.fromLeader, span, rate)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s%s sent %d %s requests for %s%s over %s (%.1f/s): %s. %d answers from %s itself were %s. ",
			who, replicaText, e.requests, api, tp, offsetText, span, rate, triedText, v.fromLeader, leaderText, errName)
		if v.shape == nlShapeMetaSelf {
			from := ""
			if e.metaServer.IsValid() {
				from = " from " + nlServerLabel(env, e.metaServer)
			}
			if n := e.metaEnd - e.metaStart; n > 0 {
				fmt.Fprintf(&b, "Yet the Metadata the client refreshed %d times during the run (last%s) names that very broker, node %d, as leader with a stable leader id, so the client goes back to it every time. ", n, from, v.leader)
			} else {
				fmt.Fprintf(&b, "Yet the last Metadata the client got%s names that very broker, node %d, as leader, and the client retries it without refreshing. ", from, v.leader)
			}
			switch {
			case e.leader >= 0 && e.leader != v.leader:
				fmt.Fprintf(&b, "The answers themselves name node %d (epoch %d) as leader, which the client ignores. ", e.leader, e.epoch)
			case e.leader == v.leader:
				fmt.Fprintf(&b, "The answers themselves name node %d (epoch %d) as the leader too: the broker refuses and, in the same breath, points at itself. ", e.leader, e.epoch)
			}
		} else {
			fmt.Fprintf(&b, "Each of those answers names node %d itself as the leader at epoch %d, so a client that follows the hint comes straight back. ", v.leader, v.epoch)
		}
		fmt.Fprintf(&b, "The broker and the metadata disagree about leadership and the client cannot make progress until they agree.")
		f.Explanation = b.String()
		f.Next = fmt.Sprintf("Compare what the cluster says with what broker %d believes: kafka-topics.sh --bootstrap-server %s --describe --topic %s "+
			"(leader, ISR, leader epoch of partition %d) against broker %d's server.log for the partition (become-leader/become-follower, "+
			"fenced or stale metadata) and its kafka.server:type=broker-metadata-metrics last-applied-record-lag-ms; "+
			"a broker serving stale Metadata (see metadata_server) has stuck metadata replication itself "+
			"(kafka-metadata-quorum.sh describe --replication; a liveness-without-replication finding). Restarting the stuck broker or "+
			"moving leadership (kafka-leader-election.sh) breaks the loop.", v.leader, text.Or(v.endpoint, "<broker>"), e.key.tp.name(),
			e.key.tp.part, v.leader)
	default:
		f.Severity = Warning
		f.Summary = fmt.Sprintf("%s got %d %s for %s in %s from %d server(s) with no success in between; nothing in the capture names the leader",
			who, e.notLeader, errName, tp, span, nServers)
		f.Explanation = fmt.Sprintf("%s%s sent %d %s requests for %s%s over %s (%.1f/s), %s, and every answer was %s or another error, "+
			"never a success. The answers carry no leader hint (responses before KIP-951 do not) and no Metadata response in the "+
			"capture names a stable leader for the partition, so whether the client is being sent the right way cannot be told from "+
			"the wire; it has not reached a leader for %s.",
			who, replicaText, e.requests, api, tp, offsetText, span, rate, triedText, errName, span)
		f.Next = fmt.Sprintf("Capture the client's Metadata requests too (or run kafka-topics.sh --describe --topic %s) to see which broker "+
			"leads partition %d; check the client's logs for metadata refresh failures and whether the partition has a leader at all "+
			"(a leader-election-stall finding).", e.key.tp.name(), e.key.tp.part)
	}
	return f
}

// nlMerge folds the findings of one client that loop the same way over
// several partitions of a topic into one, so that a producer stuck on a
// broker's fifty partitions is one finding, not fifty.
func nlMerge(in []Finding) []Finding {
	type group struct {
		first int
		parts []int32
	}
	keyOf := func(f *Finding) string {
		return fmt.Sprint(f.Fields["client"], "\x00", f.Fields["client_id"], "\x00", f.Fields["topic"], "\x00",
			f.Fields["shape"], "\x00", f.Fields["leader_id"], "\x00", f.Fields["leader_epoch"], "\x00", f.Fields["servers"])
	}
	groups := map[string]*group{}
	var out []Finding
	for i := range in {
		f := &in[i]
		k := keyOf(f)
		g := groups[k]
		if g == nil {
			groups[k] = &group{first: len(out), parts: []int32{f.Fields["partition"].(int32)}}
			out = append(out, *f)
			continue
		}
		m := &out[g.first]
		g.parts = append(g.parts, f.Fields["partition"].(int32))
		for name, n := range f.Counts {
			m.Counts[name] += n
		}
		if f.First.Before(m.First) {
			m.First = f.First
		}
		if f.Last.After(m.Last) {
			m.Last = f.Last
		}
		m.Conns = nlMergeInts(m.Conns, f.Conns)
		ns := idSet{}
		for _, n := range append(m.Nodes, f.Nodes...) {
			ns.add(n)
		}
		m.Nodes = ns.sorted()
		m.Evidence = append(m.Evidence, f.Evidence...)
	}
	for _, g := range groups {
		if len(g.parts) < 2 {
			continue
		}
		m := &out[g.first]
		sort.Slice(g.parts, func(i, j int) bool { return g.parts[i] < g.parts[j] })
		m.Fields["partition"] = g.parts[0]
		m.Fields["partitions"] = g.parts
		delete(m.Fields, "fetch_offset")
		delete(m.Fields, "first_fetch_offset")
		dur := m.Last.Sub(m.First)
		m.Fields["duration_s"] = text.Seconds(dur)
		m.Fields["rate_per_s"] = text.Rate(m.Counts["requests"], dur)
		m.Summary = fmt.Sprintf("%s [%d partitions: %s]", m.Summary, len(g.parts), text.IDs(g.parts, 8))
		m.Explanation = fmt.Sprintf("The same loop holds for %d partitions of %s (%s); counts are summed over them, and the text describes the first. %s",
			len(g.parts), m.Fields["topic"], text.IDs(g.parts, 8), m.Explanation)
		sort.SliceStable(m.Evidence, func(i, j int) bool {
			a, b := m.Evidence[i], m.Evidence[j]
			if a.File != b.File {
				return a.File < b.File
			}
			return a.Packet < b.Packet
		})
		m.Evidence = nlThin(m.Evidence, 2+maxMiddle)
	}
	return out
}

// nlThin keeps the first, the last and evenly spread evidence, n in all.
func nlThin(ev []Evidence, n int) []Evidence {
	if len(ev) <= n || n < 2 {
		return ev
	}
	out := make([]Evidence, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, ev[i*(len(ev)-1)/(n-1)])
	}
	return out
}

func nlMergeInts(a, b []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, x := range append(append([]int(nil), a...), b...) {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Ints(out)
	return out
}
