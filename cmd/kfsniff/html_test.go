package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --html writes the page beside the text report, which is unchanged: the
// page has the charts, the map, the tables and the capture's finding, and
// no temporary file is left behind; with --json as well.
func TestHTMLFlag(t *testing.T) {
	capture := fixture("scenarios/mm2-replay.pcap")
	page := filepath.Join(t.TempDir(), "incident.html")
	code, out, errs := kfsniff(t, "-r", capture, "--html", page)
	if code != exitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	_, plain, _ := kfsniff(t, "-r", capture)
	if out != plain {
		t.Errorf("--html changed the text report")
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<!DOCTYPE html>", `<svg id="chart-requests-by-api"`, `<svg id="map"`, "duplicate-batches", "src.mm2_src-0: 257 batches", `id="table-connections"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the page has no %q", want)
		}
	}
	if st, _ := os.Stat(page); st.Mode().Perm() != 0o644 {
		t.Errorf("page mode %v, want 0644 like any report", st.Mode().Perm())
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(page), ".incident.html.*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// With --json too: the JSON on stdout, the page written.
	page2 := filepath.Join(t.TempDir(), "b.html")
	if code, out, _ := kfsniff(t, "-r", capture, "--json", "--html", page2); code != exitOK || !strings.HasPrefix(out, "{") {
		t.Errorf("--json --html: exit %d, stdout %.20q", code, out)
	}
	if _, err := os.Stat(page2); err != nil {
		t.Error(err)
	}
}

// --html never writes over an input or the -w capture, nor to stdout; an
// unwritable place fails with exit 1 after the report.
func TestHTMLRefusesToDestroy(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcap")
	orig, err := os.ReadFile(fixture("basic.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.pcap")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-r", in, "--html", in},
		{"-r", in, "--html", link},
		{"-r", in, "--html", "-"},
	} {
		code, _, errs := kfsniff(t, args...)
		if code != exitUsage || !strings.Contains(errs, "--html") {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming --html", args, code, errs)
		}
	}
	if b, _ := os.ReadFile(in); !bytes.Equal(b, orig) {
		t.Fatal("the input was changed")
	}
	// A directory that does not exist is said before the analysis (it
	// was said after it, however long it took, exit 1).
	code, out, errs := kfsniff(t, "-r", in, "--html", filepath.Join(dir, "no", "such", "dir", "x.html"))
	if code != exitUsage || !strings.Contains(errs, "--html") || out != "" {
		t.Errorf("page in a missing directory: exit %d, stdout %.30q, stderr %q; want 2 before the report", code, out, errs)
	}
	code, out, errs = kfsniff(t, "-r", in, "--write-expect", filepath.Join(dir, "no", "such", "dir", "x.expect.json"))
	if code != exitUsage || !strings.Contains(errs, "--write-expect") || out != "" {
		t.Errorf("expectation in a missing directory: exit %d, stdout %.30q, stderr %q; want 2 before the report", code, out, errs)
	}
	// A directory in the page's place is said before the analysis too
	// (issue 31: it was said after it, a temporary page written beside;
	// TestHTMLExistingDirectory).
	taken := filepath.Join(dir, "taken.html")
	if err := os.Mkdir(taken, 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errs = kfsniff(t, "-r", in, "--html", taken)
	if code != exitUsage || !strings.Contains(errs, "--html") || out != "" {
		t.Errorf("a directory in the page's place: exit %d, stdout %.30q, stderr %q; want 2 before the report", code, out, errs)
	}
}

// A live capture writes the page when it ends, with its report.
func TestHTMLAtEndOfLiveRun(t *testing.T) {
	needLive(t)
	page := filepath.Join(t.TempDir(), "live.html")
	done, errw := startLive(t, context.Background(), nil, "-i", "lo", "--duration", "400ms", "--html", page, "port", "1")
	r := wait(t, done, errw)
	if r.code != exitOK || !strings.Contains(r.stdout, "kfsniff report") {
		t.Fatalf("exit %d, stdout %.200q, stderr %s", r.code, r.stdout, errw)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`<svg id="chart-requests-by-api"`)) || !bytes.Contains(b, []byte("kfsniff report: lo")) {
		t.Errorf("the live run's page lacks its charts or its interface: %.300s", b)
	}
}

// --html is "also": with --records, --finding and --expect (holding or
// not) the page is written too, not silently skipped.
func TestHTMLWithOtherViews(t *testing.T) {
	capture := fixture("scenarios/mm2-replay.pcap")
	dir := t.TempDir()
	for i, c := range []struct {
		args []string
		code int
	}{
		{[]string{"--records"}, exitOK},
		{[]string{"--finding", "1"}, exitOK},
		{[]string{"--expect", fixture("scenarios/mm2-replay.expect.json")}, exitOK},
		{[]string{"--expect", fixture("scenarios/healthy-group.expect.json")}, exitExpect},
	} {
		page := filepath.Join(dir, string(rune('a'+i))+".html")
		code, _, errs := kfsniff(t, append([]string{"-r", capture, "--html", page}, c.args...)...)
		if code != c.code {
			t.Errorf("%q: exit %d, want %d; stderr %q", c.args, code, c.code, errs)
		}
		if b, err := os.ReadFile(page); err != nil || !bytes.Contains(b, []byte("duplicate-batches")) {
			t.Errorf("%q: the page was not written (%v)", c.args, err)
		}
	}
}

// Two outputs into one file are refused before anything is written: the
// second replaced the first (-w x --write-expect x left JSON where the
// capture was asked for, exit 0), whether the file exists yet or not.
func TestOutputsIntoOneFileRefused(t *testing.T) {
	capture := fixture("scenarios/mm2-replay.pcap")
	dir := t.TempDir()
	old := filepath.Join(dir, "old")
	if err := os.WriteFile(old, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{filepath.Join(dir, "new"), old} {
		for _, pair := range [][2]string{{"-w", "--write-expect"}, {"-w", "--html"}, {"--html", "--write-expect"}} {
			args := []string{"-r", capture, pair[0], name, pair[1], filepath.Dir(name) + "/./" + filepath.Base(name)}
			code, _, errs := kfsniff(t, args...)
			if code != exitUsage || !strings.Contains(errs, pair[1]) {
				t.Errorf("%q: exit %d, stderr %q; want 2, refused", args, code, errs)
			}
		}
	}
	// Nor onto the --expect file read.
	exp := filepath.Join(dir, "x.expect.json")
	orig, err := os.ReadFile(fixture("scenarios/mm2-replay.expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exp, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"-w", "--html"} {
		code, _, errs := kfsniff(t, "-r", capture, "--expect", exp, flag, exp)
		if code != exitUsage || !strings.Contains(errs, flag+" "+exp) {
			t.Errorf("--expect X %s X: exit %d, stderr %q; want 2, refused", flag, code, errs)
		}
	}
	if b, _ := os.ReadFile(exp); !bytes.Equal(b, orig) {
		t.Error("a refused run changed the expectation")
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Error("a refused run wrote the file")
	}
	if b, _ := os.ReadFile(old); string(b) != "keep" {
		t.Error("a refused run changed the existing file")
	}
}
