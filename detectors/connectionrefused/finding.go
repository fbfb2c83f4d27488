package connectionrefused

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is the failed connection attempts to one endpoint. Its exported
// fields are the finding's "fields".
type Finding struct {
	Endpoint string `json:"endpoint"`
	// Advertised: Metadata (or another response) advertises the
	// endpoint for a node, as AdvertisedAs.
	Advertised   bool     `json:"advertised"`
	AdvertisedAs []string `json:"advertised_as"`
	Clients      []string `json:"clients"`
	// Recovered: a connection to the endpoint opened after the last
	// failure.
	Recovered     bool `json:"recovered"`
	KafkaEndpoint bool `json:"kafka_endpoint"`
	// SameHost are the other endpoints of its host that served Kafka
	// connections in the capture; Accepted is true if the endpoint
	// itself was seen accepting a connection (a SYN-ACK), Kafka or not.
	SameHost []string `json:"same_host_kafka"`
	Accepted bool     `json:"accepted"`
	// UnableS is how long clients were unable to connect, in seconds:
	// from the first failure to the last; Ongoing if no connection to it
	// opened after the last.
	UnableS float64 `json:"unable_s"`
	Ongoing bool    `json:"ongoing"`

	Server         netip.AddrPort
	IDs            []int32
	First, Last    time.Time
	MoreClients    bool
	Seen, After    int // Kafka connections to it, those opened after the last failure
	Why            int // why it is info, 0 if graded
	DeadListener   bool
	Held, Recovery time.Duration
	MinAttempts    int

	// The counts: connection attempts, those refused (RST), those whose
	// SYNs went unanswered, and the SYNs sent.
	Attempts   int64 `count:"attempts"`
	Refused    int64 `count:"refused"`
	Unanswered int64 `count:"unanswered"`
	SYNs       int64 `count:"syns"`
}

// Why a finding is info.
const (
	notKafka = iota + 1
	fewAttempts
	restart
)

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s to %s from %s %s", text.Plural(f.Attempts, "connection attempt", "connection attempts"),
		f.Endpoint, f.clientText(), f.how())
	if f.Attempts > 1 {
		fmt.Fprintf(&b, " over %s", text.Duration(f.Last.Sub(f.First)))
	}
	if f.Advertised {
		fmt.Fprintf(&b, "; Metadata advertises it (%s) for %s", strings.Join(f.AdvertisedAs, ", "), f.nodes())
	}
	if f.DeadListener {
		fmt.Fprintf(&b, "; its host serves Kafka at %s and this port never accepted a connection: a dead bootstrap server or listener",
			text.List(f.SameHost, 3))
	}
	if f.Recovered {
		b.WriteString("; a connection to it opened afterwards")
	} else if f.KafkaEndpoint {
		b.WriteString("; none opened afterwards")
	}
	return b.String()
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var b strings.Builder
	fmt.Fprintf(&b, "From %s to %s UTC, %s (%s with retransmissions) from %s to %s %s. ",
		text.Stamp(f.First), text.Stamp(f.Last), text.Plural(f.Attempts, "connection attempt", "connection attempts"),
		text.Plural(f.SYNs, "SYN", "SYNs"), f.clientText(), f.Endpoint, f.how())
	if f.Refused > 0 {
		fmt.Fprintf(&b, "A RST in answer to a SYN means the host is up but nothing listens on port %d (or a firewall rejects). ", f.Server.Port())
	}
	if f.Unanswered > 0 {
		b.WriteString("An unanswered SYN means the host is down or unreachable, or a firewall drops the packets. ")
	}
	switch {
	case f.Advertised:
		fmt.Fprintf(&b, "Metadata advertises this endpoint (as %s) for %s, so clients are sent there and fail. ",
			strings.Join(f.AdvertisedAs, ", "), f.nodes())
	case f.DeadListener:
		fmt.Fprintf(&b, "Its host serves Kafka in this capture (%s), and this port never accepted a connection in it: "+
			"a client given it as a bootstrap server, or a listener that is not up (a wrong port in bootstrap.servers, "+
			"a listener missing from listeners=). ", text.List(f.SameHost, 3))
	case f.KafkaEndpoint:
		b.WriteString("No Metadata response in the capture advertises it: it is a bootstrap address or a stale one. ")
	}
	switch {
	case f.Recovered:
		fmt.Fprintf(&b, "%s to it opened after the last failure.", text.Plural(f.After, "connection", "connections"))
	case f.Seen > 0:
		fmt.Fprintf(&b, "The capture holds %d Kafka %s to it, none opened after the last failure.", f.Seen,
			text.Word(f.Seen, "connection", "connections"))
	default:
		b.WriteString("No Kafka connection to it is in the capture.")
	}
	switch f.Why {
	case notKafka:
		b.WriteString(" Info only: the endpoint is not known as Kafka (not advertised, no Kafka connection to it, not a " +
			"default Kafka port")
		if len(f.SameHost) > 0 {
			b.WriteString(", and it accepted connections, so something else listens there")
		} else {
			b.WriteString(", no Kafka on its host in the capture")
		}
		b.WriteString("): a port scan or a health check, not a Kafka client.")
	case fewAttempts:
		fmt.Fprintf(&b, " Info only: fewer than %d attempts failed, for less than %s.", f.MinAttempts,
			text.Duration(detectors.FeltAfter))
	case restart:
		if f.Attempts == 1 {
			b.WriteString(" Info only: one attempt failed, and then a connection to it opened.")
			break
		}
		fmt.Fprintf(&b, " Info only: the failures lasted %s, under %s, and then a connection to it opened (a restart).",
			text.Duration(f.Held), text.Duration(f.Recovery))
	default:
		fmt.Fprintf(&b, " Clients were unable to connect for %s (first to last failure)", text.Duration(f.Held))
		if f.Recovered {
			b.WriteString(".")
		} else {
			b.WriteString(", and it had not healed when the capture ended.")
		}
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	next := fmt.Sprintf("On the host of %s: ss -ltnp 'sport = :%d' (does anything listen?), the broker process and its log",
		f.Endpoint, f.Server.Port())
	if f.Advertised {
		next += fmt.Sprintf(" for %s; compare listeners= and advertised.listeners= of %s with this address",
			f.nodes(), text.Word(len(f.IDs), "that node", "those nodes"))
	}
	next += fmt.Sprintf(". From a client host: nc -vz %s %d.", f.Server.Addr(), f.Server.Port())
	if f.Unanswered > 0 {
		next += " For unanswered SYNs: is the host up, firewall / security group rules, routes."
	}
	if !f.Advertised && f.KafkaEndpoint {
		next += " Check the clients' bootstrap.servers"
		if f.DeadListener {
			next += fmt.Sprintf(" (the port Kafka listens on at that host is %s) and the brokers' listeners=", text.List(f.SameHost, 3))
		}
		next += "."
	}
	return next
}

// how says how the attempts failed.
func (f *Finding) how() string {
	switch {
	case f.Refused == 0:
		return "never answered (SYNs unanswered)"
	case f.Unanswered > 0:
		return fmt.Sprintf("failed (%d refused by RST, %s unanswered)", f.Refused, text.Plural(f.Unanswered, "SYN", "SYNs"))
	}
	return "refused (SYN answered by RST)"
}

func (f *Finding) clientText() string {
	s := strings.Join(f.Clients, ", ")
	if f.MoreClients {
		s += " and more"
	}
	return s
}

// nodes is "node 2" or "nodes 4, 5, 6".
func (f *Finding) nodes() string {
	return text.Word(len(f.IDs), "node", "nodes") + " " + text.IDs(f.IDs, 0)
}
