package report_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
)

// benchReport is the report of the benchmarks' small capture
// ($KFSNIFF_BENCH_DIR/small.pcap, written by go test ./bench -bench E2E),
// built once per test binary: analysing it takes seconds, writing its JSON
// (several MB) is what BenchmarkWriteJSON times.
var benchReport = sync.OnceValues(func() (*report.Report, error) {
	path := filepath.Join(os.Getenv("KFSNIFF_BENCH_DIR"), "small.pcap")
	f, err := capture.Open(path, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dets, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		return nil, err
	}
	res := pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{
		Flows: flows.DefaultConfig(), Detectors: dets, Workers: 1,
	})
	return res.Report, res.Err
})

// BenchmarkWriteJSON times `--json` alone: encoding and indenting the
// report of the small benchmark capture. It is skipped unless
// KFSNIFF_BENCH_DIR holds small.pcap.
func BenchmarkWriteJSON(b *testing.B) {
	if _, err := os.Stat(filepath.Join(os.Getenv("KFSNIFF_BENCH_DIR"), "small.pcap")); os.Getenv("KFSNIFF_BENCH_DIR") == "" || err != nil {
		b.Skip("no $KFSNIFF_BENCH_DIR/small.pcap (go test ./bench -bench E2E/small writes it)")
	}
	r, err := benchReport()
	if err != nil {
		b.Fatal(err)
	}
	var n countWriter
	if err := report.WriteJSON(&n, r); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		if err := report.WriteJSON(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
