package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/internal/promtest"
)

var metricsAddrRE = regexp.MustCompile(`serving metrics on http://([^/\s]+)/metrics`)

// metricsURL finds the address kfsniff printed on stderr.
func metricsURL(t *testing.T, stderr string) string {
	t.Helper()
	m := metricsAddrRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("kfsniff did not say where it serves metrics:\n%s", stderr)
	}
	return "http://" + m[1] + "/metrics"
}

// scrape gets /metrics in the text format, as Prometheus does without
// native histograms.
func scrape(t *testing.T, url string) (promtest.Scrape, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s %v", url, resp.Status, err)
	}
	s, err := promtest.Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%v\n%.2000s", err, body)
	}
	return s, body
}

// promtool returns the path of promtool, installed by metrics/promtool.sh
// when missing (Debian's prometheus package; CI runs as root).
func promtool(t *testing.T) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join("..", "..", "metrics", "promtool.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("metrics/promtool.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// checkMetrics runs `promtool check metrics` on a scrape: the exposition
// must parse and follow Prometheus's naming and help conventions.
func checkMetrics(t *testing.T, tool string, body []byte) {
	t.Helper()
	cmd := exec.Command(tool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// errorsAndOldVersions asks for a topic that does not exist (error
// UNKNOWN_TOPIC_OR_PARTITION in the Metadata answer) and sends ListOffsets
// v0, a version Kafka 4.0 removed, from a client limited to 0.10.0's
// versions: a finding of kafka40-removed-versions. It returns its first
// client still connected, having produced a record: a producer's
// connection open while the test scrapes.
func errorsAndOldVersions(ctx context.Context, seeds []string, counts *kafkaCounts) (*kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.WithHooks(counts), kgo.ClientID("kfsniff-metrics-errors"),
		kgo.DefaultProduceTopic("live"))
	if err != nil {
		return nil, err
	}
	if err := errorsAndOld(ctx, seeds, counts, cl); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

func errorsAndOld(ctx context.Context, seeds []string, counts *kafkaCounts, cl *kgo.Client) error {
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("still connected")}).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	md := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"no-such-topic-a", "no-such-topic-b"} {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		md.Topics = append(md.Topics, t)
	}
	resp, err := md.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != 3 {
		return fmt.Errorf("metadata for missing topics answered %+v; want UNKNOWN_TOPIC_OR_PARTITION", resp.Topics)
	}
	old, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.WithHooks(counts), kgo.ClientID("kfsniff-metrics-old"),
		kgo.MaxVersions(kversion.V0_10_0()))
	if err != nil {
		return err
	}
	defer old.Close()
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "live"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lp.MaxNumOffsets = 1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	if _, err := old.Request(ctx, lo); err != nil {
		return fmt.Errorf("ListOffsets v0: %w", err)
	}
	if lo.Version != 0 {
		return fmt.Errorf("the old client sent ListOffsets v%d; want v0", lo.Version)
	}
	return nil
}

// TestLiveMetrics captures kgo talking to kfake on lo with
// --metrics-addr 127.0.0.1:0 and scrapes /metrics while the capture runs.
// The scrape passes `promtool check metrics`; its counts per API (requests,
// responses, error codes by name) are the report's for the same run; the
// findings gauge shows the live finding of kafka40-removed-versions before
// the capture ends; the kernel's counters are there; every metric the
// Grafana dashboard queries is there. After the run, the port is closed.
func TestLiveMetrics(t *testing.T) {
	needLive(t)
	tool := promtool(t)
	c, ports, filter := startKfake(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := append([]string{"-i", "lo", "--no-tui", "--json", "--ports", ports, "--metrics-addr", "127.0.0.1:0", "--duration", "2m"}, strings.Fields(filter)...)
	done, errw := startLive(t, ctx, nil, args...)
	url := metricsURL(t, errw.String())

	counts := &kafkaCounts{writes: map[int16]int{}, reads: map[int16]int{}}
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	err := workload(wctx, c.ListenAddrs(), counts, 30)
	var open *kgo.Client
	if err == nil {
		open, err = errorsAndOldVersions(wctx, c.ListenAddrs(), counts)
	}
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	// Scrape until the counts settle (the ring hands partly filled blocks
	// over after 50 ms), the live findings (every 2 s) are in and the
	// closed clients' connections have left the gauge.
	var s promtest.Scrape
	var body []byte
	var requests float64
	deadline := time.Now().Add(15 * time.Second)
	for {
		time.Sleep(500 * time.Millisecond)
		s, body = scrape(t, url)
		n := s.Sum("kfsniff_requests_total", nil)
		settled := n > 0 && n == requests
		requests = n
		roles := s.By("kfsniff_connections", nil, "role")
		if settled && s.Sum("kfsniff_findings", map[string]string{"detector": "kafka40-removed-versions"}) > 0 && roles["consumer"] == 0 && roles["group"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15 s: %v requests, findings %v, connections by role %v (the consumers' closed)\n%s", n, s.By("kfsniff_findings", nil, "detector", "severity"), roles, errw)
		}
	}
	checkMetrics(t, tool, body)
	dashboardMetrics(t, s)
	counts.mu.Lock()
	wrote := maps.Clone(counts.writes)
	counts.mu.Unlock()
	cancel()
	r := wait(t, done, errw)
	open.Close() // after the capture: its closing requests are in neither
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, errw)
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("%s still served after the run ended", url)
	}

	var rep struct {
		Capture struct {
			Packets int64   `json:"packets"`
			Drops   *uint64 `json:"drops"`
		} `json:"capture"`
		APIs     []apiErrRow `json:"apis"`
		Findings []struct {
			Detector string `json:"detector"`
			Severity string `json:"severity"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("not the JSON report: %v\n%.500s", err, r.stdout)
	}
	req := s.By("kfsniff_requests_total", nil, "api")
	resp := s.By("kfsniff_responses_total", nil, "api")
	errs := s.By("kfsniff_response_errors_total", nil, "api", "error")
	wantReq, wantResp, wantErrs := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, a := range rep.APIs {
		wantReq[a.Name] += float64(a.Requests)
		wantResp[a.Name] += float64(a.Responses)
		for e, n := range a.Errors {
			wantErrs[a.Name+"/"+e] += float64(n)
		}
	}
	for api, n := range wantReq {
		if req[api] != n {
			t.Errorf("%s: %v requests scraped, the report has %v", api, req[api], n)
		}
	}
	for api, n := range req {
		if wantReq[api] != n {
			t.Errorf("%s: %v requests scraped, the report has %v", api, n, wantReq[api])
		}
	}
	// The report's responses may include long polls answered after the
	// scrape, as the clients closed; never fewer.
	for api, n := range wantResp {
		if resp[api] > n || resp[api] < n-1 {
			t.Errorf("%s: %v responses scraped, the report has %v", api, resp[api], n)
		}
	}
	for k, n := range wantErrs {
		if errs[k] != n {
			t.Errorf("error %s: %v scraped, the report has %v", k, errs[k], n)
		}
	}
	for k, n := range errs {
		if wantErrs[k] != n {
			t.Errorf("error %s: %v scraped, the report has %v", k, n, wantErrs[k])
		}
	}
	if errs["Metadata/UNKNOWN_TOPIC_OR_PARTITION"] < 2 {
		t.Errorf("UNKNOWN_TOPIC_OR_PARTITION in Metadata: %v scraped; the workload asked for two missing topics", errs["Metadata/UNKNOWN_TOPIC_OR_PARTITION"])
	}
	for key, n := range wrote {
		if got := req[decode.Name(key)]; got != float64(n) {
			t.Errorf("%s: %v requests scraped, kgo wrote %d", decode.Name(key), got, n)
		}
	}
	if got := s.By("kfsniff_requests_total", map[string]string{"api": "ListOffsets"}, "version")["0"]; got != 1 {
		t.Errorf("ListOffsets v0: %v requests scraped; want the old client's 1", got)
	}
	found := false
	for _, f := range rep.Findings {
		found = found || f.Detector == "kafka40-removed-versions"
	}
	if !found {
		t.Errorf("the report has no kafka40-removed-versions finding, the scrape had one")
	}
	if lat := s.Sum("kfsniff_response_latency_seconds", map[string]string{"api": "Produce"}); lat == 0 || lat != resp["Produce"] {
		t.Errorf("Produce latency histogram counts %v; %v Produce responses", lat, resp["Produce"])
	}
	if got := s.Sum("kfsniff_capture_packets_total", nil); got == 0 || got > float64(rep.Capture.Packets) {
		t.Errorf("%v packets scraped; the report has %d", got, rep.Capture.Packets)
	}
	if !s.Has("kfsniff_capture_kernel_drops_total") || rep.Capture.Drops == nil || s.Sum("kfsniff_capture_kernel_drops_total", nil) > float64(*rep.Capture.Drops) {
		t.Errorf("kernel drops: scraped %v (present %v), report %v", s.Sum("kfsniff_capture_kernel_drops_total", nil), s.Has("kfsniff_capture_kernel_drops_total"), rep.Capture.Drops)
	}
	// The workload's clients had closed their connections when the scrape
	// was taken; the last client's were open, one producing.
	roles := s.By("kfsniff_connections", nil, "role")
	if roles["producer"] < 1 || roles["metadata"] < 1 || roles["consumer"] != 0 || roles["group"] != 0 {
		t.Errorf("open connections by role %v; want the open client's producer and metadata connections, no consumer's or group's", roles)
	}
	if opened, closed := s.Sum("kfsniff_connections_opened_total", nil), s.Sum("kfsniff_connections_closed_total", nil); opened < 5 || closed >= opened {
		t.Errorf("%v connections opened, %v closed; want the workload's closed and the last client's open", opened, closed)
	}
	clients := s.By("kfsniff_client_requests_total", nil, "client_id")
	for _, id := range []string{"kfsniff-live-producer", "kfsniff-live-consumer", "kfsniff-metrics-errors", "kfsniff-metrics-old"} {
		if clients[id] == 0 {
			t.Errorf("no requests of client id %s in %v", id, clients)
		}
	}
}

// dashboardMetrics checks that every metric the Grafana dashboard queries
// is in a live scrape.
func dashboardMetrics(t *testing.T, s promtest.Scrape) {
	t.Helper()
	// A live agent without --export: the export row's metrics are
	// TestLiveExportSpoolOutage's, the correlators' TestUnitCorrelator's.
	dashboardMetricsOf(t, s, func(n string) bool {
		return !strings.HasPrefix(n, "kfsniff_export_") && !strings.HasPrefix(n, "kfsniff_correlate_")
	})
}

// dashboardMetricsOf checks that the scrape has every metric the
// dashboard queries that want says this scrape should have.
func dashboardMetricsOf(t *testing.T, s promtest.Scrape, want func(string) bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "grafana", "kfsniff.json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := promtest.ReadDashboard(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range d.Metrics() {
		if want(n) && !s.Has(n) {
			t.Errorf("docs/grafana/kfsniff.json queries %s, which the scrape lacks", n)
		}
	}
}

type apiErrRow struct {
	Name      string           `json:"name"`
	Requests  int64            `json:"requests"`
	Responses int64            `json:"responses"`
	Errors    map[string]int64 `json:"errors"`
}

// TestReadMetrics: with -r (here a capture streamed on standard input, as
// `tcpdump -w - | kfsniff -r - --metrics-addr :9464` does), metrics are
// served while the input is read, counting what was read so far, and the
// server stops when the run ends. The exposition passes promtool without
// the live capture's kernel counters, which a file does not have.
func TestReadMetrics(t *testing.T) {
	data, err := os.ReadFile(fixture("recorded-kgo-kfake-group.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	errw := newStderrWatch()
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"-r", "-", "--json", "--metrics-addr", "127.0.0.1:0"}, pr, &out, errw)
	}()
	half := len(data) / 2
	if _, err := pw.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	url := ""
	for i := 0; url == "" && i < 100; i++ {
		if m := metricsAddrRE.FindStringSubmatch(errw.String()); m != nil {
			url = "http://" + m[1] + "/metrics"
		}
		time.Sleep(50 * time.Millisecond)
	}
	if url == "" {
		t.Fatalf("no metrics address on stderr: %s", errw)
	}
	var s promtest.Scrape
	var body []byte
	for i := 0; i < 50; i++ {
		s, body = scrape(t, url)
		if s.Sum("kfsniff_capture_packets_total", nil) > 0 && s.Sum("kfsniff_requests_total", nil) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	midway := s.Sum("kfsniff_requests_total", nil)
	if midway == 0 {
		t.Fatalf("no request counted while half the capture was read:\n%.1500s", body)
	}
	if s.Has("kfsniff_capture_kernel_drops_total") {
		t.Error("a file's metrics claim kernel drops")
	}
	checkMetrics(t, promtool(t), body)
	if _, err := pw.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errw)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("kfsniff -r - did not end with its input")
	}
	var rep struct {
		Totals struct {
			Requests int64 `json:"requests"`
		} `json:"totals"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if midway >= float64(rep.Totals.Requests) {
		t.Errorf("%v requests counted with half the capture read, %d in all: the scrape was not taken midway", midway, rep.Totals.Requests)
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("%s still served after the run ended", url)
	}
}

// TestReadMetricsLinger: a stream piped to -r - ends between two scrapes,
// and the server stopped with the run: Prometheus never read the final
// counts (issue 28: "metrics stay at 0 with -r -"). With --metrics-linger
// the final metrics are served once the analysis is done, until a scrape
// has read them (the report's request count), and the run then ends at
// once; without a scrape, after the linger.
func TestReadMetricsLinger(t *testing.T) {
	data, err := os.ReadFile(fixture("recorded-kgo-kfake-group.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	errw := newStderrWatch()
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"-r", "-", "--json", "--metrics-addr", "127.0.0.1:0", "--metrics-linger", "60s"}, bytes.NewReader(data), &out, errw)
	}()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(errw.String(), "serving the final metrics"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no word of the final metrics served: %s", errw)
		}
	}
	m := metricsAddrRE.FindStringSubmatch(errw.String())
	if m == nil {
		t.Fatalf("no metrics address on stderr: %s", errw)
	}
	s, _ := scrape(t, "http://"+m[1]+"/metrics")
	scraped := time.Now()
	var code int
	select {
	case code = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("still serving 10 s after the final metrics were scraped")
	}
	var rep struct {
		Totals struct {
			Requests int64 `json:"requests"`
		} `json:"totals"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v: %s", code, err, errw)
	}
	if got := s.Sum("kfsniff_requests_total", nil); got != float64(rep.Totals.Requests) || got == 0 {
		t.Errorf("final scrape: %v requests, the report %d", got, rep.Totals.Requests)
	}
	t.Logf("ended %s after the final scrape", time.Since(scraped).Round(time.Millisecond))

	start := time.Now()
	code, _, stderr := kfsniff(t, "-r", fixture("basic.pcap"), "--metrics-addr", "127.0.0.1:0", "--metrics-linger", "1s")
	if took := time.Since(start); code != exitOK || took < time.Second || took > 10*time.Second {
		t.Errorf("unscraped, --metrics-linger 1s: exit %d after %s: %s", code, took, stderr)
	}
	if code, _, stderr := kfsniff(t, "-r", fixture("basic.pcap"), "--metrics-linger", "1s"); code != exitUsage || !strings.Contains(stderr, "--metrics-linger needs --metrics-addr") {
		t.Errorf("--metrics-linger alone: exit %d, %q", code, stderr)
	}
}

// TestMetricsAddrUsage: a malformed address or a port in use is a usage
// error before anything is read.
func TestMetricsAddrUsage(t *testing.T) {
	code, _, stderr := kfsniff(t, "-r", fixture("basic.pcap"), "--metrics-addr", "9464")
	if code != exitUsage || !strings.Contains(stderr, "--metrics-addr") {
		t.Errorf("--metrics-addr 9464: exit %d, %q; want a usage error naming the flag", code, stderr)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	code, stdout, stderr := kfsniff(t, "-r", fixture("basic.pcap"), "--metrics-addr", busy.Addr().String())
	if code != exitUsage || !strings.Contains(stderr, "--metrics-addr") || stdout != "" {
		t.Errorf("--metrics-addr %s (in use): exit %d, stdout %.80q, stderr %q; want a usage error and no report", busy.Addr(), code, stdout, stderr)
	}
}
