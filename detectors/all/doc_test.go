package all_test

import (
	"os"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/detectors/detectortest"
)

// update, set by -update, rewrites docs/detectors.md (detectortest, which this
// binary imports, registers the flag).
var update = detectortest.Update

// policy is the severity policy every rule applies (detectors/policy.go).
const policy = `## Severity policy

Severity follows what clients felt, not what the wire shows:

- **info**: something an operator may want to know. No client was held up, or for less than 3 s;
  or a normal event: a leader election clients follow within a second, the MEMBER_ID_REQUIRED of a
  first JoinGroup, a consumer idle at the high watermark, a periodic metadata refresh.
- **warning**: a failure clients felt (requests failing or waiting) for 3 s or more; or a
  misconfiguration that will bite (a listener advertised by two nodes, a bootstrap server that refuses
  every connection, request versions the next Kafka release removes).
- **error**: a failure that lasted 30 s or more, or that had not healed when the capture ended after
  10 s or more (detectors.Grade).

A rule's thresholds below say where its boundaries lie; each rule is tested on both sides of them.
`

// TestDetectorsDoc keeps docs/detectors.md equal to what --list-detectors
// prints; refresh with `go test ./detectors/all -run DetectorsDoc -update`.
func TestDetectorsDoc(t *testing.T) {
	const path = "../../docs/detectors.md"
	as := all.Analyzers()
	want := "# kfsniff detectors\n\nGenerated from `kfsniff --list-detectors` (refresh: `go test ./detectors/all -run DetectorsDoc -update`).\n" +
		"Change a parameter with `-o detector.param=value` (a duration as `10s` or `250ms`); `--fail-on warning` makes kfsniff\n" +
		"exit 3 when a finding at or above that severity exists.\n\n" + policy + "\n```\n" + detectors.Describe(as) + "```\n"
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Fatalf("docs/detectors.md is stale (run go test ./detectors/all -run DetectorsDoc -update): %v", err)
	}
	if n := strings.Count(want, " (up to "); n != len(as) || n < 12 {
		t.Errorf("%d detectors documented", n)
	}
	names := map[string]bool{}
	for _, a := range as {
		if a.Doc == "" {
			t.Errorf("%s: every detector documents what it finds", a.Name)
		}
		if names[a.Name] {
			t.Errorf("%s listed twice", a.Name)
		}
		names[a.Name] = true
	}
}
