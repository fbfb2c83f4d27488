package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 31: the files kfsniff check and --expect read, and the ones they
// write, are inputs too.

func copyFixture(t *testing.T, name, to string) {
	t.Helper()
	b, err := os.ReadFile(fixture(name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCheckNonRegularFiles: an expectation that is a link to /dev/zero
// was read without a bound until the Go runtime died out of memory; a
// FIFO (as the expectation or the capture) hung kfsniff check past
// SIGINT and SIGTERM. Each is a case that could not be checked, at once;
// --expect FIFO is a usage error.
func TestCheckNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"zero", "fifo", "capfifo", "good"} {
		if n != "capfifo" {
			copyFixture(t, "basic.pcap", filepath.Join(dir, n+".pcap"))
		}
		if n != "zero" && n != "fifo" {
			copyFixture(t, "basic.expect.json", filepath.Join(dir, n+".expect.json"))
		}
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.expect.json")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"fifo.expect.json", "capfifo.pcap"} {
		if err := syscall.Mkfifo(filepath.Join(dir, p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr, took := runFor(t, 0, 30*time.Second, "check", dir)
	if code != exitExpect || strings.Count(stdout, "not a regular file") != 3 || !strings.Contains(stdout, "1 held, 0 did not hold, 3 could not be checked") {
		t.Errorf("check: exit %d, want 4 with 3 cases not regular files and 1 held:\n%s%s", code, stdout, stderr)
	}
	code, _, stderr, _ = runFor(t, 0, 10*time.Second, "--expect", filepath.Join(dir, "fifo.expect.json"), "-r", filepath.Join(dir, "good.pcap"))
	if code != exitUsage || !strings.Contains(stderr, "not a regular file (a FIFO)") {
		t.Errorf("--expect FIFO: exit %d, want 2 and why:\n%s", code, stderr)
	}
	t.Logf("check of 4 cases, 3 not regular files: %v", took)
}

// TestOutputsNotThroughLinks: check --junit F and --write-expect F wrote
// F.tmp with a plain write, through a link placed there (onto the file
// it points to) and onto an input named F.tmp. Now the temporary file is
// made exclusively with a fresh name: the link's target and the input
// stay as they were.
func TestOutputsNotThroughLinks(t *testing.T) {
	dir := t.TempDir()
	copyFixture(t, "basic.pcap", filepath.Join(dir, "basic.pcap"))
	copyFixture(t, "basic.expect.json", filepath.Join(dir, "basic.expect.json"))
	out := t.TempDir()
	victim := filepath.Join(out, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	junit := filepath.Join(out, "results.xml")
	if err := os.Symlink(victim, junit+".tmp"); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := kfsniff(t, "check", "--junit", junit, dir); code != exitOK {
		t.Fatalf("check --junit: exit %d\n%s%s", code, stdout, stderr)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the file behind %s.tmp was written: %.100q", junit, b)
	}
	if b, _ := os.ReadFile(junit); !bytes.Contains(b, []byte("<testsuites")) {
		t.Errorf("%s: not the JUnit file: %.100q", junit, b)
	}

	// A capture named e.tmp, its expectation written to e.
	capture := filepath.Join(out, "e.tmp")
	copyFixture(t, "basic.pcap", capture)
	want, _ := os.ReadFile(capture)
	if code, _, stderr := kfsniff(t, "-r", capture, "--write-expect", filepath.Join(out, "e")); code != exitOK {
		t.Fatalf("--write-expect: exit %d: %s", code, stderr)
	}
	if got, err := os.ReadFile(capture); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the capture %s was overwritten or removed (%v, %d bytes of %d)", capture, err, len(got), len(want))
	}
	if _, err := os.Stat(filepath.Join(out, "e")); err != nil {
		t.Errorf("the expectation was not written: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(out, ".*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %q", left)
	}
}

// TestHTMLExistingDirectory: --html DIR was caught only after the whole
// analysis, having written a temporary page in the parent directory.
// It is a usage error before anything is read.
func TestHTMLExistingDirectory(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "page")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := kfsniff(t, "-r", fixture("basic.pcap"), "--html", dir)
	if code != exitUsage || !strings.Contains(stderr, "not a file (a directory)") || stdout != "" {
		t.Errorf("--html DIR: exit %d, want 2 and why, no report:\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = kfsniff(t, "-r", fixture("basic.pcap"), "--html", filepath.Join(parent, "no", "such", "page.html"))
	if code != exitUsage || !strings.Contains(stderr, "no directory") {
		t.Errorf("--html in a directory that does not exist: exit %d, want 2:\n%s", code, stderr)
	}
	if left, _ := os.ReadDir(parent); len(left) != 1 {
		t.Errorf("files left beside the directory: %v", left)
	}
}
