package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// copyAsSchema2 reads every record of the export topic at from and
// produces it into to as an agent of schema 2 would have shipped it:
// "v" 2, without fp_fn and the batches' fp, fp_deltas and fp_err.
func copyAsSchema2(t *testing.T, from, to []string) int {
	t.Helper()
	src, err := kgo.NewClient(kgo.SeedBrokers(from...), kgo.ConsumeTopics("corr"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := kgo.NewClient(kgo.SeedBrokers(to...), kgo.DefaultProduceTopic("corr"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	// The agent's records, all there once it exited: read until a poll
	// gives nothing more.
	n, printed := 0, 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3e9)
		fs := src.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			break
		}
		for _, r := range fs.Records() {
			dec := json.NewDecoder(bytes.NewReader(r.Value))
			dec.UseNumber() // ts_ns past 2^53 stays exact
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				t.Fatal(err)
			}
			m["v"] = 2
			if _, ok := m["fp_fn"]; ok {
				printed++
			}
			delete(m, "fp_fn")
			if bs, ok := m["batches"].([]any); ok {
				for _, b := range bs {
					for _, k := range []string{"fp", "fp_deltas", "fp_err"} {
						delete(b.(map[string]any), k)
					}
				}
			}
			v, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := dst.ProduceSync(context.Background(), &kgo.Record{Key: r.Key, Value: v, Partition: r.Partition}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if printed == 0 {
		t.Fatal("the agent shipped no record with fp_fn")
	}
	return n
}

// boundsOf runs the correlator on url with args and returns its
// findings, its bounds_reached and its stderr.
func boundsOf(t *testing.T, url string, args ...string) ([]string, map[string]int64, string) {
	t.Helper()
	code, stdout, stderr := kfsniff(t, append([]string{"-r", url, "--until-end", "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("correlator: exit %d: %s", code, stderr)
	}
	var rep struct {
		Findings []corrFinding `json:"findings"`
		Totals   struct {
			Bounds map[string]int64 `json:"bounds_reached"`
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	return summaries(rep.Findings), rep.Totals.Bounds, stderr
}

// TestCorrelateFingerprints (issue 30 item 8): MirrorMaker 2's replay
// re-batched, shipped by an agent of schema 3, read back gives the
// file's findings; the same records as an agent of schema 2 shipped them
// (rewritten here) are still read, compared by CRC only (the replay by
// records is missed, as before), said once on stderr and counted in
// bounds_reached. Agents with a shared key: a correlator with the key
// gives the file's findings, one without says why it compares by CRC.
func TestCorrelateFingerprints(t *testing.T) {
	const capture = "kafka/mm2-replay-dst.pcap.gz"
	file, _ := correlateJSON(t, "-r", fixture(capture))
	want := summaries(file.Findings)
	if !slices.ContainsFunc(want, func(s string) bool { return strings.Contains(s, "duplicate-batches") }) {
		t.Fatalf("the file shows no duplicate-batches finding: %v", want)
	}
	const without = "duplicate-batches.batches_without_fingerprints"

	url, seeds := newSink(t, 3)
	agent(t, url, capture, "mm2-host")
	got, bounds, stderr := boundsOf(t, url)
	if !slices.Equal(got, want) || bounds[without] != 0 || strings.Contains(stderr, "fingerprint") {
		t.Errorf("schema 3: %v, %s %d, stderr %s; want the file's %v", got, without, bounds[without], stderr, want)
	}

	url2, seeds2 := newSink(t, 3)
	copyAsSchema2(t, seeds, seeds2)
	got, bounds, stderr = boundsOf(t, url2)
	if slices.Equal(got, want) || bounds[without] == 0 {
		t.Errorf("schema 2: %v, %s %d; want the replay by records missed and the batches counted", got, without, bounds[without])
	}
	if strings.Count(stderr, "without record fingerprints") != 1 || !strings.Contains(stderr, `agent "mm2-host" ships records of schema 2`) {
		t.Errorf("schema 2: stderr should say it once:\n%s", stderr)
	}

	key := filepath.Join(t.TempDir(), "fp.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url3, _ := newSink(t, 3)
	agentFile(t, url3, fixture(capture), "mm2-host", "--fingerprint-key", key)
	if got, bounds, _ = boundsOf(t, url3, "--fingerprint-key", key); !slices.Equal(got, want) || bounds[without] != 0 {
		t.Errorf("shared key: %v, %s %d; want the file's %v", got, without, bounds[without], want)
	}
	got, bounds, stderr = boundsOf(t, url3)
	if slices.Equal(got, want) || bounds[without] == 0 || strings.Count(stderr, "fingerprints records with hmac-sha256-128:") != 1 {
		t.Errorf("key at the agents only: %v, %s %d, stderr:\n%s", got, without, bounds[without], stderr)
	}

	for _, args := range [][]string{{"-r", fixture(capture), "--fingerprint-key", key},
		{"-r", fixture(capture), "--export", url, "--export-fingerprints=false", "--fingerprint-key", key},
		{"-r", url, "--fingerprint-key", filepath.Join(t.TempDir(), "none")}} {
		if code, _, stderr := kfsniff(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want usage: %s", args, code, stderr)
		}
	}
}
