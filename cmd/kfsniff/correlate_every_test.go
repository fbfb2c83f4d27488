package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recordings are every committed capture under fixtures/pcaps (scenarios,
// real clients, the real-Kafka recordings), by their path there, except
// the hostile inputs (built to be refused or to break a reader, not
// traffic) and the TLS captures (nothing to ship without their key log).
func recordings(t *testing.T) []string {
	t.Helper()
	root := fixture("")
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel == "hostile" || rel == "tls" {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if strings.HasSuffix(name, ".pcap") || strings.HasSuffix(name, ".pcapng") || strings.HasSuffix(name, ".cap") ||
			strings.HasSuffix(name, ".pcap.gz") || strings.HasSuffix(name, ".pcapng.gz") {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("no recordings under %s: %v", root, err)
	}
	return out
}

// TestCorrelateEveryRecording (issue 30 item 8): every recording shipped
// by an agent into kfake and read back gives the findings of the file,
// for every rule, but those that still differ (stillDiffer, each with
// why: skipped with it, so that -v lists them; CORRELATE_GAPS=1 runs
// them too, to see what differs).
func TestCorrelateEveryRecording(t *testing.T) {
	for _, capture := range recordings(t) {
		t.Run(capture, func(t *testing.T) {
			if why, ok := stillDiffer[capture]; ok && os.Getenv("CORRELATE_GAPS") == "" {
				t.Skip("differs from the file: " + why)
			}
			t.Parallel()
			file, _ := correlateJSON(t, "-r", fixture(capture))
			url, _ := newSink(t, 3)
			agent(t, url, capture, "host-a")
			rep, _ := correlateJSON(t, "-r", url, "--until-end")
			if got, want := summaries(rep.Findings), summaries(file.Findings); !slices.Equal(got, want) {
				t.Errorf("read back from Kafka:\n  %s\nthe file:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

// stillDiffer are the recordings whose correlated findings still differ
// from the file's, by path, and why: none today.
var stillDiffer = map[string]string{}
