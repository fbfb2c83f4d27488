package decode

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kversion"
)

// The versions the brief's captures use, as an operator would look them up
// in the KIP: removed or still served by Kafka 4.0.
func TestRemovedIn40(t *testing.T) {
	for _, tc := range []struct {
		api            string
		key, version   int16
		removed        bool
		restored, note bool
	}{
		{"Produce v1 (kafka-python)", 0, 1, true, false, true},
		{"Produce v2 (console producer 0.10)", 0, 2, true, false, true},
		{"Produce v3 (librdkafka): the new baseline", 0, 3, false, false, false},
		{"Fetch v3", 1, 3, true, false, false},
		{"Fetch v4: the new baseline", 1, 4, false, false, false},
		{"ListOffsets v0", 2, 0, true, false, false},
		{"ListOffsets v1", 2, 1, false, false, false},
		{"Metadata v0: deprecated in 3.7, kept in 4.0", 3, 0, false, false, false},
		{"Metadata v2 (librdkafka)", 3, 2, false, false, false},
		{"FindCoordinator v0: kept", 10, 0, false, false, false},
		{"JoinGroup v1: 4.0.0 only", 11, 1, true, true, true},
		{"JoinGroup v2", 11, 2, false, false, false},
		{"SaslHandshake v0: kept", 17, 0, false, false, false},
		{"ApiVersions v0: kept", 18, 0, false, false, false},
		{"DeleteGroups v0: kept", 42, 0, false, false, false},
		{"DescribeDelegationToken v0", 41, 0, true, false, false},
		{"an unknown key", 999, 0, false, false, false},
		{"a negative key", -1, 0, false, false, false},
	} {
		r, ok := RemovedIn40(tc.key, tc.version)
		if ok != tc.removed {
			t.Errorf("%s: removed %v, want %v", tc.api, ok, tc.removed)
			continue
		}
		if (r.RestoredIn != "") != tc.restored || (r.Note != "") != tc.note {
			t.Errorf("%s: restored in %q, note %q", tc.api, r.RestoredIn, r.Note)
		}
	}
}

// The table against what franz-go knows of each release: KIP-896 keeps
// every version up to the one Kafka 2.1 used (its baseline), so no range
// may reach a version a 2.1 broker served at most; and 4.0 serves more
// than it removed.
func TestRemovedInKafka40KeepsKafka21(t *testing.T) {
	v21, v40 := kversion.V2_1_0(), kversion.V4_0_0()
	seen := map[int16]bool{}
	for _, r := range RemovedInKafka40 {
		name := Name(r.Key)
		if seen[r.Key] {
			t.Errorf("%s listed twice", name)
		}
		seen[r.Key] = true
		if !KnownKey(r.Key) || r.Below <= 0 || r.Below > MaxVersion(r.Key) {
			t.Errorf("%s: removed below v%d, kmsg knows up to v%d", name, r.Below, MaxVersion(r.Key))
		}
		// WriteTxnMarkers goes from broker to broker: outside the
		// clients' baseline (its v1 came with Kafka 2.8).
		if max21, ok := v21.LookupMaxKeyVersion(r.Key); ok && r.Below > max21 && r.Key != 27 {
			t.Errorf("%s: removed below v%d, past Kafka 2.1's v%d", name, r.Below, max21)
		}
		if max40, ok := v40.LookupMaxKeyVersion(r.Key); !ok || max40 < r.Below {
			t.Errorf("%s: Kafka 4.0 serves up to v%d (known %v), below the removal v%d", name, max40, ok, r.Below)
		}
	}
}
