// Package memberevicted reports a consumer group member evicted for
// missing its session timeout: its group requests (Heartbeat, SyncGroup,
// OffsetCommit, JoinGroup) stopped for longer than the session timeout its
// JoinGroup asked for, the coordinator dropped it and rebalanced the group
// without it, and when it came back its first request was answered
// UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION (or it never came back before
// the capture ended). A stopped process (a long GC pause, a hung host, a
// poll loop that blocks the heartbeat thread) looks like this; a rebalance
// loop does not, and rebalance-loop's finding on the same group drops to
// info when the eviction accounts for its rebalances (Subject.Rebalances).
//
// One finding per evicted member: the group, member id, client id and
// host, how long it was silent against which session timeout, what it
// was told when it came back. Graded by how long it was silent
// (detectors.Grade, at least a warning: its partitions went unread that
// long).
package memberevicted

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "member-evicted",
	Severity: detectors.Error,
	Recorded: []string{"fixtures/pcaps/clients/evicted-kgo.pcap", "fixtures/pcaps/clients/evicted-sarama.pcap", "fixtures/pcaps/kafka/java-member-evicted.pcap.gz"},
	Doc: "A consumer group member evicted for missing its session timeout: its group requests stopped for longer " +
		"than the session timeout its JoinGroup asked for, and when it came back it was answered UNKNOWN_MEMBER_ID " +
		"or ILLEGAL_GENERATION (or it never came back while the group went on rebalancing). Per member: the group, " +
		"member id, client id and host, how long it was silent against which timeout. A warning (its partitions " +
		"went unread) from 3 s of silence, an error from 30 s or silent at the end after 10 s. Told apart from a " +
		"loop: rebalance-loop's finding on the group drops to info when the evictions account for its rebalances.",
}, Params{Unknown: 6 * time.Second}, New)

// Params are the rule's thresholds: the session timeout is the client's
// own, when its JoinGroup was captured.
type Params struct {
	Unknown time.Duration `param:"unknown-timeout" unit:"ms" doc:"silence of a member whose JoinGroup (its session timeout) came before the capture that, answered UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION, counts as an eviction while another member of the group was heard from (Kafka's minimum session timeout, group.min.session.timeout.ms, is 6 s by default; the consumer's default 45 s)"`
}

// The bounds.
const (
	maxGroups  = 1024
	maxMembers = 256 // per group
)

// New makes the rule.
func New(p Params) detectors.Rule { return &rule{p: p, groups: map[string]*group{}} }

type rule struct {
	p       Params
	groups  map[string]*group
	dropped int64
}

type group struct {
	name        string
	members     map[string]*member
	generations int64 // distinct generations JoinGroup answers gave
	generation  int32
	joiners     map[cluster.Client]bool
	evictions   []*member
	conns       tally.Conns
}

type member struct {
	id       string
	client   cluster.Client
	timeout  time.Duration
	lastSeen time.Time
	lastEv   detectors.Evidence // What set at the finding: lastAPI
	lastAPI  string
	left     bool
	// sinceStart: not heard from in the capture before its eviction
	// was answered; silent at least since the capture began.
	sinceStart bool
	// set at the eviction
	evicted     bool
	back        bool
	silentUntil time.Time
	answer      string
	backEv      detectors.Evidence
	server      netip.AddrPort
}

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.JoinGroup, kmsg.Heartbeat, kmsg.SyncGroup, kmsg.OffsetCommit, kmsg.LeaveGroup}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(p *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.Resp == nil || x.Resp.Resp == nil {
		return
	}
	var grp, id string
	var code int16
	switch req := x.Req.Req.(type) {
	case *kmsg.JoinGroupRequest:
		resp, _ := x.Resp.Resp.(*kmsg.JoinGroupResponse)
		if resp == nil {
			return
		}
		r.joined(x, req, resp)
		return
	case *kmsg.HeartbeatRequest:
		grp, id = req.Group, req.MemberID
		if resp, ok := x.Resp.Resp.(*kmsg.HeartbeatResponse); ok {
			code = resp.ErrorCode
		}
	case *kmsg.SyncGroupRequest:
		grp, id = req.Group, req.MemberID
		if resp, ok := x.Resp.Resp.(*kmsg.SyncGroupResponse); ok {
			code = resp.ErrorCode
		}
	case *kmsg.OffsetCommitRequest:
		grp, id = req.Group, req.MemberID
		if resp, ok := x.Resp.Resp.(*kmsg.OffsetCommitResponse); ok && len(resp.Topics) > 0 && len(resp.Topics[0].Partitions) > 0 {
			code = resp.Topics[0].Partitions[0].ErrorCode
		}
	case *kmsg.LeaveGroupRequest:
		if g := r.groups[req.Group]; g != nil {
			if m := g.members[req.MemberID]; m != nil {
				m.left = true
			}
			for _, lm := range req.Members {
				if m := g.members[lm.MemberID]; m != nil {
					m.left = true
				}
			}
		}
		return
	default:
		return
	}
	g := r.group(grp)
	if g == nil {
		return
	}
	if id == "" {
		// librdkafka, having timed the session out itself, clears its
		// member id and sends its next Heartbeat and OffsetCommit with
		// none (recorded: fixtures/pcaps/clients/evicted-librdkafka): the
		// member is the one this client was.
		if code != cluster.UnknownMemberID && code != cluster.IllegalGeneration {
			return
		}
		if m := g.byClient(x.Req.Client); m != nil {
			r.seen(g, m, x, code)
			return
		}
		if g.hasClient(x.Req.Client) {
			return // two members of this client, or one already evicted
		}
		// Not heard from before in the capture: taken up as a member
		// whose JoinGroup came before it (below), with no id, keyed by
		// its client.
	}
	key := id
	if id == "" {
		key = "\x00" + x.Req.Client.ID + "\x00" + x.Req.Client.Host.String()
	}
	m := g.members[key]
	if m == nil {
		// A member whose JoinGroup came before the capture: its session
		// timeout is not known.
		if len(g.members) >= maxMembers {
			return
		}
		m = &member{id: id, client: x.Req.Client, lastSeen: x.Req.Time,
			lastEv: detectors.EvidenceAt(x.Req, ""), lastAPI: x.Req.Name(), server: x.Conn.Server}
		g.members[key] = m
		g.conns.Add(x.Conn)
		if (code == cluster.UnknownMemberID || code == cluster.IllegalGeneration) && !p.Start.IsZero() && x.Req.Time.Sub(p.Start) >= r.p.Unknown &&
			g.othersSince(m, p.Start) {
			// Its first request in the capture, answered as to a member
			// the coordinator dropped: silent since before the capture
			// began, at least that long.
			m.lastSeen, m.sinceStart = p.Start, true
			r.seen(g, m, x, code)
		}
		return
	}
	r.seen(g, m, x, code)
}

func (r *rule) group(name string) *group {
	return tally.Entry(r.groups, name, maxGroups, &r.dropped, func() *group {
		return &group{name: name, members: map[string]*member{}, joiners: map[cluster.Client]bool{}}
	})
}

// seen is a member's group request: an eviction when it comes after a
// silence longer than the session timeout and is answered as to a member
// the coordinator no longer knows.
func (r *rule) seen(g *group, m *member, x *detectors.Exchange, code int16) {
	t := x.Req.Time
	limit := m.timeout
	if limit == 0 {
		limit = r.p.Unknown
	}
	if !m.evicted && limit > 0 && t.Sub(m.lastSeen) >= limit && (code == cluster.UnknownMemberID || code == cluster.IllegalGeneration) &&
		(m.timeout > 0 || g.othersSince(m, m.lastSeen)) {
		m.evicted, m.back, m.silentUntil = true, true, t
		m.answer = detectors.ErrorName(code)
		m.backEv = detectors.EvidenceAt(x.Resp, x.Req.Name()+" answer: "+m.answer+" to member "+m.id+" after "+
			strconv.FormatFloat(t.Sub(m.lastSeen).Seconds(), 'f', 1, 64)+" s of silence")
		m.server = x.Conn.Server
		g.evictions = append(g.evictions, m)
		g.conns.Add(x.Conn)
		return
	}
	if !m.evicted {
		m.lastSeen = t
		m.lastEv, m.lastAPI = detectors.EvidenceAt(x.Req, ""), x.Req.Name() // no allocation per heartbeat
		m.server = x.Conn.Server
	}
}

func (r *rule) joined(x *detectors.Exchange, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse) {
	g := r.group(req.Group)
	if g == nil {
		return
	}
	c := x.Req.Client
	if len(g.joiners) < maxMembers {
		g.joiners[c] = true
	}
	if resp.ErrorCode == 0 && resp.Generation != g.generation {
		g.generation = resp.Generation
		g.generations++
	}
	if old := g.members[req.MemberID]; old != nil && req.MemberID != "" {
		r.seen(g, old, x, resp.ErrorCode)
	}
	id := resp.MemberID
	if resp.ErrorCode != 0 && resp.ErrorCode != cluster.MemberIDRequired || id == "" {
		return
	}
	m := g.members[id]
	if m == nil {
		if len(g.members) >= maxMembers {
			return
		}
		m = &member{id: id, client: c}
		g.members[id] = m
	}
	m.timeout = time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if !m.evicted {
		m.lastSeen = x.Req.Time
		m.lastEv, m.lastAPI = detectors.EvidenceAt(x.Req, ""), "JoinGroup"
		m.server = x.Conn.Server
	}
	g.conns.Add(x.Conn)
}

// Findings implements detectors.Rule: one per evicted member.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	var out []detectors.Finding
	for _, n := range slices.Sorted(maps.Keys(r.groups)) {
		g := r.groups[n]
		ev := append([]*member(nil), g.evictions...)
		// Silent at the end: never back, while the group went on.
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			m := g.members[id]
			if !m.evicted && !m.left && m.timeout > 0 && p.End.Sub(m.lastSeen) >= m.timeout && g.generations > 1 && othersAfter(g, m) {
				// A copy: Findings is also a live snapshot and must
				// leave the rule as it found it.
				c := *m
				c.evicted, c.silentUntil = true, p.End
				ev = append(ev, &c)
			}
		}
		for _, m := range ev {
			out = append(out, r.finding(p, g, m, len(ev)))
		}
	}
	return out
}

// othersSince reports whether another member of g was heard from after t:
// the group lived on while m was silent. A member whose session timeout is
// not known is taken as evicted only then: a coordinator that lost every
// member (restarted, moved) answers them all UNKNOWN_MEMBER_ID at once.
func (g *group) othersSince(m *member, t time.Time) bool {
	for _, o := range g.members {
		if o != m && !o.left && !o.evicted && o.lastSeen.After(t) {
			return true
		}
	}
	return false
}

// hasClient reports whether client c was any member of g.
func (g *group) hasClient(c cluster.Client) bool {
	for _, m := range g.members {
		if m.client == c {
			return true
		}
	}
	return false
}

// byClient is the one member of g that client c is, nil when it is none
// or more than one.
func (g *group) byClient(c cluster.Client) *member {
	var found *member
	for _, m := range g.members {
		if m.client == c && !m.left && !m.evicted {
			if found != nil {
				return nil
			}
			found = m
		}
	}
	return found
}

// othersAfter reports whether another member of g was heard from after
// m's session timeout ran out: the group went on without it.
func othersAfter(g *group, m *member) bool {
	for _, o := range g.members {
		if o != m && !o.left && o.lastSeen.After(m.lastSeen.Add(m.timeout)) {
			return true
		}
	}
	return false
}

func (r *rule) finding(p *detectors.Pass, g *group, m *member, evictions int) detectors.Finding {
	silent := m.silentUntil.Sub(m.lastSeen)
	f := &Finding{Group: g.name, Member: m.id, ClientID: m.client.ID, Host: m.client.Host.String(),
		SilentS: silent.Seconds(), SessionTimeoutMs: m.timeout.Milliseconds(), Back: m.back, Answer: m.answer,
		Generations: g.generations, Last: m.lastSeen, Until: m.silentUntil, Coordinator: p.Label(m.server)}
	sev := max(detectors.Warning, detectors.Grade(silent, !m.back))
	last := m.lastEv
	last.What = "last " + m.lastAPI + " request of member " + m.id + " before its silence"
	evs := []detectors.Evidence{last}
	if m.sinceStart {
		evs = evs[:0]
		f.SinceStart = true
	}
	if m.back {
		evs = append(evs, m.backEv)
	}
	// The evictions account for the group's rebalances when there are no
	// more generations than each eviction and return (two), and each
	// member's first join and last leave (two) make.
	explains := g.generations <= int64(2*evictions+2*len(g.joiners))
	f.ExplainsRebalances, f.SilentMs = explains, silent.Milliseconds()
	return detectors.Finding{
		Severity: sev,
		First:    m.lastSeen,
		Last:     m.silentUntil,
		Conns:    g.conns.IDs(),
		Nodes:    g.conns.Nodes(p.Nodes),
		Evidence: evs,
		Subject: detectors.Subject{ClientIDs: []string{m.client.ID}, Clients: g.conns.ClientAddrs(), Servers: g.conns.ServerAddrs(),
			Rebalances: explains},
		Detail: f,
	}
}
