package legacy_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
)

// lwHeartbeat is a BrokerHeartbeat v1 exchange of broker id, answered
// with code.
func lwHeartbeat(id int32, metaOffset int64, code int16) (*kmsg.BrokerHeartbeatRequest, *kmsg.BrokerHeartbeatResponse) {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.Version, req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset = 1, id, 100, metaOffset
	resp := kmsg.NewPtrBrokerHeartbeatResponse()
	resp.Version, resp.ErrorCode, resp.IsCaughtUp, resp.IsFenced = 1, code, true, false
	return req, resp
}

// lwBroker scripts broker 5 at 10.4.0.5: heartbeats every 2 s for span to
// the controller at 10.4.0.9:9093 answered with hbCode, and a raft fetch
// every 250 ms to server, answered by answer(i) (nil: no answer).
func lwBroker(tr *nlTraffic, span time.Duration, hbCode int16, server string, answer func(i int) kmsg.Response) {
	hb := tr.conn("10.4.0.5:42000", "10.4.0.9:9093")
	for t := time.Duration(0); t < span; t += 2 * time.Second {
		req, resp := lwHeartbeat(5, 4000, hbCode)
		tr.exchange(hb, "5", nlAt(t+100*time.Millisecond), time.Millisecond, req, resp)
	}
	raft := tr.conn("10.4.0.5:42001", server)
	i := 0
	for t := time.Duration(0); t < span; t += 250 * time.Millisecond {
		var resp kmsg.Response
		if r := answer(i); r != nil {
			resp = r
		}
		tr.exchange(raft, "raft-client-5", nlAt(t), 2*time.Millisecond, nlRaftFetch(5, 4001, 8), resp)
		i++
	}
}

func TestLivenessWithoutReplication(t *testing.T) {
	notLeader := func(int) kmsg.Response { return nlRaftFetched(6, -1, 9, 8, "10.4.0.9", 9093, nil) }
	type want struct {
		summary []string
		expl    []string
		counts  map[string]int64
		fields  map[string]any
		nodes   []int32
	}
	cases := []struct {
		name      string
		overrides map[string]float64
		build     func(tr *nlTraffic)
		want      []want
	}{
		{
			name: "heartbeats fine, raft fetches refused by another controller",
			build: func(tr *nlTraffic) {
				lwBroker(tr, 30*time.Second, 0, "10.4.0.7:9093", notLeader)
			},
			want: []want{{
				summary: []string{"broker 5 is alive by heartbeat but its metadata replication is not"},
				expl: []string{
					"broker 5 is alive by heartbeat: 15 heartbeats to node 9 (10.4.0.9:9093) answered without error",
					"currentMetadataOffset 4000 throughout",
					"its metadata replication is not: 120 raft fetches to 1 other controller all answered NOT_LEADER_OR_FOLLOWER naming leader 9",
				},
				counts: map[string]int64{"heartbeats": 15, "heartbeat_errors": 0, "raft_fetches": 120, "raft_fetch_errors": 120, "raft_fetches_to_leader": 0},
				fields: map[string]any{"node_id": int32(5), "heartbeat_client_id": "5", "raft_client_id": "raft-client-5",
					"leader_id": int32(9), "leader_endpoint": "10.4.0.9:9093", "fetch_offset": int64(4001),
					"current_metadata_offset": int64(4000)},
				nodes: []int32{5, 9},
			}},
		},
		{
			name: "heartbeats fine, raft fetches to the leader time out",
			build: func(tr *nlTraffic) {
				lwBroker(tr, 30*time.Second, 0, "10.4.0.9:9093", func(int) kmsg.Response { return nil })
			},
			want: []want{{
				summary: []string{"none answered successfully"},
				counts:  map[string]int64{"raft_fetches": 120, "raft_fetch_errors": 0, "raft_fetches_unanswered": 120},
				fields:  map[string]any{"node_id": int32(5)},
			}},
		},
		{
			name: "near miss: healthy broker, raft long polls answered by the leader",
			build: func(tr *nlTraffic) {
				lwBroker(tr, 30*time.Second, 0, "10.4.0.9:9093", func(int) kmsg.Response { return nlRaftFetched(0, 4001, -1, -1, "", 0, nil) })
			},
		},
		{
			name: "near miss: heartbeats fail too (the controller is gone)",
			build: func(tr *nlTraffic) {
				lwBroker(tr, 30*time.Second, 41, "10.4.0.7:9093", notLeader)
			},
		},
		{
			name: "near miss: a controller election, raft fails for 3 s then recovers",
			build: func(tr *nlTraffic) {
				lwBroker(tr, 30*time.Second, 0, "10.4.0.7:9093", func(i int) kmsg.Response {
					if i < 12 {
						return nlRaftFetched(6, -1, 9, 8, "10.4.0.9", 9093, nil)
					}
					return nlRaftFetched(0, 4001, -1, -1, "", 0, nil)
				})
			},
		},
		{
			name: "near miss: raft fails but no heartbeats are captured",
			build: func(tr *nlTraffic) {
				raft := tr.conn("10.4.0.5:42001", "10.4.0.7:9093")
				for i := range 120 {
					tr.exchange(raft, "raft-client-5", nlAt(time.Duration(i)*250*time.Millisecond), time.Millisecond,
						nlRaftFetch(5, 4001, 8), notLeader(i))
				}
			},
		},
		{
			name:      "min-heartbeats raised above the 15 captured",
			overrides: map[string]float64{"liveness-without-replication.min-heartbeats": 16},
			build: func(tr *nlTraffic) {
				lwBroker(tr, 30*time.Second, 0, "10.4.0.7:9093", notLeader)
			},
		},
		{
			name:      "the election's 3 s of failures count once min-duration is lowered",
			overrides: map[string]float64{"liveness-without-replication.min-duration": 2, "liveness-without-replication.min-heartbeats": 1},
			build: func(tr *nlTraffic) {
				lwBroker(tr, 30*time.Second, 0, "10.4.0.7:9093", func(i int) kmsg.Response {
					if i < 12 {
						return nlRaftFetched(6, -1, 9, 8, "10.4.0.9", 9093, nil)
					}
					return nlRaftFetched(0, 4001, -1, -1, "", 0, nil)
				})
			},
			want: []want{{counts: map[string]int64{"raft_fetches": 12, "heartbeats": 2}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newNLTraffic(t)
			tc.build(tr)
			r := tr.run(tc.overrides)
			got := findingsOf(r, "liveness-without-replication")
			if len(got) != len(tc.want) {
				t.Fatalf("%d findings, want %d:%s", len(got), len(tc.want), nlDescribe(got))
			}
			for i, w := range tc.want {
				nlCheck(t, got[i], "error", w.summary, w.counts, w.fields, w.nodes)
				for _, s := range w.expl {
					if !strings.Contains(got[i].Explanation, s) {
						t.Errorf("explanation %q lacks %q", got[i].Explanation, s)
					}
				}
			}
			// The connections carry the roles the finding speaks of.
			for _, c := range r.Connections {
				want := "raft"
				if strings.HasSuffix(c.Client, ":42000") {
					want = "liveness"
				}
				if !slices.Equal(c.Roles, []string{want}) {
					t.Errorf("connection %s -> %s roles %v, want [%s]", c.Client, c.Server, c.Roles, want)
				}
			}
		})
	}
}

// TestObserverScenario runs the observer fetch loop fixture and checks the
// findings of this file's three detectors against the scenario's
// expectations (written from the incident write-up), and the roles of its
// connections.
func TestObserverScenario(t *testing.T) {
	sc, ok := gen.FindScenario("observer-fetch-loop.pcap")
	if !ok {
		t.Fatal("no observer-fetch-loop scenario")
	}
	f, err := capture.Open(filepath.Join("..", "..", "fixtures", "pcaps", gen.ScenarioDir, sc.Name), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{Flows: flows.DefaultConfig(), Detectors: set}).Report
	mine := []string{"not-leader-loop", "stalled-fetch", "liveness-without-replication"}
	for _, want := range sc.Expect {
		if !slices.Contains(mine, want.Detector) {
			continue
		}
		got := findingsOf(r, want.Detector)
		if len(got) != 1 {
			t.Errorf("%s: %d findings, want 1:%s", want.Detector, len(got), nlDescribe(got))
			continue
		}
		if err := want.Check(got[0].Detector, got[0].Severity.String(), got[0].Nodes, got[0].Counts, got[0].Fields); err != nil {
			t.Error(err)
		}
	}
	nl := findingsOf(r, "not-leader-loop")
	if len(nl) == 1 && !strings.Contains(nl[0].Summary, "KAFKA-19354") {
		t.Errorf("not-leader-loop summary %q does not name KAFKA-19354", nl[0].Summary)
	}
	lw := findingsOf(r, "liveness-without-replication")
	if len(lw) == 1 {
		for _, s := range []string{
			"broker 68 is alive by heartbeat: 20 heartbeats to node 1003 (10.30.7.85:8081) answered without error",
			"its metadata replication is not: 2000 raft fetches to 3 other controllers all answered NOT_LEADER_OR_FOLLOWER naming leader 1003",
		} {
			if !strings.Contains(lw[0].Explanation, s) {
				t.Errorf("explanation %q lacks %q", lw[0].Explanation, s)
			}
		}
	}
	for _, want := range sc.Roles {
		found := false
		for _, c := range r.Connections {
			if c.Client == want.Client && c.Server == want.Server {
				found = true
				if !slices.Equal(c.Roles, want.Roles) {
					t.Errorf("connection %s -> %s roles %v, want %v", c.Client, c.Server, c.Roles, want.Roles)
				}
			}
		}
		if !found {
			t.Errorf("no connection %s -> %s", want.Client, want.Server)
		}
	}
}
