package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/internal/termcheck"
)

// TestHostileCLI runs kfsniff on every committed input of the hostile
// corpus (fixtures/pcaps/hostile) in every output mode and checks what the
// operator sees: exit code 2 and one line naming the file for inputs that
// cannot be read; exit 0 and one warning line for inputs that break
// part-way; exit 0 and nothing on stderr otherwise; stdout that cannot
// drive a terminal in any mode and is valid JSON in the JSON modes.
func TestHostileCLI(t *testing.T) {
	unusable := map[string]string{
		"empty.pcap":     "empty file, not a capture",
		"text.pcap":      `not a pcap or pcapng capture (starts with text "[2024-05-06 14:30:00")`,
		"bad-magic.pcap": "not a pcap or pcapng capture (starts with bytes d4 c3 b2 a2)",
	}
	warning := map[string]string{
		"truncated.pcap":      fmt.Sprintf("file ends inside packet %d (record at byte 996): truncated capture", gen.TruncatedAt),
		"corrupt-record.pcap": fmt.Sprintf("packet %d (record at byte 1263): record claims 2147483632 captured bytes", gen.CorruptAt),
	}
	jsonClamps := map[string]bool{"time-range.pcapng": true}
	n := 0
	for _, h := range gen.Hostile() {
		if h.Large {
			continue
		}
		n++
		path := fixture(filepath.Join(gen.HostileDir, h.Name))
		t.Run(h.Name, func(t *testing.T) {
			if want, ok := unusable[h.Name]; ok {
				code, out, errs := kfsniff(t, "-r", path)
				if code != exitUsage || out != "" || errs != fmt.Sprintf("kfsniff: %s: %s\n", path, want) {
					t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and the one line %q", code, out, errs, want)
				}
				return
			}
			for _, mode := range [][]string{nil, {"--json"}, {"--frames"}, {"--frames", "-v"}, {"--frames", "--json"}, {"--frames", "--json", "-v"}} {
				args := append([]string{"-r", path}, mode...)
				code, out, errs := kfsniff(t, args...)
				name := strings.Join(append([]string{"kfsniff"}, args...), " ")
				if code != exitOK {
					t.Errorf("%s: exit %d, stderr %q", name, code, errs)
				}
				if want, ok := warning[h.Name]; ok {
					line := fmt.Sprintf("kfsniff: warning: %s: ", path)
					if !strings.HasPrefix(errs, line) || !strings.Contains(errs, want) || strings.Count(errs, "\n") != 1 ||
						!strings.HasSuffix(errs, "; analysed the packets before it\n") {
						t.Errorf("%s: stderr %q; want one warning line saying %q", name, errs, want)
					}
				} else if jsonClamps[h.Name] && contains(mode, "--json") {
					// hostile_io_test.go checks these warnings.
					if !strings.HasPrefix(errs, "kfsniff: warning: JSON: ") {
						t.Errorf("%s: stderr %q; want warnings of times clamped", name, errs)
					}
				} else if errs != "" {
					t.Errorf("%s: stderr %q, want nothing", name, errs)
				}
				// JSON too is often read on a terminal: wire strings in it
				// are escaped as well (report.SafeJSON).
				if err := termcheck.Safe([]byte(out)); err != nil {
					t.Errorf("%s: stdout would drive the terminal: %v", name, err)
				}
				switch {
				case !contains(mode, "--json"):
				case contains(mode, "--frames"):
					for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
						if l != "" && !json.Valid([]byte(l)) {
							t.Errorf("%s: line %d is not JSON: %.200s", name, i+1, l)
						}
					}
				default:
					var doc map[string]any
					if err := json.Unmarshal([]byte(out), &doc); err != nil || doc["schema"] != "kfsniff/v1" {
						t.Errorf("%s: not a kfsniff/v1 JSON document: %v", name, err)
					}
				}
			}
		})
	}
	if n < 10 {
		t.Fatalf("only %d committed hostile inputs", n)
	}
}

// TestHostileMaxFrameFlag: one byte over --max-frame is a framing error
// the report names with the limit given.
func TestHostileMaxFrameFlag(t *testing.T) {
	code, out, errs := kfsniff(t, "-r", fixture(filepath.Join(gen.HostileDir, "frame-sizes.pcap")), "--max-frame", "65536")
	if code != exitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"6 framing errors", fmt.Sprintf("frame size %d outside 8..65536", gen.JustOverMaxFrame), "1 unmatched responses"} {
		if !strings.Contains(out, want) {
			t.Errorf("report does not say %q", want)
		}
	}
}

// TestHostileFailOn: findings about clients with hostile ids still count
// for --fail-on, and the line saying so is plain.
func TestHostileFailOn(t *testing.T) {
	code, _, errs := kfsniff(t, "-r", fixture(filepath.Join(gen.HostileDir, "hostile-strings.pcap")), "--fail-on", "warning")
	if code != exitFindings || errs != "kfsniff: 7 finding(s) at or above warning\n" {
		t.Errorf("exit %d, stderr %q; want exit 3 and 7 findings (the throttled client ids)", code, errs)
	}
}

// TestHostileCorpusCommitted: the committed hostile inputs are the small
// ones of the corpus and no more.
func TestHostileCorpusCommitted(t *testing.T) {
	entries, err := os.ReadDir(fixture(gen.HostileDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "README.md" {
			continue
		}
		h, ok := gen.FindHostile(e.Name())
		if !ok || h.Large {
			t.Errorf("%s is committed but is not a small input of the corpus", e.Name())
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestBoundFlags: --max-waiting and --buffer-budget set the totals across
// connections, and say so when reached; negative values are usage errors.
func TestBoundFlags(t *testing.T) {
	code, out, errs := kfsniff(t, "-r", fixture("pipelining.pcap"), "--max-waiting", "1", "--workers", "1")
	if code != 0 || !strings.Contains(out, "over 1 requests waiting across connections (the total bound)") {
		t.Errorf("--max-waiting 1: exit %d, stderr %q, report:\n%s", code, errs, out)
	}
	code, out, _ = kfsniff(t, "-r", fixture("pipelining.pcap"))
	if code != 0 || strings.Contains(out, "requests waiting across") {
		t.Errorf("default: exit %d, report:\n%s", code, out)
	}
	for _, flag := range []string{"--max-waiting", "--buffer-budget"} {
		if code, _, errs := kfsniff(t, "-r", fixture("pipelining.pcap"), flag, "-1"); code != 2 || !strings.Contains(errs, "must not be negative") {
			t.Errorf("%s -1: exit %d, stderr %q", flag, code, errs)
		}
	}
	// Frames of a few kilobytes, split across segments: a one-byte budget
	// drops them; the default, or none at all, keeps them.
	mm2 := fixture(filepath.Join("scenarios", "mm2-replay.pcap"))
	for _, tc := range []struct {
		budget  string
		dropped bool
	}{{"1", true}, {"0", false}, {"67108864", false}} {
		code, out, errs := kfsniff(t, "-r", mm2, "--buffer-budget", tc.budget, "--workers", "1")
		if code != 0 || strings.Contains(out, "passed the budget of "+tc.budget+" bytes") != tc.dropped {
			t.Errorf("--buffer-budget %s: exit %d, stderr %q, want frames dropped: %v; report:\n%s", tc.budget, code, errs, tc.dropped, out)
		}
	}
}
