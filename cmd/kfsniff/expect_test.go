package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kfsniff/kfsniff/expect"
)

// allCaptures lists every committed capture (fixtures/pcaps/**) and the
// shared public ones when they are there.
func allCaptures(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, root := range []string{fixture(""), filepath.Join("..", "..", "..", "shared", "captures")} {
		if _, err := os.Stat(root); err != nil {
			continue
		}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && isCaptureName(p) {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) < 100 {
		t.Fatalf("only %d captures found", len(out))
	}
	return out
}

// TestWriteExpectRoundTrip: on every capture, the expectation
// --write-expect writes of it holds for it under --expect; it lists every
// finding the report has; a capture that cannot be read writes none.
func TestWriteExpectRoundTrip(t *testing.T) {
	dir := t.TempDir()
	caps := allCaptures(t)
	var held, unusable atomic.Int64
	t.Run("each", func(t *testing.T) {
		for i, p := range caps {
			name := strings.TrimPrefix(filepath.ToSlash(p), "../")
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				file := filepath.Join(dir, fmt.Sprintf("%03d-%s%s", i, filepath.Base(p), expect.Suffix))
				code, out, errs := kfsniff(t, "-r", p, "--json", "--write-expect", file)
				if code == exitUsage {
					// Not a usable capture (the hostile corpus): nothing
					// written, and --expect says the same.
					if _, err := os.Stat(file); err == nil {
						t.Errorf("exit 2 but %s was written", file)
					}
					unusable.Add(1)
					return
				}
				if code != exitOK {
					t.Fatalf("--write-expect: exit %d: %s", code, errs)
				}
				var rep struct {
					Findings []json.RawMessage `json:"findings"`
				}
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatal(err)
				}
				f, err := expect.Load(file)
				if err != nil {
					t.Fatal(err)
				}
				if len(f.Findings) != len(rep.Findings) || f.Totals == nil || f.Analysis != nil {
					t.Errorf("written: %d findings (the report has %d), totals %v, analysis %v", len(f.Findings), len(rep.Findings), f.Totals, f.Analysis)
				}
				code, out, errs = kfsniff(t, "--expect", file, "-r", p)
				if code != exitOK || !strings.Contains(out, "holds for") {
					t.Errorf("--expect of what --write-expect wrote: exit %d\n%s%s", code, out, errs)
				}
				held.Add(1)
			})
		}
	})
	// Only the hostile corpus's unusable files are not captures.
	if held.Load()+unusable.Load() != int64(len(caps)) || unusable.Load() > 10 {
		t.Errorf("%d captures: %d round trips held, %d unusable", len(caps), held.Load(), unusable.Load())
	}
	t.Logf("%d captures: %d round trips held, %d unusable", len(caps), held.Load(), unusable.Load())
}

// TestExpectAnalysisSettings: an expectation keeps the -o thresholds it
// was written with and --expect analyses with them: the same file holds
// only with its settings.
func TestExpectAnalysisSettings(t *testing.T) {
	capture := fixture("scenarios/kraft-fenced-while-alive.pcap")
	file := filepath.Join(t.TempDir(), "fenced"+expect.Suffix)
	// With so high a count, the slow heartbeats are not slow-responses.
	code, _, errs := kfsniff(t, "-r", capture, "-o", "slow-responses.min-count=1000", "--write-expect", file)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	f, err := expect.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if f.Analysis == nil || len(f.Analysis.Options) != 1 || f.Analysis.Options[0] != "slow-responses.min-count=1000" {
		t.Fatalf("analysis written: %+v", f.Analysis)
	}
	for _, e := range f.Findings {
		if e.Detector == "slow-responses" {
			t.Fatalf("slow-responses found with min-count=1000: %+v", e)
		}
	}
	if code, out, _ := kfsniff(t, "--expect", file, "-r", capture); code != exitOK {
		t.Errorf("with the file's settings: exit %d\n%s", code, out)
	}
	// The command line's -o wins over the file's.
	code, out, _ := kfsniff(t, "--expect", file, "-r", capture, "-o", "slow-responses.min-count=3")
	if code != exitExpect || !strings.Contains(out, "unexpected: warning slow-responses") {
		t.Errorf("with -o slow-responses.min-count=3: exit %d\n%s", code, out)
	}
	// Without the settings the same findings do not hold.
	f.Analysis = nil
	b, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = kfsniff(t, "--expect", file, "-r", capture)
	if code != exitExpect || !strings.Contains(out, "unexpected: warning slow-responses") {
		t.Errorf("without the settings: exit %d\n%s", code, out)
	}
}

// TestExpectUsage: what --expect and --write-expect refuse, and the exit
// code beside --fail-on's.
func TestExpectUsage(t *testing.T) {
	basic := fixture("basic.pcap")
	good := fixture("basic" + expect.Suffix)
	bad := writeFile(t, "bad"+expect.Suffix, []byte(`{"format": "kfsniff-expect/v2", "findings": []}`))
	badOption := writeFile(t, "option"+expect.Suffix, []byte(`{"format": "kfsniff-expect/v1", "analysis": {"options": ["nosuch.param=1"]}}`))
	badFilter := writeFile(t, "filter"+expect.Suffix, []byte(`{"format": "kfsniff-expect/v1", "analysis": {"filter": "port port"}}`))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"both", []string{"-r", basic, "--expect", good, "--write-expect", filepath.Join(t.TempDir(), "x.json")}, "give one"},
		{"live", []string{"-i", "lo", "--expect", good}, "not -i"},
		{"frames", []string{"-r", basic, "--expect", good, "--frames"}, "not with --frames"},
		{"json", []string{"-r", basic, "--expect", good, "--json"}, "without --json"},
		{"missing file", []string{"-r", basic, "--expect", filepath.Join(t.TempDir(), "nope.json")}, "no such file"},
		{"other format", []string{"-r", basic, "--expect", bad}, `format "kfsniff-expect/v2"`},
		// The file's own settings: the error names the file, not -o.
		{"file's option", []string{"-r", basic, "--expect", badOption}, "option" + expect.Suffix + ": analysis.options: unknown detector setting"},
		{"file's filter", []string{"-r", basic, "--expect", badFilter}, "filter" + expect.Suffix + ": analysis.filter"},
		{"over the capture", []string{"-r", basic, "--write-expect", basic}, "is the capture read by -r"},
		// It wrote a file named "-" in the current directory.
		{"to stdout", []string{"-r", basic, "--write-expect", "-"}, "--write-expect -"},
		// It wrote the findings of the first N packets, which the
		// capture then failed.
		{"count", []string{"-r", basic, "-c", "10", "--write-expect", filepath.Join(t.TempDir(), "c.expect.json")}, "not with -c"},
		{"duration", []string{"-r", basic, "--duration", "1s", "--write-expect", filepath.Join(t.TempDir(), "d.expect.json")}, "not with -c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := kfsniff(t, tc.args...)
			if code != exitUsage || out != "" || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, out, errs, tc.want)
			}
		})
	}
	if st, err := os.Stat(basic); err != nil || st.Size() < 1000 {
		t.Fatalf("the capture was harmed: %v", err)
	}
	// Held, --fail-on decides: refused.pcap holds its expectation and
	// has info findings.
	refused, refusedExpect := fixture("refused.pcap"), fixture("refused"+expect.Suffix)
	if code, out, _ := kfsniff(t, "-r", refused, "--expect", refusedExpect, "--fail-on", "info"); code != exitFindings {
		t.Errorf("held with --fail-on info: exit %d, want %d\n%s", code, exitFindings, out)
	}
	// Not held: 4 over --fail-on's 3.
	code, out, _ := kfsniff(t, "-r", refused, "--expect", fixture("scenarios/observer-fetch-loop"+expect.Suffix), "--fail-on", "info")
	if code != exitExpect || !strings.Contains(out, "missing:    not-leader-loop error") {
		t.Errorf("not held with --fail-on info: exit %d, want %d\n%s", code, exitExpect, out)
	}
	// --help lists the flags and exit code 4.
	_, out, _ = kfsniff(t, "--help")
	for _, w := range []string{"--expect", "--write-expect", "kfsniff check", "4  the --expect file does not hold"} {
		if !strings.Contains(out, w) {
			t.Errorf("--help lacks %q", w)
		}
	}
}

// TestExpectDocExample: the example of docs/expect.md holds for the
// capture it describes, and fails when its leader is wrong.
func TestExpectDocExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "expect.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```json\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no JSON example in docs/expect.md")
	}
	file := writeFile(t, "example"+expect.Suffix, []byte(example))
	capture := fixture("scenarios/observer-fetch-loop.pcap")
	if code, out, errs := kfsniff(t, "--expect", file, "-r", capture); code != exitOK {
		t.Errorf("the example does not hold: exit %d\n%s%s", code, out, errs)
	}
	wrong := writeFile(t, "wrong"+expect.Suffix, []byte(strings.Replace(example, `"leader_id": 1003`, `"leader_id": 1002`, 1)))
	if code, out, _ := kfsniff(t, "--expect", wrong, "-r", capture); code != exitExpect || !strings.Contains(out, "field leader_id = 1003, want 1002") {
		t.Errorf("leader 1002: exit %d\n%s", code, out)
	}
}
