package legacy

import (
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// error-storm: one client keeps getting the same error from one API, at a
// rate no healthy client sustains. Healthy clients do get errors: a KIP-394
// JoinGroup is answered MEMBER_ID_REQUIRED once, heartbeats get
// REBALANCE_IN_PROGRESS while a group rebalances (one every heartbeat
// interval, seconds apart), an admin tool gets TOPIC_ALREADY_EXISTS once.
// What they do not do is get the same error over and over, several times a
// second, for many seconds: that is a retry loop the client does not get
// out of (a NOT_LEADER_OR_FOLLOWER loop, a metadata refresh loop on
// LEADER_NOT_AVAILABLE, an authorization failure retried forever).
//
// The rate is measured per client (address and client id) so that many
// healthy clients each getting an occasional error (a large group
// rebalancing) do not add up to a storm. A client storms when some window
// of window-s seconds holds at least min-rate × window-s of its responses
// carrying the error; from then on every response carrying it while that
// holds is counted. The API and error are reported once min-responses
// such responses have been counted.

func errorStormSpec() Spec {
	return Spec{
		ID:       "error-storm",
		Severity: Warning,
		Generic:  true,
		Summary: "The same error from one API keeps coming back to a client at a sustained rate " +
			"(one client gets at least min-rate × window-s responses carrying it within window-s seconds, " +
			"and min-responses are counted in all), the mark of a retry loop; the occasional error of a " +
			"healthy client (MEMBER_ID_REQUIRED on a first JoinGroup, REBALANCE_IN_PROGRESS during a " +
			"rebalance, TOPIC_ALREADY_EXISTS) is far below it.",
		Params: []Param{
			{Name: "min-responses", Default: 20, Meaning: "responses carrying the error, counted while clients storm, before it is reported"},
			{Name: "min-rate", Default: 1, Meaning: "responses per second carrying the error that one client (address and client id) must get over a whole window: min-rate × window-s of them within window-s seconds"},
			{Name: "window-s", Default: 10, Meaning: "length in seconds of the window over which the rate must hold"},
		},
		New: func(p Params) Detector { return newErrorStorm(p) },
	}
}

const (
	// stormMaxClients bounds the clients whose rate is tracked; errors
	// of further clients are counted but cannot start a storm.
	stormMaxClients = 4096
	// stormMaxWindow bounds the responses a client's window holds.
	stormMaxWindow = 1 << 14
)

type errorStorm struct {
	minResponses int64
	window       time.Duration
	k            int // responses a window must hold
	groups       map[[2]int16]*stormGroup
	apiResponses apiCounts
	clients      int
}

func newErrorStorm(p Params) *errorStorm {
	window := p.Seconds("window-s")
	k := int(math.Ceil(p.Float("min-rate") * window.Seconds()))
	k = min(max(k, 1), stormMaxWindow)
	return &errorStorm{
		minResponses: int64(max(p.Int("min-responses"), 1)),
		window:       window,
		k:            k,
		groups:       make(map[[2]int16]*stormGroup),
	}
}

// stormGroup is one API and error code.
type stormGroup struct {
	api, code   int16
	responses   int64 // responses carrying the code, from every client
	occurrences int64 // times the code appears in them
	first, last time.Time
	clients     map[stormClientKey]*stormClient
	what        string // what the evidence shows

	// While clients storm.
	stormed               int64
	stormFirst, stormLast time.Time
	stormClients          int
	conns                 opsConns
	clientIDs             map[string]bool
	ev                    sampler[Evidence]
}

type stormClientKey struct {
	addr netip.Addr
	id   string
}

// stormClient holds the times of a client's last k responses carrying the
// error, in a ring.
type stormClient struct {
	ring    []stormHit
	next    int
	seq     int64 // responses seen
	counted int64 // seq of the last response counted into the storm
	stormed bool
}

type stormHit struct {
	t    time.Time
	ev   Evidence
	conn *flows.Conn
}

// OnExchange implements flows.ExchangeHandler.
func (d *errorStorm) OnExchange(x *flows.Exchange) {
	if x.Req == nil || x.Resp == nil {
		return
	}
	d.apiResponses.add(x.Req.Key)
	for _, ec := range x.Resp.ErrorCodes {
		d.hit(x, ec)
	}
}

func (d *errorStorm) hit(x *flows.Exchange, ec flows.ErrorCount) {
	gk := [2]int16{x.Req.Key, ec.Code}
	g := d.groups[gk]
	if g == nil {
		g = &stormGroup{api: x.Req.Key, code: ec.Code, clients: make(map[stormClientKey]*stormClient), clientIDs: make(map[string]bool)}
		d.groups[gk] = g
	}
	t := x.Resp.Time
	if g.responses == 0 {
		g.first = t
	}
	g.responses++
	g.occurrences += int64(ec.Count)
	g.last = t

	ck := stormClientKey{x.Conn.Client.Addr(), x.Req.ClientID}
	c := g.clients[ck]
	if c == nil {
		if d.clients >= stormMaxClients {
			return
		}
		d.clients++
		c = &stormClient{}
		g.clients[ck] = c
	}
	if g.what == "" {
		g.what = fmt.Sprintf("%s response %s", x.Req.Name(), decode.ErrorName(ec.Code))
	}
	h := stormHit{t: t, ev: evidence(x.Resp, g.what), conn: x.Conn}
	c.seq++
	if len(c.ring) < d.k {
		c.ring = append(c.ring, h)
	} else {
		c.ring[c.next] = h
	}
	c.next = (c.next + 1) % d.k
	if len(c.ring) < d.k {
		return
	}
	// The ring is full and its oldest entry is at c.next. If the last k
	// responses fit in one window, the client storms.
	oldest := c.ring[c.next]
	if t.Sub(oldest.t) > d.window {
		return
	}
	if !c.stormed {
		c.stormed = true
		g.stormClients++
		g.clientIDs[ck.id] = true
	}
	// Count the window's responses not counted yet, oldest first.
	from := max(c.counted+1, c.seq-int64(d.k)+1)
	for s := from; s <= c.seq; s++ {
		hh := c.ring[int((int64(c.next)+s-(c.seq-int64(d.k)+1))%int64(d.k))]
		g.stormed++
		if g.stormFirst.IsZero() || hh.t.Before(g.stormFirst) {
			g.stormFirst = hh.t
		}
		if hh.t.After(g.stormLast) {
			g.stormLast = hh.t
		}
		g.conns.add(hh.conn)
		g.ev.add(hh.ev)
	}
	c.counted = c.seq
}

// Findings implements Detector.
func (d *errorStorm) Findings(env *Env) []Finding {
	keys := make([][2]int16, 0, len(d.groups))
	for k, g := range d.groups {
		if g.stormed >= d.minResponses {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	var out []Finding
	for _, k := range keys {
		out = append(out, d.finding(env, d.groups[k]))
	}
	return out
}

func (d *errorStorm) finding(env *Env, g *stormGroup) Finding {
	api := decode.Name(g.api)
	name := decode.ErrorName(g.code)
	dur := g.stormLast.Sub(g.stormFirst)
	rate := float64(g.stormed)
	if dur > 0 {
		rate = float64(g.stormed) / dur.Seconds()
	}
	ids := text.SortedKeys(g.clientIDs)
	servers := g.conns.servers()
	clients := g.conns.clients()
	var whoList []string
	for k, c := range g.clients {
		if !c.stormed {
			continue
		}
		if k.id == "" {
			whoList = append(whoList, k.addr.Unmap().String()+" (no client id)")
		} else {
			whoList = append(whoList, fmt.Sprintf("%q (%s)", k.id, k.addr.Unmap()))
		}
	}
	sort.Strings(whoList)
	who := text.List(whoList, 3)
	summary := fmt.Sprintf("%s answered %s %d times in %s (%.1f/s) to %s", api, name, g.stormed,
		text.Duration(dur), rate, who)
	if len(servers) > 0 {
		summary += " from " + text.List(g.conns.serverLabels(env.Nodes), 3)
	}
	expl := fmt.Sprintf("%d of %d %s responses carried %s (error code %d, %d occurrences: one response can name it "+
		"for several partitions or resources). %d client(s), %s, kept getting it at %.1f per second for %s, "+
		"from %s to %s, at least %d within %s: the client retries and the broker gives the same answer every "+
		"time. A healthy client sees this error now and then and recovers after one refresh or retry.",
		g.responses, d.apiResponses.get(g.api), api, name, g.code, g.occurrences, g.stormClients,
		strings.Join(whoList, ", "), rate, text.Duration(dur),
		text.Clock(g.stormFirst), text.Clock(g.stormLast), d.k, text.Duration(d.window))
	if g.responses > g.stormed {
		expl += fmt.Sprintf(" %d other response(s) carried it outside the storm.", g.responses-g.stormed)
	}
	next := fmt.Sprintf("kfsniff -r <capture> --frames --errors --api %s%s shows the exchanges. ", api,
		opsClientFilter(ids)) + stormHint(g.code)
	return Finding{
		Severity: Warning,
		Summary:  summary,
		First:    g.stormFirst,
		Last:     g.stormLast,
		Conns:    g.conns.ids(),
		Nodes:    g.conns.nodes(env.Nodes),
		Counts: map[string]int64{
			"responses":       g.responses,
			"storm_responses": g.stormed,
			"error_codes":     g.occurrences,
			"api_responses":   d.apiResponses.get(g.api),
			"clients":         int64(g.stormClients),
		},
		Fields: map[string]any{
			"api":        api,
			"error":      name,
			"error_code": g.code,
			"client_ids": ids,
			"clients":    clients,
			"servers":    servers,
			"duration_s": text.Seconds(dur),
			"rate_per_s": math.Round(rate*100) / 100,
		},
		Evidence:    g.ev.list(),
		Explanation: expl,
		Next:        next,
	}
}

// stormHint says what to check for the common errors of retry loops.
func stormHint(code int16) string {
	switch code {
	case 6, 74, 75: // NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH
		return "Compare the leader the responses and Metadata name with the broker the client sends to " +
			"(see not-leader-loop); kafka-topics.sh --describe --topic <topic> shows leader and ISR."
	case 5: // LEADER_NOT_AVAILABLE
		return "kafka-topics.sh --describe --unavailable-partitions lists leaderless partitions; " +
			"check that their replicas' brokers are up (see leader-election-stall)."
	case 3: // UNKNOWN_TOPIC_OR_PARTITION
		return "Check that the topic exists (kafka-topics.sh --describe --topic <topic>) and " +
			"auto.create.topics.enable; a deleted topic still in the client's list loops here."
	case 14, 15, 16: // COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
		return "Check the __consumer_offsets (or __transaction_state) partition of the group: " +
			"its leader, ISR and the coordinator broker's log for loading errors."
	case 19, 20: // NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND
		return "Compare the partition's ISR with min.insync.replicas (kafka-topics.sh --describe " +
			"--under-min-isr-partitions)."
	case 1: // OFFSET_OUT_OF_RANGE
		return "The fetch offset is outside the log: check retention and the consumer's auto.offset.reset."
	case 29, 30, 31, 58: // TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED, SASL_AUTHENTICATION_FAILED
		return "Check the principal's ACLs (kafka-acls.sh --list --principal User:<name>) and credentials."
	case 35: // UNSUPPORTED_VERSION
		return "The client asks for a version the broker does not support: compare ApiVersions with the client's version."
	}
	return "Look the error up in the Kafka protocol guide and the broker's log at the same time; " +
		"the client's retry settings (retry.backoff.ms, retries) set the rate."
}

// ---------------------------------------------------------------------------
// Helpers shared by error-storm, throttled, unanswered-requests and
// slow-responses.

// opsMaxConns bounds the connections a finding keeps.
const opsMaxConns = 256

// opsConns collects the connections involved in a finding, up to a cap.
type opsConns struct {
	list []*flows.Conn
	seen map[*flows.Conn]bool
	more int
}

func (s *opsConns) add(c *flows.Conn) {
	if c == nil || s.seen[c] {
		return
	}
	if len(s.list) >= opsMaxConns {
		s.more++
		return
	}
	if s.seen == nil {
		s.seen = make(map[*flows.Conn]bool)
	}
	s.seen[c] = true
	s.list = append(s.list, c)
}

func (s *opsConns) ids() []int {
	out := make([]int, 0, len(s.list))
	for _, c := range s.list {
		out = append(out, c.ID)
	}
	sort.Ints(out)
	return out
}

// servers returns the server addresses, sorted.
func (s *opsConns) servers() []string {
	set := map[string]bool{}
	for _, c := range s.list {
		set[c.Server.String()] = true
	}
	return text.SortedKeys(set)
}

// serverLabels returns the servers with their node ids where known.
func (s *opsConns) serverLabels(n *flows.Nodes) []string {
	set := map[string]bool{}
	for _, c := range s.list {
		if n != nil {
			set[n.Label(c.Server, true)] = true
		} else {
			set[c.Server.String()] = true
		}
	}
	return text.SortedKeys(set)
}

// clients returns the client addresses (without port), sorted.
func (s *opsConns) clients() []string {
	set := map[string]bool{}
	for _, c := range s.list {
		set[c.Client.Addr().Unmap().String()] = true
	}
	return text.SortedKeys(set)
}

// nodes returns the node ids of the servers and of clients that are nodes.
func (s *opsConns) nodes(n *flows.Nodes) []int32 {
	if n == nil {
		return nil
	}
	ids := idSet{}
	for _, c := range s.list {
		ids.add(n.Server(c.Server))
		ids.add(n.Host(c.Client.Addr()))
	}
	if len(ids) == 0 {
		return nil
	}
	return ids.sorted()
}

// opsClientFilter is a --client-id filter when there is one client id.
func opsClientFilter(ids []string) string {
	if len(ids) != 1 || ids[0] == "" || strings.ContainsAny(ids[0], " '\"\\$`") {
		return ""
	}
	return " --client-id " + ids[0]
}

func opsHasPacket(ev []Evidence, e Evidence) bool {
	for _, x := range ev {
		if x.File == e.File && x.Packet == e.Packet {
			return true
		}
	}
	return false
}
