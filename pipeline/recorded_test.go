package pipeline

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/fixtures/record"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// compareRecorded checks the analysis of real kgo <-> kfake traffic against
// the counts of the recording proxy's own framer (fixtures/record.Count),
// which reads the exact bytes that went through the proxy.
func compareRecorded(t *testing.T, r *report.Report, want record.Counts) {
	t.Helper()
	tot := r.Totals
	if tot.KafkaConnections != want.Connections {
		t.Errorf("connections = %d, want %d", tot.KafkaConnections, want.Connections)
	}
	if tot.DecodeErrors != 0 || tot.FramingErrors != 0 || tot.Gaps != 0 || len(tot.UnknownAPIs) != 0 {
		t.Errorf("decode errors %d, framing errors %d, gaps %d, unknown APIs %v: want none",
			tot.DecodeErrors, tot.FramingErrors, tot.Gaps, tot.UnknownAPIs)
	}
	if tot.UnmatchedResponses != int64(want.UnmatchedResponses) || tot.UnansweredRequests != int64(want.Unanswered) {
		t.Errorf("unmatched %d unanswered %d, want %d %d", tot.UnmatchedResponses, tot.UnansweredRequests, want.UnmatchedResponses, want.Unanswered)
	}
	if tot.NoResponseExpected != int64(want.Acks0) {
		t.Errorf("acks=0 produce = %d, want %d", tot.NoResponseExpected, want.Acks0)
	}
	// ApiVersions refused (read in the v0 layout): as many as the
	// proxy's framer read error code 35 in.
	var refused int64
	for _, a := range r.APIs {
		if a.Key == 18 {
			refused += a.Errors["UNSUPPORTED_VERSION"]
		}
	}
	if refused != int64(want.UnsupportedVersion) {
		t.Errorf("ApiVersions answered UNSUPPORTED_VERSION %d times, want %d", refused, want.UnsupportedVersion)
	}
	var apis []apiCount
	for _, a := range want.APIs {
		apis = append(apis, apiCount{a.Key, a.Version, int64(a.Requests), int64(a.Responses)})
	}
	if len(apis) < 5 {
		t.Fatalf("ground truth has only %d APIs; the recording is not realistic", len(apis))
	}
	checkAPIs(t, r, apis)
}

// TestRecordedFixtures checks every recorded fixture (each written by
// cmd/recordgen with its sidecar) against its sidecar's counts.
func TestRecordedFixtures(t *testing.T) {
	dir := filepath.Join("..", "fixtures", "pcaps")
	sidecars, _ := filepath.Glob(filepath.Join(dir, "recorded-*.counts.json"))
	if len(sidecars) < len(record.Fixtures(record.GroupConfig{})) {
		t.Fatalf("%d recorded fixtures in %s, want one per record.Fixtures; run `make fixtures`", len(sidecars), dir)
	}
	for _, path := range sidecars {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".counts.json"), func(t *testing.T) {
			side, err := record.ReadSidecar(path)
			if err != nil {
				t.Fatal(err)
			}
			compareRecorded(t, runFile(t, filepath.Join(dir, side.Pcap)), side.Counts)
		})
	}
}

// TestLiveRecording records fresh traffic between kgo and a kfake cluster
// (real clients, real protocol server) and checks that every frame is
// decoded and every response matched, with counts as sent.
func TestLiveRecording(t *testing.T) {
	if testing.Short() {
		t.Skip("records live kgo/kfake traffic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec, err := record.HealthyGroup(ctx, record.GroupConfig{Records: 120})
	if err != nil {
		t.Fatal(err)
	}
	var pcap bytes.Buffer
	if err := record.WritePcap(&pcap, rec.Transcript, record.PcapOptions()); err != nil {
		t.Fatal(err)
	}
	f, err := capture.NewFile("live", 0, &pcap)
	if err != nil {
		t.Fatal(err)
	}
	var produced int64
	counter := recordCounter{n: &produced}
	res := Run(ctx, []*capture.File{f}, Options{Flows: flows.DefaultConfig(), Handlers: []flows.Handler{counter}})
	compareRecorded(t, res.Report, record.Count(rec.Transcript))
	if produced != int64(rec.Sent.Produced) {
		t.Errorf("records in CRC-valid produced batches = %d, want %d as sent", produced, rec.Sent.Produced)
	}
}

// recordCounter counts records in CRC-valid batches of Produce requests.
type recordCounter struct{ n *int64 }

func (c recordCounter) OnRequest(m *flows.Message) {
	if m.Key != 0 {
		return
	}
	for _, b := range m.Batches {
		if b.CRCOK {
			*c.n += int64(b.Records)
		}
	}
}
