package pipeline

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// TestCatalogueFixtures runs every scripted fixture through the analysis
// and compares it with what the generator put in it (gen.Want): the counts
// come from the script that wrote the capture, not from kfsniff.
func TestCatalogueFixtures(t *testing.T) {
	cat := gen.Catalogue()
	if len(cat) < 20 {
		t.Fatalf("catalogue has %d fixtures; expected the full set", len(cat))
	}
	for _, fx := range cat {
		t.Run(fx.Name, func(t *testing.T) {
			r := runFile(t, filepath.Join("..", "fixtures", "pcaps", fx.Name))
			checkWant(t, r, fx.Want)
		})
	}
}

// checkWant compares a report with what the generator put in the capture.
func checkWant(t *testing.T, r *report.Report, w gen.Want) {
	t.Helper()
	tot := r.Totals
	if tot.KafkaConnections != w.Conns {
		t.Errorf("kafka connections = %d, want %d", tot.KafkaConnections, w.Conns)
	}
	if tot.OtherTCP != int64(w.NotKafka) {
		t.Errorf("non-Kafka connections = %d, want %d", tot.OtherTCP, w.NotKafka)
	}
	if got := tot.RefusedConnections + tot.UnansweredSYNs; got != int64(w.Failed) {
		t.Errorf("failed connection attempts = %d, want %d", got, w.Failed)
	}
	if tot.UnmatchedResponses != int64(w.Orphans) {
		t.Errorf("unmatched responses = %d, want %d", tot.UnmatchedResponses, w.Orphans)
	}
	if tot.DecodeErrors != 0 || tot.FramingErrors != 0 {
		t.Errorf("decode errors %d, framing errors %d; want none", tot.DecodeErrors, tot.FramingErrors)
	}
	// Partial frames are skipped, never decoded: they show up as
	// skipped bytes, and every complete frame is counted.
	skipped := tot.SkippedBytes[flows.SkipGap] + tot.SkippedBytes[flows.SkipResync] + tot.SkippedBytes[flows.SkipMidstream]
	if (w.Partial > 0) != (skipped > 0) {
		t.Errorf("skipped bytes %v with %d partial frames", tot.SkippedBytes, w.Partial)
	}
	if w.Partial == 0 && tot.Gaps != 0 {
		t.Errorf("%d gaps, want none", tot.Gaps)
	}
	compareCounts(t, "requests", r, w.Requests, func(a report.API) int64 { return a.Requests })
	compareCounts(t, "responses", r, w.Responses, func(a report.API) int64 { return a.Responses })
	if w.ConnList == nil {
		return
	}
	var got []gen.ConnWant
	for _, c := range r.Connections {
		got = append(got, gen.ConnWant{
			Client: c.Client, Server: c.Server, Requests: c.Requests, Responses: c.Responses,
			Unanswered: c.Unanswered, Closed: c.Closed, Reset: c.Reset,
		})
	}
	if !slices.Equal(got, w.ConnList) {
		t.Errorf("connections in order of their IDs:\n%s\nwant\n%s", connList(got), connList(w.ConnList))
	}
	for i, c := range r.Connections {
		if c.ID != i+1 {
			t.Errorf("connection %d has ID %d", i+1, c.ID)
		}
	}
}

func connList(cs []gen.ConnWant) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString("  " + c.String() + "\n")
	}
	return b.String()
}

func compareCounts(t *testing.T, what string, r *report.Report, want []gen.Count, get func(report.API) int64) {
	t.Helper()
	got := map[[2]int16]int64{}
	for _, a := range r.APIs {
		if n := get(a); n > 0 {
			got[[2]int16{a.Key, a.Version}] = n
		}
	}
	for _, c := range want {
		k := [2]int16{c.Key, c.Version}
		if got[k] != int64(c.N) {
			t.Errorf("%s %s: got %d", what, c, got[k])
		}
		delete(got, k)
	}
	for k, n := range got {
		t.Errorf("unexpected %s for key %d v%d: %d", what, k[0], k[1], n)
	}
}
