package leaderelectionstall_test

import (
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/leaderelectionstall"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
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
func poll(h *dt.Harness, c *flows.Conn, from, to int, parts func(s int) []dt.Leadership) {
	for s := from; s <= to; s++ {
		answer(h, c, time.Duration(s)*time.Second, dt.MetaTopic("orders", parts(s)...))
	}
}

func healthy(int) []dt.Leadership { return []dt.Leadership{dt.Led(0, 1), dt.Led(1, 2), dt.Led(2, 3)} }

// stalled is partition 1 without a leader (its only replica, node 2,
// offline) from second from to second to, polled once a second from 0 to
// end: leaderless from the answer of second from to that of second to+1.
func stalled(from, to, end int) func(h *dt.Harness) {
	return func(h *dt.Harness) {
		poll(h, h.Conn(client, server), 0, end, func(s int) []dt.Leadership {
			if s >= from && s <= to {
				return []dt.Leadership{dt.Led(0, 1), dt.Leaderless(1, 2), dt.Led(2, 3)}
			}
			return healthy(s)
		})
	}
}

// leaderlessFor answers partition 0 of orders without a leader at 0 and
// then every second while before d, and at d names leader 3 (or, ongoing,
// answers without one again and the capture ends): leaderless for exactly
// d, from the first answer to the one naming a leader or to the end.
func leaderlessFor(d time.Duration, ongoing bool) func(h *dt.Harness) {
	return func(h *dt.Harness) {
		c := h.Conn(client, server)
		for at := time.Duration(0); at < d; at += time.Second {
			answer(h, c, at, dt.MetaTopic("orders", dt.Leaderless(0, 2)))
		}
		last := dt.Led(0, 3)
		if ongoing {
			last = dt.Leaderless(0, 2)
		}
		answer(h, c, d, dt.MetaTopic("orders", last))
	}
}

// stallAndElection is orders-0 without a leader for 40 s (its only
// replica, node 2, offline) and logs-0 for 4 s, in the same responses.
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

// produceTo is a producer (client id "orders-producer" on 10.0.0.5) whose
// Produce of orders partitions 0 and 1 to node 1 is answered code at at.
func produceTo(h *dt.Harness, c *flows.Conn, at time.Duration, code int16) {
	h.Call(c, dt.At(at), 2*time.Millisecond, "orders-producer", dt.ProduceTo(9, "orders", 0, 1), dt.ProducedTo(9, "orders", code, -1, 0, "", 0, 0, 1))
}

// waited is orders-0 and orders-1 leaderless from 10 s to 16 s for two
// clients: a producer refused NOT_LEADER_OR_FOLLOWER 3 s before the first
// answer without a leader (the refusal that sent it to ask, within the
// 5 s a client may take to refresh Metadata) and again during the
// stretch, also 5.5 s before (too early to be this stretch's); and a
// consumer refused LEADER_NOT_AVAILABLE by Fetch, with a follower's Fetch
// refused beside it (a broker, not a client).
func waited(h *dt.Harness) {
	meta := h.Conn("10.0.0.5:40000", server)
	prod := h.Conn("10.0.0.5:40001", server)
	cons := h.Conn("10.0.0.6:40000", "10.0.0.3:9092")
	follower := h.Conn("10.0.0.4:40000", "10.0.0.3:9092")
	produceTo(h, prod, 4500*time.Millisecond, 6)
	produceTo(h, prod, 7*time.Second, 6)
	lost := []dt.Leadership{dt.Leaderless(0, 2), dt.Leaderless(1, 2), dt.Led(2, 3)}
	for s := 10; s <= 16; s++ {
		parts := lost
		if s == 16 {
			parts = []dt.Leadership{dt.Led(0, 3), dt.Led(1, 3), dt.Led(2, 3)}
		}
		req, resp := dt.Metadata(12, threeBrokers, dt.MetaTopic("orders", parts...))
		h.Call(meta, dt.At(time.Duration(s)*time.Second), 2*time.Millisecond, "orders-producer", req, resp)
		if s == 12 {
			produceTo(h, prod, 12*time.Second+100*time.Millisecond, 6)
			h.Call(cons, dt.At(12*time.Second+200*time.Millisecond), 2*time.Millisecond, "billing",
				dt.ConsumerFetch("orders", 0, 42, 0), dt.ConsumerFetched("orders", 0, 5, -1, -1, -1, -1, nil))
			fr := dt.FetchedAt("orders", 42)
			fr.Topics[0].Partitions[0].ErrorCode = 6
			h.Call(follower, dt.At(12*time.Second+300*time.Millisecond), 2*time.Millisecond, "broker-3", dt.FetchOffsets(3, "orders", 42), fr)
		}
	}
}

// TestElectionStall holds the rule to the severity policy: a partition
// leaderless, from the first Metadata answer saying so to the first
// naming a leader (or the end), for under 1 s is a normal election (no
// finding), under 3 s info, from 3 s a warning, from 30 s or still
// leaderless at the end after 10 s an error; both sides of each boundary.
func TestElectionStall(t *testing.T) {
	dt.Run(t, leaderelectionstall.Analyzer, append(boundaries(), []dt.Case{
		{
			Name:    "leaderless for 60 s and still at the end",
			Traffic: stalled(10, 70, 70),
			Want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &leaderelectionstall.Finding{
					Responses: 61, Refused: 0, Topic: "orders", Partitions: []int32{1},
					Error: "LEADER_NOT_AVAILABLE", LeaderID: int32(-1), Servers: []string{server},
					DurationS: 60.0, Ongoing: true, Replicas: []int32{2}, ISR: []int32{2},
					OfflineReplicas: []int32{2}, NewLeaders: []int32{},
					Waited: []leaderelectionstall.Waiter{{ClientID: "app", Host: "10.0.0.1", MetadataAnswers: 61}},
				}, Exact: []string{"Refused", "NewLeaders"},
				Summary: []string{"orders partition 1 without a leader for 60.0 s (61 Metadata responses from node 1 (10.0.0.2:9092): " +
					"LEADER_NOT_AVAILABLE, leader -1); their only replica, node 2, is offline; still so at the end of the capture; 1 client waited"},
				Evidence: []uint64{22, 142},
			}},
			Explanation: []string{"answered LEADER_NOT_AVAILABLE with leader -1 to the end of the capture at 2026-01-01 00:01:10.002 (60.0 s of capture time)",
				`1 client waited for a leader: "app" on 10.0.0.1 (61 Metadata answers without a leader)`},
		},
		{
			Name: "no answer after the last without a leader: leaderless to the end all the same",
			Traffic: func(h *dt.Harness) {
				c := h.Conn(client, server)
				for s := range 6 {
					answer(h, c, time.Duration(s)*time.Second, dt.MetaTopic("orders", dt.Leaderless(0, 2)))
				}
				for s := 6; s <= 20; s++ {
					answer(h, c, time.Duration(s)*time.Second, dt.MetaTopic("payments", dt.Led(0, 1)))
				}
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &leaderelectionstall.Finding{
				Responses: 6, DurationS: 20.0, Ongoing: true,
			}}},
			Explanation: []string{"the last, at 2026-01-01 00:00:05.002, still named none, and no response named one until the end of the capture " +
				"at 2026-01-01 00:00:20.002 (20.0 s of capture time)"},
		},
		{
			Name:    "leaderless for 45 s, then a leader",
			Traffic: stalled(10, 54, 80),
			Want: []dt.Want{{Severity: detectors.Error, Detail: &leaderelectionstall.Finding{
				Responses: 45, Partitions: []int32{1}, DurationS: 45.0, Ongoing: false,
				NewLeaders: []int32{2},
			}, Exact: []string{"Ongoing"},
				Summary: []string{"without a leader for 45.0 s", "is offline", "then led by node 2"}}},
			Explanation: []string{"until a response named node 2 the leader at 2026-01-01 00:00:55.002 (45.0 s of capture time for orders partition 1)"},
		},
		{
			Name:    "an election of 5 s that producers waited out is a warning",
			Traffic: stalled(10, 14, 30),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &leaderelectionstall.Finding{
				Responses: 5, Topic: "orders", Partitions: []int32{1}, DurationS: 5.0, Ongoing: false,
				Error: "LEADER_NOT_AVAILABLE",
			}, Exact: []string{"Ongoing"},
				Summary:  []string{"orders partition 1 without a leader for 5.0 s"},
				Evidence: []uint64{22, 32}}},
			Explanation: []string{"A healthy election leaves a partition leaderless for milliseconds; for 5.0 s producers"},
		},
		{
			Name:    "a short election of 2 s is info",
			Traffic: stalled(10, 11, 30),
			Want: []dt.Want{{Severity: detectors.Info, Detail: &leaderelectionstall.Finding{
				Responses: 2, Partitions: []int32{1}, DurationS: 2.0, NewLeaders: []int32{2},
			},
				Summary: []string{"orders partition 1 briefly without a leader (2.0 s), then led by node 2: a leader election"}}},
			Next: []string{"Nothing, unless it repeats"},
		},
		{
			Name:    "still leaderless at the end after 2 s is info, too soon to call",
			Traffic: leaderlessFor(2*time.Second, true),
			Want: []dt.Want{{Severity: detectors.Info, Detail: &leaderelectionstall.Finding{Ongoing: true},
				Summary: []string{"still without one at the end of the capture, too soon to call it a stall"}}},
		},
		{
			Name:    "one answer without a leader, the next naming one 5 s later: the client waited 5 s",
			Traffic: leaderlessFor(5*time.Second, false),
			Want:    []dt.Want{{Severity: detectors.Warning, Detail: &leaderelectionstall.Finding{Responses: 5, DurationS: 5.0}}},
		},
		{
			Name:     "min-duration raised above a 60 s stall: a warning",
			Settings: map[string]string{"min-duration": "90s"},
			Traffic:  stalled(10, 69, 80),
			Want:     []dt.Want{{Severity: detectors.Warning, Detail: &leaderelectionstall.Finding{DurationS: 60.0}}},
		},
		{
			Name: "a leader in between splits two 29 s stretches: warnings, not a stall",
			Traffic: func(h *dt.Harness) {
				poll(h, h.Conn(client, server), 0, 60, func(s int) []dt.Leadership {
					if s == 30 {
						return healthy(s)
					}
					return []dt.Leadership{dt.Led(0, 1), dt.Leaderless(1, 2), dt.Led(2, 3)}
				})
			},
			// 0..29 then a leader at 30: 30 s, an error; 31..60 open
			// to the end (60.002): 29 s and ongoing, an error too; the
			// worst, the longer, is reported.
			Want: []dt.Want{{Severity: detectors.Error, Detail: &leaderelectionstall.Finding{
				Responses: 30, DurationS: 30.0, Ongoing: false,
			}, Exact: []string{"Ongoing"}}},
		},
		{
			Name:    "healthy metadata for two minutes",
			Traffic: func(h *dt.Harness) { poll(h, h.Conn(client, server), 0, 120, healthy) },
		},
		{
			Name: "near miss: a topic-level error without partitions (auto-creation) is not leaderless",
			Traffic: func(h *dt.Harness) {
				poll(h, h.Conn(client, server), 0, 60, func(int) []dt.Leadership { return nil })
			},
		},
		{
			Name: "near miss: Produce answers refusing partitions with no Metadata saying so are not a stall",
			Traffic: func(h *dt.Harness) {
				c := h.Conn(client, server)
				for s := range 60 {
					produceTo(h, c, time.Duration(s)*time.Second, 6)
				}
			},
		},
		{
			Name: "leader -1 without an error code and NOT_LEADER_OR_FOLLOWER count too",
			Traffic: func(h *dt.Harness) {
				poll(h, h.Conn(client, server), 0, 40, func(int) []dt.Leadership {
					return []dt.Leadership{
						{ID: 0, Leader: -1, Replicas: []int32{1, 2}, ISR: []int32{1}, Offline: []int32{1}},
						{ID: 1, Leader: 2, Err: 6, Replicas: []int32{2, 3}, ISR: []int32{2, 3}},
						dt.Led(2, 3),
					}
				})
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &leaderelectionstall.Finding{
				Responses: 41, Partitions: []int32{0, 1}, DurationS: 40.0, Replicas: []int32{1, 2, 3},
				OfflineReplicas: []int32{1},
			}}},
		},
		{
			Name: "overlapping stretches count each response once",
			Traffic: func(h *dt.Harness) {
				poll(h, h.Conn(client, server), 0, 100, func(s int) []dt.Leadership {
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
			Want: []dt.Want{{Severity: detectors.Error, Detail: &leaderelectionstall.Finding{
				Responses: 81, Partitions: []int32{0, 2}, DurationS: 61.0, OfflineReplicas: []int32{1, 3},
			},
				Summary: []string{"orders partitions 0, 2 without a leader for 61.0 s", "all their replicas (nodes 1, 3) are offline"}}},
		},
		{
			Name: "two brokers answering, one healthy topic beside",
			Traffic: func(h *dt.Harness) {
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
			Want: []dt.Want{{Severity: detectors.Error, Detail: &leaderelectionstall.Finding{
				Responses: 41, Topic: "orders", Partitions: []int32{1},
				Servers: []string{"10.0.0.2:9092", "10.0.0.3:9092"},
			},
				Summary: []string{"from node 1 (10.0.0.2:9092), node 2 (10.0.0.3:9092)"}}},
		},
		{
			Name:    "per topic: a stall and a short election, one finding each",
			Traffic: stallAndElection,
			Want: []dt.Want{
				{Severity: detectors.Error, Detail: &leaderelectionstall.Finding{Topic: "orders", DurationS: 40.0}},
				{Severity: detectors.Warning, Detail: &leaderelectionstall.Finding{Topic: "logs", DurationS: 4.0}},
			},
		},
		{
			Name: "one topic, partitions graded apart: one finding per severity (5 s; 2 s and 1 s)",
			Traffic: func(h *dt.Harness) {
				poll(h, h.Conn(client, server), 0, 20, func(s int) []dt.Leadership {
					parts := healthy(s)
					if s >= 2 && s < 4 {
						parts[0] = dt.Leaderless(0, 1)
					}
					if s >= 5 && s < 10 {
						parts[1] = dt.Leaderless(1, 2)
					}
					if s >= 5 && s < 6 {
						parts[2] = dt.Leaderless(2, 3)
					}
					return parts
				})
			},
			Want: []dt.Want{
				{Severity: detectors.Warning, Detail: &leaderelectionstall.Finding{Partitions: []int32{1}, DurationS: 5.0}},
				{Severity: detectors.Info, Detail: &leaderelectionstall.Finding{Partitions: []int32{0, 2}, DurationS: 2.0}},
			},
		},
		{
			Name:    "who waited: the producer refused before and during, a consumer refused, not the follower",
			Traffic: waited,
			Want: []dt.Want{{Severity: detectors.Warning,
				Detail: &leaderelectionstall.Finding{Responses: 6, Refused: 3, Partitions: []int32{0, 1}, DurationS: 6.0, NewLeaders: []int32{3}, Waited: []leaderelectionstall.Waiter{
					{ClientID: "orders-producer", Host: "10.0.0.5", MetadataAnswers: 6, ProduceRefused: 2},
					{ClientID: "billing", Host: "10.0.0.6", FetchRefused: 1},
				}},
				Summary: []string{"orders partitions 0, 1 without a leader for 6.0 s", "then led by node 3; 2 clients waited"},
				// The refusal 3 s before (4), the consumer's (14),
				// the answer naming a leader (24).
				Evidence: []uint64{4, 14, 24}}},
			// The producer's two refused requests each named both
			// partitions: two requests, not four.
			Explanation: []string{`2 clients waited for a leader: "orders-producer" on 10.0.0.5 (6 Metadata answers without a leader, ` +
				`2 Produce refused); "billing" on 10.0.0.6 (1 Fetch refused)`},
		},
	}...), nil)
}

// boundaries are both sides of each boundary of the policy, and of the
// rule's parameters moving them: orders-0 leaderless for d, then led (or,
// ongoing, to the end of the capture); quiet when sev is quiet.
func boundaries() []dt.Case {
	const quiet = detectors.Severity(-1)
	ms := time.Millisecond
	var cases []dt.Case
	for _, b := range []struct {
		name     string
		settings map[string]string
		d        time.Duration
		ongoing  bool
		sev      detectors.Severity
		secs     float64
	}{
		{"a healthy election of 300 ms is quiet", nil, 300 * ms, false, quiet, 0},
		{"near miss: 999 ms is a normal election, quiet", nil, 999 * ms, false, quiet, 0},
		{"1 s is reported, as info", nil, time.Second, false, detectors.Info, 1},
		{"near miss: the capture ends 500 ms into an election, quiet", nil, 500 * ms, true, quiet, 0},
		{"near miss: 2.9 s is info", nil, 2900 * ms, false, detectors.Info, 2.9},
		{"exactly 3 s is a warning", nil, 3000 * ms, false, detectors.Warning, 3},
		{"3.1 s is a warning", nil, 3100 * ms, false, detectors.Warning, 3.1},
		{"near miss: 29 s is a warning", nil, 29000 * ms, false, detectors.Warning, 29},
		{"near miss: 29.999 s is a warning", nil, 29999 * ms, false, detectors.Warning, 29.999},
		{"exactly 30 s is an error", nil, 30000 * ms, false, detectors.Error, 30},
		{"31 s is an error", nil, 31000 * ms, false, detectors.Error, 31},
		{"near miss: still leaderless at the end after 9 s is a warning", nil, 9000 * ms, true, detectors.Warning, 9},
		{"near miss: still leaderless at the end after 9.999 s is a warning", nil, 9999 * ms, true, detectors.Warning, 9.999},
		{"still leaderless at the end after 10 s is an error", nil, 10000 * ms, true, detectors.Error, 10},
		{"still leaderless at the end after 11 s is an error", nil, 11000 * ms, true, detectors.Error, 11},
		{"min-duration moves the error boundary: 21 s with min-duration 20 (seconds)", map[string]string{"min-duration": "20"},
			21000 * ms, false, detectors.Error, 21},
		{"near miss: 19 s with min-duration 20", map[string]string{"min-duration": "20"}, 19000 * ms, false, detectors.Warning, 19},
		{"min-duration below 10 s: still leaderless at the end after min-duration is an error", map[string]string{"min-duration": "5"},
			6000 * ms, true, detectors.Error, 6},
		{"warn-after moves the warning boundary: 4 s with warn-after 5s is info", map[string]string{"warn-after": "5s"},
			4000 * ms, false, detectors.Info, 4},
		{"brief lowered to 100 (ms): a 300 ms election is info", map[string]string{"brief": "100"}, 300 * ms, false, detectors.Info, 0.3},
	} {
		c := dt.Case{Name: b.name, Settings: b.settings, Traffic: leaderlessFor(b.d, b.ongoing)}
		if b.sev != quiet {
			c.Want = []dt.Want{{Severity: b.sev, Detail: &leaderelectionstall.Finding{
				DurationS: b.secs, Ongoing: b.ongoing,
			}, Exact: []string{"DurationS", "Ongoing"}}}
		}
		cases = append(cases, c)
	}
	return cases
}

// TestElectionStallResponseAlone: a Fetch refusal whose request the
// capture lost tells no client: not counted, and nothing breaks.
func TestElectionStallResponseAlone(t *testing.T) {
	h := dt.New(t, nil, leaderelectionstall.Analyzer)
	leaderlessFor(5*time.Second, false)(h)
	c := h.Conn("10.0.0.6:40000", server)
	q := flowstest.MakeRequest(c, dt.At(2*time.Second), 1, "billing", dt.ConsumerFetch("orders", 0, 42, 0))
	r := flowstest.MakeResponse(q, dt.At(2*time.Second+time.Millisecond), dt.ConsumerFetched("orders", 0, 6, -1, -1, -1, -1, nil))
	h.Exchange(&flows.Exchange{Conn: c, Resp: r})
	dt.Check(t, h.Findings(), rule, dt.Want{Severity: detectors.Warning, Detail: &leaderelectionstall.Finding{
		Refused: 0,
		Waited:  []leaderelectionstall.Waiter{{ClientID: "app", Host: "10.0.0.1", MetadataAnswers: 5}},
	}, Exact: []string{"Refused"}})
}

// TestElectionStallGrade: at its defaults the rule grades as the policy
// does (detectors.Grade), from brief on.
func TestElectionStallGrade(t *testing.T) {
	for d := time.Second; d <= 40*time.Second; d += 100 * time.Millisecond {
		for _, ongoing := range []bool{false, true} {
			h := dt.New(t, nil, leaderelectionstall.Analyzer)
			leaderlessFor(d, ongoing)(h)
			fs := h.Findings()
			if len(fs) != 1 || fs[0].Severity != detectors.Grade(d, ongoing) {
				t.Fatalf("leaderless for %v (ongoing %v): want one %s finding:%s", d, ongoing, detectors.Grade(d, ongoing), dt.Describe(fs))
			}
		}
	}
}

// findings runs the rule over 35 s of one partition answered as p.
func findings(t *testing.T, version int16, p dt.Leadership) []detectors.Finding {
	t.Helper()
	h := dt.New(t, nil, leaderelectionstall.Analyzer)
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
		part    dt.Leadership
		want    string
	}{
		{"only replica offline", 12, dt.Leaderless(0, 4), "no candidate to elect"},
		{"in-sync replicas offline", 12, dt.Leadership{Leader: -1, Err: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Offline: []int32{1}},
			"the online replicas ([2 3]) are out of sync, and with unclean.leader.election.enable=false"},
		{"in-sync replica online", 12, dt.Leadership{Leader: -1, Err: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Offline: []int32{1}},
			"In-sync replicas [2] are online, yet no leader was elected: the controller is not completing the election"},
		{"a listener missing on the leader is not an election", 12, dt.Leadership{Leader: -1, Err: 72, Replicas: []int32{1}, ISR: []int32{1}},
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
	h := dt.New(t, nil, leaderelectionstall.Analyzer)
	stallAndElection(h)
	fs := h.Findings()
	if len(fs) != 2 {
		t.Fatalf("want a stall and an election:%s", dt.Describe(fs))
	}
	all := []string{"duration_s", "error", "isr", "leader_id", "new_leaders", "offline_replicas", "ongoing", "partitions", "replicas",
		"servers", "topic", "waited"}
	for i, want := range [][]string{all, all} {
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
		!slices.Equal(s.Partitions, []cluster.Partition{{Topic: "orders", Num: 0}}) {
		t.Errorf("subject %+v", s)
	}
	if !slices.Equal(s.ClientIDs, []string{"app"}) || !slices.Equal(s.Clients, []netip.Addr{netip.MustParseAddr("10.0.0.1")}) {
		t.Errorf("subject's clients %v %v, want the client that waited: app on 10.0.0.1", s.ClientIDs, s.Clients)
	}
	if !slices.Equal(fs[0].Conns, []int{1}) || !slices.Equal(fs[0].Nodes, []int32{2}) {
		t.Errorf("stall on connections %v, nodes %v; want [1], [2]", fs[0].Conns, fs[0].Nodes)
	}
}

// TestElectionStallEvidence: each piece of evidence says which partitions
// a response answered without a leader, eight at most by number.
func TestElectionStallEvidence(t *testing.T) {
	h := dt.New(t, nil, leaderelectionstall.Analyzer)
	c := h.Conn(client, server)
	var parts []dt.Leadership
	for p := range int32(10) {
		parts = append(parts, dt.Leaderless(p, 2))
	}
	for s := range 31 {
		answer(h, c, time.Duration(s)*time.Second, dt.MetaTopic("orders", parts...))
	}
	fs := h.Findings()
	dt.Check(t, fs, rule, dt.Want{Severity: detectors.Error, Detail: &leaderelectionstall.Finding{
		Responses: 31, Partitions: []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
	}, Evidence: []uint64{2, 62}})
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
		h := dt.New(t, nil, leaderelectionstall.Analyzer)
		c := h.Conn(client, server)
		if tc.name {
			named := dt.MetaTopic("orders", dt.Led(0, 1))
			named.TopicID = id
			answer(h, c, 0, named)
		}
		for s := 1; s <= 40; s++ {
			answer(h, c, time.Duration(s)*time.Second, byID)
		}
		dt.Check(t, h.Findings(), rule, dt.Want{Severity: detectors.Error, Detail: &leaderelectionstall.Finding{Topic: tc.topic}, Exact: []string{"Topic"}})
	}
}

// TestElectionStallBound: partitions beyond the table's bound are not
// followed, and the findings say how many answers that left out.
func TestElectionStallBound(t *testing.T) {
	if testing.Short() {
		t.Skip("a Metadata response of 65546 partitions")
	}
	h := dt.New(t, nil, leaderelectionstall.Analyzer)
	c := h.Conn(client, server)
	parts := make([]dt.Leadership, 1<<16+10)
	for i := range parts {
		parts[i] = dt.Leadership{ID: int32(i), Leader: -1, Err: 5}
	}
	answer(h, c, 0, dt.MetaTopic("orders", parts...))
	answer(h, c, 2*time.Second, dt.MetaTopic("orders", parts...))
	fs := h.Findings()
	// Compare, not Check: a golden of its 65536 partitions would be 2 MB.
	first := make([]int32, 1<<16) // the first 65536 seen are tracked
	for i := range first {
		first[i] = int32(i)
	}
	dt.Compare(t, fs, rule, dt.Want{Severity: detectors.Info, Detail: &leaderelectionstall.Finding{Partitions: first}})
	if len(fs) == 1 && !strings.Contains(fs[0].Explanation, "20 leaderless answers about partitions beyond the first 65536 tracked were not followed") {
		t.Errorf("the bound is not said: %s", fs[0].Explanation)
	}
}
