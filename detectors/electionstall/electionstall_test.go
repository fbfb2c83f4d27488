package electionstall_test

import (
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/electionstall"
	"github.com/kfsniff/kfsniff/flows"
)

const (
	rule   = "leader-election-stall"
	client = "10.0.0.1:40000"
	server = "10.0.0.2:9092"
)

var threeBrokers = []kmsg.MetadataResponseBroker{dt.MetaBroker(1, "10.0.0.2", 9092), dt.MetaBroker(2, "10.0.0.3", 9092), dt.MetaBroker(3, "10.0.0.4", 9092)}

// answer sends one Metadata v12 request at at, answered 2 ms later with
// the topics.
func answer(h *dt.Harness, c *flows.Conn, at time.Duration, topics ...kmsg.MetadataResponseTopic) {
	req, resp := dt.Metadata(12, threeBrokers, topics...)
	h.Call(c, dt.At(at), 2*time.Millisecond, "app", req, resp)
}

// poll answers Metadata on c once a second from second from to second
// to, with the partitions of topic "orders" that parts(s) returns. The
// request of second s is packet 2s+1 and its response 2s+2 when c is the
// only connection.
func poll(h *dt.Harness, c *flows.Conn, from, to int, parts func(s int) []dt.Partition) {
	for s := from; s <= to; s++ {
		answer(h, c, time.Duration(s)*time.Second, dt.MetaTopic("orders", parts(s)...))
	}
}

func healthy(int) []dt.Partition { return []dt.Partition{dt.Led(0, 1), dt.Led(1, 2), dt.Led(2, 3)} }

// stalled is partition 1 without a leader (its only replica, node 2,
// offline) from second from to second to, polled from 0 to end.
func stalled(from, to, end int) func(h *dt.Harness) {
	return func(h *dt.Harness) {
		poll(h, h.Conn(client, server), 0, end, func(s int) []dt.Partition {
			if s >= from && s <= to {
				return []dt.Partition{dt.Led(0, 1), dt.Leaderless(1, 2), dt.Led(2, 3)}
			}
			return healthy(s)
		})
	}
}

// exactly answers partition 0 without a leader at 0 s, 10 s, 20 s and
// last at d, then (unless ongoing) with a leader a second later.
func exactly(d time.Duration, ongoing bool) func(h *dt.Harness) {
	return func(h *dt.Harness) {
		c := h.Conn(client, server)
		for at := time.Duration(0); at < d; at += 10 * time.Second {
			answer(h, c, at, dt.MetaTopic("orders", dt.Leaderless(0, 2)))
		}
		answer(h, c, d, dt.MetaTopic("orders", dt.Leaderless(0, 2)))
		if !ongoing {
			answer(h, c, d+time.Second, dt.MetaTopic("orders", dt.Led(0, 1)))
		}
	}
}

// stallAndElection is orders-0 without a leader for 40 s (its only
// replica, node 2, offline) and logs-0 for 3 s, in the same responses.
func stallAndElection(h *dt.Harness) {
	c := h.Conn(client, server)
	for s := range 41 {
		logs := dt.Led(0, 1)
		if s >= 5 && s <= 8 {
			logs = dt.Leaderless(0, 1)
		}
		answer(h, c, time.Duration(s)*time.Second, dt.MetaTopic("orders", dt.Leaderless(0, 2)), dt.MetaTopic("logs", logs))
	}
}

func TestElectionStall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		traffic  func(h *dt.Harness)
		want     []dt.Want
	}{
		{
			name:    "leaderless for 60 s and still at the end",
			traffic: stalled(10, 70, 70),
			want: []dt.Want{{
				Severity: detectors.Error,
				Counts:   map[string]int64{"responses": 61, "partitions": 1},
				Fields: map[string]any{"topic": "orders", "partitions": []int32{1}, "error": "LEADER_NOT_AVAILABLE", "leader_id": int32(-1),
					"servers": []string{server}, "duration_s": 60.0, "ongoing": true, "replicas": []int32{2}, "isr": []int32{2},
					"offline_replicas": []int32{2}},
				Summary: []string{"orders partition 1 without a leader for 60.0 s (61 Metadata responses from node 1 (10.0.0.2:9092): " +
					"LEADER_NOT_AVAILABLE, leader -1); their only replica, node 2, is offline; still so at the end of the capture"},
				Evidence: []uint64{22, 142},
			}},
		},
		{
			name:    "leaderless for 45 s, then a leader",
			traffic: stalled(10, 55, 80),
			want: []dt.Want{{Severity: detectors.Error, Counts: map[string]int64{"responses": 46},
				Fields:  map[string]any{"partitions": []int32{1}, "duration_s": 45.0, "ongoing": false},
				Summary: []string{"without a leader for 45.0 s", "is offline"}}},
		},
		{
			name:    "a short election after a restart: 3 s",
			traffic: stalled(10, 13, 30),
			want: []dt.Want{{Severity: detectors.Info, Counts: map[string]int64{"partition_answers": 4, "partitions": 1},
				Fields:   map[string]any{"topic": "orders", "partitions": []int32{1}, "duration_s": 3.0, "ongoing": false, "error": "LEADER_NOT_AVAILABLE"},
				Summary:  []string{"orders partition 1 was briefly without a leader (longest 3.0 s), then got a leader: a normal leader election"},
				Evidence: []uint64{22}}},
		},
		{
			name:    "near miss: 29 s, then a leader",
			traffic: stalled(10, 39, 60),
			want:    []dt.Want{{Severity: detectors.Info, Fields: map[string]any{"duration_s": 29.0}}},
		},
		{
			name:    "near miss: 29.999 s, then a leader",
			traffic: exactly(29999*time.Millisecond, false),
			want:    []dt.Want{{Severity: detectors.Info, Fields: map[string]any{"duration_s": 29.999, "ongoing": false}}},
		},
		{
			name:    "exactly 30 s, then a leader, is a stall",
			traffic: exactly(30*time.Second, false),
			want: []dt.Want{{Severity: detectors.Error, Counts: map[string]int64{"responses": 4},
				Fields: map[string]any{"duration_s": 30.0, "ongoing": false}}},
		},
		{
			name:    "near miss: 29.999 s and still leaderless at the end is too soon to call",
			traffic: exactly(29999*time.Millisecond, true),
			want: []dt.Want{{Severity: detectors.Info, Fields: map[string]any{"ongoing": true},
				Summary: []string{"still without one at the end of the capture, too soon to call it a stall"}}},
		},
		{
			name:    "exactly 30 s and still leaderless at the end",
			traffic: exactly(30*time.Second, true),
			want:    []dt.Want{{Severity: detectors.Error, Fields: map[string]any{"duration_s": 30.0, "ongoing": true}}},
		},
		{
			name:     "near miss lowered below the threshold: 29 s with min-duration 20 (seconds, as before)",
			settings: map[string]string{"min-duration": "20"},
			traffic:  stalled(10, 39, 60),
			want: []dt.Want{{Severity: detectors.Error, Counts: map[string]int64{"responses": 30},
				Fields: map[string]any{"partitions": []int32{1}, "duration_s": 29.0}}},
		},
		{
			name:     "min-duration as a duration: 19.5s against 19 s",
			settings: map[string]string{"min-duration": "19.5s"},
			traffic:  stalled(10, 29, 60),
			want:     []dt.Want{{Severity: detectors.Info, Fields: map[string]any{"duration_s": 19.0}}},
		},
		{
			name:     "threshold raised above a 60 s stall",
			settings: map[string]string{"min-duration": "90"},
			traffic:  stalled(10, 70, 80),
			want:     []dt.Want{{Severity: detectors.Info, Fields: map[string]any{"duration_s": 60.0}}},
		},
		{
			name: "a leader in between splits two 29 s stretches",
			traffic: func(h *dt.Harness) {
				poll(h, h.Conn(client, server), 0, 60, func(s int) []dt.Partition {
					if s == 30 {
						return healthy(s)
					}
					return []dt.Partition{dt.Led(0, 1), dt.Leaderless(1, 2), dt.Led(2, 3)}
				})
			},
			want: []dt.Want{{Severity: detectors.Info, Counts: map[string]int64{"partition_answers": 60},
				Fields: map[string]any{"duration_s": 29.0, "ongoing": true}}},
		},
		{
			name:    "healthy metadata for two minutes",
			traffic: func(h *dt.Harness) { poll(h, h.Conn(client, server), 0, 120, healthy) },
		},
		{
			name: "near miss: a topic-level error without partitions (auto-creation) is not leaderless",
			traffic: func(h *dt.Harness) {
				poll(h, h.Conn(client, server), 0, 60, func(int) []dt.Partition { return nil })
			},
		},
		{
			name: "near miss: Produce answers naming no leader are not Metadata",
			traffic: func(h *dt.Harness) {
				c := h.Conn(client, server)
				for s := range 60 {
					h.Call(c, dt.At(time.Duration(s)*time.Second), time.Millisecond, "app", dt.Produce(9), dt.Produced(9, 5, 0))
				}
			},
		},
		{
			name: "leader -1 without an error code and NOT_LEADER_OR_FOLLOWER count too",
			traffic: func(h *dt.Harness) {
				poll(h, h.Conn(client, server), 0, 40, func(int) []dt.Partition {
					return []dt.Partition{
						{ID: 0, Leader: -1, Replicas: []int32{1, 2}, ISR: []int32{1}, Offline: []int32{1}},
						{ID: 1, Leader: 2, Err: 6, Replicas: []int32{2, 3}, ISR: []int32{2, 3}},
						dt.Led(2, 3),
					}
				})
			},
			want: []dt.Want{{Severity: detectors.Error, Counts: map[string]int64{"responses": 41, "partitions": 2},
				Fields: map[string]any{"partitions": []int32{0, 1}, "duration_s": 40.0, "replicas": []int32{1, 2, 3},
					"offline_replicas": []int32{1}}}},
		},
		{
			name: "overlapping stretches count each response once",
			traffic: func(h *dt.Harness) {
				poll(h, h.Conn(client, server), 0, 100, func(s int) []dt.Partition {
					parts := healthy(s)
					if s <= 40 {
						parts[0] = dt.Leaderless(0, 1)
					}
					if s >= 20 && s <= 80 {
						parts[2] = dt.Leaderless(2, 3)
					}
					return parts
				})
			},
			// Responses 0..80: 81 distinct, not 41+61.
			want: []dt.Want{{Severity: detectors.Error, Counts: map[string]int64{"responses": 81},
				Fields:  map[string]any{"partitions": []int32{0, 2}, "duration_s": 60.0, "offline_replicas": []int32{1, 3}},
				Summary: []string{"orders partitions 0, 2 without a leader for 60.0 s", "all their replicas (nodes 1, 3) are offline"}}},
		},
		{
			name: "two brokers answering, one healthy topic beside",
			traffic: func(h *dt.Harness) {
				a, b := h.Conn(client, server), h.Conn("10.0.0.1:40001", "10.0.0.3:9092")
				for s := range 41 {
					c := a
					if s%2 == 1 {
						c = b
					}
					answer(h, c, time.Duration(s)*time.Second, dt.MetaTopic("orders", dt.Led(0, 1), dt.Leaderless(1, 2)),
						dt.MetaTopic("payments", dt.Led(0, 3)))
				}
			},
			want: []dt.Want{{Severity: detectors.Error, Counts: map[string]int64{"responses": 41},
				Fields:  map[string]any{"topic": "orders", "partitions": []int32{1}, "servers": []string{"10.0.0.2:9092", "10.0.0.3:9092"}},
				Summary: []string{"from node 1 (10.0.0.2:9092), node 2 (10.0.0.3:9092)"}}},
		},
		{
			name:    "per topic: a stall and a short election, one finding each",
			traffic: stallAndElection,
			want: []dt.Want{
				{Severity: detectors.Error, Fields: map[string]any{"topic": "orders", "duration_s": 40.0}},
				{Severity: detectors.Info, Fields: map[string]any{"topic": "logs", "duration_s": 3.0}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, map[string]map[string]string{rule: tc.settings}, electionstall.Analyzer)
			tc.traffic(h)
			dt.Check(t, h.Findings(), rule, tc.want...)
		})
	}
}

// findings runs the rule over 35 s of one partition answered as p.
func findings(t *testing.T, version int16, p dt.Partition) []detectors.Finding {
	t.Helper()
	h := dt.New(t, nil, electionstall.Analyzer)
	c := h.Conn(client, server)
	for s := range 36 {
		req, resp := dt.Metadata(version, threeBrokers, dt.MetaTopic("orders", p))
		if version < 5 {
			resp.Topics[0].Partitions[0].OfflineReplicas = nil
		}
		h.Call(c, dt.At(time.Duration(s)*time.Second), 2*time.Millisecond, "app", req, resp)
	}
	fs := h.Findings()
	if len(fs) != 1 || fs[0].Severity != detectors.Error {
		t.Fatalf("want one error:%s", dt.Describe(fs))
	}
	return fs
}

// TestElectionStallExplains: the explanation says what the replicas allow:
// nobody to elect when every replica is offline, the controller when
// in-sync replicas are online.
func TestElectionStallExplains(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version int16
		part    dt.Partition
		want    string
	}{
		{"only replica offline", 12, dt.Leaderless(0, 4), "no candidate to elect"},
		{"in-sync replicas offline", 12, dt.Partition{Leader: -1, Err: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Offline: []int32{1}},
			"the online replicas ([2 3]) are out of sync, and with unclean.leader.election.enable=false"},
		{"in-sync replica online", 12, dt.Partition{Leader: -1, Err: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Offline: []int32{1}},
			"In-sync replicas [2] are online, yet no leader was elected: the controller is not completing the election"},
		{"a listener missing on the leader is not an election", 12, dt.Partition{Leader: -1, Err: 72, Replicas: []int32{1}, ISR: []int32{1}},
			"LISTENER_NOT_FOUND means the leader exists but has no listener"},
		{"Metadata v4 does not list offline replicas", 4, dt.Leaderless(0, 4), "(these Metadata versions do not list offline replicas)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if f := findings(t, tc.version, tc.part)[0]; !strings.Contains(f.Explanation, tc.want) {
				t.Errorf("explanation lacks %q: %s", tc.want, f.Explanation)
			}
		})
	}
	if f := findings(t, 4, dt.Leaderless(0, 4))[0]; strings.Contains(f.Summary, "offline") {
		t.Errorf("without a list of offline replicas the summary cannot say they are offline: %s", f.Summary)
	}
}

// TestElectionStallFinding: the finding's fields are the documented ones,
// and its subject names the error and the brokers that answered it, so
// that an error-storm of LEADER_NOT_AVAILABLE from them is explained.
func TestElectionStallFinding(t *testing.T) {
	h := dt.New(t, nil, electionstall.Analyzer)
	stallAndElection(h)
	fs := h.Findings()
	if len(fs) != 2 {
		t.Fatalf("want a stall and an election:%s", dt.Describe(fs))
	}
	for i, want := range [][]string{
		{"duration_s", "error", "isr", "leader_id", "offline_replicas", "ongoing", "partitions", "replicas", "servers", "topic"},
		{"duration_s", "error", "ongoing", "partitions", "topic"},
	} {
		var keys []string
		for k := range fs[i].Fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if !slices.Equal(keys, want) {
			t.Errorf("%s finding's fields %v, want %v", fs[i].Severity, keys, want)
		}
	}
	s := fs[0].Subject
	if s.Error != 5 || !slices.Equal(s.Servers, []netip.AddrPort{netip.MustParseAddrPort(server)}) ||
		!slices.Equal(s.Partitions, []detectors.TopicPartition{{Topic: "orders", Partition: 0}}) {
		t.Errorf("subject %+v", s)
	}
	if !slices.Equal(fs[0].Conns, []int{1}) || !slices.Equal(fs[0].Nodes, []int32{2}) {
		t.Errorf("stall on connections %v, nodes %v; want [1], [2]", fs[0].Conns, fs[0].Nodes)
	}
}

// TestElectionStallEvidence: each piece of evidence says which partitions
// a response answered without a leader, eight at most by number.
func TestElectionStallEvidence(t *testing.T) {
	h := dt.New(t, nil, electionstall.Analyzer)
	c := h.Conn(client, server)
	var parts []dt.Partition
	for p := range int32(10) {
		parts = append(parts, dt.Leaderless(p, 2))
	}
	for s := range 31 {
		answer(h, c, time.Duration(s)*time.Second, dt.MetaTopic("orders", parts...))
	}
	fs := h.Findings()
	dt.Check(t, fs, rule, dt.Want{Severity: detectors.Error, Counts: map[string]int64{"responses": 31, "partitions": 10}, Evidence: []uint64{2, 62}})
	if len(fs) == 1 {
		want := "Metadata v12 response from 10.0.0.2:9092: orders partitions 0, 1, 2, 3, 4, 5, 6, 7 and 2 more without a leader (LEADER_NOT_AVAILABLE, leader -1)"
		if got := fs[0].Evidence[0].What; got != want {
			t.Errorf("evidence %q\nwant     %q", got, want)
		}
	}
}

// TestElectionStallTopicByID: a topic a Metadata response names by id only
// is shown by the name an earlier response gave it, else by its id.
func TestElectionStallTopicByID(t *testing.T) {
	id := [16]byte{0x14, 0x65, 0xf2, 0x31}
	byID := dt.MetaTopic("orders", dt.Leaderless(0, 2))
	byID.Topic, byID.TopicID = nil, id
	for _, tc := range []struct {
		name  bool
		topic string
	}{{true, "orders"}, {false, "FGXyMQAAAAAAAAAAAAAAAA"}} {
		h := dt.New(t, nil, electionstall.Analyzer)
		c := h.Conn(client, server)
		if tc.name {
			named := dt.MetaTopic("orders", dt.Led(0, 1))
			named.TopicID = id
			answer(h, c, 0, named)
		}
		for s := 1; s <= 40; s++ {
			answer(h, c, time.Duration(s)*time.Second, byID)
		}
		dt.Check(t, h.Findings(), rule, dt.Want{Severity: detectors.Error, Fields: map[string]any{"topic": tc.topic}})
	}
}

// TestElectionStallBound: partitions beyond the table's bound are not
// followed, and the findings say how many answers that left out.
func TestElectionStallBound(t *testing.T) {
	if testing.Short() {
		t.Skip("a Metadata response of 65546 partitions")
	}
	h := dt.New(t, nil, electionstall.Analyzer)
	c := h.Conn(client, server)
	parts := make([]dt.Partition, 1<<16+10)
	for i := range parts {
		parts[i] = dt.Partition{ID: int32(i), Leader: -1, Err: 5}
	}
	answer(h, c, 0, dt.MetaTopic("orders", parts...))
	fs := h.Findings()
	dt.Check(t, fs, rule, dt.Want{Severity: detectors.Info, Counts: map[string]int64{"partitions": 1 << 16}})
	if len(fs) == 1 && !strings.Contains(fs[0].Explanation, "10 leaderless answers about partitions beyond the first 65536 tracked were not followed") {
		t.Errorf("the bound is not said: %s", fs[0].Explanation)
	}
}
