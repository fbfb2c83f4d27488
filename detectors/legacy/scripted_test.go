package legacy_test

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// Helpers shared by the tests of the rules still here: scripted traffic
// through the whole analysis. (They came with the election stall and
// listener conflict tests, now specifications in detectors/electionstall
// and detectors/listenerconflict.)

var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// kafkaPeer is a scripted client connection with its correlation ids.
type kafkaPeer struct {
	c    *gen.Conn
	corr int32
	id   string
}

func dial(w *gen.Writer, client, server string, t time.Time) *kafkaPeer {
	return &kafkaPeer{c: w.Conn(ap(client), ap(server), t, gen.ConnOptions{}), id: "detector-test"}
}

// exchange writes a request at t and its response 2 ms later.
func (p *kafkaPeer) exchange(t time.Time, req kmsg.Request, resp kmsg.Response) {
	p.corr++
	p.c.Request(t, p.corr, &p.id, req)
	p.c.Response(t.Add(2*time.Millisecond), p.corr, resp)
}

// trafficFindings writes the traffic script into an in-memory pcap, runs
// the analysis with every detector (thresholds changed by overrides) and
// returns the findings of detector id.
func trafficFindings(t *testing.T, id string, overrides map[string]float64, script func(w *gen.Writer)) []detectors.Finding {
	t.Helper()
	return findingsOf(analyseScript(t, overrides, script), id)
}

// asJSON renders a field value as JSON, the way gen.Expect compares them.
func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func describeFindings(fs []detectors.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("\n  " + f.Severity.String() + " " + f.Summary + " counts=" + asJSON(f.Counts) + " fields=" + asJSON(f.Fields) + " nodes=" + asJSON(f.Nodes))
	}
	return b.String()
}

// checkFinding compares a finding's counts and fields (as JSON) and nodes.
func checkFinding(t *testing.T, f detectors.Finding, sev detectors.Severity, nodes []int32, counts map[string]int64, fields map[string]any) {
	t.Helper()
	if f.Severity != sev {
		t.Errorf("severity %s, want %s: %s", f.Severity, sev, f.Summary)
	}
	if nodes != nil && !slices.Equal(f.Nodes, nodes) {
		t.Errorf("nodes %v, want %v", f.Nodes, nodes)
	}
	for k, v := range counts {
		if got, ok := f.Counts[k]; !ok || got != v {
			t.Errorf("count %s = %d (present %v), want %d", k, got, ok, v)
		}
	}
	for k, v := range fields {
		if got := asJSON(f.Fields[k]); got != asJSON(v) {
			t.Errorf("field %s = %s, want %s", k, got, asJSON(v))
		}
	}
	if len(f.Evidence) == 0 {
		t.Errorf("no evidence: %s", f.Summary)
	}
	if f.Summary == "" || f.Explanation == "" || f.Next == "" {
		t.Errorf("summary, explanation or next missing: %+v", f)
	}
}

// Metadata builders: detectortest's (detectors/detectortest/meta.go).
var (
	mdBroker = dt.MetaBroker
	mdTopic  = dt.MetaTopic
	led      = dt.Led
)

// metadata is a Metadata v12 request for the topics and its response.
func metadata(brokers []kmsg.MetadataResponseBroker, topics ...kmsg.MetadataResponseTopic) (*kmsg.MetadataRequest, *kmsg.MetadataResponse) {
	return dt.Metadata(12, brokers, topics...)
}
