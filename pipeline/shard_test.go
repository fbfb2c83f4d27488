package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// shardOutputs runs the whole analysis of path as kfsniff -r does, with the
// detectors, on n workers, and returns the JSON report and the frames
// written by --frames --json -v.
func shardOutputs(t *testing.T, path string, n int) (rep, frames []byte) {
	t.Helper()
	var fb bytes.Buffer
	fw := report.NewFrameWriter(&fb, report.FrameFilter{}, true, true)
	res := runResult(t, path, n, fw)
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}
	if res.Workers != n {
		t.Fatalf("ran %d workers, asked for %d", res.Workers, n)
	}
	var doc bytes.Buffer // as --json writes it (time-range.pcapng's times clamped)
	if err := report.WriteJSON(&doc, res.Report); err != nil {
		t.Fatal(err)
	}
	return doc.Bytes(), fb.Bytes()
}

// allCaptures lists every committed capture and the shared ones.
func allCaptures(t *testing.T) []string {
	var paths []string
	for _, root := range []string{filepath.Join("..", "fixtures", "pcaps"), sharedDir} {
		if _, err := os.Stat(root); err != nil {
			continue
		}
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".pcap") || strings.HasSuffix(p, ".pcapng") || strings.HasSuffix(p, ".pcap.gz")) {
				paths = append(paths, p)
			}
			return nil
		})
	}
	if len(paths) < 50 {
		t.Fatalf("only %d captures found", len(paths))
	}
	return paths
}

// workerDependent are the captures whose output depends on the workers
// by design (ARCHITECTURE.md, Workers; ROBUSTNESS.md, Known gaps): heavy
// kernel loss, where a hole proven lost by an ACK flushes every connection
// of an analyzer, so some holes are noticed a few packets later with more
// workers (counts equal).
var workerDependent = map[string]bool{
	"../fixtures/pcaps/real/lossy-midstream-tcpdump.pcap.gz": true,
}

// TestShardedSameOutput: analysing connections on several workers gives
// byte for byte the report and the --frames output of one worker, on
// every committed capture (scenarios, real clients, hostile inputs) and
// the shared real ones.
func TestShardedSameOutput(t *testing.T) {
	for _, p := range allCaptures(t) {
		if _, err := capture.Open(p, 0); err != nil {
			continue // the unusable hostile inputs
		}
		if workerDependent[filepath.ToSlash(p)] {
			continue
		}
		rep1, fr1 := shardOutputs(t, p, 1)
		for _, n := range []int{2, 3} {
			rep, fr := shardOutputs(t, p, n)
			if !bytes.Equal(rep, rep1) {
				t.Errorf("%s: report with %d workers differs from one worker's:\n%s", p, n, firstDiff(rep1, rep))
			}
			if !bytes.Equal(fr, fr1) {
				t.Errorf("%s: --frames with %d workers differs from one worker's:\n%s", p, n, firstDiff(fr1, fr))
			}
		}
	}
}

// firstDiff shows the first line where two outputs differ.
func firstDiff(a, b []byte) string {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := 0; i < len(la) || i < len(lb); i++ {
		var x, y []byte
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if !bytes.Equal(x, y) {
			return "line " + itoa(i+1) + ":\n  one: " + trunc(x) + "\n  got: " + trunc(y)
		}
	}
	return "(same lines)"
}

func trunc(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// TestShardedSameOutputMerged: several files analysed as one timeline
// (merged by time, as `kfsniff -r a -r b` does) come out the same on one
// worker and on several.
func TestShardedSameOutputMerged(t *testing.T) {
	dir := filepath.Join("..", "fixtures", "pcaps")
	names := []string{"scenarios/observer-fetch-loop.pcap", "scenarios/mm2-replay.pcap", "recorded-kgo-kfake-group.pcap", "loss.pcap", "reorder.pcap"}
	run := func(n int) []byte {
		var files []*capture.File
		for i, name := range names {
			f, err := capture.Open(filepath.Join(dir, name), i)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			files = append(files, f)
		}
		set, err := detectors.NewSet(all.Analyzers(), nil)
		if err != nil {
			t.Fatal(err)
		}
		res := Run(context.Background(), files, Options{Flows: flows.DefaultConfig(), Detectors: set, Workers: n})
		if len(res.Report.Capture.Files) != len(names) || res.Report.Totals.Requests == 0 {
			t.Fatalf("%d workers: %d files, %d requests", n, len(res.Report.Capture.Files), res.Report.Totals.Requests)
		}
		b, err := json.MarshalIndent(res.Report, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	one := run(1)
	for _, n := range []int{2, 4} {
		if got := run(n); !bytes.Equal(got, one) {
			t.Errorf("%d workers differ from one:\n%s", n, firstDiff(one, got))
		}
	}
}

// TestShardItemHoldsNoLoss: a round's item per packet holds the packet and
// its place, not a datagram's loss (kept beside the items): the reader
// writes, and a worker on the other core reads and clears, one item a
// packet, and with the loss inline they were twice as large.
func TestShardItemHoldsNoLoss(t *testing.T) {
	item, pkt := unsafe.Sizeof(shardItem{}), unsafe.Sizeof(capture.Packet{})
	if item > pkt+16 {
		t.Errorf("a round's item is %d bytes for a packet of %d: more than its sequence number and kind", item, pkt)
	}
}
