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
