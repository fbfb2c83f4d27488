package pipeline

import (
	"bytes"
	"context"
	"path/filepath"
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
	var apis []apiCount
	for _, a := range want.APIs {
		apis = append(apis, apiCount{a.Key, a.Version, int64(a.Requests), int64(a.Responses)})
	}
	if len(apis) < 5 {
		t.Fatalf("ground truth has only %d APIs; the recording is not realistic", len(apis))
	}
	checkAPIs(t, r, apis)
}

func TestRecordedFixtures(t *testing.T) {
	for _, name := range []string{"recorded-kgo-kfake-group", "recorded-kgo-kfake-admin"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "fixtures", "pcaps")
			side, err := record.ReadSidecar(filepath.Join(dir, name+".counts.json"))
			if err != nil {
				t.Fatal(err)
			}
			compareRecorded(t, runFile(t, filepath.Join(dir, name+".pcap")), side.Counts)
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
