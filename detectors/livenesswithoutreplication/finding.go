package livenesswithoutreplication

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
	"github.com/kfsniff/kfsniff/detectors/internal/spell"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one broker alive by heartbeat while its metadata replication
// is not. Its exported fields are the finding's "fields".
type Finding struct {
	NodeID            int32    `json:"node_id"`
	HeartbeatClientID string   `json:"heartbeat_client_id"`
	RaftClientID      string   `json:"raft_client_id"`
	LeaderID          int32    `json:"leader_id"` // -1: not known
	HeartbeatServers  []string `json:"heartbeat_servers"`
	RaftServers       []string `json:"raft_servers"`
	// Duration is the span of the failed raft fetches; HeldS how long
	// they failed (to the success that ended the run, if one followed
	// promptly); Ongoing that they still failed when the capture ended.
	Duration float64 `json:"duration_s"`
	HeldS    float64 `json:"held_s"`
	Ongoing  bool    `json:"ongoing"`
	// The leader's epoch and endpoint, when a leader is known.
	LeaderEpoch    *int32 `json:"leader_epoch,omitempty"`
	LeaderEndpoint string `json:"leader_endpoint,omitempty"`
	// FetchOffset is what the raft fetches ask for.
	FetchOffset *int64 `json:"fetch_offset,omitempty"`
	// What the last heartbeat reported, and its answer.
	CurrentMetadataOffset *int64 `json:"current_metadata_offset,omitempty"`
	IsCaughtUp            *bool  `json:"is_caught_up,omitempty"`
	IsFenced              *bool  `json:"is_fenced,omitempty"`

	// The counts: heartbeats and those answered with an error; raft
	// fetches, those answered with an error, those unanswered, and those
	// sent to the leader.
	Heartbeats      int64 `count:"heartbeats"`
	HeartbeatErrors int64 `count:"heartbeat_errors"`
	RaftFetches     int64 `count:"raft_fetches"`
	RaftErrors      int64 `count:"raft_fetch_errors"`
	RaftUnanswered  int64 `count:"raft_fetches_unanswered"`
	RaftToLeader    int64 `count:"raft_fetches_to_leader"`

	HbTo                string // the controller the heartbeats go to
	Span                string
	Held                time.Duration
	Healed              bool
	Raft                string // what the raft fetches got
	LeaderFrom          string
	MetaThroughout      bool // the heartbeats' offset did not change during the run
	Fenced, Answered    bool
	CaughtUp, HasOffset bool
	Offset, MetaOffset  int64
	// during: the heartbeat facts are those answered while the run was open;
	// metaFrom: the first such heartbeat's offset when it moved (else -1)
	During   bool
	MetaFrom int64
	LeaderEP string
}

// finding makes the finding of node n's run e (open: still open at the
// end of the capture, when the heartbeats to the end count).
func finding(p *detectors.Pass, e *run, open bool) detectors.Finding {
	n := e.node
	hbOK, hbErr := n.beats.during(e, open, n.hbOK, n.hbErr)
	dur := e.duration()
	held, healed := e.held()

	// The heartbeat target: the active controller, normally the leader.
	var hbServer netip.AddrPort
	var most int64
	for _, s := range n.hbServers.List() {
		if s.Requests > most {
			hbServer, most = s.Addr, s.Requests
		}
	}
	leader, epoch, leaderEP := e.leader, e.epoch, e.leaderEP
	leaderFrom := "named by the raft answers"
	if leader < 0 && p.Nodes != nil && hbServer.IsValid() {
		leader, leaderFrom = p.Nodes.Server(hbServer), "the node its heartbeats go to"
	}
	if leaderEP == "" && leader >= 0 && p.Nodes != nil {
		if eps := p.Nodes.EndpointsOf(leader); len(eps) > 0 {
			leaderEP = eps[0]
		}
	}
	if leaderEP == "" && leader >= 0 && hbServer.IsValid() && p.Nodes != nil && p.Nodes.Server(hbServer) == leader {
		leaderEP = hbServer.String()
	}
	// Raft fetches that went to the leader or to the heartbeat target.
	var toLeader, toHB int64
	for _, s := range e.servers.List() {
		if s.Addr == hbServer {
			toHB += s.Requests
		}
		if leader >= 0 {
			if is, _ := peers.IsNode(p, s.Addr, leader, peers.Endpoints(p, leader, leaderEP)); is {
				toLeader += s.Requests
			}
		}
	}

	nodes := peers.NodeIDs(p, []*peers.Servers{&n.hbServers, &e.servers}, n.id, leader)
	f := &Finding{
		NodeID: n.id, HeartbeatClientID: n.hbClientID, RaftClientID: n.raftClientID, LeaderID: leader,
		HeartbeatServers: n.hbServers.Strings(), RaftServers: e.servers.Strings(), Duration: text.Seconds(dur),
		HeldS: text.Seconds(held), Ongoing: open, Held: held, Healed: healed,
		Heartbeats: hbOK + hbErr, HeartbeatErrors: hbErr, RaftFetches: e.fetches, RaftErrors: e.errors,
		RaftUnanswered: e.unanswered, RaftToLeader: toLeader,
		Span: text.Duration(dur), LeaderFrom: leaderFrom,
		MetaThroughout: n.metaChanged.IsZero() || n.metaChanged.Before(e.first), Fenced: n.fenced, Answered: n.hbAnswered,
		CaughtUp: n.caughtUp, HasOffset: e.hasOffset, Offset: e.offset, MetaOffset: n.metaOffset, LeaderEP: leaderEP,
		MetaFrom: -1,
	}
	hbFirst, hbLast := n.hbFirst, n.hbLast
	if e.beats > 0 {
		// What the heartbeats said while the raft fetches failed.
		hbFirst, hbLast = e.hbFirst, e.hbLast
		f.During = true
		f.MetaOffset, f.CaughtUp, f.Fenced = hbLast.metaOffset, hbLast.caughtUp, hbLast.fenced
		f.MetaThroughout = hbFirst.metaOffset == hbLast.metaOffset
		if !f.MetaThroughout {
			f.MetaFrom = hbFirst.metaOffset
		}
	}
	if leader >= 0 {
		f.LeaderEpoch, f.LeaderEndpoint = &epoch, leaderEP
	}
	if e.hasOffset {
		f.FetchOffset = new(e.offset)
	}
	if f.MetaOffset >= 0 {
		f.CurrentMetadataOffset = new(f.MetaOffset)
	}
	if n.hbAnswered {
		f.IsCaughtUp, f.IsFenced = new(f.CaughtUp), new(f.Fenced)
	}
	f.HbTo = "the controller"
	if hbServer.IsValid() {
		f.HbTo = p.Label(hbServer)
	}
	if n.hbServers.Len() > 1 {
		f.HbTo += fmt.Sprintf(" and %d other controller(s)", n.hbServers.Len()-1)
	}
	f.Raft = raftFact(e, leader, toHB, toLeader)

	var ev []detectors.Evidence
	if n.hbAnswered {
		ev = append(ev, hbFirst.Evidence())
		if hbLast.packet != hbFirst.packet || hbLast.file != hbFirst.file {
			ev = append(ev, hbLast.Evidence())
		}
	}
	ev = append(ev, e.ev.List()...)
	detectors.SortEvidence(ev)
	return detectors.Finding{
		Severity: detectors.Grade(held, open),
		First:    e.first,
		Last:     e.last,
		Conns:    peers.UnionIDs(n.hbConns.IDs(), e.conns.IDs()),
		Nodes:    nodes,
		Evidence: ev,
		// No error: the raft answers' errors are what not-leader-loop
		// explains.
		Subject: detectors.Subject{ClientIDs: []string{n.hbClientID, n.raftClientID}, Nodes: nodes},
		Detail:  f,
	}
}

// raftFact says where run e's raft fetches went and what they got.
func raftFact(e *run, leader int32, toHB, toLeader int64) string {
	nsrv := e.servers.Len()
	dest := fmt.Sprintf("to %d controllers", nsrv)
	switch {
	case toHB == e.fetches && nsrv == 1:
		dest = "to the same controller"
	case toHB == 0 && toLeader == 0 && nsrv == 1:
		dest = "to 1 other controller"
	case toHB == 0 && toLeader == 0:
		dest = fmt.Sprintf("to %d other controllers", nsrv)
	}
	code, codeN := e.codes.Top()
	switch {
	case e.errors == e.fetches && codeN == e.errors && leader >= 0 && e.leader >= 0:
		return fmt.Sprintf("%d raft fetches %s all answered %s naming leader %d", e.fetches, dest, decode.ErrorName(code), leader)
	case e.errors == e.fetches && codeN == e.errors:
		return fmt.Sprintf("%d raft fetches %s all answered %s", e.fetches, dest, decode.ErrorName(code))
	}
	parts := e.codes.Parts()
	if e.unanswered > 0 {
		parts = append(parts, fmt.Sprintf("no answer x%d", e.unanswered))
	}
	return fmt.Sprintf("%d raft fetches %s, none answered successfully (%s)", e.fetches, dest, strings.Join(parts, ", "))
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("broker %d is alive by heartbeat but its metadata replication is not: %s answered ok by %s, while %s in %s",
		f.NodeID, text.Plural(f.heartbeatsOK(), "heartbeat", "heartbeats"), f.HbTo, f.Raft, f.Span)
	return s + spell.Tail(f.Ongoing, f.Healed, f.Held, "failing", "a raft fetch succeeded again", "failed one")
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var b strings.Builder
	hb := fmt.Sprintf("%d heartbeats to %s answered without error", f.heartbeatsOK(), f.HbTo)
	if f.HeartbeatErrors > 0 {
		hb = fmt.Sprintf("%d of %d heartbeats to %s answered without error", f.heartbeatsOK(), f.Heartbeats, f.HbTo)
	}
	fmt.Fprintf(&b, "broker %d is alive by heartbeat: %s", f.NodeID, hb)
	if f.Answered {
		last := "last answer"
		if f.During {
			last = "last answer while the raft fetches failed"
		}
		fmt.Fprintf(&b, " (%s: isCaughtUp %v, isFenced %v)", last, f.CaughtUp, f.Fenced)
	}
	fmt.Fprintf(&b, "; its metadata replication is not: %s", f.Raft)
	if f.LeaderID >= 0 && f.LeaderEP != "" {
		fmt.Fprintf(&b, " (%s)", f.LeaderEP)
	}
	fmt.Fprintf(&b, ", over %s. ", f.Span)
	if f.LeaderID >= 0 {
		if f.RaftToLeader == 0 {
			fmt.Fprintf(&b, "Not one raft fetch went to leader %d (%s), though its heartbeats reach %s. ", f.LeaderID, f.LeaderFrom, f.HbTo)
		} else {
			fmt.Fprintf(&b, "%d raft fetches went to leader %d and failed there too. ", f.RaftToLeader, f.LeaderID)
		}
	}
	if f.MetaOffset >= 0 {
		meanwhile := ""
		if f.During {
			meanwhile = " meanwhile"
		}
		if f.MetaFrom >= 0 {
			fmt.Fprintf(&b, "Its heartbeats%s report currentMetadataOffset from %d to %d", meanwhile, f.MetaFrom, f.MetaOffset)
		} else {
			fmt.Fprintf(&b, "Its heartbeats%s report currentMetadataOffset %d", meanwhile, f.MetaOffset)
			if f.MetaThroughout {
				fmt.Fprintf(&b, " throughout")
			}
		}
		if f.HasOffset {
			fmt.Fprintf(&b, " and its raft fetches ask for offset %d every time", f.Offset)
		}
		if f.MetaFrom >= 0 {
			fmt.Fprintf(&b, ". ")
		} else {
			fmt.Fprintf(&b, ": the metadata it applies is frozen. ")
		}
	}
	if f.Answered && !f.Fenced {
		fmt.Fprintf(&b, "The controller keeps it registered and unfenced, so nothing in the cluster's health view shows that this broker serves stale metadata (leaders, ISR, configs, ACLs).")
	} else {
		fmt.Fprintf(&b, "Heartbeats keep its registration alive, so the cluster's health view does not show that this broker's metadata (leaders, ISR, configs, ACLs) is stale.")
	}
	switch {
	case f.Ongoing:
		fmt.Fprintf(&b, " Its raft fetches were still failing when the capture ended, %s after the first failed.", text.Duration(f.Held))
	case f.Healed:
		fmt.Fprintf(&b, " A raft fetch succeeded again %s after the first failed: that long its metadata was frozen.", text.Duration(f.Held))
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return fmt.Sprintf("kafka-metadata-quorum.sh --bootstrap-controller %s describe --replication (node %d's LogEndOffset and Lag) and "+
		"describe --status; on broker %d: kafka.server:type=broker-metadata-metrics last-applied-record-lag-ms (rising), "+
		"raft-metrics fetch-records-rate (0) and high-watermark (frozen), raft-channel-metrics request-total (rising: traffic is "+
		"not health). See the not-leader-loop finding for where its raft fetches go. Do not read heartbeats or an unfenced "+
		"broker as proof of metadata health.", text.Or(f.LeaderEP, "<controller>"), f.NodeID, f.NodeID)
}

// heartbeatsOK is the heartbeats answered without an error.
func (f *Finding) heartbeatsOK() int64 { return f.Heartbeats - f.HeartbeatErrors }
