package metrics_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
	"github.com/kfsniff/kfsniff/metrics"
)

// errorStorm feeds m one answered exchange per broker of brokers, (api,
// version) pair of pairs and error code of codes, each response carrying
// that code: the fan-out issue 31 found (64 x 16 x 136). It returns how
// many error codes were counted.
func errorStorm(m *metrics.Metrics, brokers, pairs int, codes []int16) int {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var kv [][2]int16
	for key := int16(0); len(kv) < pairs && key < 100; key++ {
		if decode.KnownKey(key) {
			kv = append(kv, [2]int16{key, decode.MaxVersion(key)})
		}
	}
	n, corr := 0, int32(0)
	for b := range brokers {
		c := conn(fmt.Sprintf("10.0.0.%d:40000", b+1), fmt.Sprintf("10.1.%d.%d:9092", b/250, b%250+1))
		for _, p := range kv {
			for _, code := range codes {
				req := kmsg.RequestForKey(p[0])
				req.SetVersion(p[1])
				corr++
				rq := flowstest.MakeRequest(c, at, corr, "storm", req)
				m.OnRequest(rq)
				resp := &flows.Message{Conn: &c.ConnInfo, Key: p[0], Version: p[1], Time: at.Add(time.Millisecond), Size: 20,
					ErrorCodes: []flows.ErrorCount{{Code: code, Count: 1}}}
				m.OnExchange(&flows.Exchange{Conn: c, Req: rq, Resp: resp})
				n++
			}
		}
	}
	return n
}

// allCodes are the 136 error codes Kafka defines past 0, and -1.
func allCodes() []int16 {
	var cs []int16
	for c := int16(-1); c < 200 && len(cs) < 136; c++ {
		if c != 0 {
			cs = append(cs, c)
		}
	}
	return cs
}

// TestErrorSeriesBounded: kfsniff_response_errors_total fanned out over
// broker x API x version x error code from wire values (64 x 16 x 136:
// 139,264 series). Per series at most MaxErrorNames error names get a
// label of their own and MaxErrorSeries in all, the rest "other"; every
// code is still counted; the scrape stays small and 8 concurrent scrapes
// take little memory.
func TestErrorSeriesBounded(t *testing.T) {
	m := metrics.New(metrics.Config{})
	sent := errorStorm(m, 64, 16, allCodes())
	s := gather(t, m)
	if got := s.Sum("kfsniff_response_errors_total", nil); got != float64(sent) {
		t.Errorf("error codes counted %v; sent %d", got, sent)
	}
	errSeries := len(s["kfsniff_response_errors_total"].GetMetric())
	total := 0
	for _, f := range s {
		total += len(f.GetMetric())
	}
	// MaxErrorSeries (1024) named, and one "other" per (api, version,
	// broker) series (64 x 16).
	if errSeries > 1024+64*16 {
		t.Errorf("%d error series; want at most 1024 and 1024 \"other\"", errSeries)
	}
	if folded := s.Sum("kfsniff_metrics_folded_total", map[string]string{"label": "error"}); folded == 0 {
		t.Error("no error code folded into other")
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var size int64
	peak := before.HeapInuse
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				mu.Lock()
				peak = max(peak, ms.HeapInuse)
				mu.Unlock()
			}
		}
	}()
	codes := map[int]int{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			n, _ := scrapeBody(resp)
			mu.Lock()
			codes[resp.StatusCode]++
			size = max(size, n)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(stop)
	mu.Lock()
	grew := int64(peak) - int64(before.HeapInuse)
	mu.Unlock()
	t.Logf("%d error codes sent: %d error series, %d series in all; a scrape %d KiB; 8 concurrent scrapes %v, heap grew %d MiB",
		sent, errSeries, total, size>>10, codes, grew>>20)
	if size > 4<<20 {
		t.Errorf("a scrape is %d MiB", size>>20)
	}
	if grew > 64<<20 {
		t.Errorf("8 concurrent scrapes grew the heap by %d MiB", grew>>20)
	}
}

func scrapeBody(resp *http.Response) (int64, error) {
	defer resp.Body.Close()
	return io.Copy(io.Discard, resp.Body)
}

// FuzzLabels: whatever the wire gives as client ids, broker endpoints,
// API keys, versions and error codes, the label values are clean text
// (valid UTF-8, no control characters, bounded), every request and
// error code is counted, and each family's series stay within the caps
// (Config: client ids, brokers, (api, version, broker) series, error
// names per series and in all, each plus "other").
func FuzzLabels(f *testing.F) {
	f.Add([]byte("\x00\x01\x02\x03consumer-1\x00"), uint8(3))
	f.Add([]byte("\xff\xfe\x1b[31m\u202e\x00\x12\x07\x22"), uint8(200))
	f.Add(bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 'x', 0}, 40), uint8(255))
	f.Fuzz(func(t *testing.T, b []byte, step uint8) {
		cfg := metrics.Config{MaxClientIDs: 4, MaxBrokers: 3, MaxSeries: 6, MaxErrorNames: 2, MaxErrorSeries: 5}
		m := metrics.New(cfg)
		at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		requests, errs := 0, 0
		for i := 0; i+4 <= len(b) && requests < 256; {
			key := int16(b[i]) - 8 // unknown keys too
			ver := int16(b[i+1]%20) - 2
			code := int16(int8(b[i+2]))
			broker := b[i+3] % 7
			i += 4
			end := bytes.IndexByte(b[i:], 0)
			if end < 0 {
				end = len(b) - i
			}
			id := string(b[i : i+end])
			i += end + 1
			c := conn(fmt.Sprintf("10.0.0.%d:%d", step%250+1, 1024+requests), fmt.Sprintf("10.1.0.%d:9092", broker+1))
			rq := &flows.Message{Conn: &c.ConnInfo, Key: key, Version: ver, Client: cluster.Client{ID: id}, Time: at, Size: 12}
			m.OnRequest(rq)
			requests++
			resp := &flows.Message{Conn: &c.ConnInfo, Key: key, Version: ver, Time: at.Add(time.Millisecond), Size: 20}
			if code != 0 {
				resp.ErrorCodes = []flows.ErrorCount{{Code: code, Count: 1}}
				errs++
			}
			m.OnExchange(&flows.Exchange{Conn: c, Req: rq, Resp: resp})
		}
		s := gather(t, m)
		if got := s.Sum("kfsniff_requests_total", nil); got != float64(requests) {
			t.Fatalf("requests %v; sent %d", got, requests)
		}
		if got := s.Sum("kfsniff_response_errors_total", nil); got != float64(errs) {
			t.Fatalf("error codes %v; sent %d", got, errs)
		}
		limits := map[string]int{
			"kfsniff_client_requests_total":     cfg.MaxClientIDs + 1,
			"kfsniff_requests_total":            cfg.MaxSeries + 1,
			"kfsniff_response_errors_total":     cfg.MaxErrorSeries + cfg.MaxSeries + 1,
			"kfsniff_unmatched_responses_total": cfg.MaxBrokers + 1,
		}
		for name, max := range limits {
			if n := len(s[name].GetMetric()); n > max {
				t.Fatalf("%s: %d series, over %d", name, n, max)
			}
		}
		for _, fam := range s {
			for _, mt := range fam.GetMetric() {
				for _, l := range mt.GetLabel() {
					v := l.GetValue()
					if !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) || r == '\u202e' }) || len(v) > 4096 {
						t.Fatalf("%s{%s=%q}: not clean text", fam.GetName(), l.GetName(), v)
					}
				}
			}
		}
	})
}
