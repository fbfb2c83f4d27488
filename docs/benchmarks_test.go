package docs

import (
	"bytes"
	"os"
	"testing"
)

// maxBenchmarksLines keeps BENCHMARKS.md one page of the present: the
// figures now, the targets, how to reproduce; old rounds live in git.
const maxBenchmarksLines = 300

func TestBenchmarksOnePage(t *testing.T) {
	b, err := os.ReadFile("../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n >= maxBenchmarksLines {
		t.Errorf("BENCHMARKS.md has %d lines, want under %d: replace figures, do not add rounds", n, maxBenchmarksLines)
	}
}
