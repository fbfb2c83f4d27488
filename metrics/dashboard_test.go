package metrics_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/promtest"
	"github.com/kfsniff/kfsniff/metrics"
	"github.com/kfsniff/kfsniff/pipeline"
)

// DashboardPath is the Grafana dashboard in the repository.
var dashboardPath = filepath.Join("..", "docs", "grafana", "kfsniff.json")

// promtool returns promtool's path, installing Debian's prometheus
// package when missing (promtool.sh).
func promtool(t *testing.T) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("./promtool.sh")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("metrics/promtool.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// TestDashboard: the Grafana dashboard is valid JSON whose every panel has
// queries; the queries parse as PromQL (`promtool check rules`, Grafana's
// variables given values); every kfsniff metric they name is in a real
// scrape, served over HTTP after analysing an incident capture with the
// detectors. The kernel's counters, which only a live capture has, are
// checked in cmd/kfsniff's TestLiveMetrics on a live scrape.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	d, err := promtest.ReadDashboard(data)
	if err != nil {
		t.Fatal(err)
	}
	names := d.Metrics()
	if len(d.Exprs) < 10 || len(names) < 10 {
		t.Fatalf("dashboard %q: %d queries naming %d metrics; want the main metrics", d.Title, len(d.Exprs), len(names))
	}

	// Agents and correlators count the same exchanges: every panel
	// follows the instance selection, whose values are one mode's (All
	// among them too, not a match-all regex), the mode one at a time.
	for _, e := range d.Exprs {
		if !strings.Contains(e, `instance=~"$instance"`) {
			t.Errorf("query %q does not follow the instance selection", e)
		}
	}
	vars := map[string]promtest.Variable{}
	for _, v := range d.Variables {
		vars[v.Name] = v
	}
	if v := vars["mode"]; v.Multi || v.IncludeAll || !strings.Contains(v.Query, "kfsniff_build_info") {
		t.Errorf("mode variable %+v: want one mode at a time, from kfsniff_build_info", v)
	}
	if v := vars["instance"]; !strings.Contains(v.Query, `mode="$mode"`) || v.AllValue != "" {
		t.Errorf("instance variable %+v: want the chosen mode's instances, All being them only", v)
	}
	rules := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(rules, promtest.RulesFile(d.PromQL()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool(t), "check", "rules", rules).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's queries do not parse: %v\n%s", err, out)
	}

	f, err := capture.Open(filepath.Join("..", "fixtures", "pcaps", "scenarios", "observer-fetch-loop.pcap"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dets, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg metrics.Config
	for _, a := range dets.Analyzers() {
		cfg.Detectors = append(cfg.Detectors, a.Name)
	}
	m := metrics.New(cfg)
	// The metrics of the other modes, registered as the command does
	// (their values are the cmd tests': TestLiveExportSpoolOutage,
	// TestUnitCorrelator): here their names.
	m.BuildInfo("v0", "abc", "go1", "file")
	m.Shipping(func() metrics.ShippingCounts { return metrics.ShippingCounts{Records: 1, Pending: 1, Up: true} })
	m.Correlator(func() *metrics.Correlation {
		return &metrics.Correlation{Lag: map[int32]int64{0: 1}, Clocks: []metrics.Clock{{Agent: "a"}},
			Latency: []metrics.TopicLatency{{Topic: "t", Count: 1, Buckets: make([]uint64, len(metrics.E2EBuckets))}}}
	})
	res := pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{
		Flows: flows.DefaultConfig(), Handlers: []flows.Handler{m}, Detectors: dets,
		Progress: func(p pipeline.Progress) { m.Capture(p.Packets, p.Bytes, p.Live) },
	})
	m.Findings(res.Report.Findings)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s, err := promtest.Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.Contains(n, "_kernel_") {
			continue // live captures only
		}
		if !s.Has(n) {
			t.Errorf("the dashboard queries %s, which the scrape lacks", n)
		}
	}
	if s.Sum("kfsniff_findings", nil) != float64(len(res.Report.Findings)) || len(res.Report.Findings) == 0 {
		t.Errorf("findings gauge %v; the report has %d findings", s.Sum("kfsniff_findings", nil), len(res.Report.Findings))
	}
}
