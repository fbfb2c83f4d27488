package pipeline

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/notleaderloop"
)

// TestRealClientsNotLeaderLoop: real clients (kgo, sarama, kafka-go,
// kafkajs; recorded by fixtures/clients) retrying a broker that answers
// NOT_LEADER_OR_FOLLOWER while Metadata names that broker as leader, each
// at its own pace, must all be reported as a not-leader loop naming the
// leader, graded as the policy grades what the client felt: refused from
// its first Produce to its last, never written, so still refused when the
// capture ended. The expected values come from the recordings' sidecars,
// which the recorder computed from the bytes on the wire without kfsniff.
// (notleader-8s-*, the loop that heals: TestRealClientsNotLeaderHealed.)
func TestRealClientsNotLeaderLoop(t *testing.T) {
	all, _ := filepath.Glob(filepath.Join("..", "fixtures", "pcaps", "clients", "notleader-*.json"))
	var sidecars []string
	for _, sc := range all {
		if !strings.HasPrefix(filepath.Base(sc), "notleader-8s-") {
			sidecars = append(sidecars, sc)
		}
	}
	if len(sidecars) < 4 {
		t.Fatalf("found %d client recordings, want kgo, sarama, kafka-go, kafkajs", len(sidecars))
	}
	burst := defaultCount(t, notleaderloop.Analyzer, "burst-responses")
	for _, sc := range sidecars {
		var side struct {
			Client    string `json:"client"`
			Pcap      string `json:"pcap"`
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			LeaderID  int32  `json:"leader_id"`
			Observed  struct {
				NotLeader int64   `json:"not_leader_responses"`
				Loop      float64 `json:"loop_s"`
			} `json:"observed"`
			Application struct {
				Acked int `json:"acked"`
			} `json:"application"`
		}
		readJSON(t, sc, &side)
		t.Run(side.Client, func(t *testing.T) {
			r := analyseWithDetectors(t, filepath.Join(filepath.Dir(sc), side.Pcap))
			var f *detectors.Finding
			for i := range r.Findings {
				if r.Findings[i].Detector == "not-leader-loop" {
					f = &r.Findings[i]
				}
			}
			if f == nil {
				t.Fatalf("no not-leader-loop finding for %s (%d NOT_LEADER responses):%s", side.Client, side.Observed.NotLeader, describe(r.Findings))
			}
			// Never written: still refused at the end, for the time
			// from the first refused Produce to the last. Hundreds of
			// refusals in less (kgo-nobackoff) are a client retrying
			// without backoff: a misconfiguration, a warning.
			ongoing := side.Application.Acked == 0
			want := detectors.Grade(seconds(side.Observed.Loop), ongoing)
			if side.Observed.NotLeader >= int64(burst) {
				want = max(want, detectors.Warning)
			}
			if f.Severity != want {
				t.Errorf("severity %s, want %s (refused %.3fs, ongoing %v): %s", f.Severity, want, side.Observed.Loop, ongoing, f.Summary)
			}
			if f.Fields["ongoing"] != ongoing {
				t.Errorf("ongoing %v, want %v", f.Fields["ongoing"], ongoing)
			}
			if got := jsonNumber(f.Fields["leader_id"]); got != float64(side.LeaderID) {
				t.Errorf("leader_id %v, want %d", f.Fields["leader_id"], side.LeaderID)
			}
			if f.Fields["topic"] != side.Topic || jsonNumber(f.Fields["partition"]) != float64(side.Partition) {
				t.Errorf("topic/partition %v[%v], want %s[%d]", f.Fields["topic"], f.Fields["partition"], side.Topic, side.Partition)
			}
			if f.Counts["not_leader_responses"] != side.Observed.NotLeader {
				t.Errorf("not_leader_responses %d, want %d", f.Counts["not_leader_responses"], side.Observed.NotLeader)
			}
			if !strings.Contains(f.Summary, "leader") {
				t.Errorf("summary does not name the leader: %q", f.Summary)
			}
		})
	}
}

func jsonNumber(v any) float64 {
	b, _ := json.Marshal(v)
	var f float64
	json.Unmarshal(b, &f)
	return f
}
