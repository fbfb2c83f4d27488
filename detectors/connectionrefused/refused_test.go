package connectionrefused_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/connectionrefused"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
)

func sec(s float64) time.Time { return dt.At(time.Duration(s * float64(time.Second))) }

// advertise opens a connection from client to server at second s, its
// handshake captured, with a Metadata exchange that advertises brokers.
func advertise(h *dt.Harness, s float64, client, server string, brokers ...kmsg.MetadataResponseBroker) {
	c := h.Conn(client, server)
	c.Handshake, c.FirstSeen = true, sec(s)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	h.Call(c, sec(s+0.01), time.Millisecond, "app", req, dt.Advertise(brokers...))
}

// refusedEvery delivers n refused attempts from the client host to
// server, from second from, every seconds apart, from source ports 50000
// up, in packets 1000 up.
func refusedEvery(h *dt.Harness, client, server string, from float64, n int, every float64) {
	for i := range n {
		h.ConnEvent(dt.Refused(fmt.Sprintf("%s:%d", client, 50000+i), server, sec(from+float64(i)*every), uint64(1000+i)))
	}
}

var b1, b2 = dt.Broker(1, "10.0.0.2", 9092), dt.Broker(2, "10.0.0.3", 9092)

// refusedOver delivers n refused attempts from the client host to server,
// the first at second from and the last span seconds later.
func refusedOver(h *dt.Harness, client, server string, from float64, n int, span float64) {
	every := 0.0
	if n > 1 {
		every = span / float64(n-1)
	}
	refusedEvery(h, client, server, from, n, every)
}

// kafkaAt opens a Kafka connection (its handshake captured) from client to
// server at second s, with an exchange.
func kafkaAt(h *dt.Harness, s float64, client, server string) {
	c := h.Conn(client, server)
	c.Handshake, c.FirstSeen = true, sec(s)
	h.Call(c, sec(s+0.01), time.Millisecond, "app", dt.ApiVersions(), dt.ApiVersionsOK())
}

// restart is a case of n refusals of an advertised broker over span
// seconds, then a connection to it at second at: graded want.
func restart(name string, settings map[string]string, n int, span, at float64, want detectors.Severity) dt.Case {
	return dt.Case{
		Name:     name,
		Settings: settings,
		Traffic: func(h *dt.Harness) {
			refusedOver(h, "10.0.0.1", "10.0.0.2:9092", 0, n, span)
			advertise(h, at, "10.0.0.1:40000", "10.0.0.2:9092", b1)
		},
		Want: []dt.Want{{Severity: want, Detail: &connectionrefused.Finding{
			Attempts: int64(n), Recovered: true, UnableS: span, Ongoing: false,
		}, Exact: []string{"Attempts", "UnableS", "Ongoing"}}},
		Nodes: []int32{1},
	}
}

func TestConnectionRefused(t *testing.T) {
	dt.Run(t, connectionrefused.Analyzer, []dt.Case{
		{
			Name: "an advertised broker refuses every attempt for 9 s, to the end: a warning",
			Traffic: func(h *dt.Harness) {
				advertise(h, 0, "10.0.0.1:40000", "10.0.0.2:9092", b1, b2)
				refusedEvery(h, "10.0.0.1", "10.0.0.3:9092", 1, 10, 1)
			},
			Want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &connectionrefused.Finding{
					Attempts: 10, Refused: 10, Unanswered: 0, SYNs: 10, Endpoint: "10.0.0.3:9092",
					Advertised: true, AdvertisedAs: []string{"10.0.0.3:9092"}, Clients: []string{"10.0.0.1"},
					Recovered: false, KafkaEndpoint: true, UnableS: 9.0, Ongoing: true,
				}, Exact: []string{"Unanswered", "Recovered"},
				Summary: []string{"10 connection attempts to 10.0.0.3:9092 from 10.0.0.1 refused (SYN answered by RST) over 9.0 s",
					"Metadata advertises it (10.0.0.3:9092) for node 2", "none opened afterwards"},
				Evidence: []uint64{1000, 1009},
			}},
			Nodes:       []int32{2},
			Explanation: []string{"Clients were unable to connect for 9.0 s (first to last failure), and it had not healed"},
		},
		{
			Name: "near miss: refused for 9.9 s to the end of the capture is a warning",
			Traffic: func(h *dt.Harness) {
				advertise(h, 0, "10.0.0.1:40000", "10.0.0.2:9092", b1, b2)
				refusedOver(h, "10.0.0.1", "10.0.0.3:9092", 1, 12, 9.9)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &connectionrefused.Finding{UnableS: 9.9, Ongoing: true}}},
		},
		{
			Name: "near miss the other way: refused for 10 s to the end of the capture is an error",
			Traffic: func(h *dt.Harness) {
				advertise(h, 0, "10.0.0.1:40000", "10.0.0.2:9092", b1, b2)
				refusedOver(h, "10.0.0.1", "10.0.0.3:9092", 1, 12, 10)
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &connectionrefused.Finding{UnableS: 10.0, Ongoing: true}}},
		},
		{
			Name: "loopback advertised as localhost matches 127.0.0.1",
			Traffic: func(h *dt.Harness) {
				advertise(h, 0, "127.0.0.1:40000", "127.0.0.1:9692", dt.Broker(4, "localhost", 9492), dt.Broker(5, "localhost", 9492))
				refusedEvery(h, "127.0.0.1", "127.0.0.1:9492", 1, 5, 1)
			},
			Want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &connectionrefused.Finding{
					Attempts: 5, Endpoint: "127.0.0.1:9492", Advertised: true,
					AdvertisedAs: []string{"localhost:9492"}, Clients: []string{"127.0.0.1"},
				},
				Summary: []string{"for nodes 4, 5"},
			}},
			Nodes: []int32{4, 5},
		},
		{
			Name: "one refused attempt, then the connection works: a restart",
			Traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 1, 1)
				advertise(h, 0.2, "10.0.0.1:40000", "10.0.0.2:9092", b1)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &connectionrefused.Finding{
				Attempts: 1, Recovered: true, Advertised: true, UnableS: 0.0, Ongoing: false,
			}, Exact: []string{"UnableS", "Ongoing"},
				Summary: []string{"1 connection attempt to", "; a connection to it opened afterwards"}}},
			Nodes: []int32{1},
		},
		{
			Name: "an earlier connection does not make it recovered",
			Traffic: func(h *dt.Harness) {
				advertise(h, 0, "10.0.0.1:40000", "10.0.0.2:9092", b1)
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 1, 3, 1)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &connectionrefused.Finding{
				Recovered: false, Advertised: true,
			}, Exact: []string{"Recovered"}}},
			Nodes: []int32{1},
		},
		{
			Name: "near miss: a connection after the failures, captured without its handshake, is not a recovery",
			Traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 3, 1)
				c := h.Conn("10.0.0.1:40000", "10.0.0.2:9092")
				c.FirstSeen, c.MidStream = sec(2.5), true
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &connectionrefused.Finding{
				Recovered: false, Advertised: false, KafkaEndpoint: true,
			}, Exact: []string{"Recovered", "Advertised"}}},
		},
		{
			Name: "a connection opening at the moment of the last failure is a recovery",
			Traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 3, 1)
				advertise(h, 2, "10.0.0.1:40000", "10.0.0.2:9092", b1)
			},
			Want:  []dt.Want{{Severity: detectors.Info, Detail: &connectionrefused.Finding{Recovered: true, UnableS: 2.0}}},
			Nodes: []int32{1},
		},

		// A dead endpoint: every attempt refused, none opened afterwards.
		{
			Name:    "three attempts in 2 s, never followed by a connection: a dead endpoint, a warning however short",
			Traffic: func(h *dt.Harness) { refusedOver(h, "10.0.0.1", "10.0.0.2:9092", 0, 3, 2) },
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &connectionrefused.Finding{
				Attempts: 3, UnableS: 2.0, Ongoing: true,
			}}},
		},
		{
			Name:    "near miss: two attempts in 2.9 s, under min-attempts and under 3 s",
			Traffic: func(h *dt.Harness) { refusedOver(h, "10.0.0.1", "10.0.0.2:9092", 0, 2, 2.9) },
			Want: []dt.Want{{Severity: detectors.Info, Detail: &connectionrefused.Finding{
				Attempts: 2, Advertised: false, AdvertisedAs: []string(nil), KafkaEndpoint: true,
			}, Exact: []string{"Advertised", "AdvertisedAs"}}},
			Explanation: []string{"Info only: fewer than 3 attempts failed, for less than 3.0 s."},
		},
		{
			Name:    "near miss the other way: two attempts 3 s apart: clients were unable to connect for 3 s",
			Traffic: func(h *dt.Harness) { refusedOver(h, "10.0.0.1", "10.0.0.2:9092", 0, 2, 3) },
			Want:    []dt.Want{{Severity: detectors.Warning, Detail: &connectionrefused.Finding{Attempts: 2, UnableS: 3.0}}},
		},
		{
			Name:     "two attempts in 1 s with min-attempts 2",
			Settings: map[string]string{"min-attempts": "2"},
			Traffic:  func(h *dt.Harness) { refusedOver(h, "10.0.0.1", "10.0.0.2:9092", 0, 2, 1) },
			Want:     []dt.Want{{Severity: detectors.Warning, Detail: &connectionrefused.Finding{Attempts: 2}}},
		},

		// A restart: failures, then a connection that opens; graded by
		// how long clients were unable to connect.
		restart("a broker restart: refusals for 2.9 s, then a connection: info", nil, 8, 2.9, 5, detectors.Info),
		restart("near miss the other way: refusals for 3 s, then a connection: clients felt it, a warning", nil, 8, 3, 5, detectors.Warning),
		restart("recovery 10 s: a restart refusing for 5 s is info", map[string]string{"recovery": "10"}, 11, 5, 6, detectors.Info),
		restart("recovery as a Go duration, below 3 s: a restart refusing for 2 s is a warning",
			map[string]string{"recovery": "1500ms"}, 5, 2, 2.5, detectors.Warning),
		restart("near miss: refusals for 29.9 s, then a connection: a warning", nil, 30, 29.9, 31, detectors.Warning),
		restart("near miss the other way: refusals for 30 s, then a connection: an error", nil, 31, 30, 31, detectors.Error),
		restart("near miss: refusals for 12 s that healed are a warning, not an error", nil, 13, 12, 13, detectors.Warning),
		{
			Name: "SYNs never answered, from two clients, over 44 s: an error",
			Traffic: func(h *dt.Harness) {
				advertise(h, 0, "10.0.0.1:40000", "10.0.0.2:9092", b1, b2)
				for i := range 4 {
					h.ConnEvent(dt.SynUnanswered(fmt.Sprintf("10.0.0.5:%d", 51000+i), "10.0.0.3:9092", sec(1+float64(10*i)), uint64(100+i), 2))
				}
				h.ConnEvent(dt.SynUnanswered("10.0.0.1:51000", "10.0.0.3:9092", sec(45), 200, 0))
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &connectionrefused.Finding{
					Attempts: 5, Unanswered: 5, Refused: 0, SYNs: 4*3 + 1,
					Clients: []string{"10.0.0.1", "10.0.0.5"}, Advertised: true,
				}, Exact: []string{"Refused", "SYNs"},
				Summary:  []string{"5 connection attempts to 10.0.0.3:9092 from 10.0.0.1, 10.0.0.5 never answered (SYNs unanswered) over 44.0 s"},
				Evidence: []uint64{100, 200},
			}},
			Nodes: []int32{2},
		},
		{
			Name: "refused and unanswered attempts to one endpoint",
			Traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 3, 1)
				h.ConnEvent(dt.SynUnanswered("10.0.0.1:51000", "10.0.0.2:9092", sec(4), 200, 1))
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &connectionrefused.Finding{
				Attempts: 4, Refused: 3, Unanswered: 1, SYNs: 5,
			},
				Summary: []string{"failed (3 refused by RST, 1 SYN unanswered)"}}},
		},

		// Which endpoints are Kafka.
		{
			Name:    "a port that is not Kafka, on a host that never speaks Kafka: info however long",
			Traffic: func(h *dt.Harness) { refusedEvery(h, "10.0.0.1", "10.0.0.2:8080", 0, 40, 1) },
			Want: []dt.Want{{Severity: detectors.Info, Detail: &connectionrefused.Finding{
				Attempts: 40, KafkaEndpoint: false, Advertised: false, SameHost: []string(nil),
			}, Exact: []string{"KafkaEndpoint", "Advertised", "SameHost"}}},
			Explanation: []string{"Info only: the endpoint is not known as Kafka", "a port scan or a health check"},
		},
		{
			// The Java client given broker 1's wrong port while another
			// broker's Metadata names broker 1 at :9092 (recorded on Apache
			// Kafka 4.1.1: fixtures/pcaps/kafka/java-refused-bootstrap); no
			// connection to :9092 in the capture.
			Name: "a port on a host whose Kafka endpoint Metadata advertises: a dead bootstrap server",
			Traffic: func(h *dt.Harness) {
				advertise(h, 0, "10.0.0.1:40000", "10.0.0.3:9092", b1, b2)
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9099", 1, 20, 1)
			},
			Want: []dt.Want{{Severity: detectors.Error,
				Detail: &connectionrefused.Finding{
					KafkaEndpoint: true, Advertised: false, SameHost: []string{"10.0.0.2:9092"},
				}, Exact: []string{"Advertised"}}},
			Explanation: []string{"Its host serves Kafka in this capture (10.0.0.2:9092)"},
		},
		{
			Name: "near miss: another port with a Kafka connection to it is Kafka",
			Traffic: func(h *dt.Harness) {
				h.Conn("10.0.0.1:40000", "10.0.0.2:8080")
				refusedEvery(h, "10.0.0.1", "10.0.0.2:8080", 1, 5, 1)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &connectionrefused.Finding{
				KafkaEndpoint: true, Advertised: false, Recovered: false,
			}, Exact: []string{"Advertised", "Recovered"}}},
		},
		{
			Name: "a port that never accepted a connection, on a host serving Kafka elsewhere: a dead bootstrap server",
			Traffic: func(h *dt.Harness) {
				kafkaAt(h, 0, "10.0.0.7:40000", "10.0.0.2:9092")
				refusedOver(h, "10.0.0.1", "10.0.0.2:39092", 1, 3, 1)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &connectionrefused.Finding{
				Attempts: 3, KafkaEndpoint: true, Advertised: false, Accepted: false,
				SameHost: []string{"10.0.0.2:9092"}, UnableS: 1.0, Ongoing: true,
			}, Exact: []string{"Advertised", "Accepted"},
				Summary: []string{"its host serves Kafka at 10.0.0.2:9092 and this port never accepted a connection: a dead bootstrap server or listener"}}},
			Explanation: []string{"Its host serves Kafka in this capture (10.0.0.2:9092)"},
			Next:        []string{"Check the clients' bootstrap.servers (the port Kafka listens on at that host is 10.0.0.2:9092)"},
		},
		{
			Name: "the dead bootstrap server refused for 12 s until the end: an error",
			Traffic: func(h *dt.Harness) {
				kafkaAt(h, 0, "10.0.0.7:40000", "10.0.0.2:9092")
				refusedOver(h, "10.0.0.1", "10.0.0.2:39092", 1, 13, 12)
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &connectionrefused.Finding{KafkaEndpoint: true, UnableS: 12.0}}},
		},
		{
			Name: "near miss: the same port seen accepting a connection (not Kafka): something else listens, info",
			Traffic: func(h *dt.Harness) {
				kafkaAt(h, 0, "10.0.0.7:40000", "10.0.0.2:9092")
				h.Accepting("10.0.0.2:39092")
				refusedOver(h, "10.0.0.1", "10.0.0.2:39092", 1, 13, 12)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &connectionrefused.Finding{
				KafkaEndpoint: false, Accepted: true, SameHost: []string{"10.0.0.2:9092"},
			}, Exact: []string{"KafkaEndpoint"}}},
			Explanation: []string{"it accepted connections, so something else listens there"},
		},
		{
			Name: "near miss: Kafka served by another host only (a port scan from a Kafka client): info",
			Traffic: func(h *dt.Harness) {
				kafkaAt(h, 0, "10.0.0.1:40000", "10.0.0.3:9092")
				refusedOver(h, "10.0.0.1", "10.0.0.2:39092", 1, 13, 12)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &connectionrefused.Finding{
				KafkaEndpoint: false, SameHost: []string(nil),
			}, Exact: []string{"KafkaEndpoint", "SameHost"}}},
		},
		{
			Name: "one finding per endpoint",
			Traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.9:9092", 0, 3, 1)
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 1, 1)
			},
			Want: []dt.Want{
				{Severity: detectors.Warning, Detail: &connectionrefused.Finding{Endpoint: "10.0.0.9:9092"}},
				{Severity: detectors.Info, Detail: &connectionrefused.Finding{Endpoint: "10.0.0.2:9092"}},
			},
		},
		{
			Name: "clients beyond 16 are counted, not listed",
			Traffic: func(h *dt.Harness) {
				for i := range 20 {
					h.ConnEvent(dt.Refused(fmt.Sprintf("10.0.1.%d:50000", i+1), "10.0.0.2:9092", sec(float64(i)/10), uint64(1000+i)))
				}
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &connectionrefused.Finding{Attempts: 20},
				Summary: []string{"10.0.1.15, 10.0.1.16 and more refused"}}},
		},
		{
			Name: "near miss: connections that work yield nothing",
			Traffic: func(h *dt.Harness) {
				advertise(h, 0, "10.0.0.1:40000", "10.0.0.2:9092", b1)
				advertise(h, 1, "10.0.0.1:40001", "10.0.0.2:9092", b1)
			},
		},
	}, nil)
}

// TestConnectionRefusedProse: what the finding says, for one unanswered
// attempt and for a restart.
func TestConnectionRefusedProse(t *testing.T) {
	h := dt.New(t, nil, connectionrefused.Analyzer)
	h.ConnEvent(dt.SynUnanswered("10.0.0.1:51000", "10.0.0.3:9092", sec(1), 7, 0))
	refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 8, 0.25)
	advertise(h, 2.5, "10.0.0.1:40000", "10.0.0.2:9092", b1)
	fs := h.Findings()
	if len(fs) != 2 {
		t.Fatalf("findings:%s", dt.Describe(fs))
	}
	restart, syn := fs[0], fs[1]
	if syn.Summary != "1 connection attempt to 10.0.0.3:9092 from 10.0.0.1 never answered (SYNs unanswered); none opened afterwards" {
		t.Errorf("summary %q", syn.Summary)
	}
	for _, want := range []string{"(1 SYN with retransmissions)", "An unanswered SYN means the host is down",
		"No Metadata response in the capture advertises it", "No Kafka connection to it is in the capture.",
		"Info only: fewer than 3 attempts failed, for less than 3.0 s."} {
		if !strings.Contains(syn.Explanation, want) {
			t.Errorf("explanation %q lacks %q", syn.Explanation, want)
		}
	}
	if syn.Evidence[0].What != "SYN from 10.0.0.1:51000 to 10.0.0.3:9092 never answered (1 SYN)" {
		t.Errorf("evidence %q", syn.Evidence[0].What)
	}
	for _, want := range []string{"Check the clients' bootstrap.servers", "is the host up, firewall"} {
		if !strings.Contains(syn.Next, want) {
			t.Errorf("next %q lacks %q", syn.Next, want)
		}
	}
	for _, want := range []string{"(8 SYNs with retransmissions)", "for node 1, so clients are sent there",
		"1 connection to it opened after the last failure.",
		"Info only: the failures lasted 1.8 s, under 3.0 s, and then a connection to it opened (a restart)."} {
		if !strings.Contains(restart.Explanation, want) {
			t.Errorf("explanation %q lacks %q", restart.Explanation, want)
		}
	}
	if want := "for node 1; compare listeners= and advertised.listeners= of that node with this address"; !strings.Contains(restart.Next, want) {
		t.Errorf("next %q lacks %q", restart.Next, want)
	}
}
