package pipeline

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/errorstorm"
	"github.com/kfsniff/kfsniff/flows"
)

// TestRealClientsErrorStorm: the captures error-storm names (Recorded),
// analysed by error-storm alone so that no specific rule explains its
// findings away: the severity must be the policy's for what the clients
// felt, as the recorders decoded it from the same bytes (the sidecars'
// "observed"), not as kfsniff measures it.
func TestRealClientsErrorStorm(t *testing.T) {
	run := func(t *testing.T, name string) detectors.Finding {
		f, err := capture.Open(filepath.Join("..", "fixtures", "pcaps", "clients", name+".pcap"), 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		set, err := detectors.NewSet([]*detectors.Analyzer{errorstorm.Analyzer}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := Run(context.Background(), []*capture.File{f}, Options{Flows: flows.DefaultConfig(), Detectors: set}).Report
		return findingsOf(t, r.Findings, "error-storm", 1)[0]
	}
	held := func(t *testing.T, f detectors.Finding) (float64, bool) {
		var h float64
		var on bool
		fieldAs(t, &f, "held_s", &h)
		fieldAs(t, &f, "ongoing", &on)
		return h, on
	}

	// NOT_LEADER_OR_FOLLOWER loops that never healed: every Produce refused
	// for about 20 s, up to the end of the recording: held 10 s or more
	// and still failing at the end, an error.
	for _, name := range []string{"notleader-kgo", "notleader-sarama"} {
		t.Run(name, func(t *testing.T) {
			var o struct {
				Produce   int64   `json:"produce_requests"`
				NotLeader int64   `json:"not_leader_responses"`
				Other     int64   `json:"other_produce_responses"`
				Loop      float64 `json:"loop_s"`
			}
			faultSidecar(t, name, &o)
			f := run(t, name)
			h, on := held(t, f)
			if o.Other != 0 || o.Loop < 10 {
				t.Fatalf("sidecar: %+v, want a loop of 10 s or more that never succeeded", o)
			}
			if f.Severity != detectors.Error || !on || h < o.Loop {
				t.Errorf("%s, held %.3f s ongoing %v; the client was refused for %.3f s and never succeeded", f.Severity, h, on, o.Loop)
			}
			if f.Counts["responses"] != o.NotLeader || f.Counts["storm_responses"] != o.NotLeader || f.Fields["error"] != "NOT_LEADER_OR_FOLLOWER" {
				t.Errorf("counts %v, error %v; the bytes show %d NOT_LEADER_OR_FOLLOWER answers", f.Counts, f.Fields["error"], o.NotLeader)
			}
		})
	}

	// Two consumers evicting each other's fetch session: an error every
	// other fetch, each followed by a full fetch that succeeds. A storm by
	// its rate, but no client held up: info.
	t.Run("fetch-session-churn-kgo", func(t *testing.T) {
		var o struct {
			Consumers []struct {
				NotFound int64 `json:"session_not_found"`
				Full     int64 `json:"full_fetches"`
			} `json:"consumers"`
		}
		faultSidecar(t, "fetch-session-churn-kgo", &o)
		var errs int64
		for _, c := range o.Consumers {
			errs += c.NotFound
			if c.Full < c.NotFound {
				t.Fatalf("sidecar: %+v, want a full fetch after every refusal", o)
			}
		}
		f := run(t, "fetch-session-churn-kgo")
		h, _ := held(t, f)
		if f.Severity != detectors.Info || h >= 3 {
			t.Errorf("%s, held %.3f s; every refusal was followed by a fetch that succeeded", f.Severity, h)
		}
		if f.Counts["responses"] != errs || f.Fields["error"] != "FETCH_SESSION_ID_NOT_FOUND" {
			t.Errorf("counts %v; the bytes show %d FETCH_SESSION_ID_NOT_FOUND", f.Counts, errs)
		}
	})

	// A consumer fetching a deleted topic's id: UNKNOWN_TOPIC_ID for
	// several seconds, never fetching the new id: held 3 s or more, less
	// than 10: a warning.
	t.Run("topic-recreated-kgo", func(t *testing.T) {
		var o struct {
			Answers int64   `json:"unknown_topic_id_answers"`
			First   float64 `json:"first_refusal_s"`
			Last    float64 `json:"last_refusal_s"`
			ByNew   int64   `json:"fetches_by_new_id"`
		}
		faultSidecar(t, "topic-recreated-kgo", &o)
		if o.ByNew != 0 || o.Last-o.First < 3 || o.Last-o.First >= 10 {
			t.Fatalf("sidecar: %+v", o)
		}
		f := run(t, "topic-recreated-kgo")
		h, _ := held(t, f)
		if f.Severity != detectors.Warning || h < o.Last-o.First-0.002 || h >= 10 {
			t.Errorf("%s, held %.3f s; the consumer was refused from %.3f s to %.3f s", f.Severity, h, o.First, o.Last)
		}
		if f.Counts["responses"] != o.Answers || f.Fields["error"] != "UNKNOWN_TOPIC_ID" {
			t.Errorf("counts %v; the bytes show %d UNKNOWN_TOPIC_ID", f.Counts, o.Answers)
		}
	})
}
