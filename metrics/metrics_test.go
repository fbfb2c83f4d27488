package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
	"github.com/kfsniff/kfsniff/internal/promtest"
	"github.com/kfsniff/kfsniff/metrics"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
	"github.com/kfsniff/kfsniff/tui"
)

func gather(t *testing.T, m *metrics.Metrics) promtest.Scrape {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	return promtest.FromFamilies(fams)
}

// apiLabel is the api label of a report row.
func apiLabel(a report.API) (string, string) {
	if !decode.KnownKey(a.Key) {
		return "unknown", "unknown"
	}
	if !decode.KnownVersion(a.Key, a.Version) {
		return a.Name, "unknown"
	}
	return a.Name, strconv.Itoa(int(a.Version))
}

// TestAgreesWithReport analyses committed captures (recorded kgo/kfake
// traffic, incident scenarios with error codes, lossy and mid-stream
// captures) with the metrics handler beside the report's collector, on one
// worker and on two: every count the report gives per API and version
// (requests, responses, error responses, unanswered, error codes by name),
// the latency histogram's count, unmatched responses, connections opened
// and request bytes are the same in the metrics; and the terminal UI's
// per-API counts (agreeUI) are the metrics', all three counting through
// collect.CountRequest and CountExchange.
func TestAgreesWithReport(t *testing.T) {
	files := []string{
		"recorded-kgo-kfake-group.pcap", "recorded-kgo-kfake-admin.pcap", "recorded-kgo-kfake-apiversions-fallback.pcap",
		"scenarios/observer-fetch-loop.pcap", "scenarios/election-stall.pcap", "scenarios/mm2-replay.pcap",
		"loss.pcap", "midstream.pcap", "pipelining.pcap", "refused.pcap", "reuse-pending.pcap",
		"clients/unanswered-kgo.pcap", "clients/rebalance-kgo-consumer.pcap", "clients/kafka40-librdkafka.pcap",
	}
	files = append(files, inferredCapture(t))
	var errorCodes, unanswered, refused float64
	for _, name := range files {
		for _, workers := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d", name, workers), func(t *testing.T) {
				path := name
				if !filepath.IsAbs(path) {
					path = filepath.Join("..", "fixtures", "pcaps", name)
				}
				f, err := capture.Open(path, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				m := metrics.New(metrics.Config{})
				ui := tui.NewModel(tui.ModelConfig{})
				res := pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{
					Flows: flows.DefaultConfig(), Handlers: []flows.Handler{m, ui}, Workers: workers,
					Progress: func(p pipeline.Progress) { m.Capture(p.Packets, p.Bytes, p.Live) },
				})
				s := gather(t, m)
				r := res.Report
				if r.Totals.Requests == 0 {
					t.Fatal("no request in the capture: nothing compared")
				}
				type row struct{ requests, responses, errResp, unanswered float64 }
				want := map[string]*row{}
				wantErrs := map[string]float64{}
				for _, a := range r.APIs {
					api, ver := apiLabel(a)
					k := api + "/" + ver
					if want[k] == nil {
						want[k] = &row{}
					}
					w := want[k]
					w.requests += float64(a.Requests)
					w.responses += float64(a.Responses)
					w.errResp += float64(a.ErrorResponses)
					w.unanswered += float64(a.Unanswered)
					for e, n := range a.Errors {
						if strings.HasPrefix(e, "UNKNOWN_ERROR_CODE_") {
							e = "UNKNOWN_ERROR_CODE"
						}
						wantErrs[k+"/"+e] += float64(n)
					}
				}
				for _, c := range []struct {
					metric string
					get    func(*row) float64
				}{
					{"kfsniff_requests_total", func(w *row) float64 { return w.requests }},
					{"kfsniff_responses_total", func(w *row) float64 { return w.responses }},
					{"kfsniff_error_responses_total", func(w *row) float64 { return w.errResp }},
					{"kfsniff_unanswered_requests_total", func(w *row) float64 { return w.unanswered }},
				} {
					got := s.By(c.metric, nil, "api", "version")
					for k, w := range want {
						if got[k] != c.get(w) {
							t.Errorf("%s{%s}: %v; the report says %v", c.metric, k, got[k], c.get(w))
						}
					}
					for k, v := range got {
						if want[k] == nil && v != 0 {
							t.Errorf("%s{%s}: %v; the report has no such API", c.metric, k, v)
						}
					}
				}
				gotErrs := s.By("kfsniff_response_errors_total", nil, "api", "version", "error")
				for k, n := range wantErrs {
					if gotErrs[k] != n {
						t.Errorf("kfsniff_response_errors_total{%s}: %v; the report says %v", k, gotErrs[k], n)
					}
				}
				for k, n := range gotErrs {
					if wantErrs[k] != n {
						t.Errorf("kfsniff_response_errors_total{%s}: %v; the report says %v", k, n, wantErrs[k])
					}
					errorCodes += n
				}
				agreeUI(t, s, ui.Stats(), r.Totals.UnmatchedResponses)
				lat := s.By("kfsniff_response_latency_seconds", nil, "api")
				resp := s.By("kfsniff_responses_total", nil, "api")
				for api, n := range resp {
					if lat[api] != n {
						t.Errorf("latency histogram of %s counts %v responses; %v responses", api, lat[api], n)
					}
				}
				if got := s.Sum("kfsniff_unmatched_responses_total", nil); got != float64(r.Totals.UnmatchedResponses) {
					t.Errorf("unmatched responses %v; the report says %d", got, r.Totals.UnmatchedResponses)
				}
				if got := s.Sum("kfsniff_connections_opened_total", nil); got != float64(r.Totals.KafkaConnections) {
					t.Errorf("connections opened %v; the report has %d Kafka connections", got, r.Totals.KafkaConnections)
				}
				failed := s.Sum("kfsniff_connection_attempts_failed_total", nil)
				if want := float64(r.Totals.RefusedConnections + r.Totals.UnansweredSYNs); failed != want {
					t.Errorf("failed connection attempts %v; the report says %v", failed, want)
				}
				refused += failed
				if got := s.Sum("kfsniff_capture_packets_total", nil); got != float64(r.Capture.Packets) {
					t.Errorf("packets %v; the report says %d", got, r.Capture.Packets)
				}
				// Request frames make up the bytes to the server when
				// nothing was skipped (no loss, no mid-stream start).
				var toServer int64
				for _, c := range r.Connections {
					toServer += c.BytesToServer
				}
				if len(r.Totals.SkippedBytes) == 0 && r.Totals.Gaps == 0 {
					if got := s.Sum("kfsniff_request_bytes_total", nil); got != float64(toServer) {
						t.Errorf("request bytes %v; the connections carried %d bytes to the servers", got, toServer)
					}
				}
				unanswered += s.Sum("kfsniff_unanswered_requests_total", nil)
			})
		}
	}
	// The captures must exercise what is compared.
	if errorCodes == 0 || unanswered == 0 || refused == 0 {
		t.Errorf("over all captures: %v error codes, %v unanswered requests, %v failed attempts; want some of each", errorCodes, unanswered, refused)
	}
}

// inferredCapture writes a capture joined while a connection was idle:
// answers to requests sent before it began, two of them decoded as the
// API of the connection's next request (flows infers it), one not, then an
// error response. Unmatched responses are not an API's responses, even
// when their API is inferred.
func inferredCapture(t *testing.T) string {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	meta := func() *kmsg.MetadataResponse {
		r := kmsg.NewPtrMetadataResponse()
		r.Version = 12
		r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "10.0.0.2", Port: 9092}}
		return r
	}
	b, err := gen.Script(func(w *gen.Writer) {
		c := w.Conn(netip.MustParseAddrPort("10.0.0.1:50000"), netip.MustParseAddrPort("10.0.0.2:9092"), t0, gen.ConnOptions{NoHandshake: true})
		c.Response(t0, 40, meta())
		av := kmsg.NewPtrApiVersionsResponse()
		av.Version = 3
		c.Response(t0.Add(time.Second), 41, av)
		c.Response(t0.Add(2*time.Second), 42, meta())
		id := "c"
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		c.Request(t0.Add(3*time.Second), 43, &id, req)
		bad := meta()
		bad.ErrorCode = 29 // CLUSTER_AUTHORIZATION_FAILED
		c.Response(t0.Add(3*time.Second+time.Millisecond), 43, bad)
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "inferred.pcap")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// agreeUI checks that the terminal UI's counts per API key (stats) are
// the metrics' per API, all versions and brokers together (s), and that
// its row of unmatched responses holds the report's unmatched.
func agreeUI(t *testing.T, s promtest.Scrape, stats []tui.APIStats, unmatched int64) {
	t.Helper()
	type row struct{ requests, responses, errResp, unanswered, errs float64 }
	got := map[string]*row{}
	for _, a := range stats {
		if a.Key == -1 {
			if a.Responses != unmatched || a.Requests != 0 {
				t.Errorf("the UI's unmatched row has %d requests and %d responses; the report has %d unmatched", a.Requests, a.Responses, unmatched)
			}
			continue
		}
		g := &row{float64(a.Requests), float64(a.Responses), float64(a.ErrorResponses), float64(a.Unanswered), 0}
		for _, e := range a.Errors {
			g.errs += float64(e.Count)
		}
		got[a.Name] = g
	}
	for _, c := range []struct {
		metric string
		get    func(*row) float64
	}{
		{"kfsniff_requests_total", func(g *row) float64 { return g.requests }},
		{"kfsniff_responses_total", func(g *row) float64 { return g.responses }},
		{"kfsniff_error_responses_total", func(g *row) float64 { return g.errResp }},
		{"kfsniff_unanswered_requests_total", func(g *row) float64 { return g.unanswered }},
		{"kfsniff_response_errors_total", func(g *row) float64 { return g.errs }},
	} {
		want := s.By(c.metric, nil, "api")
		for api, g := range got {
			if c.get(g) != want[api] {
				t.Errorf("the UI counts %v for %s in %s; the metrics %v", c.get(g), api, c.metric, want[api])
			}
		}
		for api, v := range want {
			if got[api] == nil && v != 0 {
				t.Errorf("%s{api=%s}: %v; the UI has no such API", c.metric, api, v)
			}
		}
	}
}

// conn makes a connection from a client to a broker endpoint.
func conn(client, server string) *flows.Conn {
	return flows.MakeConn(netip.MustParseAddrPort(client), netip.MustParseAddrPort(server))
}

func metadata(c *flows.Conn, at time.Time, corr int32, clientID string) (*flows.Message, *flows.Message) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	m := flowstest.MakeRequest(c, at, corr, clientID, req)
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr("gone")
	t.ErrorCode = 3
	resp.Topics = append(resp.Topics, t)
	return m, flowstest.MakeResponse(m, at.Add(3*time.Millisecond), resp)
}

// TestCaps: thousands of client ids (hostile ones among them: invalid
// UTF-8, control characters, 10 kB long) and hundreds of brokers give at
// most the capped label values plus "other", with every request still
// counted once, the folds counted, and label values printable.
func TestCaps(t *testing.T) {
	m := metrics.New(metrics.Config{MaxClientIDs: 20, MaxBrokers: 8, MaxSeries: 50})
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	hostile := []string{"\xff\xfe bad utf-8", "bell\x07\x1b[31mred", strings.Repeat("long", 2500), ""}
	const clients, brokers = 3000, 200
	requests := 0
	for i := range clients {
		id := fmt.Sprintf("consumer-%d", i)
		if i < len(hostile) {
			id = hostile[i]
		}
		c := conn(fmt.Sprintf("10.0.%d.%d:40000", i/250, i%250+1), fmt.Sprintf("10.1.0.%d:9092", i%brokers+1))
		req, resp := metadata(c, at, int32(i), id)
		m.OnRequest(req)
		m.OnExchange(&flows.Exchange{Conn: c, Req: req, Resp: resp})
		requests++
	}
	s := gather(t, m)
	if got := s.Sum("kfsniff_requests_total", nil); got != float64(requests) {
		t.Errorf("requests %v; sent %d", got, requests)
	}
	if got := s.Sum("kfsniff_client_requests_total", nil); got != float64(requests) {
		t.Errorf("requests by client id %v; sent %d", got, requests)
	}
	ids := s.Values("kfsniff_client_requests_total", "client_id")
	if len(ids) != 21 || !contains(ids, metrics.Other) {
		t.Errorf("%d client ids (%.200q...); want 20 and other", len(ids), ids)
	}
	for _, id := range ids {
		if !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl) || len(id) > 1024 {
			t.Errorf("client id label %.80q is not clean and bounded", id)
		}
	}
	if got, want := s.Sum("kfsniff_client_requests_total", map[string]string{"client_id": metrics.Other}), float64(clients-20); got != want {
		t.Errorf("client_id=other counts %v requests; want %v", got, want)
	}
	if got := s.Sum("kfsniff_metrics_folded_total", map[string]string{"label": "client_id"}); got != float64(clients-20) {
		t.Errorf("folded client ids %v; want %d", got, clients-20)
	}
	bs := s.Values("kfsniff_requests_total", "broker")
	if len(bs) != 9 || !contains(bs, metrics.Other) {
		t.Errorf("brokers %q; want 8 and other", bs)
	}
	if got := s.Sum("kfsniff_client_error_responses_total", nil); got != float64(requests) {
		t.Errorf("error responses by client %v; want %d (every answer carried an error)", got, requests)
	}
	if got := s.Sum("kfsniff_response_errors_total", map[string]string{"error": "UNKNOWN_TOPIC_OR_PARTITION"}); got != float64(requests) {
		t.Errorf("UNKNOWN_TOPIC_OR_PARTITION %v; want %d", got, requests)
	}

	// Past MaxSeries, (api, version) combinations are folded.
	c := conn("10.9.0.1:40000", "10.1.0.1:9092")
	n := 0
	for key := int16(0); key < 80; key++ {
		if !decode.KnownKey(key) {
			continue
		}
		for v := int16(0); v <= decode.MaxVersion(key); v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			m.OnRequest(flowstest.MakeRequest(c, at, int32(n), "versions", req))
			n++
		}
	}
	m.OnRequest(&flows.Message{Conn: &c.ConnInfo, Key: 9999, Version: 3, Size: 12}) // an unknown key
	n++
	s = gather(t, m)
	series := len(s["kfsniff_requests_total"].GetMetric())
	if series > 51 {
		t.Errorf("%d (api, version, broker) series; want at most 50 and other", series)
	}
	if got := s.Sum("kfsniff_requests_total", nil); got != float64(requests+n) {
		t.Errorf("requests %v; sent %d", got, requests+n)
	}
	if s.Sum("kfsniff_requests_total", map[string]string{"api": metrics.Other}) == 0 || s.Sum("kfsniff_metrics_folded_total", map[string]string{"label": "series"}) == 0 {
		t.Error("no request folded into api=other past MaxSeries")
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestConnectionRoles: a connection counts in each role it carried until
// it closes, or until it has been idle for IdleAfter of capture time.
func TestConnectionRoles(t *testing.T) {
	m := metrics.New(metrics.Config{IdleAfter: time.Minute})
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	roles := func() map[string]float64 { return gather(t, m).By("kfsniff_connections", nil, "role") }
	cons := conn("10.0.0.1:40000", "10.1.0.1:9092")
	prod := conn("10.0.0.2:40000", "10.1.0.1:9092")
	for i, c := range []*flows.Conn{cons, prod} {
		m.OnConnEvent(&flows.ConnEvent{Kind: flows.ConnOpened, Conn: c})
		req, _ := metadata(c, at, int32(i), "app")
		m.OnRequest(req)
	}
	f := kmsg.NewPtrFetchRequest()
	f.SetVersion(12)
	f.ReplicaID = -1
	m.OnRequest(flowstest.MakeRequest(cons, at, 5, "app", f))
	m.OnRequest(flowstest.MakeRequest(cons, at, 6, "app", f)) // a role counts once per connection
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(9)
	m.OnRequest(flowstest.MakeRequest(prod, at.Add(50*time.Second), 7, "app", p))
	if got := roles(); got["metadata"] != 2 || got["consumer"] != 1 || got["producer"] != 1 || got["admin"] != 0 {
		t.Fatalf("roles %v; want metadata 2, consumer 1, producer 1", got)
	}
	m.OnConnEvent(&flows.ConnEvent{Kind: flows.ConnClosed, Conn: cons})
	if got := roles(); got["metadata"] != 1 || got["consumer"] != 0 || got["producer"] != 1 {
		t.Errorf("after the consumer closed: roles %v; want metadata 1, producer 1", got)
	}
	// Requests on a third connection move the capture's clock on.
	other := conn("10.0.0.3:40000", "10.1.0.2:9092")
	req, _ := metadata(other, at.Add(90*time.Second), 8, "app")
	m.OnRequest(req) // the producer's last request was 40 s ago
	if got := roles(); got["producer"] != 1 || got["metadata"] != 2 {
		t.Errorf("roles %v 40 s after the producer's last request; want it and the new connection open", got)
	}
	req, _ = metadata(other, at.Add(111*time.Second), 9, "app")
	m.OnRequest(req)
	if got := roles(); got["metadata"] != 1 || got["producer"] != 0 {
		t.Errorf("roles %v after the producer's connection was 61 s idle; want only the new connection's metadata", got)
	}
	s := gather(t, m)
	if s.Sum("kfsniff_connections_opened_total", nil) != 2 || s.Sum("kfsniff_connections_closed_total", nil) != 1 {
		t.Errorf("opened %v, closed %v; want 2, 1", s.Sum("kfsniff_connections_opened_total", nil), s.Sum("kfsniff_connections_closed_total", nil))
	}
}

// TestNativeHistograms: a scraper that asks for the protobuf format (as
// Prometheus does with native histograms enabled) gets the latency as a
// native histogram (exponential schema, populated spans) besides the
// classic buckets; one asking for text gets the classic buckets.
func TestNativeHistograms(t *testing.T) {
	m := metrics.New(metrics.Config{})
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := conn("10.0.0.1:40000", "10.1.0.1:9092")
	for i := range 100 {
		req, _ := metadata(c, at, int32(i), "app")
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(12)
		m.OnRequest(req)
		m.OnExchange(&flows.Exchange{Conn: c, Req: req, Resp: flowstest.MakeResponse(req, at.Add(time.Duration(i+1)*time.Millisecond), resp)})
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	get := func(accept string) (*http.Response, []byte) {
		r, _ := http.NewRequest("GET", srv.URL, nil)
		r.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, body := get(`application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited`)
	dec := expfmt.NewDecoder(bytes.NewReader(body), expfmt.ResponseFormat(resp.Header))
	var h *dto.Histogram
	for {
		var f dto.MetricFamily
		if err := dec.Decode(&f); err != nil {
			break
		}
		if f.GetName() == "kfsniff_response_latency_seconds" {
			h = f.GetMetric()[0].GetHistogram()
		}
	}
	if h == nil {
		t.Fatalf("no latency histogram in the protobuf scrape (%s)", resp.Header.Get("Content-Type"))
	}
	if h.GetSampleCount() != 100 || h.Schema == nil || len(h.GetPositiveSpan()) == 0 || len(h.GetBucket()) != len(metrics.LatencyBuckets) {
		t.Errorf("histogram: %d samples, schema %v, %d spans, %d classic buckets; want 100, a native schema with spans, and the classic buckets",
			h.GetSampleCount(), h.Schema, len(h.GetPositiveSpan()), len(h.GetBucket()))
	}
	// Half of the latencies (1 to 100 ms) are at most 50 ms: the native
	// buckets hold them where they belong.
	var below, n float64
	idx := int32(0)
	base := math.Pow(2, math.Pow(2, float64(-h.GetSchema())))
	deltas := h.GetPositiveDelta()
	var count int64
	d := 0
	for _, sp := range h.GetPositiveSpan() {
		idx += sp.GetOffset()
		for j := uint32(0); j < sp.GetLength(); j++ {
			count += deltas[d]
			d++
			if upper := math.Pow(base, float64(idx)); upper <= 0.0505 {
				below += float64(count)
			}
			n += float64(count)
			idx++
		}
	}
	if n != 100 || below < 45 || below > 55 {
		t.Errorf("native buckets: %v samples, %v at most ~50 ms; want 100 and about 50", n, below)
	}
	_, text := get("text/plain")
	if !bytes.Contains(text, []byte(`kfsniff_response_latency_seconds_bucket{api="Metadata",broker="10.1.0.1:9092",le="0.05"} 50`)) {
		t.Errorf("text scrape lacks the classic bucket le=0.05 with 50 samples:\n%s", grepLines(text, "latency_seconds_bucket"))
	}
}

func grepLines(b []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestProcessAndGoMetrics: the scrape carries the Go runtime's and the
// process's metrics (prometheus's Go and process collectors), as
// dashboards of any Go service expect.
func TestProcessAndGoMetrics(t *testing.T) {
	m := metrics.New(metrics.Config{})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds", "process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds"} {
		if !bytes.Contains(b, []byte("\n"+name+" ")) && !bytes.Contains(b, []byte("\n"+name+"{")) {
			t.Errorf("the scrape has no %s", name)
		}
	}
}
