package advertisedlistenerconflict_test

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/advertisedlistenerconflict"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/flows"
)

const rule = "advertised-listener-conflict"

// advertise answers one Metadata request on c at second s, the response
// advertising brokers.
func advertise(h *dt.Harness, c *flows.Conn, s float64, brokers ...kmsg.MetadataResponseBroker) {
	req, resp := dt.Metadata(12, brokers, dt.MetaTopic("orders", dt.Led(0, 1)))
	h.Call(c, dt.At(time.Duration(s*float64(time.Second))), 2*time.Millisecond, "app", req, resp)
}

// produce sends one Produce request on c at second s.
func produce(h *dt.Harness, c *flows.Conn, s float64) {
	h.Call(c, dt.At(time.Duration(s*float64(time.Second))), 2*time.Millisecond, "app", dt.Produce(9), dt.Produced(9, 0, 0))
}

var b = dt.MetaBroker

func TestListenerConflict(t *testing.T) {
	for _, tc := range []struct {
		name    string
		traffic func(h *dt.Harness)
		want    []dt.Want
	}{
		{
			name: "two node ids at one host:port",
			traffic: func(h *dt.Harness) {
				c := h.Conn("10.0.0.1:40000", "10.0.0.2:9092")
				for s := range 3 {
					advertise(h, c, float64(s), b(1, "10.0.0.2", 9092), b(2, "10.0.0.2", 9092), b(3, "10.0.0.4", 9092))
				}
			},
			want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &advertisedlistenerconflict.Finding{
					Problem: "shared-endpoint", Endpoint: "10.0.0.2:9092", NodeIDs: []int32{1, 2},
					Servers: []string{"10.0.0.2:9092"}, Clients: []string{"10.0.0.1"}, RefusedS: 0.0,
					Ongoing: false, Told: advertisedlistenerconflict.Told{Responses: 3},
				}, Exact: []string{"RefusedS", "Ongoing"},
				Summary:  []string{"nodes 1, 2 are all advertised at 10.0.0.2:9092: a client reaches at most one of them there"},
				Evidence: []uint64{2, 6},
			}},
		},
		{
			name: "localhost and 127.0.0.1 at one port are one listener",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("127.0.0.1:40000", "127.0.0.1:9092"), 0, b(1, "localhost", 9092), b(2, "127.0.0.1", 9092))
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Finding{
				NodeIDs: []int32{1, 2}, Endpoint: "127.0.0.1:9092",
			}}},
		},
		{
			name: "::1 and localhost at one port are one listener",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("127.0.0.1:40000", "127.0.0.1:9092"), 0, b(1, "localhost", 9092), b(2, "::1", 9092))
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Finding{NodeIDs: []int32{1, 2}}}},
		},
		{
			name: "host names compare case-insensitively",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("10.0.0.1:40000", "10.0.0.2:9092"), 0, b(1, "kafka-0.example", 9092), b(2, "KAFKA-0.example", 9092))
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Finding{NodeIDs: []int32{1, 2}}}},
		},
		{
			name: "DescribeCluster with two ids at one endpoint",
			traffic: func(h *dt.Harness) {
				req, resp := dt.DescribeCluster(dt.ClusterBroker(7, "kafka.internal", 9092), dt.ClusterBroker(8, "kafka.internal", 9092))
				h.Call(h.Conn("10.0.0.1:40000", "10.0.0.2:9092"), dt.At(0), time.Millisecond, "admin", req, resp)
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Finding{
				Endpoint: "kafka.internal:9092", NodeIDs: []int32{7, 8},
			},
				Summary: []string{"nodes 7, 8 are all advertised at kafka.internal:9092"}}},
		},
		{
			name: "near miss: a node that moves to another address is not a conflict",
			traffic: func(h *dt.Harness) {
				c := h.Conn("10.0.0.1:40000", "10.0.0.2:9092")
				advertise(h, c, 0, b(1, "10.0.0.2", 9092), b(2, "10.0.0.3", 9092))
				// Node 2 took node 1's address; node 1 moved.
				advertise(h, c, 10, b(1, "10.0.0.9", 9092), b(2, "10.0.0.2", 9092))
			},
		},
		{
			name: "near miss: the same node listed twice at one endpoint",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("10.0.0.1:40000", "10.0.0.2:9092"), 0, b(1, "10.0.0.2", 9092), b(1, "10.0.0.2", 9092))
			},
		},
		{
			name: "near miss: brokers on one host at different ports (kfake)",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("127.0.0.1:40000", "127.0.0.1:9092"), 0, b(0, "127.0.0.1", 9092), b(1, "127.0.0.1", 9093), b(2, "127.0.0.1", 9094))
			},
		},
		{
			name: "localhost told to a remote client",
			traffic: func(h *dt.Harness) {
				c := h.Conn("10.0.0.1:40000", "10.0.0.2:9092")
				advertise(h, c, 0, b(1, "localhost", 9092))
				advertise(h, c, 1, b(1, "localhost", 9092))
			},
			want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &advertisedlistenerconflict.Loopback{
					Problem: "loopback", Endpoint: "localhost:9092", Endpoints: []string{"localhost:9092"},
					NodeIDs: []int32{1}, Servers: []string{"10.0.0.2:9092"}, Clients: []string{"10.0.0.1"},
					Stuck: []string{"10.0.0.1"}, Told: advertisedlistenerconflict.Told{Responses: 2},
				},
				Summary:  []string{"node 1 advertised at localhost:9092 to remote client 10.0.0.1: it will connect to itself"},
				Evidence: []uint64{2, 4},
			}},
		},
		{
			name: "a whole cluster at localhost told to a remote client: one finding",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("10.0.0.1:40000", "10.0.0.2:9092"), 0, b(0, "localhost", 9092), b(1, "localhost", 9093), b(2, "localhost", 9094))
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Loopback{
				Endpoint:  "localhost:9092",
				Endpoints: []string{"localhost:9092", "localhost:9093", "localhost:9094"},
				NodeIDs:   []int32{0, 1, 2}, Stuck: []string{"10.0.0.1"},
			}}},
		},
		{
			name: "127.0.1.1 told to a remote client",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("10.0.0.1:40000", "10.0.0.2:9092"), 0, b(1, "127.0.1.1", 9092))
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Loopback{Endpoint: "127.0.1.1:9092"}}},
		},
		{
			name: "0.0.0.0, [::1] and localhost.localdomain told to remote clients",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("10.0.0.1:40000", "10.0.0.2:9092"), 0, b(1, "0.0.0.0", 9092), b(2, "::1", 9093), b(3, "localhost.localdomain", 9094))
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Loopback{
				Endpoints: []string{"0.0.0.0:9092", "[::1]:9093", "localhost.localdomain:9094"},
				NodeIDs:   []int32{1, 2, 3},
			}}},
		},
		{
			name: "near miss: localhost told to a local client",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("127.0.0.1:40000", "127.0.0.1:9092"), 0, b(1, "localhost", 9092))
			},
		},
		{
			name: "near miss: localhost told to a client on the broker's own address",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("10.0.0.2:40000", "10.0.0.2:9092"), 0, b(1, "localhost", 9092))
			},
		},
		{
			name: "near miss: a host name that is not loopback",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("10.0.0.1:40000", "10.0.0.2:9092"), 0, b(1, "VM_9_227_centos", 9092), b(2, "localhost-1.example", 9092))
			},
		},
		{
			name: "localhost through a port forward: the client then produces",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("172.17.0.1:40000", "172.17.0.2:9092"), 0, b(1, "localhost", 9092))
				produce(h, h.Conn("172.17.0.1:40001", "172.17.0.2:9092"), 1.1)
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &advertisedlistenerconflict.Loopback{
				Clients: []string{"172.17.0.1"}, Stuck: []string{},
			}, Exact: []string{"Stuck"},
				Summary: []string{"node 1 advertised at localhost:9092 to remote client 172.17.0.1, which reached the brokers anyway (port forwarding)"}}},
		},
		{
			name: "near miss: the client's producing connection was opened before it was told",
			traffic: func(h *dt.Harness) {
				q := h.Conn("172.17.0.1:40001", "172.17.0.2:9092")
				advertise(h, h.Conn("172.17.0.1:40000", "172.17.0.2:9092"), 1, b(1, "localhost", 9092))
				produce(h, q, 2)
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Loopback{Stuck: []string{"172.17.0.1"}}}},
		},
		{
			name: "near miss: the client then produces to another port",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("172.17.0.1:40000", "172.17.0.2:9092"), 0, b(1, "localhost", 9092))
				produce(h, h.Conn("172.17.0.1:40001", "172.17.0.2:9093"), 1.1)
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Loopback{Stuck: []string{"172.17.0.1"}}}},
		},
		{
			name: "a remote client that only refreshes metadata is stuck",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("10.0.0.1:40000", "10.0.0.2:9092"), 0, b(1, "localhost", 9092))
				advertise(h, h.Conn("10.0.0.1:40001", "10.0.0.2:9092"), 1.1, b(1, "localhost", 9092))
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Loopback{
				Stuck: []string{"10.0.0.1"}, Told: advertisedlistenerconflict.Told{Responses: 2},
			}}},
		},
		{
			name: "two clients told, one reached a broker",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("172.17.0.1:40000", "172.17.0.2:9092"), 0, b(1, "localhost", 9092))
				advertise(h, h.Conn("10.0.0.1:40000", "172.17.0.2:9092"), 0.5, b(1, "localhost", 9092))
				produce(h, h.Conn("172.17.0.1:40001", "172.17.0.2:9092"), 1.1)
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Loopback{
				Clients: []string{"10.0.0.1", "172.17.0.1"}, Stuck: []string{"10.0.0.1"},
			},
				Summary: []string{"to remote client 10.0.0.1: it will connect to itself"}}},
		},
		{
			name: "a shared endpoint and loopback addresses, one finding each",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("10.0.0.1:40000", "10.0.0.2:9092"), 0, b(1, "localhost", 9092), b(2, "localhost", 9092))
			},
			want: []dt.Want{
				{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Finding{
					Problem: "shared-endpoint", Endpoint: "localhost:9092",
				}},
				{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Loopback{
					Problem: "loopback", NodeIDs: []int32{1, 2},
				}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, nil, advertisedlistenerconflict.Analyzer)
			tc.traffic(h)
			dt.Check(t, h.Findings(), rule, tc.want...)
		})
	}
}

// TestListenerConflictExplains: the explanation says where the responses
// came from, and whether the clients told found a way to the brokers.
func TestListenerConflictExplains(t *testing.T) {
	for _, tc := range []struct {
		name    string
		traffic func(h *dt.Harness)
		want    string
		not     string
	}{
		{
			name: "answered from an address no node advertises",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("127.0.0.1:40000", "127.0.0.1:9692"), 0, b(4, "localhost", 9492), b(5, "localhost", 9492))
			},
			want: "The responses came from 127.0.0.1:9692, an address no node advertises",
		},
		{
			name: "near miss: answered by a node at its advertised address",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("10.0.0.1:40000", "10.0.0.2:9092"), 0, b(1, "10.0.0.2", 9092), b(2, "10.0.0.3", 9092), b(3, "10.0.0.3", 9092))
			},
			want: "1 Metadata response from node 1 (10.0.0.2:9092) to 10.0.0.1",
			not:  "no node advertises",
		},
		{
			name: "nobody reached a broker",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("10.0.0.1:40000", "10.0.0.2:9092"), 0, b(1, "localhost", 9092))
			},
			want: "No new connection from 10.0.0.1 to port 9092 carried Produce, Fetch or group requests afterwards.",
		},
		{
			name: "some reached a broker",
			traffic: func(h *dt.Harness) {
				advertise(h, h.Conn("172.17.0.1:40000", "172.17.0.2:9092"), 0, b(1, "localhost", 9092))
				advertise(h, h.Conn("10.0.0.1:40000", "172.17.0.2:9092"), 0.5, b(1, "localhost", 9092))
				produce(h, h.Conn("172.17.0.1:40001", "172.17.0.2:9092"), 1.1)
			},
			want: "Some clients did reach a broker on port 9092 afterwards (a port forward?); 10.0.0.1 did not.",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, nil, advertisedlistenerconflict.Analyzer)
			tc.traffic(h)
			fs := h.Findings()
			if len(fs) != 1 {
				t.Fatalf("want one finding:%s", dt.Describe(fs))
			}
			if !strings.Contains(fs[0].Explanation, tc.want) || tc.not != "" && strings.Contains(fs[0].Explanation, tc.not) {
				t.Errorf("explanation (want %q, not %q): %s", tc.want, tc.not, fs[0].Explanation)
			}
		})
	}
}

// TestListenerConflictFinding: the findings' fields are the documented
// ones, and their subjects name the clients told and the servers.
func TestListenerConflictFinding(t *testing.T) {
	h := dt.New(t, nil, advertisedlistenerconflict.Analyzer)
	advertise(h, h.Conn("10.0.0.1:40000", "10.0.0.2:9092"), 0, b(1, "localhost", 9092), b(2, "localhost", 9092))
	fs := h.Findings()
	if len(fs) != 2 {
		t.Fatalf("want two findings:%s", dt.Describe(fs))
	}
	for i, want := range [][]string{
		{"clients", "endpoint", "node_ids", "ongoing", "problem", "refused_s", "servers"},
		{"clients", "endpoint", "endpoints", "node_ids", "problem", "servers", "stuck"},
	} {
		var keys []string
		for k := range fs[i].Fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if !slices.Equal(keys, want) {
			t.Errorf("%s finding's fields %v, want %v", fs[i].Fields["problem"], keys, want)
		}
		s := fs[i].Subject
		if !slices.Equal(s.Clients, []netip.Addr{netip.MustParseAddr("10.0.0.1")}) ||
			!slices.Equal(s.Servers, []netip.AddrPort{netip.MustParseAddrPort("10.0.0.2:9092")}) || !slices.Equal(s.Nodes, []int32{1, 2}) {
			t.Errorf("subject %+v", s)
		}
	}
}

// TestListenerConflictBound: endpoints beyond the table's bound are not
// followed, and the findings say how many responses that left out.
func TestListenerConflictBound(t *testing.T) {
	h := dt.New(t, nil, advertisedlistenerconflict.Analyzer)
	h.SetLimits(detectors.Limits{PerRule: 2000, Total: 2000}) // the rule's own bound, not the Set's
	var brokers []kmsg.MetadataResponseBroker
	for i := range 1030 {
		host := fmt.Sprintf("kafka-%d.example", i)
		brokers = append(brokers, b(int32(2*i), host, 9092), b(int32(2*i+1), host, 9092))
	}
	c := h.Conn("10.0.0.1:40000", "10.0.0.2:9092")
	advertise(h, c, 0, brokers...)
	advertise(h, c, 1, brokers...)
	fs := h.Findings()
	if len(fs) != 1024 {
		t.Fatalf("%d findings, want one per endpoint up to 1024", len(fs))
	}
	if !strings.Contains(fs[0].Explanation, "(12 responses listing several nodes at other endpoints were not followed: more than 1024 such endpoints.)") {
		t.Errorf("the bound is not said: %s", fs[0].Explanation)
	}
}

// shared advertises nodes 1 and 2 at 10.0.0.2:9092 (node 1's listener) to
// a producer at 0 s, which then sends orders-0, led by node 2, there every
// second from 1 s: refused NOT_LEADER_OR_FOLLOWER by node 1 for refused
// seconds, then written (unless never), and the capture goes on to end s.
func shared(refused, end int, never bool) func(h *dt.Harness) {
	return func(h *dt.Harness) {
		meta := h.Conn("10.0.0.1:40000", "10.0.0.2:9092")
		req, resp := dt.Metadata(12, []kmsg.MetadataResponseBroker{b(1, "10.0.0.2", 9092), b(2, "10.0.0.2", 9092)}, dt.MetaTopic("orders", dt.Led(0, 2)))
		h.Call(meta, dt.At(0), 2*time.Millisecond, "app", req, resp)
		prod := h.Conn("10.0.0.1:40001", "10.0.0.2:9092")
		for s := 1; s <= end; s++ {
			code := int16(0)
			if s <= refused || never {
				code = 6
			}
			h.Call(prod, dt.At(time.Duration(s)*time.Second), 2*time.Millisecond, "app", dt.ProduceTo(9, "orders", 0),
				dt.ProducedTo(9, "orders", code, -1, 0, "", 0, 0))
		}
	}
}

// TestListenerConflictFelt holds the shared endpoint to the policy: a
// misconfiguration that will bite is a warning; clients refused there (a
// partition refused NOT_LEADER_OR_FOLLOWER until it is written, or
// connection attempts failing until one opens) for 30 s or more, or still
// after 10 s at the end of the capture, make it an error.
func TestListenerConflictFelt(t *testing.T) {
	warning := func(secs float64, ongoing bool) []dt.Want {
		return []dt.Want{{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Finding{
			RefusedS: secs, Ongoing: ongoing,
		}, Exact: []string{"RefusedS", "Ongoing"}}}
	}
	errorAfter := func(secs float64, ongoing bool) []dt.Want {
		return []dt.Want{{Severity: detectors.Error, Detail: &advertisedlistenerconflict.Finding{
			RefusedS: secs, Ongoing: ongoing,
		}, Exact: []string{"RefusedS", "Ongoing"}}}
	}
	refusedSYNs := func(n int, opened bool) func(h *dt.Harness) {
		return func(h *dt.Harness) {
			advertise(h, h.Conn("127.0.0.1:40000", "127.0.0.1:9692"), 0, b(4, "localhost", 9492), b(5, "localhost", 9492))
			for i := 1; i <= n; i++ {
				h.ConnEvent(dt.Refused(fmt.Sprintf("127.0.0.1:%d", 51000+i), "127.0.0.1:9492", dt.At(time.Duration(i)*time.Second), uint64(100+i)))
			}
			if opened {
				h.ConnEvent(&flows.ConnEvent{Kind: flows.ConnOpened, Client: netip.MustParseAddrPort("127.0.0.1:52000"),
					Server: netip.MustParseAddrPort("127.0.0.1:9492"), Time: dt.At(time.Duration(n+1) * time.Second)})
			}
			advertise(h, h.Conn("127.0.0.1:40001", "127.0.0.1:9692"), float64(n+2), b(4, "localhost", 9492), b(5, "localhost", 9492))
		}
	}
	// rebootstrap is a KIP-1242 client told nodes 1 and 2 at 10.0.0.2:9092
	// asking for node 1 there each second from 1 s to n s, answered
	// REBOOTSTRAP_REQUIRED by node 2 listening there, and for node 2, answered;
	// healed, the next ask for node 1 (at its own address) is answered.
	rebootstrap := func(n int, healed bool) func(h *dt.Harness) {
		return func(h *dt.Harness) {
			advertise(h, h.Conn("10.0.0.1:40000", "10.0.0.2:9092"), 0, b(1, "10.0.0.2", 9092), b(2, "10.0.0.2", 9092))
			for s := 1; s <= n; s++ {
				at := dt.At(time.Duration(s) * time.Second)
				h.Call(h.Conn(fmt.Sprintf("10.0.0.1:%d", 41000+s), "10.0.0.2:9092"), at, time.Millisecond, "app",
					dt.ApiVersionsTo("test-cluster", 1), dt.ApiVersionsAnswer(129))
				h.Call(h.Conn(fmt.Sprintf("10.0.0.1:%d", 42000+s), "10.0.0.2:9092"), at.Add(100*time.Millisecond), time.Millisecond, "app",
					dt.ApiVersionsTo("test-cluster", 2), dt.ApiVersionsAnswer(0))
			}
			if healed {
				h.Call(h.Conn("10.0.0.1:43000", "10.0.0.3:9092"), dt.At(time.Duration(n+1)*time.Second), time.Millisecond, "app",
					dt.ApiVersionsTo("test-cluster", 1), dt.ApiVersionsAnswer(0))
			}
		}
	}
	dt.Run(t, advertisedlistenerconflict.Analyzer, []dt.Case{
		{
			Name:    "KIP-1242 clients refused REBOOTSTRAP_REQUIRED for node 1 to the end after 11 s: an error",
			Traffic: rebootstrap(12, false),
			Want: []dt.Want{{Severity: detectors.Error, Detail: &advertisedlistenerconflict.Finding{
				Rebootstrap: 12, Refused: 0, RefusedS: 11.1, Ongoing: true,
			}, Exact: []string{"Refused"},
				Evidence: []uint64{4}}},
			Explanation: []string{"12 ApiVersions answers from 10.0.0.2:9092 REBOOTSTRAP_REQUIRED to clients asking for node 1 (KIP-1242"},
		},
		{
			Name:    "near miss: refused REBOOTSTRAP_REQUIRED for 5 s, then node 1 answers at its own address: a warning",
			Traffic: rebootstrap(5, true),
			Want:    warning(5, false),
		},
		{Name: "advertised, never used: a warning", Traffic: shared(0, 0, false), Want: warning(0, false)},
		{Name: "one refusal, then written: a warning", Traffic: shared(1, 40, false), Want: warning(0, false)},
		{Name: "near miss: refused for 29 s, then written: a warning", Traffic: shared(29, 40, false), Want: warning(29, false)},
		{Name: "refused for 30 s, then written: an error", Traffic: shared(30, 40, false), Want: errorAfter(30, false)},
		{Name: "refused for 31 s, then written: an error", Traffic: shared(31, 40, false), Want: errorAfter(31, false)},
		{Name: "near miss: still refused at the end after 9 s: a warning", Traffic: shared(0, 10, true), Want: warning(9, true)},
		{Name: "still refused at the end after 11 s: an error", Traffic: shared(0, 12, true), Want: errorAfter(11, true)},
		{
			Name:    "connections to the shared endpoint refused to the end after 12 s: an error",
			Traffic: refusedSYNs(12, false),
			Want: []dt.Want{{Severity: detectors.Error, Detail: &advertisedlistenerconflict.Finding{
				Attempts: 12, Refused: 0, Endpoint: "localhost:9492", RefusedS: 13.002, Ongoing: true,
			}, Exact: []string{"Refused"},
				Summary:  []string{"clients were refused there for 13.0 s, still at the end of the capture"},
				Evidence: []uint64{101, 112}}},
			Explanation: []string{"Clients met it: 12 connection attempts to localhost:9492 refused or unanswered",
				"An error: clients were refused there for 13.0 s and still at the end of the capture."},
		},
		{
			Name:        "near miss: refused 12 times, then a connection opens: a warning",
			Traffic:     refusedSYNs(12, true),
			Want:        warning(12, false),
			Explanation: []string{"A warning: a misconfiguration that will bite; an error once clients are refused there for 30.0 s"},
		},
		{
			Name: "near miss: refusals by a broker elsewhere are not the shared endpoint's",
			Traffic: func(h *dt.Harness) {
				shared(0, 0, false)(h)
				c := h.Conn("10.0.0.1:40002", "10.0.0.3:9092")
				for s := 1; s <= 40; s++ {
					h.Call(c, dt.At(time.Duration(s)*time.Second), 2*time.Millisecond, "app", dt.ProduceTo(9, "orders", 0),
						dt.ProducedTo(9, "orders", 6, -1, 0, "", 0, 0))
				}
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &advertisedlistenerconflict.Finding{Refused: 0}, Exact: []string{"Refused"}}},
		},
		{
			Name: "a partition refused at the endpoint is healed by a write elsewhere",
			Traffic: func(h *dt.Harness) {
				shared(0, 5, true)(h)
				c := h.Conn("10.0.0.1:40002", "10.0.0.3:9092")
				h.Call(c, dt.At(6*time.Second), 2*time.Millisecond, "app", dt.ProduceTo(9, "orders", 0), dt.ProducedTo(9, "orders", 0, -1, 0, "", 0, 0))
				advertise(h, h.Conn("10.0.0.1:40003", "10.0.0.2:9092"), 60, b(1, "10.0.0.2", 9092), b(2, "10.0.0.3", 9092))
			},
			Want:        warning(5, false),
			Explanation: []string{"5 Produce/Fetch partition answers NOT_LEADER_OR_FOLLOWER from 10.0.0.2:9092 (1 partition)"},
		},
	}, nil)
}
