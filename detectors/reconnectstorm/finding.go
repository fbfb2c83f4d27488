package reconnectstorm

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors/internal/burst"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one broker's burst of connections. Its exported fields are
// the finding's "fields".
type Finding struct {
	Server string `json:"server"`
	// Storm is set when the attempts churned (refused, unanswered,
	// short-lived) rather than stayed.
	Storm           bool    `json:"storm"`
	Ongoing         bool    `json:"ongoing"`
	BurstS          float64 `json:"burst_s"`
	BurstRate       float64 `json:"burst_rate"`
	PeakPerSecond   int     `json:"peak_per_second"`
	ChurnShare      float64 `json:"churn_share"`
	MedianLifetimeS float64 `json:"median_lifetime_s"`
	MaxLifetimeS    float64 `json:"max_lifetime_s"`
	// Clients are the client hosts with their attempts, most first.
	Clients []HostCount `json:"clients"`

	burst     burst.Episode
	bursts    int
	peakAt    time.Time
	lifetimes bool
	b         *broker
	p         Params
	dropped   int64
}

// HostCount is a client host and its connection attempts.
type HostCount struct {
	Host     string `json:"host"`
	Attempts int64  `json:"attempts"`
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func hosts(b *broker) []HostCount {
	out := make([]HostCount, 0, len(b.hosts))
	for h, n := range b.hosts {
		out = append(out, HostCount{h.String(), n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Attempts != out[j].Attempts {
			return out[i].Attempts > out[j].Attempts
		}
		return out[i].Host < out[j].Host
	})
	return out
}

func hostAddrs(b *broker) []netip.Addr {
	out := make([]netip.Addr, 0, len(b.hosts))
	for h := range b.hosts {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

func lifetimes(ls []time.Duration) (median, longest float64) {
	if len(ls) == 0 {
		return 0, 0
	}
	s := slices.Clone(ls)
	slices.Sort(s)
	return text.Seconds(s[len(s)/2]), text.Seconds(s[len(s)-1])
}

func (f *Finding) hostList(max int) string {
	parts := make([]string, 0, len(f.Clients))
	for _, h := range f.Clients {
		parts = append(parts, fmt.Sprintf("%s (%d)", h.Host, h.Attempts))
	}
	return text.List(parts, max)
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	what := "burst of new connections"
	if f.Storm {
		what = "reconnect storm"
	}
	s := fmt.Sprintf("%s to %s: %s in %s (peak %d/s) from %s", what, f.Server,
		text.Plural(f.burst.Events, "connection attempt", "connection attempts"), text.Duration(f.burst.Duration()),
		f.PeakPerSecond, text.Plural(len(f.Clients), "client host", "client hosts"))
	if f.Storm {
		s += fmt.Sprintf(", %.0f%% refused or short-lived", f.ChurnShare*100)
	}
	if f.Ongoing {
		s += " (still going on at the end)"
	}
	return s
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	b := f.b
	var s strings.Builder
	fmt.Fprintf(&s, "Between %s and %s, %s were made to %s from %s; from %s to %s, %s (%.1f a second, at most %d "+
		"in the second from %s). Of all the attempts, %d were refused (RST), %d SYNs went unanswered, %d connections "+
		"opened and %d of those closed in the capture, %d of them less than %s after opening and %d having carried "+
		"nothing but ApiVersions and the SASL handshake (%d ApiVersions, %d SaslHandshake requests in all). ",
		text.Clock(b.first), text.Clock(b.last), text.Plural(b.attempts, "connection attempt", "connection attempts"), f.Server,
		f.hostList(5), text.Clock(f.burst.Start), text.Clock(f.burst.End), text.Plural(f.burst.Events, "attempt", "attempts"),
		f.BurstRate, f.PeakPerSecond, text.Clock(f.peakAt), b.refused, b.unanswered, b.opened, b.closed, b.short,
		text.Duration(f.p.ShortLived), b.bare, b.apiVersions, b.sasl)
	if f.lifetimes {
		fmt.Fprintf(&s, "Closed connections lived %s at the median, %s at the longest. ",
			text.Duration(time.Duration(f.MedianLifetimeS*float64(time.Second))), text.Duration(time.Duration(f.MaxLifetimeS*float64(time.Second))))
	}
	if f.Storm {
		s.WriteString("Connections that are refused or die young and come back are a reconnect storm: a client " +
			"reconnecting in a loop (failing authentication or ApiVersions, a broker or proxy closing it, " +
			"reconnect.backoff.ms too low), or every client at once after a broker restart overflowing its listen " +
			"backlog (KAFKA-9648: SYNs dropped or reset, clients retrying). Each connection costs the broker a new socket (and a TLS or " +
			"SASL handshake on such listeners), and the clients' requests wait meanwhile.")
	} else {
		fmt.Fprintf(&s, "Most connections stayed (less than %.0f%% churned): clients starting, or reconnecting once "+
			"after a broker restart, which is normal.", f.p.MinChurn*100)
	}
	if f.bursts > 1 {
		fmt.Fprintf(&s, " There were %d bursts; this is the longest.", f.bursts)
	}
	if f.Ongoing {
		s.WriteString(" It was still going on when the capture ended.")
	}
	if f.dropped > 0 {
		fmt.Fprintf(&s, " (Connections to %d further brokers were not followed: too many brokers.)", f.dropped)
	}
	return s.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return "On the broker, kafka.server:type=socket-server-metrics (connection-creation-rate, " +
		"connection-close-rate, failed-authentication-rate per listener) and " +
		"kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent show the churn; the broker log " +
		"says why it closed connections, and netstat -s (listen queue overflows, SYNs to LISTEN sockets dropped) " +
		"whether the backlog overflowed (KAFKA-9648; raise net.core.somaxconn / tcp_max_syn_backlog, " +
		"socket.listen.backlog.size in Kafka 3.2+). On the client hosts, check the clients' logs for the reason " +
		"they reconnect and their reconnect.backoff.ms / reconnect.backoff.max.ms; max.connections.per.ip and " +
		"max.connection.creation.rate (KIP-612) bound a looping client."
}
