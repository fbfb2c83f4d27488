package correlate

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/export"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
)

// shippedValues are the record values the real exporter handed its kgo
// client, in the order it shipped them: a kgo hook sees each record as
// it is produced (copied, as the exporter reuses its buffers). The sink
// is an address nothing listens on; what kgo then does with the records
// does not matter here (kfsniff's own export tests cover delivery with
// kfake).
type shippedValues struct {
	mu   sync.Mutex
	vals [][]byte
}

func (s *shippedValues) OnProduceRecordBuffered(r *kgo.Record) {
	s.mu.Lock()
	s.vals = append(s.vals, append([]byte(nil), r.Value...))
	s.mu.Unlock()
}

// exporter makes a real exporter for agent whose records land in s.
func exporter(t testing.TB, agent string, s *shippedValues) *export.Exporter {
	t.Helper()
	x, err := export.New(export.Config{Brokers: []string{"127.0.0.1:1"}, Topic: "ship", Agent: agent,
		Buffer: 1 << 20, FlushTimeout: time.Millisecond, Opts: []kgo.Opt{kgo.WithHooks(s)}})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// shipCapture runs a capture through the analysis with every detector and
// the real exporter, as kfsniff -r FILE --export does, and returns every
// record shipped (exchanges, connection events, then the final findings).
func shipCapture(t testing.TB, path, agent string) [][]byte {
	t.Helper()
	var s shippedValues
	x := exporter(t, agent, &s)
	f, err := capture.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{Flows: flows.DefaultConfig(), Detectors: set,
		Handlers: []flows.Handler{x}, Workers: 1})
	x.End(res.Stats.FirstTime, res.Stats.LastTime, res.Stats.Packets)
	x.Findings(res.Report.Findings)
	x.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.vals) == 0 {
		t.Fatalf("%s: nothing shipped", path)
	}
	return s.vals
}

// parseAll parses every value, failing the test on an error.
func parseAll(t testing.TB, vals [][]byte) []Record {
	t.Helper()
	out := make([]Record, 0, len(vals))
	for _, v := range vals {
		r, err := Parse(v)
		if err != nil {
			t.Fatalf("%v: %.300s", err, v)
		}
		out = append(out, r)
	}
	return out
}
