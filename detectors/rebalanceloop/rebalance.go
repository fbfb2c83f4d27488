// Package rebalanceloop reports consumer groups that keep rebalancing without
// settling: with the classic protocol, JoinGroup, SyncGroup, Heartbeat and
// OffsetCommit answered REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or
// UNKNOWN_MEMBER_ID again and again while generation after generation
// goes by (KAFKA-8653, kafkajs 375); with the consumer protocol (KIP-848),
// ConsumerGroupHeartbeat answered FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID
// in a loop.
//
// Per group, the rule follows episodes of instability: an episode begins
// with a disturbance (a member joining or leaving, a rebalance error) and
// the group is settled again when a member gets its assignment or a
// heartbeat succeeds; disturbances less than `hold` after the group settled
// belong to the same episode. In an episode it counts rebalances
// (generations completed; fences under KIP-848), the members that joined
// and left, and how long the group was unsettled. Rebalances that members
// joining or leaving explain are normal: a loop is one with
// min-rebalances rebalances more than that, or min-errors rebalance
// errors. A loop is graded by how long no assignment held, from the
// episode's first disturbance to its last rebalance (the severity policy:
// warning from 3 s, error from 30 s or when still unsettled at the end of
// the capture after 10 s); an episode that is not a loop is info at most.
// A member leaving explains a rebalance but does not unsettle the group by
// itself (consumers closing at the end of a capture are not a loop). The MEMBER_ID_REQUIRED of a first JoinGroup (KIP-394) is
// not an error.
package rebalanceloop

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "rebalance-loop",
	Recorded: []string{"fixtures/pcaps/clients/rebalance-kgo-classic.pcap", "fixtures/pcaps/clients/rebalance-kgo-consumer.pcap"},
	Severity: detectors.Error,
	Doc: "Consumer groups rebalancing in a loop: classic JoinGroup/SyncGroup/Heartbeat answered " +
		"REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID generation after generation, or " +
		"KIP-848 ConsumerGroupHeartbeat fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) again and again. Per " +
		"group and episode (disturbances less than hold after the group settled are one episode): " +
		"generations, members joining, leaving and fenced, and how long no assignment held. A loop " +
		"(min-rebalances rebalances more than members joining and leaving explain, or min-errors rebalance " +
		"errors more than they explain: each join or leave, every member that joined answered once) is a warning when no assignment held for 3 s or more, an error from 30 s or when still " +
		"unsettled at the end after 10 s, info below; rebalances that joins and leaves explain are info; the " +
		"MEMBER_ID_REQUIRED of a first JoinGroup gives nothing.",
}, Params{MinRebalances: 2, MinErrors: 20, Hold: 10 * time.Second}, New)

// Params are the rule's thresholds.
type Params struct {
	MinRebalances int           `param:"min-rebalances" doc:"rebalances in one episode beyond those that members joining and leaving explain that make a loop"`
	MinErrors     int           `param:"min-errors" doc:"rebalance errors (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_*) in one episode, beyond those members joining and leaving explain (joins and leaves × members that joined), that make a loop"`
	Hold          time.Duration `param:"hold" doc:"how long a group must stay settled for its next disturbance to begin a new episode"`
}

// Bounds of what the rule keeps.
const (
	maxGroups  = 1024
	maxMembers = 4096 // member ids remembered per group
	maxNamed   = 8    // member ids named in a finding
)

// New makes the rule.
func New(p Params) detectors.Rule {
	p.MinRebalances = max(p.MinRebalances, 1)
	p.MinErrors = max(p.MinErrors, 1)
	return &rule{p: p, groups: map[string]*group{}}
}

type rule struct {
	p       Params
	groups  map[string]*group
	dropped int64
}

type group struct {
	id       string
	classic  bool
	consumer bool // KIP-848
	members  map[string]bool
	// live are the members heard from (joined, synced, beating) that
	// have not left: when the last of them leaves, the group is empty,
	// which is settled (nothing left to assign), not unsettled.
	live     map[string]bool
	lastGen  int32
	fenced   map[cluster.Client]bool // sources fenced in the current episode
	cur      episode
	best     episode
	episodes int // reportable episodes
}

// evid is evidence formatted only if reported.
type evid struct {
	file   int
	packet uint64
	conn   int
	key    int16
	code   int16
	gen    int32
	resp   bool
}

func (e evid) Evidence() detectors.Evidence {
	what := kmsg.NameForKey(e.key)
	if e.resp {
		what += " response"
	} else {
		what += " request"
	}
	switch {
	case e.code != 0:
		what += " " + detectors.ErrorName(e.code)
	case e.key == int16(kmsg.JoinGroup) && e.resp:
		what += " generation " + strconv.Itoa(int(e.gen))
	}
	return detectors.Evidence{File: e.file, Packet: e.packet, Conn: e.conn, What: what}
}

// rebalanceError reports whether code tells a member that the group is
// rebalancing or that its generation or identity is stale.
func rebalanceError(code int16) bool {
	switch code {
	case cluster.IllegalGeneration, cluster.UnknownMemberID, cluster.RebalanceInProgress, cluster.FencedInstanceID, cluster.FencedMemberEpoch, cluster.StaleMemberEpoch:
		return true
	}
	return false
}

// fencing reports whether code tells a member it is no longer one.
func fencing(code int16) bool {
	switch code {
	case cluster.IllegalGeneration, cluster.UnknownMemberID, cluster.FencedInstanceID, cluster.FencedMemberEpoch:
		return true
	}
	return false
}

func (r *rule) group(id string) *group {
	g := r.groups[id]
	if g == nil {
		if len(r.groups) >= maxGroups {
			r.dropped++
			return nil
		}
		g = &group{id: id, members: map[string]bool{}, live: map[string]bool{}, fenced: map[cluster.Client]bool{}}
		r.groups[id] = g
	}
	return g
}

// Request implements detectors.RequestHook: a JoinGroup disturbs the group
// when it is sent, not when its answer comes (a JoinGroup waits, sometimes
// seconds, for the other members to join too). The first JoinGroup of a
// new member, without a member id, is answered MEMBER_ID_REQUIRED from v4
// on (KIP-394): the join that follows with the id is the one that counts.
func (r *rule) Request(_ *detectors.Pass, m *flows.Message) {
	req, ok := m.Req.(*kmsg.JoinGroupRequest)
	if !ok || req.MemberID == "" && req.Version >= 4 {
		return
	}
	if g := r.group(req.Group); g != nil {
		g.classic = true
		r.disturb(g, m.Time, m.Conn, evid{}, false)
		g.cur.joinReqs++
	}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.Req.Req == nil {
		return
	}
	id := x.Req.Group // a group API naming no group is Kafka's INVALID_GROUP_ID, no rebalance
	if id == "" {
		return
	}
	g := r.group(id)
	if g == nil {
		return
	}
	var code int16
	if x.Resp != nil && x.Resp.Resp != nil {
		code = topCode(x.Resp.Resp)
	}
	t := x.Req.Time
	if x.Resp != nil {
		t = x.Resp.Time
	}
	src := x.Req.Client
	switch req := x.Req.Req.(type) {
	case *kmsg.JoinGroupRequest:
		g.classic = true
		if code == cluster.MemberIDRequired { // the first half of a first join (KIP-394)
			return
		}
		if x.Resp == nil || x.Resp.Resp == nil {
			return
		}
		// Checked: a correlator's rebuilt responses may be of no API's
		// body type (correlate's throttle-only response).
		resp, ok := x.Resp.Resp.(*kmsg.JoinGroupResponse)
		if !ok {
			return
		}
		if code != 0 {
			r.fail(g, t, x, code, src)
			return
		}
		if resp.Generation != g.lastGen || g.cur.rebalances == 0 {
			if g.cur.rebalances == 0 {
				g.cur.genFirst = resp.Generation
			}
			g.cur.genLast = resp.Generation
			g.cur.rebalances++
			g.lastGen = resp.Generation
			g.cur.ev.Add(evidOf(x.Resp, 0, resp.Generation))
		}
		g.alive(resp.MemberID)
		if !g.members[resp.MemberID] && resp.MemberID != "" {
			if len(g.members) < maxMembers {
				g.members[resp.MemberID] = true
			}
			if !g.fenced[src] {
				g.cur.joined++ // a new member, not one coming back after being fenced
			}
			if len(g.cur.named) < maxNamed {
				g.cur.named = append(g.cur.named, resp.MemberID)
			}
		}
	case *kmsg.SyncGroupRequest, *kmsg.HeartbeatRequest:
		g.classic = true
		if code == 0 && x.Resp != nil {
			if sg, ok := req.(*kmsg.SyncGroupRequest); ok {
				g.alive(sg.MemberID)
			} else {
				g.alive(req.(*kmsg.HeartbeatRequest).MemberID)
			}
			r.settle(g, t)
		} else if code != 0 {
			r.fail(g, t, x, code, src)
		}
	case *kmsg.OffsetCommitRequest:
		if x.Resp != nil && x.Resp.Resp != nil {
			for _, c := range x.Resp.ErrorCodes {
				if rebalanceError(c.Code) {
					r.fail(g, t, x, c.Code, src)
					break
				}
			}
		}
	case *kmsg.LeaveGroupRequest:
		g.classic = true
		r.leave(g, x.Req.Time, x.Conn, evidOf(x.Req, 0, 0))
		n := len(req.Members)
		if req.Version < 3 {
			n = 1
			r.gone(g, x.Req.Time, req.MemberID)
		}
		for _, m := range req.Members {
			r.gone(g, x.Req.Time, m.MemberID)
		}
		g.cur.left += n
	case *kmsg.ConsumerGroupHeartbeatRequest:
		g.consumer = true
		switch {
		case req.MemberEpoch == -1 || req.MemberEpoch == -2: // leaving
			r.leave(g, x.Req.Time, x.Conn, evidOf(x.Req, 0, 0))
			g.cur.left++
			r.gone(g, x.Req.Time, req.MemberID)
			return
		case req.MemberEpoch == 0 && code == 0 && x.Resp != nil:
			resp, ok := x.Resp.Resp.(*kmsg.ConsumerGroupHeartbeatResponse)
			if ok && resp.MemberID != nil && !g.members[*resp.MemberID] {
				if len(g.members) < maxMembers {
					g.members[*resp.MemberID] = true
				}
				if g.cur.active && !g.fenced[src] {
					g.cur.joined++
				}
				if g.cur.active && len(g.cur.named) < maxNamed {
					g.cur.named = append(g.cur.named, *resp.MemberID)
				}
			}
		}
		switch {
		case code == 0 && x.Resp != nil:
			if resp, ok := x.Resp.Resp.(*kmsg.ConsumerGroupHeartbeatResponse); ok && resp.MemberID != nil {
				g.alive(*resp.MemberID)
			} else {
				g.alive(req.MemberID)
			}
			r.settle(g, t)
		case code != 0:
			if fencing(code) {
				r.disturb(g, t, x.Conn, evid{}, false)
				g.cur.fences++
				g.cur.rebalances++
			}
			r.fail(g, t, x, code, src)
		}
	}
}

// alive notes a member heard from.
func (g *group) alive(id string) {
	if id != "" && len(g.live) < maxMembers {
		g.live[id] = true
	}
}

// gone is a member leaving at t: when it was the last one heard from, the
// group is empty and so settled: members that all left do not leave it
// "still unsettled at the end" (issue 30, a consumer group whose members
// all closed).
func (r *rule) gone(g *group, t time.Time, id string) {
	if !g.live[id] {
		return
	}
	delete(g.live, id)
	if len(g.live) == 0 {
		r.settle(g, t)
	}
}

func evidOf(m *flows.Message, code int16, gen int32) evid {
	return evid{file: m.File, packet: m.Packet, conn: m.Conn.ID, key: m.Key, code: code, gen: gen, resp: m.Response}
}

// topCode is the error code of a group response.
func topCode(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode
	case *kmsg.SyncGroupResponse:
		return r.ErrorCode
	case *kmsg.HeartbeatResponse:
		return r.ErrorCode
	case *kmsg.LeaveGroupResponse:
		return r.ErrorCode
	case *kmsg.ConsumerGroupHeartbeatResponse:
		return r.ErrorCode
	}
	return 0
}

// Findings implements detectors.Rule: one per group, for its worst
// episode.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	var out []detectors.Finding
	for _, id := range slices.Sorted(maps.Keys(r.groups)) {
		g := r.groups[id]
		best, episodes := g.best, g.episodes
		ongoing := false
		if cur := g.cur; cur.active {
			if !cur.unsettledSince.IsZero() && p.End.After(cur.unsettledSince) {
				// Still unsettled at the end: count the time up to it.
				d := p.End.Sub(cur.unsettledSince)
				cur.unsettled += d
				cur.longest = max(cur.longest, d)
				cur.last = p.End
			}
			if r.reportable(&cur) {
				episodes++
				if worse(r, &cur, &best) {
					best = cur
					ongoing = !g.cur.unsettledSince.IsZero()
				}
			}
		}
		if !best.active {
			continue
		}
		out = append(out, r.finding(p, g, &best, episodes, ongoing))
	}
	return out
}

func (r *rule) finding(p *detectors.Pass, g *group, e *episode, episodes int, ongoing bool) detectors.Finding {
	loop := r.loop(e)
	sev := detectors.Info
	if loop {
		sev = detectors.Grade(e.last.Sub(e.start), ongoing)
	}
	protocol := "classic"
	switch {
	case g.consumer && g.classic:
		protocol = "classic and consumer"
	case g.consumer:
		protocol = "consumer"
	}
	code, _ := e.codes.Top()
	f := &Finding{
		Group: g.id, Protocol: protocol, Rebalances: e.rebalances, Unexplained: unexplained(e),
		GenerationFirst: e.genFirst, GenerationLast: e.genLast,
		Joined: e.joined, Left: e.left, Fenced: e.fences, Members: append([]string(nil), e.named...),
		Errors: e.codes.Parts(), UnsettledS: text.Seconds(e.unsettled), LongestUnsettledS: text.Seconds(e.longest),
		EpisodeS: text.Seconds(e.last.Sub(e.start)), Ongoing: ongoing, Loop: loop, Clients: e.conns.Clients(), Servers: e.conns.ServerLabels(p.Nodes),
		Episodes: episodes, Unsettled: e.unsettled, Longest: e.longest, Start: e.start, Last: e.last, Params: r.p, Dropped: r.dropped,
		RebalanceErrors: e.errors, JoinRequests: int64(e.joinReqs),
	}
	return detectors.Finding{
		Severity: sev,
		First:    e.start,
		Last:     e.last,
		Conns:    e.conns.IDs(),
		Nodes:    e.conns.Nodes(p.Nodes),
		Evidence: e.ev.List(),
		Subject:  detectors.Subject{Clients: e.conns.ClientAddrs(), Servers: e.conns.ServerAddrs(), Error: code, Rebalances: true},
		Detail:   f,
	}
}
