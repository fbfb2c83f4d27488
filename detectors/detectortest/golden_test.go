package detectortest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
)

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"near_miss:_held_up_9.9_s,_then_a_response", "near-miss-held-up-9.9-s-then-a-response"},
		{"a_\"quoted\"_client_(v3)", "a-quoted-client-v3"},
		{"same_name#01", "same-name-01"},
		{"::", "case"},
		{strings.Repeat("word_", 40), strings.TrimSuffix(strings.Repeat("word-", 20), "-")},
	} {
		if got := slug(tc.in); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestClaim(t *testing.T) {
	a, err := claim("TestClaim/first_case")
	if err != nil || a != filepath.Join("testdata", "TestClaim", "first-case") {
		t.Fatalf("claim = %q, %v", a, err)
	}
	if b, err := claim("TestClaim/first_case"); err != nil || b != a+"-2" {
		t.Errorf("a second golden of one test = %q, %v; want %q", b, err, a+"-2")
	}
	if _, err := claim("TestClaim/first:case"); err == nil {
		t.Error("two tests whose names make one file share it")
	}
}

// TestGolden: a finding's goldens are written with -update, compared
// without it, and a changed sentence or a finding gone fails the test.
func TestGolden(t *testing.T) {
	t.Chdir(t.TempDir())
	f := detectors.Finding{Detector: "rule", Severity: detectors.Warning, Summary: "client \"a\" <held> 3 s",
		First: T0, Last: T0.Add(time.Second), Counts: map[string]int64{"n": 3}, Explanation: "why", Next: "what next"}
	run := func(update bool, fs ...detectors.Finding) (failed bool) {
		*Update = update
		defer func() { *Update = false }()
		ft := &fake{TB: t, name: "TestGolden/case"}
		delete(goldens.by, "testdata/TestGolden/case")
		Golden(ft, fs, "rule")
		return ft.failed
	}
	if !run(false, f) {
		t.Error("no golden yet, and no failure")
	}
	if run(true, f) || run(false, f) {
		t.Fatal("the golden written does not match itself")
	}
	txt, err := os.ReadFile("testdata/TestGolden/case.txt")
	if want := "[WARNING] rule: client \"a\" <held> 3 s\nwhat it means: why\ncheck next: what next\n"; err != nil || string(txt) != want {
		t.Errorf("prose golden %q (%v), want %q", txt, err, want)
	}
	if js, _ := os.ReadFile("testdata/TestGolden/case.json"); !strings.Contains(string(js), `"summary": "client \"a\" <held> 3 s"`) {
		t.Errorf("JSON golden lacks the summary unescaped:\n%s", js)
	}
	g := f
	g.Summary = "client \"a\" held 3 s"
	if !run(false, g) {
		t.Error("a changed summary passes")
	}
	if !run(false) {
		t.Error("a finding gone passes while its golden is left")
	}
	if run(true) || run(false) {
		t.Error("-update does not remove the goldens of a finding gone")
	}
}

// fake is a testing.TB that records failure instead of failing.
type fake struct {
	testing.TB
	name   string
	failed bool
}

func (f *fake) Name() string          { return f.name }
func (f *fake) Helper()               {}
func (f *fake) Errorf(string, ...any) { f.failed = true }
func (f *fake) Fatal(...any)          { f.failed = true }
func (f *fake) Fatalf(string, ...any) { f.failed = true }
