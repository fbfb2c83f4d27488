package liveness_test

import (
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/liveness"
	"github.com/kfsniff/kfsniff/flows"
)

const rule = "liveness-without-replication"

// schedule collects calls on several connections and makes them in time
// order; requests never answered are delivered at the end, as flows does
// when the capture ends.
type schedule struct {
	calls []call
}

type call struct {
	at   time.Duration
	c    *flows.Conn
	id   string
	req  kmsg.Request
	resp kmsg.Response // nil: never answered
}

func (s *schedule) add(at time.Duration, c *flows.Conn, id string, req kmsg.Request, resp kmsg.Response) {
	s.calls = append(s.calls, call{at, c, id, req, resp})
}

func (s *schedule) run(h *dt.Harness) {
	sort.SliceStable(s.calls, func(i, j int) bool { return s.calls[i].at < s.calls[j].at })
	type pending struct {
		c *flows.Conn
		q *flows.Message
	}
	var never []pending
	for _, c := range s.calls {
		if c.resp == nil {
			q, _ := h.Call(c.c, dt.At(c.at), 0, c.id, c.req, nil)
			never = append(never, pending{c.c, q})
			continue
		}
		h.Call(c.c, dt.At(c.at), 2*time.Millisecond, c.id, c.req, c.resp)
	}
	for _, p := range never {
		h.Unanswered(p.c, p.q)
	}
}

// broker scripts broker 5 at 10.4.0.5 for span: heartbeats every 2 s to
// the controller at 10.4.0.9:9093 (node 9) answered with hbCode, and a
// raft fetch every 250 ms to server answered by answer(i) (nil: never).
func broker(h *dt.Harness, span time.Duration, hbCode int16, server string, answer func(i int) kmsg.Response) {
	var s schedule
	hb := h.Conn("10.4.0.5:42000", "10.4.0.9:9093")
	raft := h.Conn("10.4.0.5:42001", server)
	for t := time.Duration(0); t < span; t += 2 * time.Second {
		req, resp := dt.BrokerHeartbeat(5, 4000, hbCode)
		s.add(t+100*time.Millisecond, hb, "5", req, resp)
	}
	i := 0
	for t := time.Duration(0); t < span; t += 250 * time.Millisecond {
		s.add(t, raft, "raft-client-5", dt.RaftFetch(5, 4001, 8), answer(i))
		i++
	}
	s.run(h)
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

func TestLivenessWithoutReplication(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		traffic  func(h *dt.Harness)
		want     []dt.Want
		nodes    []int32
		expl     []string
	}{
		{
			name:    "heartbeats fine, raft fetches refused by another controller",
			traffic: func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", notLeader) },
			want: []dt.Want{{
				Severity: detectors.Error,
				Summary: []string{"broker 5 is alive by heartbeat but its metadata replication is not: 15 heartbeats answered ok by node 9 (10.4.0.9:9093), " +
					"while 120 raft fetches to 1 other controller all answered NOT_LEADER_OR_FOLLOWER naming leader 9 in 29.8 s"},
				Counts: map[string]int64{"heartbeats": 15, "heartbeat_errors": 0, "raft_fetches": 120, "raft_fetch_errors": 120,
					"raft_fetches_unanswered": 0, "raft_fetches_to_leader": 0},
				Fields: map[string]any{"node_id": int32(5), "heartbeat_client_id": "5", "raft_client_id": "raft-client-5",
					"leader_id": int32(9), "leader_epoch": int32(8), "leader_endpoint": "10.4.0.9:9093", "fetch_offset": int64(4001),
					"current_metadata_offset": int64(4000), "is_caught_up": true, "is_fenced": false,
					"heartbeat_servers": []string{"10.4.0.9:9093"}, "raft_servers": []string{"10.4.0.7:9093"}, "duration_s": 29.752},
				Evidence: []uint64{2, 4, 270},
			}},
			nodes: []int32{5, 9},
			expl: []string{
				"broker 5 is alive by heartbeat: 15 heartbeats to node 9 (10.4.0.9:9093) answered without error (last answer: isCaughtUp true, isFenced false)",
				"its metadata replication is not: 120 raft fetches to 1 other controller all answered NOT_LEADER_OR_FOLLOWER naming leader 9 (10.4.0.9:9093)",
				"Not one raft fetch went to leader 9 (named by the raft answers), though its heartbeats reach node 9 (10.4.0.9:9093).",
				"Its heartbeats report currentMetadataOffset 4000 throughout and its raft fetches ask for offset 4001 every time",
				"The controller keeps it registered and unfenced",
			},
		},
		{
			name: "heartbeats fine, raft fetches to the leader time out",
			traffic: func(h *dt.Harness) {
				broker(h, 30*time.Second, 0, "10.4.0.9:9093", func(int) kmsg.Response { return nil })
			},
			want: []dt.Want{{
				Severity: detectors.Error,
				Summary:  []string{"120 raft fetches to the same controller, none answered successfully (no answer x120)"},
				Counts:   map[string]int64{"raft_fetches": 120, "raft_fetch_errors": 0, "raft_fetches_unanswered": 120, "heartbeats": 15},
				Fields:   map[string]any{"node_id": int32(5), "leader_id": int32(-1)},
			}},
		},
		{
			name: "some heartbeats fail, fewer than succeed",
			traffic: func(h *dt.Harness) {
				var s schedule
				hb := h.Conn("10.4.0.5:42000", "10.4.0.9:9093")
				raft := h.Conn("10.4.0.5:42001", "10.4.0.7:9093")
				for i := range 10 {
					code := int16(0)
					if i%3 == 0 {
						code = 41
					}
					req, resp := dt.BrokerHeartbeat(5, 4000+int64(i/5), code)
					s.add(time.Duration(i)*2*time.Second+100*time.Millisecond, hb, "5", req, resp)
				}
				for i := range 80 {
					s.add(time.Duration(i)*250*time.Millisecond, raft, "raft-client-5", dt.RaftFetch(5, 4001, 8), notLeader(i))
				}
				s.run(h)
			},
			want: []dt.Want{{Severity: detectors.Error, Counts: map[string]int64{"heartbeats": 10, "heartbeat_errors": 4}}},
			expl: []string{"6 of 10 heartbeats to node 9 (10.4.0.9:9093) answered without error",
				"Its heartbeats report currentMetadataOffset 4001 and its raft fetches ask"},
		},
		{
			name:    "near miss: healthy broker, raft long polls answered by the leader",
			traffic: func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.9:9093", fine) },
		},
		{
			name:    "near miss: heartbeats fail too (the controller is gone)",
			traffic: func(h *dt.Harness) { broker(h, 30*time.Second, 41, "10.4.0.7:9093", notLeader) },
		},
		{
			name:    "near miss: a controller election, raft fails for 3 s then recovers",
			traffic: func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", election(12)) },
		},
		{
			name: "near miss: raft fails but no heartbeats are captured",
			traffic: func(h *dt.Harness) {
				raft := h.Conn("10.4.0.5:42001", "10.4.0.7:9093")
				for i := range 120 {
					h.Call(raft, dt.At(time.Duration(i)*250*time.Millisecond), time.Millisecond, "raft-client-5", dt.RaftFetch(5, 4001, 8), notLeader(i))
				}
			},
		},
		{
			name:     "min-heartbeats raised above the 15 captured",
			settings: map[string]string{"min-heartbeats": "16"},
			traffic:  func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", notLeader) },
		},
		{
			name:     "the election's 3 s of failures count once min-duration is lowered (a bare number is in seconds)",
			settings: map[string]string{"min-duration": "2", "min-heartbeats": "1"},
			traffic:  func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", election(12)) },
			want:     []dt.Want{{Severity: detectors.Error, Counts: map[string]int64{"raft_fetches": 12, "heartbeats": 2}}},
		},
		{
			name:    "min-raft-fetches and min-duration: 41 failures over 10 s are a run",
			traffic: func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", election(41)) },
			want:    []dt.Want{{Severity: detectors.Error, Counts: map[string]int64{"raft_fetches": 41, "heartbeats": 5}}},
		},
		{
			name:    "near miss: 40 failures over 9.75 s are not (min-duration)",
			traffic: func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", election(40)) },
		},
		{
			name:     "min-raft-fetches: 10 failures make a run",
			settings: map[string]string{"min-duration": "1s", "min-heartbeats": "1"},
			traffic:  func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", election(10)) },
			want:     []dt.Want{{Severity: detectors.Error, Counts: map[string]int64{"raft_fetches": 10}}},
		},
		{
			name:     "near miss: 9 failures do not",
			settings: map[string]string{"min-duration": "1s", "min-heartbeats": "1"},
			traffic:  func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", election(9)) },
		},
		{
			name:     "min-heartbeats: 3 heartbeats during the run make it",
			settings: map[string]string{"min-duration": "1s"},
			traffic:  func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", election(20)) },
			want:     []dt.Want{{Severity: detectors.Error, Counts: map[string]int64{"raft_fetches": 20, "heartbeats": 3}}},
		},
		{
			name:     "near miss: 2 heartbeats do not",
			settings: map[string]string{"min-duration": "1s"},
			traffic:  func(h *dt.Harness) { broker(h, 30*time.Second, 0, "10.4.0.7:9093", election(16)) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, map[string]map[string]string{rule: tc.settings}, liveness.Analyzer)
			tc.traffic(h)
			fs := h.Findings()
			dt.Check(t, fs, rule, tc.want...)
			for _, f := range fs {
				if tc.nodes != nil && !slices.Equal(f.Nodes, tc.nodes) {
					t.Errorf("nodes %v, want %v", f.Nodes, tc.nodes)
				}
				for _, s := range tc.expl {
					if !strings.Contains(f.Explanation, s) {
						t.Errorf("explanation %q lacks %q", f.Explanation, s)
					}
				}
				if !strings.Contains(f.Next, "kafka-metadata-quorum.sh --bootstrap-controller") || f.Subject.Error != 0 {
					t.Errorf("next %q, subject error %d", f.Next, f.Subject.Error)
				}
			}
		})
	}
}

// TestLivenessLeaderFromHeartbeats: with no raft answer naming a leader,
// the node the heartbeats go to is taken as the leader, once known.
func TestLivenessLeaderFromHeartbeats(t *testing.T) {
	h := dt.New(t, nil, liveness.Analyzer)
	m := h.Conn("10.4.0.1:30000", "10.4.0.9:9093")
	req, resp := dt.MetadataLeader("t", 9, 1, []string{"9@10.4.0.9:9093"}, 0)
	h.Call(m, dt.At(0), time.Millisecond, "admin", req, resp)
	broker(h, 30*time.Second, 0, "10.4.0.9:9093", func(int) kmsg.Response { return dt.RaftFetched(3, -1, -1, -1, "", 0, nil) })
	fs := h.Findings()
	dt.Check(t, fs, rule, dt.Want{Severity: detectors.Error,
		Summary: []string{"15 heartbeats answered ok by node 9 (10.4.0.9:9093), while 120 raft fetches to the same controller all answered UNKNOWN_TOPIC_OR_PARTITION in"},
		Counts:  map[string]int64{"raft_fetches_to_leader": 120},
		Fields:  map[string]any{"leader_id": int32(9), "leader_endpoint": "10.4.0.9:9093"}})
	if len(fs) == 1 && !strings.Contains(fs[0].Explanation, "120 raft fetches went to leader 9 and failed there too.") {
		t.Errorf("explanation %q", fs[0].Explanation)
	}
}
