package pipeline

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/errorstorm"
	"github.com/kfsniff/kfsniff/detectors/unansweredrequests"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
)

// The operational rules (error-storm, throttled, unanswered-requests,
// slow-responses, connection-refused) on whole captures: what their
// specifications on the harness cannot show, the analysis feeding them.

// opsFindings runs the whole analysis, every rule, and returns the
// findings of the rules named.
func opsFindings(t *testing.T, rules string, files ...*capture.File) []detectors.Finding {
	t.Helper()
	set, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := Run(context.Background(), files, Options{Flows: flows.DefaultConfig(), Detectors: set,
		Warn: func(err error) { t.Errorf("input broke: %v", err) }})
	var out []detectors.Finding
	for _, f := range res.Report.Findings {
		if slices.Contains(strings.Fields(rules), f.Detector) {
			out = append(out, f)
		}
	}
	return out
}

func opsOpen(t *testing.T, path string) *capture.File {
	t.Helper()
	f, err := capture.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestUnansweredOnSharedCaptures pins the decisions on the public
// captures with requests that have no response: at most info.
func TestUnansweredOnSharedCaptures(t *testing.T) {
	for _, tc := range []struct {
		file   string
		counts map[string]int64
	}{
		// A ListOffsets sent 140 ms before the capture ends.
		{"arkime/kafka.pcap", map[string]int64{"requests": 1, "in_flight": 1}},
		// Three requests on connections with not one packet from the
		// server: a sampled capture.
		{"ndpi/kafka.pcapng", map[string]int64{"requests": 3, "one_sided": 3}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got := opsFindings(t, "unanswered-requests", opsOpen(t, sharedPath(t, tc.file)))
			detectortest.Compare(t, got, "unanswered-requests", detectortest.Want{Severity: detectors.Info, Counts: tc.counts})
		})
	}
}

// TestUnansweredCaptureLoss: a response lost in the capture (the client
// ACKs bytes the capture does not have) makes its request look overtaken;
// flows tells the rule of the gap, so it is info, not a broker failure.
func TestUnansweredCaptureLoss(t *testing.T) {
	var buf bytes.Buffer
	w, err := gen.NewWriter(&buf, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := detectortest.T0
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	broker := netip.MustParseAddrPort("10.1.0.10:9092")
	// Segments in send order: 0 request 1, 1 response 1 (lost), 2
	// request 2, 3 response 2.
	c := w.Conn(netip.MustParseAddrPort("10.2.0.5:40000"), broker, t0, gen.ConnOptions{Loss: []int{1}})
	p := w.Conn(netip.MustParseAddrPort("10.2.9.9:49999"), broker, t0, gen.ConnOptions{})
	id, pid := "producer-1", "pinger"
	c.Request(at(time.Second), 1, &id, detectortest.Produce(9))
	c.Response(at(time.Second+2*time.Millisecond), 1, detectortest.Produced(9, 0, 0))
	c.Request(at(time.Second+100*time.Millisecond), 2, &id, detectortest.Produce(9))
	c.Response(at(time.Second+102*time.Millisecond), 2, detectortest.Produced(9, 0, 0))
	for i := range 8 {
		req, resp := detectortest.MetadataErrors(0)
		t := at(2*time.Second + time.Duration(i)*500*time.Millisecond)
		p.Request(t, int32(i+1), &pid, req)
		p.Response(t.Add(time.Millisecond), int32(i+1), resp)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := capture.NewFile("loss.pcap", 0, bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	got := opsFindings(t, "unanswered-requests", f)
	detectortest.Compare(t, got, "unanswered-requests",
		detectortest.Want{Severity: detectors.Info, Detail: &unansweredrequests.Pending{Counted: unansweredrequests.Counted{
			Requests: 1, ByReason: map[string]int64{"in_flight": 0, "one_sided": 0, "capture_gaps": 1, "long_poll": 0},
		}}})
}

// TestOpsRulesQuietOnHealthyCaptures runs the committed healthy captures
// (recorded kgo traffic, the healthy scenarios, the catalogue) and the
// public ones: none may get a warning from error-storm, throttled,
// unanswered-requests or slow-responses.
func TestOpsRulesQuietOnHealthyCaptures(t *testing.T) {
	fixtures := filepath.Join("..", "fixtures", "pcaps")
	var paths []string
	for _, f := range []string{"recorded-kgo-kfake-admin.pcap", "recorded-kgo-kfake-group.pcap", "scenarios/healthy-group.pcap",
		"scenarios/replica-identity.pcap", "scenarios/replica-divergence.pcap", "scenarios/mm2-replay.pcap"} {
		paths = append(paths, filepath.Join(fixtures, f))
	}
	catalogue, _ := filepath.Glob(filepath.Join(fixtures, "*.pcap*"))
	paths = append(paths, catalogue...)
	if _, err := os.Stat(sharedDir); err == nil {
		shared, _ := filepath.Glob(filepath.Join(sharedDir, "*", "*.pcap*"))
		paths = append(paths, shared...)
	}
	seen := map[string]bool{}
	for _, p := range paths {
		if strings.HasSuffix(p, ".json") || seen[p] {
			continue
		}
		seen[p] = true
		t.Run(filepath.Base(p), func(t *testing.T) {
			for _, f := range opsFindings(t, "error-storm throttled unanswered-requests slow-responses", opsOpen(t, p)) {
				if f.Severity >= detectors.Warning {
					t.Errorf("%s %s: %s", f.Severity, f.Detector, f.Summary)
				}
			}
		})
	}
	if len(seen) < 20 {
		t.Errorf("%d captures run, want the catalogue's and the scenarios'", len(seen))
	}
}

// TestErrorStormOnScenarios: the two incident captures whose loops the
// storm rule must see; there the specific rules explain them (through
// the findings' typed subjects: the same error, and a client or server in
// common), so the storm finding is info and names the rule that explains
// it.
func TestErrorStormOnScenarios(t *testing.T) {
	for _, tc := range []struct {
		file      string
		api, err  string
		responses int64
		by        string
	}{
		{"observer-fetch-loop.pcap", "Fetch", "NOT_LEADER_OR_FOLLOWER", 2000, "not-leader-loop"},
		{"election-stall.pcap", "Metadata", "LEADER_NOT_AVAILABLE", 1206, "leader-election-stall"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got := opsFindings(t, "error-storm", opsOpen(t, filepath.Join("..", "fixtures", "pcaps", "scenarios", tc.file)))
			detectortest.Compare(t, got, "error-storm", detectortest.Want{
				Severity: detectors.Info,
				Detail: &errorstorm.Finding{
					API: tc.api, Error: tc.err, Responses: tc.responses, StormResponses: tc.responses,
				},
				ExplainedBy: tc.by,
				Summary:     []string{" (explained by " + tc.by + ")"},
			})
		})
	}
}
