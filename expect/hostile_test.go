package expect

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestParseStrict (issue 31): encoding/json matched keys without case
// and let the last of two win, so that `"Findings": []` after the
// findings emptied them: an expectation that always held. Both are
// refused, at every level, in free maps too.
func TestParseStrict(t *testing.T) {
	const f = `{"detector": "x", "severity": "error"}`
	for _, tc := range []struct{ name, doc, want string }{
		{"Findings after findings", `{"format": "kfsniff-expect/v1", "findings": [` + f + `], "Findings": []}`, `key "Findings": keys are case-sensitive: "findings"`},
		{"findings twice", `{"format": "kfsniff-expect/v1", "findings": [` + f + `], "findings": []}`, `key "findings" given twice`},
		{"FORMAT", `{"FORMAT": "kfsniff-expect/v1"}`, `keys are case-sensitive: "format"`},
		{"a finding's Severity", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "x", "severity": "error", "Severity": "info"}]}`, `key "findings[0].Severity": keys are case-sensitive`},
		{"a count twice", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "x", "severity": "error", "counts": {"n": 1, "n": 2}}]}`, `key "findings[0].counts.n" given twice`},
		{"a field's object", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "x", "severity": "error", "fields": {"o": {"a": 1, "a": 2}}}]}`, `key "findings[0].fields.o.a" given twice`},
		{"others.Allow", `{"format": "kfsniff-expect/v1", "others": {"allow": [], "Allow": ["x"]}}`, `key "others.Allow": keys are case-sensitive: "others.allow"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want %q", err, tc.want)
			}
		})
	}
	// What encoding/json's own words say stays theirs.
	if _, err := Parse([]byte(`{"format": "kfsniff-expect/v1", "findings": [`)); err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Errorf("a cut file: %v", err)
	}
}

// TestLoadRegularOnly: an expectation that is /dev/zero (a link in the
// checked tree, or --expect) was read without a bound until the runtime
// died out of memory; a FIFO hung the check past Ctrl-C. Both are refused
// at once, as is a file over MaxFileBytes.
func TestLoadRegularOnly(t *testing.T) {
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero.expect.json")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.expect.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.expect.json")
	if err := os.WriteFile(big, []byte(`{"format": "kfsniff-expect/v1", "description": "`+strings.Repeat("x", MaxFileBytes)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{zero, "not a regular file (a character device)"}, {fifo, "not a regular file (a FIFO)"}, {dir, "not a regular file (a directory)"},
		{big, "over the 4194304 bytes"},
	} {
		began := time.Now()
		_, err := Load(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%s) = %v, want %q", tc.path, err, tc.want)
		}
		if took := time.Since(began); took > time.Second {
			t.Errorf("Load(%s) took %v", tc.path, took)
		}
	}
}

// FuzzParse: whatever the bytes, Parse never panics, and what it accepts
// encoding/json reads the same (a File equal field by field), with no
// key given twice and every key as the format spells it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"format": "kfsniff-expect/v1", "findings": [{"detector": "x", "severity": "error", "counts": {"n": 1}, "fields": {"a": [1, {"b": null}]}}], "others": {"strict": "none"}}`,
		`{"format": "kfsniff-expect/v1", "findings": [], "Findings": []}`, `{"format": "kfsniff-expect/v1", "totals": {"requests": {"Fetch": 3}}, "connections": [{"client": "a:1", "server": "b:2", "roles": ["raft"]}]}`,
		`{"format": "kfsniff-expect/v1", "analysis": {"options": ["x.y=1"], "max_frame": 100}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Parse(b)
		if err != nil {
			return
		}
		var want File
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("Parse accepted what encoding/json refuses: %v: %q", err, b)
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(&want)
		if string(gb) != string(wb) {
			t.Fatalf("Parse read %s, encoding/json %s, from %q", gb, wb, b)
		}
		if err := strictKeys(b, nil); err != nil {
			t.Fatalf("accepted a key twice: %v: %q", err, b)
		}
	})
}
