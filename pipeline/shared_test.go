package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// sharedDir holds public captures recorded by other projects; it sits
// beside the repository for developers and in CI.
const sharedDir = "../../shared/captures"

type apiCount struct {
	key, version int16
	reqs, resps  int64
}

// The expected counts below were established independently of kfsniff:
// with tshark 4.0 (`tshark -r F -d tcp.port==36333,kafka -Y kafka -T fields
// -e frame.number -e kafka.request_key -e kafka.api_version
// -e kafka.correlation_id -e kafka.request_frame`), listing every request
// and response frame and pairing them by correlation id by hand where
// tshark marks flexible versions malformed, and cross-checked against the
// capture descriptions in shared/captures/README.md.
var sharedCases = []struct {
	file      string
	apis      []apiCount
	conns     int
	unmatched int64 // responses whose request precedes the capture
	// unanswered requests at the end of the capture
	unanswered int64
	// requests on connections with no packet from the server: their
	// fate is not in the capture
	notCaptured int64
	// a record batch that must be decoded with a valid CRC
	batchTopic string
}{
	{file: "arkime/kafka.pcap", conns: 1, unanswered: 1, apis: []apiCount{{2, 0, 1, 0}}},
	{file: "deepflow/00-produce-v2.pcap", conns: 1, apis: []apiCount{{0, 2, 1, 1}}, batchTopic: "topic2"},
	{file: "deepflow/00-produce-v7-sw8.pcap", conns: 1, apis: []apiCount{{0, 7, 1, 1}}, batchTopic: "quickstart-events"},
	{file: "deepflow/00-produce-v9.pcap", conns: 1, apis: []apiCount{{0, 9, 1, 1}}, batchTopic: "zqy-test"},
	{file: "deepflow/01-fetch-v12-ok.pcap", conns: 1, apis: []apiCount{{1, 12, 1, 1}}},
	{file: "deepflow/01-fetch-v12-perf.pcap", conns: 1, apis: []apiCount{{1, 12, 1, 1}}},
	{file: "deepflow/01-fetch-v12-unknown.pcap", conns: 1, apis: []apiCount{{1, 12, 1, 1}}},
	{file: "deepflow/11-join-group-v7.pcap", conns: 1, apis: []apiCount{{11, 7, 1, 1}}},
	{file: "deepflow/13-leave-group-v4.pcap", conns: 1, apis: []apiCount{{13, 4, 1, 1}}},
	{file: "deepflow/14-sync-group-v5.pcap", conns: 1, apis: []apiCount{{14, 5, 1, 1}}},
	{file: "deepflow/18-api-versions-v3.pcap", conns: 1, apis: []apiCount{{18, 3, 1, 1}}},
	{file: "deepflow/mixed-with-unsupported.pcap", conns: 2, apis: []apiCount{{1, 13, 1, 1}, {8, 8, 1, 1}, {12, 4, 1, 1}}},
	{file: "go-sniffer/kafka.pcap", conns: 2, apis: []apiCount{{0, 1, 1, 1}, {3, 0, 1, 1}}, batchTopic: "test"},
	{
		// Frames 5, 6, 7 are responses (corr 131, 140, 141) to requests
		// sent before the capture; frames 19, 21, 22 are requests with
		// no response captured.
		file: "ndpi/kafka.pcapng", conns: 9, unmatched: 3, notCaptured: 3,
		apis: []apiCount{
			{0, 3, 2, 2}, {0, 9, 1, 1}, {3, 2, 4, 3}, {3, 12, 1, 1},
			{18, 0, 4, 2}, {18, 3, 1, 1}, {22, 4, 1, 1},
		},
		batchTopic: "sampleTopic",
	},
}

// batchSeen records the topics of CRC-valid record batches.
type batchSeen map[string]int

func (b batchSeen) OnRequest(m *flows.Message) {
	for _, x := range m.Batches {
		if x.CRCOK {
			b[x.Topic]++
		}
	}
}

func sharedPath(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(sharedDir, name)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("shared capture %s missing in CI: %v", p, err)
		}
		t.Skipf("shared captures not beside the repository (%v)", err)
	}
	return p
}

func runFile(t *testing.T, path string, handlers ...flows.Handler) *report.Report {
	t.Helper()
	f, err := capture.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res := Run(context.Background(), []*capture.File{f}, Options{
		Flows: flows.DefaultConfig(), Handlers: handlers,
		Warn: func(err error) { t.Errorf("input broke: %v", err) },
	})
	return res.Report
}

func TestSharedCaptures(t *testing.T) {
	for _, tc := range sharedCases {
		t.Run(tc.file, func(t *testing.T) {
			seen := batchSeen{}
			r := runFile(t, sharedPath(t, tc.file), seen)
			tot := r.Totals
			if tot.FramingErrors != 0 || tot.DecodeErrors != 0 || tot.Gaps != 0 || len(tot.UnknownAPIs) != 0 {
				t.Errorf("framing errors %d, decode errors %d, gaps %d, unknown %v; want none", tot.FramingErrors, tot.DecodeErrors, tot.Gaps, tot.UnknownAPIs)
			}
			if tot.KafkaConnections != tc.conns {
				t.Errorf("kafka connections = %d, want %d", tot.KafkaConnections, tc.conns)
			}
			if tot.UnmatchedResponses != tc.unmatched || tot.UnansweredRequests != tc.unanswered || tot.NotCaptured != tc.notCaptured {
				t.Errorf("unmatched %d, unanswered %d, responses not captured %d; want %d, %d, %d",
					tot.UnmatchedResponses, tot.UnansweredRequests, tot.NotCaptured, tc.unmatched, tc.unanswered, tc.notCaptured)
			}
			checkAPIs(t, r, tc.apis)
			if tc.batchTopic != "" && seen[tc.batchTopic] == 0 {
				t.Errorf("no CRC-valid record batch for topic %q decoded; saw %v", tc.batchTopic, seen)
			}
		})
	}
}

func checkAPIs(t *testing.T, r *report.Report, want []apiCount) {
	t.Helper()
	got := map[[2]int16][2]int64{}
	for _, a := range r.APIs {
		got[[2]int16{a.Key, a.Version}] = [2]int64{a.Requests, a.Responses}
		if a.DecodeErrors != 0 {
			t.Errorf("%s v%d: %d decode errors", a.Name, a.Version, a.DecodeErrors)
		}
	}
	for _, w := range want {
		k := [2]int16{w.key, w.version}
		if g := got[k]; g != [2]int64{w.reqs, w.resps} {
			t.Errorf("key %d v%d: requests/responses = %v, want [%d %d]", w.key, w.version, g, w.reqs, w.resps)
		}
		delete(got, k)
	}
	for k, g := range got {
		t.Errorf("unexpected key %d v%d: %v", k[0], k[1], g)
	}
}
