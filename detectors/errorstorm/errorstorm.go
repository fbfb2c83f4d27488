// Package errorstorm reports one client getting the same error from one
// API over and over, at a rate no healthy client sustains. Healthy clients
// do get errors: a KIP-394 JoinGroup is answered MEMBER_ID_REQUIRED once,
// heartbeats get REBALANCE_IN_PROGRESS while a group rebalances (one every
// heartbeat interval, seconds apart), an admin tool gets
// TOPIC_ALREADY_EXISTS once. What they do not do is get the same error
// over and over, about once a second or faster, for seconds: that is a
// retry loop (a NOT_LEADER_OR_FOLLOWER loop, a metadata refresh loop on
// LEADER_NOT_AVAILABLE, an authorization failure retried forever).
//
// The rate is measured per client (address and client id) so that many
// healthy clients each getting an occasional error (a large group
// rebalancing) do not add up to a storm. A client storms when some window
// of Window holds at least MinRate × Window of its responses carrying the
// error; from then on every response carrying it while that holds is
// counted. The API and error are reported once MinResponses such
// responses have been counted.
//
// The severity is what the storming clients felt (detectors.Grade): how
// long a client kept getting the error with no success in between, from
// its first error to the request that then succeeded (the same API, to
// the same broker, answered without the error), or to its last error if
// it went quiet for a window; still failing at the capture's end is
// ongoing. A client that gets the error at a high rate but succeeds in
// between (every other fetch) is not held up: info.
//
// The rule is generic: a specific rule's finding about the same error and
// client or server (not-leader-loop, leader-election-stall), at least as
// severe, explains it, and it drops to info.
package errorstorm

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "error-storm",
	Recorded: []string{"fixtures/pcaps/clients/notleader-kgo.pcap", "fixtures/pcaps/clients/notleader-sarama.pcap", "fixtures/pcaps/clients/fetch-session-churn-kgo.pcap", "fixtures/pcaps/clients/topic-recreated-kgo.pcap"},
	Severity: detectors.Error,
	Generic:  true,
	Doc: "The same error from one API keeps coming back to a client at a sustained rate " +
		"(one client gets at least min-rate × window responses carrying it within window, " +
		"and min-responses are counted in all), the mark of a retry loop; the occasional error of a " +
		"healthy client (MEMBER_ID_REQUIRED on a first JoinGroup, REBALANCE_IN_PROGRESS during a " +
		"rebalance, TOPIC_ALREADY_EXISTS) is far below it. Severity by what the storming clients felt: " +
		"how long one kept getting the error with no success in between (from its first error to the " +
		"request that then succeeded at the same broker, or to its last error once quiet for a window): " +
		"info under 3 s (or a client that succeeds in between, as when every other fetch fails), warning " +
		"from 3 s, error from 30 s or when still failing at the capture's end after 10 s; whatever its length, a " +
		"client getting it 50 times or more at 100 a second or more (faster than any client's backoff allows), or 3 " +
		"clients or more still getting it at the capture's end after 1 s, is a warning (a failure still going at " +
		"the end has an unknown length, not a short one). Generic: a " +
		"specific rule's finding about the same error and client or server, at least as severe, explains " +
		"it, and it drops to info.",
}, Params{MinResponses: 5, MinRate: 1, Window: 5 * time.Second}, New)

// Params are the rule's thresholds.
type Params struct {
	MinResponses int           `param:"min-responses" doc:"responses carrying the error, counted while clients storm, before it is reported"`
	MinRate      float64       `param:"min-rate" doc:"responses per second carrying the error that one client (address and client id) must get over a whole window: min-rate × window of them within window"`
	Window       time.Duration `param:"window" unit:"s" alias:"window-s" doc:"how long the window is over which the rate must hold; also how long a client must go without the error for its spell to end there"`
}

const (
	// maxClients bounds the clients whose rate is tracked; errors of
	// further clients are counted but cannot start a storm.
	maxClients = 4096
	// maxGroups bounds the (API, error code) pairs followed.
	maxGroups = 1024
	// maxWindow bounds the responses a client's window holds.
	maxWindow = 1 << 14
)

// New makes the rule.
func New(p Params) detectors.Rule {
	k := int(math.Ceil(p.MinRate * p.Window.Seconds()))
	return &rule{
		minResponses: int64(max(p.MinResponses, 1)),
		window:       p.Window,
		k:            min(max(k, 1), maxWindow),
		groups:       make(map[groupKey]*Group),
		failing:      make(map[failKey][]*client),
	}
}

type rule struct {
	minResponses int64
	window       time.Duration
	k            int // responses a window must hold
	groups       map[groupKey]*Group
	// groupsDropped counts the error codes of responses beyond maxGroups.
	groupsDropped int64
	apiResponses  tally.APIs
	clients       int
	// failing lists, by API and client, the clients with an open spell
	// (one per error code), for a success to end them.
	failing map[failKey][]*client
	// creation: topics answered unknown and topics created (created.go)
	creation creation
}

type groupKey struct{ api, code int16 }

// Group is one API and error code.
type Group struct {
	groupKey
	Responses   int64 // responses carrying the code, from every client
	occurrences int64 // times the code appears in them
	clients     map[cluster.Client]*client
	what        string // what the evidence shows

	// While clients storm.
	Stormed               int64
	StormFirst, StormLast time.Time
	stormClients          int
	conns                 tally.Conns
	clientIDs             map[string]bool
	ev                    detectors.Sampler[detectors.Evidence]

	// unknown: the topics a topic answer named unknown (code 3 of
	// Metadata and DescribeTopicPartitions, created.go); unknownCut: more
	// than maxTopics.
	unknown    map[string]bool
	unknownCut bool
}

type failKey struct {
	api    int16
	client cluster.Client
}

// client holds the times of a client's last k responses carrying the
// error, in a ring, and its spells: the runs of the error with no success
// in between.
type client struct {
	code    int16
	ring    []hit
	next    int
	seq     int64 // responses seen
	counted int64 // seq of the last response counted into the storm
	stormed bool

	// The open spell: from its first error; last is its latest, server
	// the broker that gave it; stormy once the client stormed in it.
	open, stormy, listed bool
	first, last          time.Time
	server               netip.AddrPort
	// longest is the longest spell that stormed and ended, healed if a
	// success ended it.
	longest time.Duration
	// n counts the errors of the open spell; fastN and fastRate are the
	// errors and their rate of the spell that stormed fastest (Fast).
	n        int64
	fastN    int64
	fastRate float64
}

type hit struct {
	t    time.Time
	ev   detectors.Evidence
	conn *flows.ConnInfo
}

// Cut implements detectors.Bounded.
func (r *rule) Cut() map[string]int64 {
	return map[string]int64{"errors_not_followed": r.groupsDropped}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.Resp == nil {
		return
	}
	r.apiResponses.Add(x.Req.Key)
	for _, ec := range x.Resp.ErrorCodes {
		r.hit(x, ec)
	}
	switch kmsg.Key(x.Req.Key) {
	case kmsg.Metadata, kmsg.DescribeTopicPartitions, kmsg.CreateTopics:
		r.topics(x)
	}
	if len(r.failing) > 0 {
		r.heal(x)
	}
}

func (r *rule) hit(x *detectors.Exchange, ec flows.ErrorCount) {
	gk := groupKey{x.Req.Key, ec.Code}
	g := r.groups[gk]
	if g == nil {
		if len(r.groups) >= maxGroups {
			// An (API, error) pair from the wire would be a group each:
			// one response can carry thousands of error codes.
			r.groupsDropped++
			return
		}
		g = &Group{groupKey: gk, clients: make(map[cluster.Client]*client), clientIDs: make(map[string]bool)}
		r.groups[gk] = g
	}
	t := x.Resp.Time
	g.Responses++
	g.occurrences += int64(ec.Count)

	ck := x.Req.Client
	c := g.clients[ck]
	if c == nil {
		if r.clients >= maxClients {
			return
		}
		r.clients++
		c = &client{code: ec.Code}
		g.clients[ck] = c
	}
	if g.what == "" {
		g.what = fmt.Sprintf("%s response %s", x.Req.Name(), decode.ErrorName(ec.Code))
	}
	r.fail(c, failKey{x.Req.Key, ck}, t, x.Conn.Server)

	h := hit{t: t, ev: detectors.EvidenceAt(x.Resp, g.what), conn: x.Conn}
	c.seq++
	if len(c.ring) < r.k {
		c.ring = append(c.ring, h)
	} else {
		c.ring[c.next] = h
	}
	c.next = (c.next + 1) % r.k
	if len(c.ring) < r.k {
		return
	}
	// The ring is full and its oldest entry is at c.next. If the last k
	// responses fit in one window, the client storms.
	if t.Sub(c.ring[c.next].t) > r.window {
		return
	}
	c.stormy = true
	if !c.stormed {
		c.stormed = true
		g.stormClients++
		g.clientIDs[ck.ID] = true
	}
	// Count the window's responses not counted yet, oldest first.
	oldest := c.seq - int64(r.k) + 1
	for s := max(c.counted+1, oldest); s <= c.seq; s++ {
		hh := c.ring[int((int64(c.next)+s-oldest)%int64(r.k))]
		g.Stormed++
		if g.StormFirst.IsZero() || hh.t.Before(g.StormFirst) {
			g.StormFirst = hh.t
		}
		if hh.t.After(g.StormLast) {
			g.StormLast = hh.t
		}
		g.conns.Add(hh.conn)
		g.ev.Add(hh.ev)
	}
	c.counted = c.seq
}

// fail counts an error at t from server into the client's spell: a spell
// quiet for longer than a window ended at its last error; a new one is
// listed for a success to end it.
func (r *rule) fail(c *client, k failKey, t time.Time, server netip.AddrPort) {
	if c.open && t.Sub(c.last) > r.window {
		c.end(c.last)
	}
	if !c.open {
		c.open, c.first, c.n = true, t, 0
		if !c.listed {
			c.listed = true
			r.failing[k] = append(r.failing[k], c)
		}
	}
	c.last, c.server = t, server
	c.n++
}

// heal ends the open spells of the exchange's client and API at the same
// broker whose error the response does not carry: the request succeeded.
func (r *rule) heal(x *detectors.Exchange) {
	k := failKey{x.Req.Key, x.Req.Client}
	cs, ok := r.failing[k]
	if !ok {
		return
	}
	kept := cs[:0]
	for _, c := range cs {
		if c.open && !carries(x.Resp.ErrorCodes, c.code) && c.server == x.Conn.Server && !x.Req.Time.Before(c.first) {
			// From the client's first error to the request, sent
			// after it, that succeeded: a long poll's wait is not a
			// failure.
			c.end(x.Req.Time)
		}
		if c.open {
			kept = append(kept, c)
		} else {
			c.listed = false
		}
	}
	switch len(kept) {
	case 0:
		delete(r.failing, k)
	case len(cs): // every spell still open: the list stands as it is
	default:
		clear(cs[len(kept):])
		r.failing[k] = kept
	}
}

func carries(ecs []flows.ErrorCount, code int16) bool {
	for _, ec := range ecs {
		if ec.Code == code {
			return true
		}
	}
	return false
}

// end closes the open spell at t, keeping its length if the client
// stormed in it.
func (c *client) end(t time.Time) {
	if c.stormy {
		c.longest = max(c.longest, t.Sub(c.first))
		c.fastN, c.fastRate = c.fastest()
	}
	c.open, c.stormy = false, false
}

// fastest is the errors and rate of the fastest spell so far, the open
// one included: a spell's rate is the gaps between its errors over the
// span from its first to its last (a millisecond at least), and one that
// holds detectors.FastMin errors beats one that does not. It changes
// nothing (Findings and Snapshot call it).
func (c *client) fastest() (int64, float64) {
	if !c.open || c.n < 2 || c.n < detectors.FastMin && c.fastN >= detectors.FastMin {
		return c.fastN, c.fastRate
	}
	r := float64(c.n-1) / max(c.last.Sub(c.first), time.Millisecond).Seconds()
	if r > c.fastRate || c.fastN < detectors.FastMin && c.n >= detectors.FastMin || c.fastN < detectors.FastMin && c.n > c.fastN {
		return c.n, r
	}
	return c.fastN, c.fastRate
}

// held is how long the client was held up by the error in a spell in which
// it stormed: the longest that ended, or the open one, ongoing if its last
// error came within a window of end (counted to end), else ended there.
func (c *client) held(end time.Time, window time.Duration) (d time.Duration, ongoing bool) {
	d = c.longest
	if c.open && c.stormy {
		if end.Sub(c.last) <= window {
			return max(d, end.Sub(c.first)), true
		}
		d = max(d, c.last.Sub(c.first))
	}
	return d, false
}

// Findings implements detectors.Rule: one per API and error that stormed.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	return detectors.FindingsOf(maps.Values(r.groups), func(g *Group) bool { return g.Stormed >= r.minResponses },
		func(a, b *Group) bool { return cmp.Or(cmp.Compare(a.api, b.api), cmp.Compare(a.code, b.code)) < 0 },
		func(g *Group) detectors.Finding { return r.finding(p, g) })
}

func (r *rule) finding(p *detectors.Pass, g *Group) detectors.Finding {
	dur := g.StormLast.Sub(g.StormFirst)
	rate := float64(g.Stormed)
	if dur > 0 {
		rate = float64(g.Stormed) / dur.Seconds()
	}
	var who []string
	sev := detectors.Info
	var (
		held    time.Duration
		ongoing bool
		ep      detectors.Episode
		failing int
	)
	type spell struct {
		d    time.Duration
		on   bool
		n    int64
		rate float64
	}
	spells := make([]spell, 0, len(g.clients))
	for k, c := range g.clients {
		if !c.stormed {
			continue
		}
		if k.ID == "" {
			who = append(who, k.Host.String()+" (no client id)")
		} else {
			who = append(who, fmt.Sprintf("%q (%s)", k.ID, k.Host))
		}
		d, on := c.held(p.End, r.window)
		if on {
			failing++
		}
		n, rate := c.fastN, c.fastRate
		if c.stormy {
			n, rate = c.fastest()
		}
		spells = append(spells, spell{d: d, on: on, n: n, rate: rate})
	}
	for _, sp := range spells {
		// The worst client: the most severe, then the longest held, then
		// one still failing, then the fastest (a total order: map order
		// must not matter).
		e := detectors.Episode{Seen: sp.d, Ongoing: sp.on, Failures: sp.n, Rate: sp.rate, Clients: len(spells), Failing: failing}
		s := e.Grade()
		if s > sev || s == sev && (sp.d > held || sp.d == held && (sp.on && !ongoing ||
			sp.on == ongoing && (sp.rate > ep.Rate || sp.rate == ep.Rate && sp.n > ep.Failures))) {
			sev, held, ongoing, ep = s, sp.d, sp.on, e
		}
	}
	sort.Strings(who)
	created := r.beingCreated(g)
	if created != nil {
		sev = detectors.Info // a wait for a topic being created
	}
	f := &Finding{
		API: decode.Name(g.api), Error: decode.ErrorName(g.code), ErrorCode: g.code,
		ClientIDs: text.SortedKeys(g.clientIDs), Clients: g.conns.Clients(), Servers: g.conns.Servers(),
		Duration: text.Seconds(dur), Rate: math.Round(rate*100) / 100, Held: text.Seconds(held), Ongoing: ongoing,
		Group: g, APIResponses: r.apiResponses.Get(g.api), ExactRate: rate, Span: dur, HeldFor: held, Severity: sev, Who: who,
		ServerLabels: g.conns.ServerLabels(p.Nodes), MinErrors: r.k, Window: r.window, TopicsCreated: created,
		Fast: ep.Fast(), StillFailing: failing, Episode: ep,
	}
	if ep.Fast() {
		f.FastRate = math.Round(ep.Rate*10) / 10
	}
	f.Responses = g.Responses
	f.StormResponses = g.Stormed
	f.ErrorCodes = g.occurrences
	f.StormClients = int64(g.stormClients)
	return detectors.Finding{
		Severity: sev,
		First:    g.StormFirst,
		Last:     g.StormLast,
		Conns:    g.conns.IDs(),
		Nodes:    g.conns.Nodes(p.Nodes),
		Evidence: g.ev.List(),
		Subject: detectors.Subject{ClientIDs: f.ClientIDs, Clients: g.conns.ClientAddrs(), Servers: g.conns.ServerAddrs(),
			Error: g.code},
		Detail: f,
	}
}
