package detectors_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
)

var update = flag.Bool("update", false, "rewrite docs/detectors.md")

// TestDetectorsDoc keeps docs/detectors.md equal to what --list-detectors
// prints; refresh with `go test ./detectors -run DetectorsDoc -update`.
func TestDetectorsDoc(t *testing.T) {
	const path = "../docs/detectors.md"
	want := "# kfsniff detectors\n\nGenerated from `kfsniff --list-detectors` (refresh: `go test ./detectors -run DetectorsDoc -update`).\n" +
		"Change a threshold with `-o detector.param=value`; `--fail-on warning` makes kfsniff exit 3 when a finding\n" +
		"at or above that severity exists.\n\n```\n" + detectors.Describe(detectors.Specs()) + "```\n"
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Fatalf("docs/detectors.md is stale (run go test ./detectors -run DetectorsDoc -update): %v", err)
	}
	if n := strings.Count(want, " (up to "); n != len(detectors.Specs()) || n < 12 {
		t.Errorf("%d detectors documented", n)
	}
	for _, s := range detectors.Specs() {
		if s.Summary == "" {
			t.Errorf("%s: every detector documents what it finds", s.ID)
		}
		for _, p := range s.Params {
			if p.Meaning == "" {
				t.Errorf("%s.%s: undocumented threshold", s.ID, p.Name)
			}
		}
	}
}
