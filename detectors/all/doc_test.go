package all_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
)

var update = flag.Bool("update", false, "rewrite docs/detectors.md")

// TestDetectorsDoc keeps docs/detectors.md equal to what --list-detectors
// prints; refresh with `go test ./detectors/all -run DetectorsDoc -update`.
func TestDetectorsDoc(t *testing.T) {
	const path = "../../docs/detectors.md"
	as := all.Analyzers()
	want := "# kfsniff detectors\n\nGenerated from `kfsniff --list-detectors` (refresh: `go test ./detectors/all -run DetectorsDoc -update`).\n" +
		"Change a parameter with `-o detector.param=value` (a duration as `10s` or `250ms`); `--fail-on warning` makes kfsniff\n" +
		"exit 3 when a finding at or above that severity exists.\n\n```\n" + detectors.Describe(as) + "```\n"
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
