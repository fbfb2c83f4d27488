package livenesswithoutreplication_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/livenesswithoutreplication"
)

const rule = "liveness-without-replication"

// broker scripts broker 5 at 10.4.0.5 for span: heartbeats every 2 s to
// the controller at 10.4.0.9:9093 (node 9) answered with hbCode, and a
// raft fetch every 250 ms to server answered by answer(i) (nil: never).
func broker(h *dt.Harness, span time.Duration, hbCode int16, server string, answer func(i int) kmsg.Response) {
	var s dt.Schedule
	hb := h.Conn("10.4.0.5:42000", "10.4.0.9:9093")
	raft := h.Conn("10.4.0.5:42001", server)
	for t := time.Duration(0); t < span; t += 2 * time.Second {
		req, resp := dt.BrokerHeartbeat(5, 4000, hbCode)
		s.Add(t+100*time.Millisecond, hb, "5", req, resp)
	}
	i := 0
	for t := time.Duration(0); t < span; t += 250 * time.Millisecond {
		s.Add(t, raft, "raft-client-5", dt.RaftFetch(5, 4001, 8), answer(i))
		i++
	}
	s.Run(h)
}

func notLeader(int) kmsg.Response { return dt.RaftFetched(6, -1, 9, 8, "10.4.0.9", 9093, nil) }

func fine(int) kmsg.Response { return dt.RaftFetched(0, 4001, -1, -1, "", 0, nil) }

// election: raft refused for the first n fetches, then fine.
func election(n int) func(i int) kmsg.Response {
	return func(i int) kmsg.Response {
		if i < n {
			return notLeader(i)
		}
		return fine(i)
	}
}

// refused: broker 5 healthy but for its first n raft fetches, refused by
// another controller.
func refused(h *dt.Harness, n int) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", election(n)) }

// timeouts: broker 5 heartbeating every 2 s for 30 s, its first n raft
// fetches to the leader (node 9) unanswered, each on a connection of its
// own that is closed at KRaft's 2 s request timeout, then a long poll
// answered every 500 ms.
func timeouts(h *dt.Harness, n int) {
	var s dt.Schedule
	hb := h.Conn("10.4.0.5:42000", "10.4.0.9:9093")
	for t := time.Duration(0); t < 30*time.Second; t += 2 * time.Second {
		req, resp := dt.BrokerHeartbeat(5, 4000, 0)
		s.Add(t+100*time.Millisecond, hb, "5", req, resp)
	}
	s.Run(h)
	for i := range n {
		c := h.Conn(fmt.Sprintf("10.4.0.5:%d", 43000+i), "10.4.0.9:9093")
		q, _ := h.Call(c, dt.At(time.Duration(i)*2*time.Second), 0, "raft-client-5", dt.RaftFetch(5, 4001, 8), nil)
		h.Unanswered(c, q)
	}
	c := h.Conn("10.4.0.5:43100", "10.4.0.9:9093")
	dt.Every(h, c, "raft-client-5", 30, time.Duration(n)*2*time.Second, 500*time.Millisecond, time.Millisecond, func(int) (kmsg.Request, kmsg.Response) {
		return dt.RaftFetch(5, 4001, 8), dt.RaftFetched(0, 4001, -1, -1, "", 0, nil)
	})
}

func TestLivenessWithoutReplication(t *testing.T) {
	dt.Run(t, livenesswithoutreplication.Analyzer, slices.Concat([]dt.Case{
		{
			Name:    "heartbeats fine, raft fetches refused by another controller",
			Traffic: func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", notLeader) },
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary: []string{"broker 5 is alive by heartbeat but its metadata replication is not: 15 heartbeats answered ok by node 9 (10.4.0.9:9093), " +
					"while 120 raft fetches to 1 other controller all answered NOT_LEADER_OR_FOLLOWER naming leader 9 in 29.8 s"},
				Detail: &livenesswithoutreplication.Finding{
					Heartbeats: 15, HeartbeatErrors: 0, RaftFetches: 120, RaftErrors: 120, RaftUnanswered: 0,
					RaftToLeader: 0, NodeID: int32(5), HeartbeatClientID: "5", RaftClientID: "raft-client-5",
					LeaderID: int32(9), LeaderEpoch: dt.Ptr[int32](int32(8)), LeaderEndpoint: "10.4.0.9:9093",
					FetchOffset: dt.Ptr[int64](int64(4001)), CurrentMetadataOffset: dt.Ptr[int64](int64(4000)),
					IsCaughtUp: dt.Ptr[bool](true), IsFenced: dt.Ptr[bool](false),
					HeartbeatServers: []string{"10.4.0.9:9093"}, RaftServers: []string{"10.4.0.7:9093"},
					Duration: 29.752,
				}, Exact: []string{"HeartbeatErrors", "RaftUnanswered", "RaftToLeader"},
				Evidence: []uint64{2, 4, 270},
			}},
			Nodes: []int32{5, 9},
			Explanation: []string{
				"broker 5 is alive by heartbeat: 15 heartbeats to node 9 (10.4.0.9:9093) answered without error (last answer while the raft fetches failed: isCaughtUp true, isFenced false)",
				"its metadata replication is not: 120 raft fetches to 1 other controller all answered NOT_LEADER_OR_FOLLOWER naming leader 9 (10.4.0.9:9093)",
				"Not one raft fetch went to leader 9 (named by the raft answers), though its heartbeats reach node 9 (10.4.0.9:9093).",
				"Its heartbeats meanwhile report currentMetadataOffset 4000 throughout and its raft fetches ask for offset 4001 every time",
				"The controller keeps it registered and unfenced",
			},
		},
		{
			Name: "heartbeats fine, raft fetches to the leader time out",
			Traffic: func(h *dt.Harness) {
				broker(h, 30*time.Second, 0, "10.4.0.9:9093", func(int) kmsg.Response { return nil })
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary:  []string{"120 raft fetches to the same controller, none answered successfully (no answer x120)"},
				Detail: &livenesswithoutreplication.Finding{
					RaftFetches: 120, RaftErrors: 0, RaftUnanswered: 120, Heartbeats: 15, NodeID: int32(5),
					LeaderID: int32(-1),
				}, Exact: []string{"RaftErrors"},
			}},
		},
		{
			Name: "some heartbeats fail, fewer than succeed",
			Traffic: func(h *dt.Harness) {
				var s dt.Schedule
				hb := h.Conn("10.4.0.5:42000", "10.4.0.9:9093")
				raft := h.Conn("10.4.0.5:42001", "10.4.0.7:9093")
				for i := range 10 {
					code := int16(0)
					if i%3 == 0 {
						code = 41
					}
					req, resp := dt.BrokerHeartbeat(5, 4000+int64(i/5), code)
					s.Add(time.Duration(i)*2*time.Second+100*time.Millisecond, hb, "5", req, resp)
				}
				for i := range 80 {
					s.Add(time.Duration(i)*250*time.Millisecond, raft, "raft-client-5", dt.RaftFetch(5, 4001, 8), notLeader(i))
				}
				s.Run(h)
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &livenesswithoutreplication.Finding{
				Heartbeats: 10, HeartbeatErrors: 4,
			}}},
			Explanation: []string{"6 of 10 heartbeats to node 9 (10.4.0.9:9093) answered without error",
				"Its heartbeats meanwhile report currentMetadataOffset from 4000 to 4001 and its raft fetches ask"},
		},
		{
			// As Apache Kafka 4.1.1 did (fixtures/pcaps/kafka/kraft-observer-loop):
			// the heartbeats' currentMetadataOffset stays at the last applied
			// offset while the raft fetches fail and jumps once one succeeds.
			// The finding states the offset of the run, not the later one.
			Name: "heartbeats' offset frozen during the run, moving after it heals",
			Traffic: func(h *dt.Harness) {
				var s dt.Schedule
				hb := h.Conn("10.4.0.5:42000", "10.4.0.9:9093")
				raft := h.Conn("10.4.0.5:42001", "10.4.0.7:9093")
				for i := range 25 {
					offset := int64(4000)
					if i >= 16 {
						offset = 4100 + int64(i)
					}
					req, resp := dt.BrokerHeartbeat(5, offset, 0)
					s.Add(time.Duration(i)*2*time.Second+100*time.Millisecond, hb, "5", req, resp)
				}
				for i := range 200 {
					s.Add(time.Duration(i)*250*time.Millisecond, raft, "raft-client-5", dt.RaftFetch(5, 4001, 8), election(120)(i))
				}
				s.Run(h)
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &livenesswithoutreplication.Finding{
				CurrentMetadataOffset: dt.Ptr[int64](int64(4000)), FetchOffset: dt.Ptr[int64](int64(4001)),
			}}},
			Explanation: []string{"(last answer while the raft fetches failed: isCaughtUp true, isFenced false)",
				"Its heartbeats meanwhile report currentMetadataOffset 4000 throughout and its raft fetches ask for offset 4001 every time: the metadata it applies is frozen."},
		},
		{
			Name:    "near miss: healthy broker, raft long polls answered by the leader",
			Traffic: func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.9:9093", fine) },
		},
		{
			Name:    "near miss: heartbeats fail too (the controller is gone)",
			Traffic: func(h *dt.Harness) { broker(h, 30*time.Second, 41, "10.4.0.7:9093", notLeader) },
		},
		{
			Name:    "near miss: a controller election, raft fails for 3 s then recovers",
			Traffic: func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", election(12)) },
		},
		{
			Name: "near miss: raft fails but no heartbeats are captured",
			Traffic: func(h *dt.Harness) {
				raft := h.Conn("10.4.0.5:42001", "10.4.0.7:9093")
				for i := range 120 {
					h.Call(raft, dt.At(time.Duration(i)*250*time.Millisecond), time.Millisecond, "raft-client-5", dt.RaftFetch(5, 4001, 8), notLeader(i))
				}
			},
		},
		{
			Name:     "min-heartbeats raised above the 15 captured",
			Settings: map[string]string{"min-heartbeats": "16"},
			Traffic:  func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", notLeader) },
		},
		{
			Name:     "the election's 3 s of failures count once min-duration is lowered (a bare number is in seconds): a warning",
			Settings: map[string]string{"min-duration": "2", "min-heartbeats": "1"},
			Traffic:  func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", election(12)) },
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &livenesswithoutreplication.Finding{
				RaftFetches: 12, Heartbeats: 2, HeldS: 3.002, Ongoing: false,
			}, Exact: []string{"Ongoing"}}},
		},
	},
		dt.Edge("min-duration (failing 10 s, to the raft fetch that succeeds): healed before 30 s, a warning", nil,
			dt.Want{Severity: detectors.Warning, Detail: &livenesswithoutreplication.Finding{
				RaftFetches: 40, Heartbeats: 5, HeldS: 10.002, Ongoing: false,
			}, Exact: []string{"Ongoing"},
				Summary: []string{"; a raft fetch succeeded again 10.0 s after the first failed one"}},
			func(h *dt.Harness) { refused(h, 40) }, func(h *dt.Harness) { refused(h, 39) }),
		dt.Edge("min-raft-fetches (5 failed, min-duration lowered: under 3 s, info)", map[string]string{"min-duration": "1s", "min-heartbeats": "1"},
			dt.Want{Severity: detectors.Info, Detail: &livenesswithoutreplication.Finding{RaftFetches: 5}},
			func(h *dt.Harness) { refused(h, 5) }, func(h *dt.Harness) { refused(h, 4) }),
		dt.Edge("min-heartbeats (3 during the run)", map[string]string{"min-duration": "1s"},
			dt.Want{Severity: detectors.Warning, Detail: &livenesswithoutreplication.Finding{RaftFetches: 20, Heartbeats: 3}},
			func(h *dt.Harness) { refused(h, 20) }, func(h *dt.Harness) { refused(h, 16) }),
		[]dt.Case{
			{
				Name:    "near miss of 30 s (LongAfter): failing 29 s, then replicating: a warning",
				Traffic: func(h *dt.Harness) { broker(h, 40*time.Second, 0, "10.4.0.7:9093", election(116)) },
				Want: []dt.Want{{Severity: detectors.Warning, Detail: &livenesswithoutreplication.Finding{
					HeldS: 29.002, Ongoing: false,
				}, Exact: []string{"Ongoing"}}},
			},
			{
				Name:    "failing 31 s, then replicating: an error (LongAfter)",
				Traffic: func(h *dt.Harness) { broker(h, 40*time.Second, 0, "10.4.0.7:9093", election(124)) },
				Want: []dt.Want{{Severity: detectors.Error, Detail: &livenesswithoutreplication.Finding{
					HeldS: 31.002, Ongoing: false,
				}, Exact: []string{"Ongoing"}}},
			},
			{
				Name:    "still failing at the end after 11 s: an error (HealAfter)",
				Traffic: func(h *dt.Harness) { broker(h, 11250*time.Millisecond, 0, "10.4.0.7:9093", notLeader) },
				Want: []dt.Want{{Severity: detectors.Error, Detail: &livenesswithoutreplication.Finding{
					HeldS: 11.002, Ongoing: true,
				},
					Summary: []string{"; still failing when the capture ended"}}},
			},
			{
				Name:    "near miss: still failing at the end after 9 s, under min-duration: nothing",
				Traffic: func(h *dt.Harness) { broker(h, 9250*time.Millisecond, 0, "10.4.0.7:9093", notLeader) },
			},
			{
				Name:    "raft fetches to the leader time out (2 s each) for 12 s, then answered: a warning",
				Traffic: func(h *dt.Harness) { timeouts(h, 6) },
				Want: []dt.Want{{Severity: detectors.Warning, Detail: &livenesswithoutreplication.Finding{
					RaftFetches: 6, RaftUnanswered: 6,
				}}},
			},
		},
	), nil)
}

// TestLivenessLeaderFromHeartbeats: with no raft answer naming a leader,
// the node the heartbeats go to is taken as the leader, once known, and
// named in the command to run. The finding names no error: the raft
// answers' errors are for not-leader-loop to explain.
func TestLivenessLeaderFromHeartbeats(t *testing.T) {
	h := dt.New(t, nil, livenesswithoutreplication.Analyzer)
	m := h.Conn("10.4.0.1:30000", "10.4.0.9:9093")
	req, resp := dt.MetadataLeader("t", 9, 1, []string{"9@10.4.0.9:9093"}, 0)
	h.Call(m, dt.At(0), time.Millisecond, "admin", req, resp)
	broker(h, 30*time.Second, 0, "10.4.0.9:9093", func(int) kmsg.Response { return dt.RaftFetched(3, -1, -1, -1, "", 0, nil) })
	fs := h.Findings()
	dt.Check(t, fs, rule, dt.Want{Severity: detectors.Error,
		Summary: []string{"15 heartbeats answered ok by node 9 (10.4.0.9:9093), while 120 raft fetches to the same controller all answered UNKNOWN_TOPIC_OR_PARTITION in"},
		Detail:  &livenesswithoutreplication.Finding{RaftToLeader: 120, LeaderID: int32(9), LeaderEndpoint: "10.4.0.9:9093"},
	})
	if len(fs) != 1 {
		return
	}
	if !strings.Contains(fs[0].Explanation, "120 raft fetches went to leader 9 and failed there too.") {
		t.Errorf("explanation %q", fs[0].Explanation)
	}
	if !strings.Contains(fs[0].Next, "kafka-metadata-quorum.sh --bootstrap-controller 10.4.0.9:9093 describe --replication (node 5's") {
		t.Errorf("next %q", fs[0].Next)
	}
	if fs[0].Subject.Error != 0 {
		t.Errorf("subject error %d", fs[0].Subject.Error)
	}
}
