package pipeline

import (
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
)

// Real clients losing records, recorded by fixtures/clients/losses against
// kfake (issue 30): each capture must give its rule's finding, a warning
// at least (a loss), with the counts the recorder decoded from the same
// bytes with kmsg (the sidecar's "observed"), not from kfsniff; the other
// rules stay at info. The held-out twins (fixtures/pcaps/heldout) are
// measured by `make eval-heldout`, not here.

func TestTooLargeRecordings(t *testing.T) {
	for _, name := range []string{"too-large-kgo", "too-large-sarama"} {
		t.Run(name, func(t *testing.T) {
			var o struct {
				ClientID        string `json:"client_id"`
				Refused         int64  `json:"refused_batches"`
				RefusedRecords  int64  `json:"refused_records"`
				SmallestRefused int64  `json:"smallest_refused_bytes"`
				LargestAccepted int64  `json:"largest_accepted_bytes"`
				WrittenAfter    bool   `json:"written_after_last"`
			}
			path := faultSidecar(t, name, &o)
			if o.Refused == 0 {
				t.Fatalf("the recording has no batch refused MESSAGE_TOO_LARGE: %+v", o)
			}
			r := analyseWithDetectors(t, path)
			f := &findingsOf(t, r.Findings, "records-rejected", 1)[0]
			if f.Severity != detectors.Warning {
				t.Errorf("severity %s, want warning (a loss, under 30 s): %s", f.Severity, f.Summary)
			}
			for k, n := range map[string]int64{"batches_refused": o.Refused, "records_refused": o.RefusedRecords} {
				if f.Counts[k] != n {
					t.Errorf("%s = %d, the sidecar says %d", k, f.Counts[k], n)
				}
			}
			var id string
			var smallest, accepted int64
			var ongoing bool
			fieldAs(t, f, "client_id", &id)
			fieldAs(t, f, "smallest_too_large", &smallest)
			fieldAs(t, f, "largest_accepted", &accepted)
			fieldAs(t, f, "ongoing", &ongoing)
			if id != o.ClientID || smallest != o.SmallestRefused || accepted != o.LargestAccepted || ongoing == o.WrittenAfter {
				t.Errorf("client %q, smallest refused %d, largest accepted %d, ongoing %v; the sidecar says %q, %d, %d, written after %v",
					id, smallest, accepted, ongoing, o.ClientID, o.SmallestRefused, o.LargestAccepted, o.WrittenAfter)
			}
			onlyInfoBesides(t, r.Findings, "records-rejected")
		})
	}
}

func TestOffsetResetRecordings(t *testing.T) {
	for _, name := range []string{"offset-reset-kgo", "offset-reset-sarama"} {
		t.Run(name, func(t *testing.T) {
			var o struct {
				Committed  int64   `json:"committed"`
				LogStart   int64   `json:"log_start"`
				OutOfRange []int64 `json:"out_of_range_fetch_offsets"`
				FirstFetch int64   `json:"first_fetch_offset"`
				Skipped    int64   `json:"skipped"`
			}
			path := faultSidecar(t, name, &o)
			if o.Skipped <= 0 || o.LogStart <= o.Committed {
				t.Fatalf("the recording shows no reset past a committed offset below the log start: %+v", o)
			}
			r := analyseWithDetectors(t, path)
			f := &findingsOf(t, r.Findings, "records-skipped", 1)[0]
			if f.Severity != detectors.Warning {
				t.Errorf("severity %s, want warning (a loss): %s", f.Severity, f.Summary)
			}
			want := map[string]int64{"offsets_skipped": o.Skipped, "offsets_deleted": o.LogStart - o.Committed, "partitions": 1}
			for k, n := range want {
				if f.Counts[k] != n {
					t.Errorf("%s = %d, the sidecar says %d", k, f.Counts[k], n)
				}
			}
			var oor int64
			fieldAs(t, f, "out_of_range", &oor)
			if oor != int64(len(o.OutOfRange)) {
				t.Errorf("%d jumps after OFFSET_OUT_OF_RANGE, the sidecar has %d such answers", oor, len(o.OutOfRange))
			}
			onlyInfoBesides(t, r.Findings, "records-skipped")
		})
	}
}

func TestFencedRecordings(t *testing.T) {
	for _, name := range []string{"fenced-kgo", "fenced-sarama"} {
		t.Run(name, func(t *testing.T) {
			var o struct {
				Init    []string       `json:"init_producer_id"`
				Fenced  map[string]int `json:"fenced"`
				Commits int64          `json:"commits"`
				Aborts  int64          `json:"aborts"`
				Refused int64          `json:"commits_refused"`
			}
			path := faultSidecar(t, name, &o)
			var fenced int64
			for _, n := range o.Fenced {
				fenced += int64(n)
			}
			if fenced < 2 || len(o.Init) < 3 {
				t.Fatalf("the recording shows no producers fencing each other: %+v", o)
			}
			r := analyseWithDetectors(t, path)
			f := &findingsOf(t, r.Findings, "transactional-fencing", 1)[0]
			if f.Severity != detectors.Warning {
				t.Errorf("severity %s, want warning (two instances fencing each other for under 30 s): %s", f.Severity, f.Summary)
			}
			for k, n := range map[string]int64{"fenced_answers": fenced, "committed": o.Commits, "aborted": o.Aborts,
				"commits_refused": o.Refused, "producers": 2} {
				if f.Counts[k] != n {
					t.Errorf("%s = %d, the sidecar says %d", k, f.Counts[k], n)
				}
			}
			var id string
			fieldAs(t, f, "transactional_id", &id)
			if id != "orders-txn" {
				t.Errorf("transactional id %q", id)
			}
			// The restarts' reconnect storm is explained by the fencing.
			for _, g := range r.Findings {
				if g.Detector == "reconnect-storm" && g.Fields["explained_by"] != "transactional-fencing" {
					t.Errorf("reconnect-storm %s not explained by the fencing: %s", g.Severity, g.Summary)
				}
			}
			onlyInfoBesides(t, r.Findings, "transactional-fencing")
		})
	}
}

func TestEvictedRecordings(t *testing.T) {
	for _, name := range []string{"evicted-kgo", "evicted-sarama"} {
		t.Run(name, func(t *testing.T) {
			var o struct {
				TimeoutMs int64   `json:"session_timeout_ms"`
				Member    string  `json:"member"`
				Silent    float64 `json:"silent_s"`
				Back      string  `json:"back"`
			}
			path := faultSidecar(t, name, &o)
			if o.Silent*1000 < float64(o.TimeoutMs) || o.Back != "UNKNOWN_MEMBER_ID" {
				t.Fatalf("the recording shows no eviction: %+v", o)
			}
			r := analyseWithDetectors(t, path)
			f := &findingsOf(t, r.Findings, "member-evicted", 1)[0]
			if want := max(detectors.Warning, detectors.Grade(seconds(o.Silent), false)); f.Severity != want {
				t.Errorf("severity %s, want %s: %s", f.Severity, want, f.Summary)
			}
			var member, answer string
			fieldAs(t, f, "member", &member)
			fieldAs(t, f, "answer", &answer)
			if member != o.Member || answer != o.Back || f.Counts["session_timeout_ms"] != o.TimeoutMs ||
				!near(float64(f.Counts["silent_ms"])/1000, o.Silent) {
				t.Errorf("member %q answered %q, timeout %d ms, silent %d ms; the sidecar says %q %q %d %.3f s",
					member, answer, f.Counts["session_timeout_ms"], f.Counts["silent_ms"], o.Member, o.Back, o.TimeoutMs, o.Silent)
			}
			// One eviction is not a loop: rebalance-loop, if any, is info.
			onlyInfoBesides(t, r.Findings, "member-evicted")
		})
	}
}
