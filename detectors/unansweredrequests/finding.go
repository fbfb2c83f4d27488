package unansweredrequests

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is the requests one server never answered (a warning). Its
// exported fields are the finding's "fields".
type Finding struct {
	Server    string           `json:"server"`
	APIs      []string         `json:"apis"`
	ByAPI     map[string]int64 `json:"by_api"`
	ClientIDs []string         `json:"client_ids"`
	Clients   []string         `json:"clients"`
	// OldestAPI and OldestPacket are the oldest request's.
	OldestAPI    string `json:"oldest_api"`
	OldestPacket uint64 `json:"oldest_packet"`
	// WaitedS is the longest a request waited beyond what the broker may
	// hold it (its MaxWaitMillis, a rebalance timeout), in seconds;
	// Ongoing: some request was still waiting when the capture ended.
	WaitedS float64 `json:"waited_s"`
	Ongoing bool    `json:"ongoing"`
	// NotKafka says what came back on connections that got no Kafka
	// answer at all, an ApiVersions among their requests: "tls" (TLS
	// records: a TLS listener, a plaintext client) or "nothing".
	NotKafka string `json:"not_kafka,omitempty"`
	Counted

	Group       *Group
	ServerLabel string
	Grace       time.Duration
	// silent: not one byte came back on any of the connections, and
	// their requests include the ApiVersions every Kafka listener answers
	// (the Java client speaking plaintext to an SSL listener, recorded on
	// Apache Kafka 4.1.1: fixtures/pcaps/kafka/java-plaintext-to-ssl)
	Silent bool
	// tlsBack: what came back were TLS records (an alert)
	TLSBack bool
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	o := f.Group.Oldest
	s := fmt.Sprintf("%d request(s) to %s never answered (%s) on %d connection(s); oldest %s at %s; clients waited up to %s",
		f.Requests, f.ServerLabel, apiCounts(f.ByAPI, f.APIs), f.Connections, decode.Name(o.Key), text.Clock(o.At),
		text.Duration(f.Group.Felt))
	if f.Ongoing {
		s += ", some still waiting at the end"
	}
	return s
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	g, o := f.Group, f.Group.Oldest
	why := g.why(overtaken, closed, f.Grace)
	until := map[int]string{overtaken: "until a later one was answered", expired: "until the capture ended",
		closed: "until its connection closed"}[g.OldestWhy]
	expl := fmt.Sprintf("%s got %d request(s) it did not answer, from client id(s) %s: %s. The oldest, %s, was sent "+
		"at %s and waited %s %s.", f.ServerLabel, g.N, strings.Join(text.Quote(f.ClientIDs), ", "),
		strings.Join(why, "; "), o.Desc, text.Clock(o.At), text.Duration(o.Waited), until)
	l := g.Longest
	if l.Evidence != o.Evidence {
		expl += fmt.Sprintf(" The longest wait: %s, %s.", l.Desc, text.Duration(l.Waited))
	}
	beyond := ""
	if l.Hold > 0 {
		expl += fmt.Sprintf(" %s of it is what the broker may hold it (MaxWaitMillis, or the rebalance timeout).",
			text.Duration(l.Hold))
		beyond = " beyond that"
	}
	switch {
	case g.Severity == detectors.Info:
		expl += fmt.Sprintf(" Clients waited %s%s, under %s: a request lost and given up, or overtaken, at once.",
			text.Duration(g.Felt), beyond, text.Duration(detectors.FeltAfter))
	case f.Ongoing:
		expl += fmt.Sprintf(" Clients waited up to %s%s, some until the capture ended.", text.Duration(g.Felt), beyond)
	default:
		expl += fmt.Sprintf(" Clients waited up to %s%s.", text.Duration(g.Felt), beyond)
	}
	switch {
	case f.Silent && f.TLSBack:
		expl += " What came back on these connections was a TLS record (an alert) and nothing else, though their requests " +
			"include an ApiVersions, which every Kafka listener answers: the listener speaks TLS (SSL or SASL_SSL) and the " +
			"client plaintext (security.protocol PLAINTEXT or SASL_PLAINTEXT). The client reads the alert as the start of " +
			"a frame hundreds of MB long and waits for the rest until its request.timeout.ms."
	case f.Silent:
		expl += " Not one byte came back on these connections, though their requests include an ApiVersions, which every " +
			"Kafka listener answers: the port does not speak Kafka as the client does. A listener of another security " +
			"protocol (an SSL or SASL_SSL listener waiting for a TLS ClientHello while the client's security.protocol is " +
			"PLAINTEXT), a proxy, or another service on a Kafka port."
	}
	return expl
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	o := f.Group.Oldest
	return fmt.Sprintf("kfsniff -r <capture> --frames --conn %d shows the oldest request and what the connection "+
		"carried after it. On the broker, check the request queue and handler threads (RequestQueueTimeMs, "+
		"RequestHandlerAvgIdlePercent, NetworkProcessorAvgIdlePercent) and its log at %s; on the client, "+
		"request.timeout.ms and disconnect messages.", o.Conn.ID, text.Clock(o.At)) + f.silentNext()
}

func (f *Finding) silentNext() string {
	if !f.Silent {
		return ""
	}
	return fmt.Sprintf(" Compare the client's security.protocol with the listener behind %s (the broker's listeners and "+
		"listener.security.protocol.map); openssl s_client -connect %s shows whether it speaks TLS.", f.Server, f.Server)
}

// Pending is the requests without a response that may yet have been
// answered (info): in flight at the end, or on connections where the
// capture may have missed the response. Its exported fields are the
// finding's "fields".
type Pending struct {
	APIs         []string         `json:"apis"`
	ByAPI        map[string]int64 `json:"by_api"`
	Servers      []string         `json:"servers"`
	OldestAPI    string           `json:"oldest_api"`
	OldestPacket uint64           `json:"oldest_packet"`
	Counted

	Group *Group
	Grace time.Duration
}

// Counted are the counts of a Finding or a Pending: the requests, the
// connections they were sent on, and the requests by why they count
// (the reasons of the finding: "overtaken", "closed", "in_flight"...).
type Counted struct {
	Requests    int64            `count:"requests"`
	Connections int64            `count:"connections"`
	ByReason    map[string]int64 `count:",inline"`
}

// counted is c, for the group's finding to fill.
func (c *Counted) counted() *Counted { return c }

// Summary implements detectors.Detail.
func (f *Pending) Summary() string {
	return fmt.Sprintf("%d request(s) without a response that may yet have been answered (%s)", f.Requests,
		apiCounts(f.ByAPI, f.APIs))
}

// Explanation implements detectors.Detail.
func (f *Pending) Explanation() string {
	g, o := f.Group, f.Group.Oldest
	parts := g.why(inFlight, reasons-1, f.Grace)
	return fmt.Sprintf("%d request(s) have no response in the capture, but that does not show that the broker "+
		"failed to answer. %s. The oldest, %s, was sent at %s, %s before the capture ended or its connection closed.",
		g.N, strings.Join(parts, ". "), o.Desc, text.Clock(o.At), text.Duration(o.Waited))
}

// Next implements detectors.Detail.
func (f *Pending) Next() string {
	return "Capture longer (past the requests' timeouts) and on both directions of the connections " +
		"(tcpdump -i <iface> 'tcp port 9092', no sampling) to see whether they are answered."
}

// whyText says why requests count, by reason: %[1]d is how many, %[2]s
// the grace.
var whyText = [reasons]string{
	overtaken: "%[1]d overtaken: a later request on the same connection was answered, and Kafka answers a " +
		"connection's requests in order, so they never will be (the broker dropped them, or the capture missed " +
		"their responses)",
	expired: "%[1]d still unanswered when the capture ended, longer than a broker may take (%[2]s, more for a " +
		"Fetch's MaxWaitMillis or a group's rebalance timeout)",
	closed: "%[1]d still unanswered, past that allowance, when their connection closed (what a client does when " +
		"its request.timeout.ms expires)",
	inFlight: "In flight: %[1]d sent less than %[2]s (or a Fetch's MaxWaitMillis, a group's rebalance timeout, " +
		"more) before the capture ended or their connection closed, too soon to call them unanswered",
	longPoll: "Long polls: %[1]d Fetch, JoinGroup or SyncGroup requests within the time the broker may hold them",
	oneSided: "One-sided: %[1]d on connections of which the capture holds not one packet from the server (a " +
		"one-sided, filtered or sampled capture), so whether they were answered cannot be told",
	gaps: "Capture gaps: %[1]d on connections that lost segments in the capture, where their responses may " +
		"have been lost",
}

// why says why the group's requests count, for the reasons from first to
// last that some have.
func (g *Group) why(first, last int, grace time.Duration) []string {
	var out []string
	for i := first; i <= last; i++ {
		if n := g.Reasons[i]; n > 0 {
			out = append(out, fmt.Sprintf(whyText[i], n, text.Duration(grace)))
		}
	}
	return out
}

// apiCounts renders "Produce 10, Metadata 2", most first.
func apiCounts(by map[string]int64, names []string) string {
	names = append([]string(nil), names...)
	sort.SliceStable(names, func(i, j int) bool { return by[names[i]] > by[names[j]] })
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, by[n])
	}
	return text.List(parts, 4)
}
