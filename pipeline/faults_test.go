package pipeline

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/fixtures/record"
)

// Real clients meeting the failures of the issue 12 rules, recorded by
// fixtures/clients/faults against kfake: each capture must give its rule's
// finding at the severity the policy gives what the clients felt, with the
// counts and values the recorder decoded from the same bytes with kmsg
// (the sidecar's "observed"), not from kfsniff.

// readJSON reads the JSON file at path into v (a sidecar written by the
// recorder).
func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// faultSidecar reads fixtures/pcaps/clients/<name>.json into observed and
// returns the capture's path.
func faultSidecar(t *testing.T, name string, observed any) string {
	t.Helper()
	dir := filepath.Join("..", "fixtures", "pcaps", "clients")
	var sc struct {
		Observed json.RawMessage `json:"observed"`
	}
	readJSON(t, filepath.Join(dir, name+".json"), &sc)
	if err := json.Unmarshal(sc.Observed, observed); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name+".pcap")
}

// findingsOf returns the findings of rule, failing unless there are want.
func findingsOf(t *testing.T, fs []detectors.Finding, rule string, want int) []detectors.Finding {
	t.Helper()
	var out []detectors.Finding
	for _, f := range fs {
		if f.Detector == rule {
			out = append(out, f)
		}
	}
	if len(out) != want {
		t.Fatalf("%d %s findings, want %d:%s", len(out), rule, want, describe(fs))
	}
	return out
}

// fieldAs decodes a finding's field as the JSON report shows it.
func fieldAs(t *testing.T, f *detectors.Finding, name string, dst any) {
	t.Helper()
	b, err := json.Marshal(f.Fields[name])
	if err == nil {
		err = json.Unmarshal(b, dst)
	}
	if err != nil {
		t.Fatalf("field %s: %v", name, err)
	}
}

// near: seconds from the capture agree with the sidecar's to the
// millisecond (the pcap keeps microseconds, the sidecar rounds).
func near(a, b float64) bool { return math.Abs(a-b) <= 0.002 }

// onlyInfoBesides fails if a rule other than those named gave a warning or
// an error: the generic error-storm must defer to the specific rule.
func onlyInfoBesides(t *testing.T, fs []detectors.Finding, rules ...string) {
	t.Helper()
	for _, f := range fs {
		if f.Severity > detectors.Info && !slices.Contains(rules, f.Detector) {
			t.Errorf("%s %s: %s", f.Severity, f.Detector, f.Summary)
		}
	}
}

func TestRealClientsProducerSequence(t *testing.T) {
	for _, tc := range []struct {
		name string
		// kgo bumps its epoch and retries once its metadata may be
		// refreshed, 5 s later; librdkafka 2.0.2 takes the refusal
		// after NOT_LEADER_OR_FOLLOWER as fatal and never writes again,
		// 11 s to the end of the capture.
		sev detectors.Severity
	}{{"producer-sequence-kgo", detectors.Warning}, {"producer-sequence-librdkafka", detectors.Error}} {
		t.Run(tc.name, func(t *testing.T) {
			var o struct {
				NotLeader  int     `json:"not_leader_answers"`
				OutOfOrder int64   `json:"out_of_order_sequence_answers"`
				NextWrite  float64 `json:"next_write_s"`
				HeldS      float64 `json:"held_s"`
				ProducerID int64   `json:"producer_id"`
				Epochs0    []int16 `json:"epochs_orders_0"`
				Restarts1  int     `json:"restarts_orders_1"`
			}
			r := analyseWithDetectors(t, faultSidecar(t, tc.name, &o))
			f := findingsOf(t, r.Findings, "producer-sequence", 1)[0]
			if f.Severity != tc.sev {
				t.Errorf("severity %s, want %s: %s", f.Severity, tc.sev, f.Summary)
			}
			if f.Counts["sequence_errors"] != o.OutOfOrder || f.Counts["epoch_bumps"] != int64(len(o.Epochs0)-1) {
				t.Errorf("sequence_errors %d, epoch_bumps %d; the bytes show %d refusals and epochs %v",
					f.Counts["sequence_errors"], f.Counts["epoch_bumps"], o.OutOfOrder, o.Epochs0)
			}
			var held float64
			var pid int64
			var after string
			var recovered bool
			var resets []string
			fieldAs(t, &f, "held_s", &held)
			fieldAs(t, &f, "producer_id", &pid)
			fieldAs(t, &f, "after", &after)
			fieldAs(t, &f, "recovered", &recovered)
			fieldAs(t, &f, "reset_partitions", &resets)
			if pid != o.ProducerID || recovered != (o.NextWrite > 0) {
				t.Errorf("producer_id %d recovered %v; the bytes show %d, orders-0 next written at %v s", pid, recovered, o.ProducerID, o.NextWrite)
			}
			if recovered && !near(held, o.HeldS) || !recovered && held < 10 {
				t.Errorf("held_s %v; the bytes show %v (0: never written again)", held, o.HeldS)
			}
			if o.NotLeader > 0 && after != "NOT_LEADER_OR_FOLLOWER" {
				t.Errorf("after %q: the partition answered NOT_LEADER_OR_FOLLOWER just before", after)
			}
			if (o.Restarts1 > 0) != slices.Equal(resets, []string{"orders-1"}) {
				t.Errorf("reset_partitions %v: orders-1 restarted at sequence 0 %d times", resets, o.Restarts1)
			}
			onlyInfoBesides(t, r.Findings, "producer-sequence")
		})
	}
}

func TestRealClientsNotEnoughReplicas(t *testing.T) {
	for _, name := range []string{"not-enough-replicas-kgo", "not-enough-replicas-sarama"} {
		t.Run(name, func(t *testing.T) {
			var o struct {
				Refusals int64     `json:"not_enough_replicas_answers"`
				HeldS    float64   `json:"held_s"`
				ISR      [][]int32 `json:"isr_while_refused"`
			}
			r := analyseWithDetectors(t, faultSidecar(t, name, &o))
			f := findingsOf(t, r.Findings, "not-enough-replicas", 1)[0]
			if f.Severity != detectors.Warning {
				t.Errorf("severity %s, want warning (%.3f s without a write): %s", f.Severity, o.HeldS, f.Summary)
			}
			if f.Counts["refusals"] != o.Refusals {
				t.Errorf("refusals %d, the bytes show %d", f.Counts["refusals"], o.Refusals)
			}
			var held float64
			var isr []struct {
				Partition string  `json:"partition"`
				ISR       []int32 `json:"isr"`
			}
			fieldAs(t, &f, "held_s", &held)
			fieldAs(t, &f, "isr", &isr)
			if !near(held, o.HeldS) {
				t.Errorf("held_s %v, the bytes show %v", held, o.HeldS)
			}
			// The smallest ISR Metadata named while refused: the leader alone.
			if len(isr) != 1 || isr[0].Partition != "orders-0" || !slices.Equal(isr[0].ISR, o.ISR[0]) {
				t.Errorf("isr %+v, Metadata named %v while refused", isr, o.ISR)
			}
			onlyInfoBesides(t, r.Findings, "not-enough-replicas")
		})
	}
}

func TestRealClientTopicRecreated(t *testing.T) {
	var o struct {
		OldID        string  `json:"old_id"`
		NewID        string  `json:"new_id"`
		Refusals     int64   `json:"unknown_topic_id_answers"`
		FirstRefusal float64 `json:"first_refusal_s"`
		LastRefusal  float64 `json:"last_refusal_s"`
		ByNewID      int     `json:"fetches_by_new_id"`
	}
	r := analyseWithDetectors(t, faultSidecar(t, "topic-recreated-kgo", &o))
	f := findingsOf(t, r.Findings, "topic-recreated", 1)[0]
	// kgo fetched the old id until the end, 5.7 s: felt, not yet 10 s.
	if f.Severity != detectors.Warning {
		t.Errorf("severity %s, want warning: %s", f.Severity, f.Summary)
	}
	if f.Counts["refusals"] != o.Refusals {
		t.Errorf("refusals %d, the bytes show %d", f.Counts["refusals"], o.Refusals)
	}
	var oldID, newID string
	var recovered bool
	fieldAs(t, &f, "old_id", &oldID)
	fieldAs(t, &f, "new_id", &newID)
	fieldAs(t, &f, "recovered", &recovered)
	if oldID != o.OldID || newID != o.NewID {
		t.Errorf("old_id %s new_id %s, the bytes show %s and %s", oldID, newID, o.OldID, o.NewID)
	}
	if recovered != (o.ByNewID > 0) {
		t.Errorf("recovered %v, but the client fetched the new id %d times", recovered, o.ByNewID)
	}
	// The recorder's times count from the proxy's start, the pcap's first
	// instant (record.Epoch).
	if !near(f.First.Sub(record.Epoch).Seconds(), o.FirstRefusal) || !near(f.Last.Sub(record.Epoch).Seconds(), o.LastRefusal) {
		t.Errorf("first %v last %v, the bytes show %v and %v s", f.First, f.Last, o.FirstRefusal, o.LastRefusal)
	}
	onlyInfoBesides(t, r.Findings, "topic-recreated")
}

func TestRealClientFetchSessionChurn(t *testing.T) {
	var o struct {
		Consumers []struct {
			ClientID string `json:"client_id"`
			NotFound int64  `json:"session_not_found"`
		} `json:"consumers"`
	}
	r := analyseWithDetectors(t, faultSidecar(t, "fetch-session-churn-kgo", &o))
	fs := findingsOf(t, r.Findings, "fetch-session-churn", len(o.Consumers))
	for _, c := range o.Consumers {
		i := slices.IndexFunc(fs, func(f detectors.Finding) bool { return f.Fields["client_id"] == c.ClientID })
		if i < 0 {
			t.Errorf("no finding for %s:%s", c.ClientID, describe(fs))
			continue
		}
		f := fs[i]
		// Evicting each other until the consumers closed, about 5 s.
		if f.Severity != detectors.Warning || f.Fields["ongoing"] != true {
			t.Errorf("%s: severity %s ongoing %v, want a warning still going at the end: %s", c.ClientID, f.Severity, f.Fields["ongoing"], f.Summary)
		}
		if f.Counts["session_errors"] != c.NotFound {
			t.Errorf("%s: session_errors %d, the bytes show %d", c.ClientID, f.Counts["session_errors"], c.NotFound)
		}
		var creators []struct {
			ClientID string `json:"client_id"`
		}
		fieldAs(t, &f, "creators", &creators)
		if len(creators) != len(o.Consumers) {
			t.Errorf("%s: creators %+v, want both consumers, which evict each other", c.ClientID, creators)
		}
	}
	onlyInfoBesides(t, r.Findings, "fetch-session-churn")
}
