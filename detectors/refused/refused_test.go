package refused_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/refused"
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

func TestConnectionRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		traffic  func(h *dt.Harness)
		want     []dt.Want
		nodes    []int32
	}{
		{
			name: "an advertised broker refuses every attempt",
			traffic: func(h *dt.Harness) {
				advertise(h, 0, "10.0.0.1:40000", "10.0.0.2:9092", b1, b2)
				refusedEvery(h, "10.0.0.1", "10.0.0.3:9092", 1, 10, 1)
			},
			want: []dt.Want{{
				Severity: detectors.Warning,
				Counts:   map[string]int64{"attempts": 10, "refused": 10, "unanswered": 0, "syns": 10},
				Fields: map[string]any{"endpoint": "10.0.0.3:9092", "advertised": true, "advertised_as": []string{"10.0.0.3:9092"},
					"clients": []string{"10.0.0.1"}, "recovered": false, "kafka_endpoint": true},
				Summary: []string{"10 connection attempts to 10.0.0.3:9092 from 10.0.0.1 refused (SYN answered by RST) over 9.0 s",
					"Metadata advertises it (10.0.0.3:9092) for node 2"},
				Evidence: []uint64{1000, 1009},
			}},
			nodes: []int32{2},
		},
		{
			name: "loopback advertised as localhost matches 127.0.0.1",
			traffic: func(h *dt.Harness) {
				advertise(h, 0, "127.0.0.1:40000", "127.0.0.1:9692", dt.Broker(4, "localhost", 9492), dt.Broker(5, "localhost", 9492))
				refusedEvery(h, "127.0.0.1", "127.0.0.1:9492", 1, 5, 1)
			},
			want: []dt.Want{{
				Severity: detectors.Warning,
				Counts:   map[string]int64{"attempts": 5},
				Fields: map[string]any{"endpoint": "127.0.0.1:9492", "advertised": true, "advertised_as": []string{"localhost:9492"},
					"clients": []string{"127.0.0.1"}},
				Summary: []string{"for nodes 4, 5"},
			}},
			nodes: []int32{4, 5},
		},
		{
			name: "one refused attempt, then the connection works",
			traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 1, 1)
				advertise(h, 0.2, "10.0.0.1:40000", "10.0.0.2:9092", b1)
			},
			want: []dt.Want{{Severity: detectors.Info, Counts: map[string]int64{"attempts": 1},
				Fields:  map[string]any{"recovered": true, "advertised": true},
				Summary: []string{"1 connection attempt to", "; a connection to it opened afterwards"}}},
			nodes: []int32{1},
		},
		{
			name: "an earlier connection does not make it recovered",
			traffic: func(h *dt.Harness) {
				advertise(h, 0, "10.0.0.1:40000", "10.0.0.2:9092", b1)
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 1, 3, 1)
			},
			want:  []dt.Want{{Severity: detectors.Warning, Fields: map[string]any{"recovered": false, "advertised": true}}},
			nodes: []int32{1},
		},
		{
			name: "near miss: a connection after the failures, captured without its handshake, is not a recovery",
			traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 3, 1)
				c := h.Conn("10.0.0.1:40000", "10.0.0.2:9092")
				c.FirstSeen, c.MidStream = sec(5), true
			},
			want: []dt.Want{{Severity: detectors.Warning, Fields: map[string]any{"recovered": false, "advertised": false, "kafka_endpoint": true}}},
		},
		{
			name: "a connection opening at the moment of the last failure is a recovery",
			traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 3, 1)
				advertise(h, 2, "10.0.0.1:40000", "10.0.0.2:9092", b1)
			},
			want:  []dt.Want{{Severity: detectors.Info, Fields: map[string]any{"recovered": true}}},
			nodes: []int32{1},
		},
		{
			name:    "near miss: two attempts, under min-attempts",
			traffic: func(h *dt.Harness) { refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 2, 1) },
			want: []dt.Want{{Severity: detectors.Info, Counts: map[string]int64{"attempts": 2},
				Fields: map[string]any{"advertised": false, "advertised_as": []string(nil), "kafka_endpoint": true}}},
		},
		{
			name:    "near miss the other way: three attempts, exactly min-attempts",
			traffic: func(h *dt.Harness) { refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 3, 1) },
			want:    []dt.Want{{Severity: detectors.Warning, Counts: map[string]int64{"attempts": 3}}},
		},
		{
			name:     "two attempts with min-attempts 2",
			settings: map[string]string{"min-attempts": "2"},
			traffic:  func(h *dt.Harness) { refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 2, 1) },
			want:     []dt.Want{{Severity: detectors.Warning, Counts: map[string]int64{"attempts": 2}}},
		},
		{
			name: "a broker restart: 8 refusals in 3.5 s, then a connection opens",
			traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 8, 0.5)
				advertise(h, 5, "10.0.0.1:40000", "10.0.0.2:9092", b1)
			},
			want:  []dt.Want{{Severity: detectors.Info, Counts: map[string]int64{"attempts": 8}, Fields: map[string]any{"recovered": true}}},
			nodes: []int32{1},
		},
		{
			name:     "the same restart with recovery 2 s is too long",
			settings: map[string]string{"recovery": "2"},
			traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 8, 0.5)
				advertise(h, 5, "10.0.0.1:40000", "10.0.0.2:9092", b1)
			},
			want:  []dt.Want{{Severity: detectors.Warning, Fields: map[string]any{"recovered": true}}},
			nodes: []int32{1},
		},
		{
			name:     "recovery as a Go duration",
			settings: map[string]string{"recovery": "3500ms"},
			traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 8, 0.5)
				advertise(h, 5, "10.0.0.1:40000", "10.0.0.2:9092", b1)
			},
			want:  []dt.Want{{Severity: detectors.Warning, Fields: map[string]any{"recovered": true}}},
			nodes: []int32{1},
		},
		{
			name: "near miss: failures for 29 s, then a connection: a restart",
			traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 30, 1)
				advertise(h, 30, "10.0.0.1:40000", "10.0.0.2:9092", b1)
			},
			want:  []dt.Want{{Severity: detectors.Info, Counts: map[string]int64{"attempts": 30}, Fields: map[string]any{"recovered": true}}},
			nodes: []int32{1},
		},
		{
			name: "near miss the other way: failures for 30 s (recovery), then a connection",
			traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 31, 1)
				advertise(h, 31, "10.0.0.1:40000", "10.0.0.2:9092", b1)
			},
			want:  []dt.Want{{Severity: detectors.Warning, Counts: map[string]int64{"attempts": 31}, Fields: map[string]any{"recovered": true}}},
			nodes: []int32{1},
		},
		{
			name: "a long outage that recovers is still a warning",
			traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 60, 1)
				advertise(h, 60, "10.0.0.1:40000", "10.0.0.2:9092", b1)
			},
			want:  []dt.Want{{Severity: detectors.Warning, Counts: map[string]int64{"attempts": 60}, Fields: map[string]any{"recovered": true}}},
			nodes: []int32{1},
		},
		{
			name: "SYNs never answered, from two clients",
			traffic: func(h *dt.Harness) {
				advertise(h, 0, "10.0.0.1:40000", "10.0.0.2:9092", b1, b2)
				for i := range 4 {
					h.ConnEvent(dt.SynUnanswered(fmt.Sprintf("10.0.0.5:%d", 51000+i), "10.0.0.3:9092", sec(1+float64(10*i)), uint64(100+i), 2))
				}
				h.ConnEvent(dt.SynUnanswered("10.0.0.1:51000", "10.0.0.3:9092", sec(45), 200, 0))
			},
			want: []dt.Want{{
				Severity: detectors.Warning,
				Counts:   map[string]int64{"attempts": 5, "unanswered": 5, "refused": 0, "syns": 4*3 + 1},
				Fields:   map[string]any{"clients": []string{"10.0.0.1", "10.0.0.5"}, "advertised": true},
				Summary:  []string{"5 connection attempts to 10.0.0.3:9092 from 10.0.0.1, 10.0.0.5 never answered (SYNs unanswered) over 44.0 s"},
				Evidence: []uint64{100, 200},
			}},
			nodes: []int32{2},
		},
		{
			name: "refused and unanswered attempts to one endpoint",
			traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 3, 1)
				h.ConnEvent(dt.SynUnanswered("10.0.0.1:51000", "10.0.0.2:9092", sec(4), 200, 1))
			},
			want: []dt.Want{{Severity: detectors.Warning, Counts: map[string]int64{"attempts": 4, "refused": 3, "unanswered": 1, "syns": 5},
				Summary: []string{"failed (3 refused by RST, 1 SYN unanswered)"}}},
		},
		{
			name:    "a port that is not Kafka",
			traffic: func(h *dt.Harness) { refusedEvery(h, "10.0.0.1", "10.0.0.2:8080", 0, 20, 1) },
			want: []dt.Want{{Severity: detectors.Info, Counts: map[string]int64{"attempts": 20},
				Fields: map[string]any{"kafka_endpoint": false, "advertised": false}}},
		},
		{
			name: "near miss: another port with a Kafka connection to it is Kafka",
			traffic: func(h *dt.Harness) {
				h.Conn("10.0.0.1:40000", "10.0.0.2:8080")
				refusedEvery(h, "10.0.0.1", "10.0.0.2:8080", 1, 20, 1)
			},
			want: []dt.Want{{Severity: detectors.Warning, Fields: map[string]any{"kafka_endpoint": true, "advertised": false, "recovered": false}}},
		},
		{
			name: "one finding per endpoint",
			traffic: func(h *dt.Harness) {
				refusedEvery(h, "10.0.0.1", "10.0.0.9:9092", 0, 3, 1)
				refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 1, 1)
			},
			want: []dt.Want{
				{Severity: detectors.Warning, Fields: map[string]any{"endpoint": "10.0.0.9:9092"}},
				{Severity: detectors.Info, Fields: map[string]any{"endpoint": "10.0.0.2:9092"}},
			},
		},
		{
			name: "clients beyond 16 are counted, not listed",
			traffic: func(h *dt.Harness) {
				for i := range 20 {
					h.ConnEvent(dt.Refused(fmt.Sprintf("10.0.1.%d:50000", i+1), "10.0.0.2:9092", sec(float64(i)), uint64(1000+i)))
				}
			},
			want: []dt.Want{{Severity: detectors.Warning, Counts: map[string]int64{"attempts": 20},
				Summary: []string{"10.0.1.15, 10.0.1.16 and more refused"}}},
		},
		{
			name: "near miss: connections that work yield nothing",
			traffic: func(h *dt.Harness) {
				advertise(h, 0, "10.0.0.1:40000", "10.0.0.2:9092", b1)
				advertise(h, 1, "10.0.0.1:40001", "10.0.0.2:9092", b1)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, map[string]map[string]string{"connection-refused": tc.settings}, refused.Analyzer)
			tc.traffic(h)
			fs := h.Findings()
			dt.Check(t, fs, "connection-refused", tc.want...)
			if len(fs) == 1 && !slices.Equal(fs[0].Nodes, tc.nodes) {
				t.Errorf("nodes %v, want %v", fs[0].Nodes, tc.nodes)
			}
		})
	}
}

// TestConnectionRefusedProse: what the finding says, for one unanswered
// attempt and for a restart.
func TestConnectionRefusedProse(t *testing.T) {
	h := dt.New(t, nil, refused.Analyzer)
	h.ConnEvent(dt.SynUnanswered("10.0.0.1:51000", "10.0.0.3:9092", sec(1), 7, 0))
	refusedEvery(h, "10.0.0.1", "10.0.0.2:9092", 0, 8, 0.5)
	advertise(h, 5, "10.0.0.1:40000", "10.0.0.2:9092", b1)
	fs := h.Findings()
	if len(fs) != 2 {
		t.Fatalf("findings:%s", dt.Describe(fs))
	}
	restart, syn := fs[0], fs[1]
	if syn.Summary != "1 connection attempt to 10.0.0.3:9092 from 10.0.0.1 never answered (SYNs unanswered)" {
		t.Errorf("summary %q", syn.Summary)
	}
	for _, want := range []string{"(1 SYN with retransmissions)", "An unanswered SYN means the host is down",
		"No Metadata response in the capture advertises it", "No Kafka connection to it is in the capture.",
		"Info only: fewer than 3 attempts failed."} {
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
		"1 connection to it opened after the last failure.", "Info only: the failures lasted 3.5 s and then a connection to it opened (a restart)."} {
		if !strings.Contains(restart.Explanation, want) {
			t.Errorf("explanation %q lacks %q", restart.Explanation, want)
		}
	}
	if want := "for node 1; compare listeners= and advertised.listeners= of that node with this address"; !strings.Contains(restart.Next, want) {
		t.Errorf("next %q lacks %q", restart.Next, want)
	}
}
