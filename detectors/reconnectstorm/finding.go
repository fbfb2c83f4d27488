package reconnectstorm

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

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

	// What the prose says besides: the first and last attempt; the
	// worst burst's span; the second its peak began; connections closed
	// in the capture; HasLifetimes, some closed; attempts to brokers
	// not followed (too many); the rule's short-lived and min-churn.
	First, Last          time.Time
	BurstStart, BurstEnd time.Time
	PeakAt               time.Time
	Closed               int64
	HasLifetimes         bool
	Dropped              int64
	ShortLivedUnder      time.Duration
	MinChurn             float64

	// The counts: connection attempts, in the worst burst; connections
	// opened, refused, whose SYN went unanswered, short-lived, with only
	// a handshake; ApiVersions requests and SASL handshakes; bursts;
	// client hosts.
	Attempts            int64 `count:"attempts"`
	BurstAttempts       int64 `count:"burst_attempts"`
	Opened              int64 `count:"opened"`
	Refused             int64 `count:"refused"`
	SYNUnanswered       int64 `count:"syn_unanswered"`
	ShortLived          int64 `count:"short_lived"`
	HandshakeOnly       int64 `count:"handshake_only"`
	APIVersionsRequests int64 `count:"apiversions_requests"`
	SASLHandshakes      int64 `count:"sasl_handshakes"`
	Bursts              int64 `count:"bursts"`
	ClientHosts         int64 `count:"client_hosts"`
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
	return slices.SortedFunc(maps.Keys(b.hosts), netip.Addr.Compare)
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
		text.Plural(f.BurstAttempts, "connection attempt", "connection attempts"), text.Duration(f.BurstEnd.Sub(f.BurstStart)),
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
	var s strings.Builder
	fmt.Fprintf(&s, "Between %s and %s, %s were made to %s from %s; from %s to %s, %s (%.1f a second, at most %d "+
		"in the second from %s). Of all the attempts, %d were refused (RST), %d SYNs went unanswered, %d connections "+
		"opened and %d of those closed in the capture, %d of them less than %s after opening and %d having carried "+
		"nothing but ApiVersions and the SASL handshake (%d ApiVersions, %d SaslHandshake requests in all). ",
		text.Clock(f.First), text.Clock(f.Last), text.Plural(f.Attempts, "connection attempt", "connection attempts"), f.Server,
		f.hostList(5), text.Clock(f.BurstStart), text.Clock(f.BurstEnd), text.Plural(f.BurstAttempts, "attempt", "attempts"),
		f.BurstRate, f.PeakPerSecond, text.Clock(f.PeakAt), f.Refused, f.SYNUnanswered, f.Opened, f.Closed, f.ShortLived,
		text.Duration(f.ShortLivedUnder), f.HandshakeOnly, f.APIVersionsRequests, f.SASLHandshakes)
	if f.HasLifetimes {
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
			"after a broker restart, which is normal.", f.MinChurn*100)
	}
	if f.Bursts > 1 {
		fmt.Fprintf(&s, " There were %d bursts; this is the longest.", f.Bursts)
	}
	if f.Ongoing {
		s.WriteString(" It was still going on when the capture ended.")
	}
	if f.Dropped > 0 {
		fmt.Fprintf(&s, " (Connections to %d further brokers were not followed: too many brokers.)", f.Dropped)
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
