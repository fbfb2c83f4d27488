package detectortest

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
)

// Update, set by -update, makes Golden rewrite the goldens instead of
// comparing with them. Every test binary that imports detectortest has
// the flag (gotest.tools' golden package registers its -update the same
// way); a test package with goldens of its own reads this one.
var Update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldens are the files written or compared in this test binary, by the
// test that claimed each (two tests whose names make one file fail), and
// the tests whose directory of goldens Run owns.
var goldens = struct {
	sync.Mutex
	by   map[string]string
	dirs map[string]*dir
}{by: map[string]string{}, dirs: map[string]*dir{}}

// dir is a test's directory of goldens, testdata/<test>: its cases and
// how many ran.
type dir struct{ cases, ran int }

// owned notes that t runs n more cases, each with goldens under
// testdata/<t's name>, and, the first time, has t check when it ends that
// no golden there is left from a case gone (one renamed, or removed), if
// every case ran (no -run left one out): -update removes such files.
func owned(t *testing.T, n int) *dir {
	goldens.Lock()
	defer goldens.Unlock()
	d := goldens.dirs[t.Name()]
	if d != nil {
		d.cases += n
		return d
	}
	d = &dir{cases: n}
	goldens.dirs[t.Name()] = d
	t.Cleanup(func() {
		if d.ran != d.cases {
			return
		}
		for _, path := range orphans(filepath.Join("testdata", t.Name())) {
			if *Update {
				if err := os.Remove(path); err != nil {
					t.Error(err)
				}
				continue
			}
			t.Errorf("%s is the golden of no case (renamed or removed?): -update removes it", path)
		}
	})
	return d
}

// orphans lists the goldens in dir that no test of this binary claimed.
func orphans(dir string) []string {
	es, _ := os.ReadDir(dir)
	goldens.Lock()
	defer goldens.Unlock()
	var out []string
	for _, e := range es {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || ext != ".json" && ext != ".txt" {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if _, ok := goldens.by[strings.TrimSuffix(path, ext)]; !ok {
			out = append(out, path)
		}
	}
	return out
}

// Golden compares a test's findings (those of the rule only) with its
// goldens, testdata/<test>/<case>.json (the findings as encoding/json
// writes them, Fields and Counts included) and .txt (the prose as a
// reader meets it: severity, rule and summary, what it means, what to
// check next), and rewrites them with -update. A test with no finding of
// the rule has no goldens: a file left from one is reported. Check calls
// it, so each case of Run and each Check has its goldens; a test calling
// Check twice has a second pair named <case>-2, and so on.
func Golden(t testing.TB, findings []detectors.Finding, rule string) {
	t.Helper()
	var got []detectors.Finding
	for _, f := range findings {
		if f.Detector == rule {
			got = append(got, f)
		}
	}
	base, err := claim(t.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		for _, ext := range []string{".json", ".txt"} {
			if *Update {
				if err := os.Remove(base + ext); err != nil && !errors.Is(err, fs.ErrNotExist) {
					t.Fatal(err)
				}
			} else if _, err := os.Stat(base + ext); err == nil {
				t.Errorf("%s: no %s finding now; remove the golden with -update", base+ext, rule)
			}
		}
		return
	}
	js, err := encodeJSON(got)
	if err != nil {
		t.Fatalf("%s findings as JSON: %v", rule, err)
	}
	files := []struct {
		ext  string
		data []byte
	}{{".json", js}, {".txt", Prose(got)}}
	for _, f := range files {
		path := base + f.ext
		if *Update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, f.data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s findings have no golden (go test -run '%s' -update writes it): %v", rule, t.Name(), err)
			continue
		}
		if !bytes.Equal(f.data, want) {
			t.Errorf("%s findings differ from %s (go test -run '%s' -update rewrites it once the change is meant):\n%s",
				rule, path, t.Name(), lineDiff(string(want), string(f.data)))
		}
	}
}

// Prose is the findings' text as a reader meets it, one paragraph each
// for the summary (with severity and rule), what it means and what to
// check next, and a blank line between findings.
func Prose(fs []detectors.Finding) []byte {
	var b bytes.Buffer
	for i, f := range fs {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[%s] %s: %s\nwhat it means: %s\ncheck next: %s\n",
			strings.ToUpper(f.Severity.String()), f.Detector, f.Summary, f.Explanation, f.Next)
	}
	return b.Bytes()
}

func encodeJSON(fs []detectors.Finding) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(fs)
	return b.Bytes(), err
}

// claim returns the path, without extension, of the next goldens of the
// test named name, and fails if another test's name gave the same path.
func claim(name string) (string, error) {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		if i > 0 {
			parts[i] = slug(p)
		}
	}
	base := filepath.Join(append([]string{"testdata"}, parts...)...)
	goldens.Lock()
	defer goldens.Unlock()
	path := base
	for n := 2; ; n++ {
		owner, taken := goldens.by[path]
		if !taken {
			goldens.by[path] = name
			return path, nil
		}
		if owner != name {
			return "", fmt.Errorf("tests %q and %q would share the goldens %s: rename one", owner, name, path)
		}
		path = fmt.Sprintf("%s-%d", base, n)
	}
}

// slug makes a case name a file name: letters, digits and dots kept (in
// lower case), every other run of characters one dash, at most 100 bytes.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	out := b.String()
	if len(out) > 100 {
		out = out[:100]
		if i := strings.LastIndexByte(out, '-'); i > 50 {
			out = out[:i]
		}
	}
	out = strings.Trim(out, ".")
	if out == "" {
		out = "case"
	}
	return out
}

// lineDiff shows the first lines that differ between want and got.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 6; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %s\n  got  %s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}
