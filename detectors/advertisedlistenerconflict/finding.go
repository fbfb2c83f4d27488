package advertisedlistenerconflict

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is several node ids advertised at one host:port: a warning, a
// misconfiguration that will bite; an error when clients were refused there
// for long. Its exported fields are the finding's "fields".
type Finding struct {
	Problem  string   `json:"problem"`  // "shared-endpoint"
	Endpoint string   `json:"endpoint"` // as first advertised
	NodeIDs  []int32  `json:"node_ids"`
	Servers  []string `json:"servers"` // the brokers that answered so
	Clients  []string `json:"clients"` // the client hosts told
	// RefusedS is the longest time clients were refused at the endpoint
	// (a partition refused NOT_LEADER_OR_FOLLOWER there until answered
	// without error, a node asked for there refused REBOOTSTRAP_REQUIRED
	// until an ApiVersions for it succeeded, or connection attempts
	// failing until one opened); Ongoing, still so at the end of the
	// capture.
	RefusedS float64 `json:"refused_s"`
	Ongoing  bool    `json:"ongoing"`

	Severity     detectors.Severity
	Held         time.Duration
	Parts        int     // partitions refused
	RebootNodes  []int32 // the nodes they asked for
	PartsDropped int64   // refusals of partitions beyond maxParts
	Told
	Unadvertised []string // servers no node advertises
	Dropped      int64

	// The counts besides Told's: connection attempts to the endpoint
	// refused or unanswered, partition answers NOT_LEADER_OR_FOLLOWER
	// there, ApiVersions answers REBOOTSTRAP_REQUIRED for its nodes.
	Attempts    int64 `count:"refused_attempts"`
	Refused     int64 `count:"refused_answers"`
	Rebootstrap int64 `count:"rebootstrap_answers"`
}

// Told is what the responses that showed an issue were: how many (the
// finding's count), of which APIs ("Metadata/DescribeCluster"), from which
// servers, when, and the connections beyond those listed.
type Told struct {
	Responses    int64 `count:"responses"`
	APIs         string
	ServerLabels []string
	First, Last  time.Time
	MoreConns    int
}

func (t *Told) responsesText() string {
	return fmt.Sprintf("%d %s %s", t.Responses, t.APIs, text.Word(int(t.Responses), "response", "responses"))
}

// omitted says what the bounds left out.
func (t *Told) omitted() string {
	if t.MoreConns == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s beyond the first %d are not listed: other brokers may have answered so too.)",
		text.Plural(t.MoreConns, "connection", "connections"), maxConns)
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("nodes %s are all advertised at %s: a client reaches at most one of them there", text.IDs(f.NodeIDs, 0), f.Endpoint)
	if f.Held > 0 {
		s += fmt.Sprintf("; clients were refused there for %s", text.Duration(f.Held))
		if f.Ongoing {
			s += ", still at the end of the capture"
		}
	}
	return s
}

// felt says what clients met at the endpoint, and what makes the severity.
func (f *Finding) felt() string {
	var b strings.Builder
	var met []string
	if f.Refused > 0 {
		met = append(met, fmt.Sprintf("%s NOT_LEADER_OR_FOLLOWER from %s (%s): the broker listening there does not lead "+
			"what clients sent it", text.Plural(f.Refused, "Produce/Fetch partition answer", "Produce/Fetch partition answers"),
			f.Endpoint, text.Plural(f.Parts, "partition", "partitions")))
	}
	if f.Rebootstrap > 0 {
		met = append(met, fmt.Sprintf("%s from %s REBOOTSTRAP_REQUIRED to clients asking for %s (KIP-1242: the broker "+
			"listening there is not the node the client expected; the client starts over from its bootstrap servers and is "+
			"sent back there)", text.Plural(f.Rebootstrap, "ApiVersions answer", "ApiVersions answers"), f.Endpoint,
			text.Word(len(f.RebootNodes), "node", "nodes")+" "+text.IDs(f.RebootNodes, 0)))
	}
	if f.Attempts > 0 {
		met = append(met, fmt.Sprintf("%s to %s refused or unanswered", text.Plural(f.Attempts, "connection attempt", "connection attempts"), f.Endpoint))
	}
	if len(met) > 0 {
		fmt.Fprintf(&b, " Clients met it: %s", strings.Join(met, "; "))
		if f.Held > 0 {
			fmt.Fprintf(&b, "; the longest a partition, a node or the connections went refused was %s", text.Duration(f.Held))
			if f.Ongoing {
				b.WriteString(", still at the end of the capture")
			}
		}
		b.WriteString(".")
	}
	if f.PartsDropped > 0 {
		fmt.Fprintf(&b, " (%s of partitions beyond the first %d, or nodes beyond the first %d, were not followed.)",
			text.Plural(f.PartsDropped, "refusal", "refusals"), maxParts, maxIDs)
	}
	if f.Severity == detectors.Error {
		fmt.Fprintf(&b, " An error: clients were refused there for %s", text.Duration(f.Held))
		if f.Held < detectors.LongAfter {
			b.WriteString(" and still at the end of the capture")
		}
		b.WriteString(".")
	} else {
		fmt.Fprintf(&b, " A warning: a misconfiguration that will bite; an error once clients are refused there for %s, "+
			"or still after %s at the end of a capture.", text.Duration(detectors.LongAfter), text.Duration(detectors.HealAfter))
	}
	return b.String()
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var b strings.Builder
	ids := text.IDs(f.NodeIDs, 0)
	fmt.Fprintf(&b, "%s from %s to %s, from %s to %s UTC, list nodes %s at the same address %s. ",
		f.responsesText(), strings.Join(f.ServerLabels, ", "), strings.Join(f.Clients, ", "),
		text.Stamp(f.Told.First), text.Stamp(f.Told.Last), ids, f.Endpoint)
	fmt.Fprintf(&b, "Clients connect to a node at the address it advertises, so requests for nodes %s all go to whatever "+
		"listens on %s, which is one process at most: requests for the others reach the wrong broker "+
		"(NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR) or are refused when that one is down. ", ids, f.Endpoint)
	if len(f.Unadvertised) > 0 {
		fmt.Fprintf(&b, "The responses came from %s, an address no node advertises: the brokers listen elsewhere than they advertise.",
			strings.Join(f.Unadvertised, ", "))
	}
	b.WriteString(f.felt())
	b.WriteString(f.omitted())
	if f.Dropped > 0 {
		fmt.Fprintf(&b, " (%s listing several nodes at other endpoints were not followed: more than %d such endpoints.)",
			text.Plural(f.Dropped, "response", "responses"), maxIssues)
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	server := text.First(f.Servers, f.Endpoint)
	return fmt.Sprintf("Give each broker its own advertised.listeners, matching the address it listens on (listeners=), "+
		"for nodes %s; check with kafka-broker-api-versions.sh --bootstrap-server %s (one line per node with its address) "+
		"or kcat -L -b %s.", text.IDs(f.NodeIDs, 0), server, server)
}

// Loopback is loopback addresses advertised to remote clients: a warning,
// or info when every client told reached a broker anyway (a port
// forward). Its exported fields are the finding's "fields".
type Loopback struct {
	Problem   string   `json:"problem"`  // "loopback"
	Endpoint  string   `json:"endpoint"` // the first of Endpoints
	Endpoints []string `json:"endpoints"`
	NodeIDs   []int32  `json:"node_ids"`
	Servers   []string `json:"servers"`
	Clients   []string `json:"clients"` // every remote client told
	Stuck     []string `json:"stuck"`   // those that did not reach a broker afterwards

	Ports []int32
	Told
	Warning bool
}

func (l *Loopback) nodes() string {
	return text.Word(len(l.NodeIDs), "node", "nodes") + " " + text.IDs(l.NodeIDs, 0)
}

func (l *Loopback) portList() string {
	ports := make([]string, len(l.Ports))
	for i, p := range l.Ports {
		ports[i] = strconv.Itoa(int(p))
	}
	return strings.Join(ports, "/")
}

// Summary implements detectors.Detail.
func (l *Loopback) Summary() string {
	eps := strings.Join(l.Endpoints, ", ")
	if l.Warning {
		n := len(l.Stuck)
		return fmt.Sprintf("%s advertised at %s to remote %s %s: %s will connect to %s", l.nodes(), eps,
			text.Word(n, "client", "clients"), strings.Join(l.Stuck, ", "), text.Word(n, "it", "they"), text.Word(n, "itself", "themselves"))
	}
	return fmt.Sprintf("%s advertised at %s to remote %s %s, which reached the brokers anyway (port forwarding)",
		l.nodes(), eps, text.Word(len(l.Clients), "client", "clients"), strings.Join(l.Clients, ", "))
}

// Explanation implements detectors.Detail.
func (l *Loopback) Explanation() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s from %s, from %s to %s UTC, give remote %s %s the loopback %s %s for %s. ",
		l.responsesText(), strings.Join(l.ServerLabels, ", "), text.Stamp(l.Told.First), text.Stamp(l.Told.Last),
		text.Word(len(l.Clients), "client", "clients"), strings.Join(l.Clients, ", "),
		text.Word(len(l.Endpoints), "address", "addresses"), strings.Join(l.Endpoints, ", "), l.nodes())
	b.WriteString("A loopback address means the client's own host: after bootstrapping, the client connects to itself, " +
		"gets refused or reaches something else, and never produces or fetches.")
	switch {
	case !l.Warning:
		fmt.Fprintf(&b, " Each of these clients afterwards opened a connection to port %s carrying Produce, Fetch or group requests, "+
			"so the address works for them (a port forward, e.g. Docker's -p); clients elsewhere would fail.", l.portList())
	case len(l.Stuck) < len(l.Clients):
		fmt.Fprintf(&b, " Some clients did reach a broker on port %s afterwards (a port forward?); %s did not.", l.portList(), strings.Join(l.Stuck, ", "))
	default:
		fmt.Fprintf(&b, " No new connection from %s to port %s carried Produce, Fetch or group requests afterwards.", strings.Join(l.Stuck, ", "), l.portList())
	}
	b.WriteString(l.omitted())
	return b.String()
}

// Next implements detectors.Detail.
func (l *Loopback) Next() string {
	return fmt.Sprintf("Set advertised.listeners of %s to an address the clients can reach (the broker's IP or DNS name); "+
		"for clients both inside and outside a container or host, use two listeners (e.g. INTERNAL://localhost:%d,EXTERNAL://<host>:<port>) "+
		"with listener.security.protocol.map. Check with kcat -L -b %s from the client host.",
		l.nodes(), l.Ports[0], text.First(l.Servers, l.Endpoint))
}
