package legacy

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// liveness-without-replication: a KRaft broker's heartbeats to the
// controller succeed while its raft fetches of the metadata log fail or go
// to nodes other than the leader. The controller sees a live broker; the
// broker's metadata is frozen. Both facts are stated side by side, since
// each alone misleads.
//
// Per node id, heartbeats (BrokerHeartbeat, broker id in the body, client
// id "68") are counted as they come; raft fetches (Fetch of
// __cluster_metadata, client id raft-client-<id> or replica state) form
// failure runs: unbroken sequences of raft fetches with no successful
// answer. A run that is long enough, during which enough heartbeats were
// answered without error, is reported.
func livenessSpec() Spec {
	return Spec{
		ID:       "liveness-without-replication",
		Severity: Error,
		Summary: "A broker's heartbeats to the controller are answered without error while its raft fetches of the " +
			"metadata log get no successful answer: errors, no answer, or fetches sent to nodes that are not the " +
			"leader (they answer NOT_LEADER_OR_FOLLOWER). Alive to the controller, frozen metadata; reported with " +
			"both facts side by side.",
		Params: []Param{
			{Name: "min-heartbeats", Default: 3, Meaning: "heartbeats answered without error during the raft failure run"},
			{Name: "min-raft-fetches", Default: 10, Meaning: "raft fetches in a row with no successful answer"},
			{Name: "min-duration", Default: 10, Meaning: "seconds the run of failed raft fetches must last (a controller election settles well within this)"},
		},
		New: func(p Params) Detector {
			return &liveness{
				minHeartbeats: int64(p.Int("min-heartbeats")),
				minFetches:    int64(p.Int("min-raft-fetches")),
				minDuration:   p.Seconds("min-duration"),
				nodes:         make(map[int32]*lwNode),
			}
		},
	}
}

// lwMaxNodes bounds the node table.
const lwMaxNodes = 4096

// lwNode is what one node id's traffic says.
type lwNode struct {
	id int32
	// Heartbeats, cumulative.
	hbClientID  string
	hbOK, hbErr int64
	hbServers   nlServers
	hbConns     nlConnSet
	hbFirst     *Evidence
	hbLast      Evidence
	metaOffset  int64     // currentMetadataOffset of the last heartbeat
	metaChanged time.Time // when it last changed (zero: never)
	// hbPoints are cumulative heartbeat counts over time, thinned as they
	// grow, so that the heartbeats of any time span can be counted even
	// for raft fetches delivered late (unanswered ones come at the end).
	hbPoints   []lwPoint
	hbStep     int64
	caughtUp   bool // the last answer's isCaughtUp
	fenced     bool // the last answer's isFenced
	hbAnswered bool

	raftClientID string
	run          *lwRun // the current failure run
	best         *lwRun // the longest finished run that qualified
}

// lwPoint is the cumulative heartbeat counts at a time.
type lwPoint struct {
	t       time.Time
	ok, err int64
}

// lwMaxPoints bounds hbPoints; past it every other point is dropped.
const lwMaxPoints = 1024

func (n *lwNode) addPoint(t time.Time) {
	if n.hbStep == 0 {
		n.hbStep = 1
	}
	if (n.hbOK+n.hbErr)%n.hbStep != 0 {
		return
	}
	n.hbPoints = append(n.hbPoints, lwPoint{t, n.hbOK, n.hbErr})
	if len(n.hbPoints) > lwMaxPoints {
		kept := n.hbPoints[:0]
		for i, p := range n.hbPoints {
			if i%2 == 1 {
				kept = append(kept, p)
			}
		}
		n.hbPoints = kept
		n.hbStep *= 2
	}
}

// hbAt returns the heartbeats answered at or before t (a lower bound once
// the points were thinned).
func (n *lwNode) hbAt(t time.Time) (ok, err int64) {
	i := sort.Search(len(n.hbPoints), func(i int) bool { return n.hbPoints[i].t.After(t) })
	if i == 0 {
		return 0, 0
	}
	p := n.hbPoints[i-1]
	return p.ok, p.err
}

// lwRun is an unbroken run of raft fetches with no successful answer.
type lwRun struct {
	first, last   time.Time
	fetches       int64
	errors        int64
	unanswered    int64
	codes         codeTally
	servers       nlServers
	conns         nlConnSet
	leader, epoch int32
	leaderEP      string
	offset        int64
	hasOffset     bool
	ev            sampler[Evidence]
}

func (r *lwRun) duration() time.Duration { return r.last.Sub(r.first) }

func (r *lwRun) addCode(code int16) { r.codes.add(code) }

type liveness struct {
	minHeartbeats int64
	minFetches    int64
	minDuration   time.Duration
	nodes         map[int32]*lwNode
}

func (d *liveness) node(id int32) *lwNode {
	n := d.nodes[id]
	if n == nil && len(d.nodes) < lwMaxNodes {
		n = &lwNode{id: id, metaOffset: -1}
		d.nodes[id] = n
	}
	return n
}

// OnExchange implements flows.ExchangeHandler.
func (d *liveness) OnExchange(x *flows.Exchange) {
	if x.Req == nil {
		return
	}
	switch kmsg.Key(x.Req.Key) {
	case kmsg.BrokerHeartbeat:
		d.heartbeat(x)
	case kmsg.Fetch:
		if x.Req.Role == flows.RoleRaft {
			d.raftFetch(x)
		}
	}
}

func (d *liveness) heartbeat(x *flows.Exchange) {
	req, ok := x.Req.Req.(*kmsg.BrokerHeartbeatRequest)
	if !ok || x.Resp == nil {
		return // unanswered (or cut by the capture's end): neither way
	}
	resp, ok := x.Resp.Resp.(*kmsg.BrokerHeartbeatResponse)
	if !ok {
		return
	}
	n := d.node(req.BrokerID)
	if n == nil {
		return
	}
	n.hbClientID = x.Req.ClientID
	if resp.ErrorCode == 0 {
		n.hbOK++
	} else {
		n.hbErr++
	}
	n.hbServers.add(x.Conn.Server, 1, 0)
	n.hbConns.add(x.Conn.ID)
	if n.metaOffset >= 0 && n.metaOffset != req.CurrentMetadataOffset {
		n.metaChanged = x.Resp.Time
	}
	n.metaOffset = req.CurrentMetadataOffset
	n.addPoint(x.Resp.Time)
	n.caughtUp, n.fenced, n.hbAnswered = resp.IsCaughtUp, resp.IsFenced, true
	what := fmt.Sprintf("BrokerHeartbeat v%d corr %d to %s: broker %d, currentMetadataOffset %d: %s",
		x.Req.Version, x.Req.Correlation, nlAddr(x.Conn.Server), req.BrokerID, req.CurrentMetadataOffset, lwAnswer(resp))
	ev := evidence(x.Resp, what)
	if n.hbFirst == nil {
		n.hbFirst = &ev
	}
	n.hbLast = ev
}

func lwAnswer(r *kmsg.BrokerHeartbeatResponse) string {
	if r.ErrorCode != 0 {
		return decode.ErrorName(r.ErrorCode)
	}
	return fmt.Sprintf("ok, isCaughtUp %v, isFenced %v", r.IsCaughtUp, r.IsFenced)
}

// lwRaftNode is the node id a raft fetch speaks for.
func lwRaftNode(m *flows.Message) int32 {
	if id, ok := flows.FetcherNode(m.ClientID); ok {
		return id
	}
	if r, ok := m.Req.(*kmsg.FetchRequest); ok {
		if r.Version >= 15 {
			return r.ReplicaState.ID
		}
		return r.ReplicaID
	}
	return -1
}

func (d *liveness) raftFetch(x *flows.Exchange) {
	id := lwRaftNode(x.Req)
	if id < 0 {
		return
	}
	n := d.node(id)
	if n == nil {
		return
	}
	n.raftClientID = x.Req.ClientID
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
		for i := range resp.Topics {
			for _, p := range resp.Topics[i].Partitions {
				if code == 0 && p.ErrorCode != 0 {
					code = p.ErrorCode
				}
			}
		}
		if code == 0 {
			d.endRun(n)
			return
		}
	}
	r := n.run
	if r == nil {
		r = &lwRun{first: x.Req.Time, last: x.Req.Time, leader: -1, epoch: -1}
		n.run = r
	}
	r.fetches++
	// Unanswered fetches are delivered late (at the end of the capture):
	// the run spans the earliest to the latest.
	if x.Req.Time.Before(r.first) {
		r.first = x.Req.Time
	}
	last := x.Req.Time
	if x.Resp != nil {
		last = x.Resp.Time
	}
	if last.After(r.last) {
		r.last = last
	}
	r.servers.add(x.Conn.Server, 1, 0)
	r.conns.add(x.Conn.ID)
	if req, ok := x.Req.Req.(*kmsg.FetchRequest); ok {
		for i := range req.Topics {
			for _, p := range req.Topics[i].Partitions {
				r.offset, r.hasOffset = p.FetchOffset, true
			}
		}
	}
	what := ""
	switch {
	case x.Unanswered:
		r.unanswered++
		what = fmt.Sprintf("raft Fetch v%d corr %d to %s: no answer", x.Req.Version, x.Req.Correlation, nlAddr(x.Conn.Server))
	default:
		r.errors++
		r.addCode(code)
		what = fmt.Sprintf("raft Fetch v%d corr %d to %s: %s", x.Req.Version, x.Req.Correlation, nlAddr(x.Conn.Server), decode.ErrorName(code))
	}
	if resp != nil {
		for i := range resp.Topics {
			for _, p := range resp.Topics[i].Partitions {
				if p.CurrentLeader.LeaderID >= 0 {
					r.leader, r.epoch = p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch
					what += fmt.Sprintf(", leader %d epoch %d", r.leader, r.epoch)
				}
			}
		}
		for _, b := range resp.Brokers {
			if b.NodeID == r.leader && r.leader >= 0 {
				r.leaderEP = flows.Endpoint(b.Host, b.Port)
			}
		}
	}
	if x.Resp != nil {
		r.ev.add(evidence(x.Resp, what))
	} else {
		r.ev.add(evidence(x.Req, what))
	}
}

// heartbeats counts the node's heartbeats during run r; an open run takes
// every heartbeat to the end of the capture.
func (n *lwNode) heartbeats(r *lwRun, open bool) (ok, bad int64) {
	ok0, bad0 := n.hbAt(r.first)
	ok1, bad1 := n.hbOK, n.hbErr
	if !open {
		ok1, bad1 = n.hbAt(r.last)
	}
	return ok1 - ok0, bad1 - bad0
}

func (d *liveness) qualifies(n *lwNode, r *lwRun, open bool) bool {
	ok, bad := n.heartbeats(r, open)
	return r.fetches >= d.minFetches && r.duration() >= d.minDuration && ok >= d.minHeartbeats && bad < ok
}

func (d *liveness) endRun(n *lwNode) {
	r := n.run
	if r == nil {
		return
	}
	n.run = nil
	if d.qualifies(n, r, false) && (n.best == nil || r.fetches > n.best.fetches) {
		n.best = r
	}
}

// Findings implements Detector.
func (d *liveness) Findings(env *Env) []Finding {
	ids := make([]int32, 0, len(d.nodes))
	for id := range d.nodes {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out []Finding
	for _, id := range ids {
		n := d.nodes[id]
		r, open := n.best, false
		if cur := n.run; cur != nil {
			// Heartbeats after the last raft fetch still count: the run
			// is open at the end of the capture.
			if d.qualifies(n, cur, true) && (r == nil || cur.fetches > r.fetches) {
				r, open = cur, true
			}
		}
		if r == nil {
			continue
		}
		out = append(out, d.finding(env, n, r, open))
	}
	return out
}

func (d *liveness) finding(env *Env, n *lwNode, r *lwRun, open bool) Finding {
	hbOK, hbErr := n.heartbeats(r, open)
	dur := r.duration()
	span := text.Duration(dur)

	// The heartbeat target: the active controller, normally the leader.
	var hbServer netip.AddrPort
	var most int64
	for _, s := range n.hbServers.list {
		if s.requests > most {
			hbServer, most = s.addr, s.requests
		}
	}
	leader, epoch, leaderEP := r.leader, r.epoch, r.leaderEP
	leaderFrom := "named by the raft answers"
	if leader < 0 && env.Nodes != nil && hbServer.IsValid() {
		leader, leaderFrom = env.Nodes.Server(hbServer), "the node its heartbeats go to"
	}
	if leaderEP == "" && leader >= 0 && env.Nodes != nil {
		if eps := env.Nodes.EndpointsOf(leader); len(eps) > 0 {
			leaderEP = eps[0]
		}
	}
	if leaderEP == "" && leader >= 0 && hbServer.IsValid() && env.Nodes != nil && env.Nodes.Server(hbServer) == leader {
		leaderEP = hbServer.String()
	}
	// Raft fetches that went to the leader or to the heartbeat target.
	var toLeader, toHB int64
	for _, s := range r.servers.list {
		if s.addr == hbServer {
			toHB += s.requests
		}
		if leader >= 0 {
			if is, _ := nlIsNode(env, s.addr, leader, nlEndpoints(env, leader, leaderEP)); is {
				toLeader += s.requests
			}
		}
	}

	nodes := idSet{}
	nodes.add(n.id)
	nodes.add(leader)
	if env.Nodes != nil {
		for _, s := range n.hbServers.list {
			nodes.add(env.Nodes.Server(s.addr))
		}
		for _, s := range r.servers.list {
			nodes.add(env.Nodes.Server(s.addr))
		}
	}
	fields := map[string]any{
		"node_id":             n.id,
		"heartbeat_client_id": n.hbClientID,
		"raft_client_id":      n.raftClientID,
		"leader_id":           leader,
		"heartbeat_servers":   n.hbServers.strings(),
		"raft_servers":        r.servers.strings(),
		"duration_s":          text.Seconds(dur),
	}
	if leader >= 0 {
		fields["leader_epoch"] = epoch
		if leaderEP != "" {
			fields["leader_endpoint"] = leaderEP
		}
	}
	if r.hasOffset {
		fields["fetch_offset"] = r.offset
	}
	if n.metaOffset >= 0 {
		fields["current_metadata_offset"] = n.metaOffset
	}
	if n.hbAnswered {
		fields["is_caught_up"] = n.caughtUp
		fields["is_fenced"] = n.fenced
	}
	counts := map[string]int64{
		"heartbeats":              hbOK + hbErr,
		"heartbeat_errors":        hbErr,
		"raft_fetches":            r.fetches,
		"raft_fetch_errors":       r.errors,
		"raft_fetches_unanswered": r.unanswered,
		"raft_fetches_to_leader":  toLeader,
	}

	hbTo := "the controller"
	if hbServer.IsValid() {
		hbTo = nlServerLabel(env, hbServer)
	}
	if len(n.hbServers.list) > 1 {
		hbTo += fmt.Sprintf(" and %d other controller(s)", len(n.hbServers.list)-1)
	}
	hbFact := fmt.Sprintf("%d heartbeats to %s answered without error", hbOK, hbTo)
	if hbErr > 0 {
		hbFact = fmt.Sprintf("%d of %d heartbeats to %s answered without error", hbOK, hbOK+hbErr, hbTo)
	}
	nsrv := len(r.servers.list)
	dest := fmt.Sprintf("to %d controllers", nsrv)
	switch {
	case toHB == r.fetches && nsrv == 1:
		dest = "to the same controller"
	case toHB == 0 && toLeader == 0 && nsrv == 1:
		dest = "to 1 other controller"
	case toHB == 0 && toLeader == 0:
		dest = fmt.Sprintf("to %d other controllers", nsrv)
	}
	leaderText := ""
	if leader >= 0 {
		leaderText = fmt.Sprintf("leader %d", leader)
	}
	var raftFact string
	code, codeN := lwTopCode(r)
	switch {
	case r.errors == r.fetches && codeN == r.errors && leaderText != "" && r.leader >= 0:
		raftFact = fmt.Sprintf("%d raft fetches %s all answered %s naming %s", r.fetches, dest, decode.ErrorName(code), leaderText)
	case r.errors == r.fetches && codeN == r.errors:
		raftFact = fmt.Sprintf("%d raft fetches %s all answered %s", r.fetches, dest, decode.ErrorName(code))
	default:
		raftFact = fmt.Sprintf("%d raft fetches %s, none answered successfully (%s)", r.fetches, dest, lwCodes(r))
	}
	f := Finding{
		Severity: Error,
		First:    r.first,
		Last:     r.last,
		Conns:    nlMergeInts(n.hbConns.sorted(), r.conns.sorted()),
		Nodes:    nodes.sorted(),
		Counts:   counts,
		Fields:   fields,
	}
	f.Summary = fmt.Sprintf("broker %d is alive by heartbeat but its metadata replication is not: %d heartbeats answered ok by %s, while %s in %s",
		n.id, hbOK, hbTo, raftFact, span)

	var b strings.Builder
	fmt.Fprintf(&b, "broker %d is alive by heartbeat: %s", n.id, hbFact)
	if n.hbAnswered {
		fmt.Fprintf(&b, " (last answer: isCaughtUp %v, isFenced %v)", n.caughtUp, n.fenced)
	}
	fmt.Fprintf(&b, "; its metadata replication is not: %s", raftFact)
	if leader >= 0 && leaderEP != "" {
		fmt.Fprintf(&b, " (%s)", leaderEP)
	}
	fmt.Fprintf(&b, ", over %s. ", span)
	if leader >= 0 {
		if toLeader == 0 {
			fmt.Fprintf(&b, "Not one raft fetch went to leader %d (%s), though its heartbeats reach %s. ", leader, leaderFrom, hbTo)
		} else {
			fmt.Fprintf(&b, "%d raft fetches went to leader %d and failed there too. ", toLeader, leader)
		}
	}
	if n.metaOffset >= 0 {
		if n.metaChanged.IsZero() || n.metaChanged.Before(r.first) {
			fmt.Fprintf(&b, "Its heartbeats report currentMetadataOffset %d throughout", n.metaOffset)
		} else {
			fmt.Fprintf(&b, "Its heartbeats report currentMetadataOffset %d", n.metaOffset)
		}
		if r.hasOffset {
			fmt.Fprintf(&b, " and its raft fetches ask for offset %d every time", r.offset)
		}
		fmt.Fprintf(&b, ": the metadata it applies is frozen. ")
	}
	if n.hbAnswered && !n.fenced {
		fmt.Fprintf(&b, "The controller keeps it registered and unfenced, so nothing in the cluster's health view shows that this broker serves stale metadata (leaders, ISR, configs, ACLs).")
	} else {
		fmt.Fprintf(&b, "Heartbeats keep its registration alive, so the cluster's health view does not show that this broker's metadata (leaders, ISR, configs, ACLs) is stale.")
	}
	f.Explanation = b.String()
	ep := leaderEP
	if ep == "" {
		ep = "<controller>"
	}
	f.Next = fmt.Sprintf("kafka-metadata-quorum.sh --bootstrap-controller %s describe --replication (node %d's LogEndOffset and Lag) and "+
		"describe --status; on broker %d: kafka.server:type=broker-metadata-metrics last-applied-record-lag-ms (rising), "+
		"raft-metrics fetch-records-rate (0) and high-watermark (frozen), raft-channel-metrics request-total (rising: traffic is "+
		"not health). See the not-leader-loop finding for where its raft fetches go. Do not read heartbeats or an unfenced "+
		"broker as proof of metadata health.", ep, n.id, n.id)

	var ev []Evidence
	if n.hbFirst != nil {
		ev = append(ev, *n.hbFirst)
		if n.hbLast.Packet != n.hbFirst.Packet || n.hbLast.File != n.hbFirst.File {
			ev = append(ev, n.hbLast)
		}
	}
	ev = append(ev, r.ev.list()...)
	sort.SliceStable(ev, func(i, j int) bool {
		if ev[i].File != ev[j].File {
			return ev[i].File < ev[j].File
		}
		return ev[i].Packet < ev[j].Packet
	})
	f.Evidence = ev
	return f
}

func lwTopCode(r *lwRun) (int16, int64) { return r.codes.top() }

func lwCodes(r *lwRun) string {
	parts := r.codes.parts()
	if r.unanswered > 0 {
		parts = append(parts, fmt.Sprintf("no answer x%d", r.unanswered))
	}
	return strings.Join(parts, ", ")
}
