// Package reconnectstorm reports reconnect storms: bursts of new connections
// to one broker, from clients reconnecting in a loop or from every client
// at once after a broker restart (KAFKA-9648: the listen backlog overflows,
// SYNs are dropped or reset, and the clients try again).
//
// Per broker, the rule counts connection attempts (connections opened in
// the capture, refused and unanswered SYNs) in a sliding window, and for
// each connection how long it lived and whether it carried anything beyond
// ApiVersions and the SASL handshake. min-conns attempts within window are
// a burst. A connection that carried requests and never ApiVersions is one
// a client opens per request by design (kafka-go's consumer groups), not
// a client starting over: short, it does not churn. A burst whose attempts mostly churned (refused, unanswered, or
// closed less than short-lived after opening: at least min-churn of them)
// is graded by its length (the severity policy: warning from 3 s, error from
// 30 s or when still going on at the end after 10 s); a burst of
// connections that stay (clients starting, or reconnecting once after a
// restart) is info.
package reconnectstorm

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/burst"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "reconnect-storm",
	Recorded: []string{"fixtures/pcaps/clients/reconnect-storm-kgo.pcap"},
	Severity: detectors.Error,
	Doc: "Bursts of new connections to one broker (KAFKA-9648): clients reconnecting in a loop, or all at once " +
		"after a restart. Per broker and client host: connection attempts (opened, refused, unanswered SYNs), " +
		"connections per second, their lifetimes, ApiVersions and SASL handshakes. min-conns attempts within " +
		"window are a burst; when at least min-churn of them churned (refused, unanswered, or closed less than " +
		"short-lived after opening; not a connection that carried requests without ApiVersions, which a client " +
		"such as kafka-go's consumer group opens per request by design) it is a warning from 3 s, an error from 30 s or when still going on at the end " +
		"after 10 s, info below; a burst of connections that stay is info.",
}, Params{Window: 10 * time.Second, MinConns: 20, ShortLived: 2 * time.Second, MinChurn: 0.5}, New)

// Params are the rule's thresholds.
type Params struct {
	Window     time.Duration `param:"window" doc:"the sliding window connection attempts are counted in"`
	MinConns   int           `param:"min-conns" doc:"connection attempts to one broker within window that make a burst"`
	ShortLived time.Duration `param:"short-lived" unit:"ms" doc:"a connection closed sooner than this after opening churned"`
	MinChurn   float64       `param:"min-churn" doc:"share of a broker's attempts that churned for its burst to be a storm rather than info"`
}

// Bounds of what the rule keeps.
const (
	maxBrokers   = 1024
	maxOpen      = 1 << 16 // connections followed at once, the newest
	maxHosts     = 64      // client hosts counted per broker
	maxLifetimes = 4096    // lifetimes kept per broker for the median
	reorder      = 64      // attempts per broker counted in time order when told out of it
)

// New makes the rule.
func New(p Params) detectors.Rule {
	p.MinConns = min(max(p.MinConns, 2), burst.MaxN)
	if p.Window <= 0 {
		p.Window = time.Second
	}
	return &rule{p: p, brokers: map[netip.AddrPort]*broker{}, open: tally.Newest[*conn]{Max: maxOpen}}
}

type rule struct {
	p       Params
	brokers map[netip.AddrPort]*broker
	open    tally.Newest[*conn] // by value: it pins no connection record; the newest maxOpen
	dropped int64
	// beyond has a connection's bit set once it has carried a request
	// beyond ApiVersions and SASL: its further requests of other APIs
	// change nothing, and are let go without looking the connection up
	// in open, which missed the cache at every request (small: 1.2 % of
	// one worker's CPU, all of it on the merger).
	beyond tally.ConnBits
}

type conn struct {
	b      *broker
	opened time.Time
	beyond bool // carried a request other than ApiVersions and SASL
	// versions: it carried ApiVersions. A connection that never did but
	// carried other requests is one a client opens per request by design
	// (kafka-go's consumer groups: FindCoordinator, JoinGroup, LeaveGroup
	// each on a connection of its own), not a client starting over.
	versions bool
}

type broker struct {
	server      netip.AddrPort
	win         *burst.Window
	attempts    int64
	opened      int64
	refused     int64
	unanswered  int64
	closed      int64
	short       int64
	bare        int64 // closed having carried nothing beyond ApiVersions and SASL
	apiVersions int64
	sasl        int64
	hosts       map[netip.Addr]int64
	moreHosts   int64
	lifetimes   []time.Duration
	first, last time.Time
	conns       tally.Conns
	ev          detectors.Sampler[detectors.Evidence]
}

func (r *rule) broker(server netip.AddrPort) *broker {
	b := r.brokers[server]
	if b == nil {
		if len(r.brokers) >= maxBrokers {
			r.dropped++
			return nil
		}
		b = &broker{server: server, win: burst.New(r.p.MinConns, r.p.Window), hosts: map[netip.Addr]int64{}}
		// Attempts are told out of time order: an opening at its first
		// packet when the connection is recognised, SYNs never answered
		// at the capture's end.
		b.win.Reorder(reorder)
		r.brokers[server] = b
	}
	return b
}

func (b *broker) attempt(client netip.AddrPort, t time.Time, n int) {
	if b.attempts == 0 {
		b.first = t
	}
	b.last = t
	h := client.Addr().Unmap()
	if _, ok := b.hosts[h]; ok || len(b.hosts) < maxHosts {
		b.hosts[h] += int64(n)
	} else {
		b.moreHosts += int64(n)
	}
	b.attempts += int64(n)
	b.win.AddN(t, n) // bounded by the window, not by n (a forged record's 2^31)
}

// Cut implements detectors.Bounded: connections still open when
// maxOpen newer ones had opened, whose close is not judged.
func (r *rule) Cut() map[string]int64 {
	return map[string]int64{"connections_forgotten": r.open.Forgotten}
}

// ConnEvent implements detectors.ConnHook.
func (r *rule) ConnEvent(_ *detectors.Pass, e *detectors.ConnEvent) {
	switch e.Kind {
	case flows.ConnOpened:
		if e.Conn == nil || e.Conn.MidStream {
			return // opened before the capture began
		}
		b := r.broker(e.Server)
		if b == nil {
			return
		}
		b.attempt(e.Client, e.Time, 1)
		b.opened++
		b.conns.Add(e.Conn)
		b.ev.Add(detectors.Evidence{File: e.File, Packet: e.Packet, Conn: e.Conn.ID, What: "connection opened"})
		r.open.Put(tally.KeyOf(e.Conn), &conn{b: b, opened: e.Time})
	case flows.ConnRefused, flows.ConnUnanswered:
		b := r.broker(e.Server)
		if b == nil {
			return
		}
		n := max(e.Attempts, 1)
		b.attempt(e.Client, e.Time, n)
		what := "connection refused (RST)"
		if e.Kind == flows.ConnRefused {
			b.refused += int64(n)
		} else {
			b.unanswered += int64(n)
			what = "SYN never answered"
		}
		b.ev.Add(detectors.Evidence{File: e.File, Packet: e.Packet, What: what})
	case flows.ConnClosed:
		if e.Conn == nil {
			return
		}
		k := tally.KeyOf(e.Conn)
		c := r.open.Get(k)
		if c == nil {
			return
		}
		r.open.Delete(k)
		b := c.b
		b.closed++
		life := e.Time.Sub(c.opened)
		if life < r.p.ShortLived && (!c.beyond || c.versions) {
			b.short++
		}
		if !c.beyond {
			b.bare++
		}
		if len(b.lifetimes) < maxLifetimes {
			b.lifetimes = append(b.lifetimes, life)
		}
	}
}

// Request implements detectors.RequestHook: what a new connection
// carried.
func (r *rule) Request(_ *detectors.Pass, m *flows.Message) {
	key := kmsg.Key(m.Key)
	if key != kmsg.ApiVersions && key != kmsg.SASLHandshake && key != kmsg.SASLAuthenticate && r.beyond.Has(m.Conn.ID) {
		return
	}
	c := r.open.Get(tally.KeyOf(m.Conn))
	if c == nil {
		return
	}
	switch key {
	case kmsg.ApiVersions:
		c.b.apiVersions++
		c.versions = true
	case kmsg.SASLHandshake:
		c.b.sasl++
	case kmsg.SASLAuthenticate:
	default:
		c.beyond = true
		r.beyond.Set(m.Conn.ID)
	}
}

// Findings implements detectors.Rule: one per broker with a burst.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	var out []detectors.Finding
	for _, s := range slices.SortedFunc(maps.Keys(r.brokers), netip.AddrPort.Compare) {
		b := r.brokers[s]
		best, ongoing, bursts := b.win.Result(p.End)
		if bursts == 0 {
			continue
		}
		out = append(out, r.finding(p, b, best, ongoing, bursts))
	}
	return out
}

func (r *rule) finding(p *detectors.Pass, b *broker, best burst.Episode, ongoing bool, bursts int) detectors.Finding {
	churned := b.refused + b.unanswered + b.short
	churn := float64(churned) / float64(max(b.attempts, 1))
	storm := churn >= r.p.MinChurn
	sev := detectors.Info
	if storm {
		sev = detectors.Grade(best.Duration(), ongoing)
	}
	peak, peakAt := b.win.Peak()
	f := &Finding{
		Server: p.Label(b.server), Storm: storm, Ongoing: ongoing, BurstS: text.Seconds(best.Duration()),
		BurstRate: best.Rate(), PeakPerSecond: peak, ChurnShare: round3(churn),
		Clients: hosts(b), First: b.first, Last: b.last, BurstStart: best.Start, BurstEnd: best.End, PeakAt: peakAt,
		Closed: b.closed, Dropped: r.dropped, ShortLivedUnder: r.p.ShortLived, MinChurn: r.p.MinChurn,
	}
	f.MedianLifetimeS, f.MaxLifetimeS = lifetimes(b.lifetimes)
	if len(b.lifetimes) > 0 {
		f.HasLifetimes = true
	}
	var nodes []int32
	if p.Nodes != nil {
		if id := p.Nodes.Server(b.server); id >= 0 {
			nodes = []int32{id}
		}
	}
	f.Attempts = b.attempts
	f.BurstAttempts = int64(best.Events)
	f.Opened = b.opened
	f.Refused = b.refused
	f.SYNUnanswered = b.unanswered
	f.ShortLived = b.short
	f.HandshakeOnly = b.bare
	f.APIVersionsRequests = b.apiVersions
	f.SASLHandshakes = b.sasl
	f.Bursts = int64(bursts)
	f.ClientHosts = int64(len(b.hosts)) + b.moreHosts
	return detectors.Finding{
		Severity: sev,
		First:    best.Start,
		Last:     best.End,
		Conns:    b.conns.IDs(),
		Nodes:    nodes,
		Evidence: b.ev.List(),
		Subject:  detectors.Subject{Clients: hostAddrs(b), Servers: []netip.AddrPort{b.server}, Nodes: nodes, Reconnects: true},
		Detail:   f,
	}
}
