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
