package slowresponses_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/slowresponses"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

const broker = "10.1.0.10:9092"

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

func produce(v int16, throttleMs int32) func() (kmsg.Request, kmsg.Response) {
	return func() (kmsg.Request, kmsg.Response) { return dt.Produce(v), dt.Produced(v, 0, throttleMs) }
}

func fetch(maxWaitMs int32) func() (kmsg.Request, kmsg.Response) {
	return func() (kmsg.Request, kmsg.Response) { return dt.Fetch(maxWaitMs), dt.Fetched(0, 0) }
}

// series schedules n exchanges on a connection of their own from client,
// one every step from at, each answered lat after its request.
func series(h *dt.Harness, tl *dt.Timeline, client, clientID string, at, step time.Duration, n int, lat time.Duration,
	mk func() (kmsg.Request, kmsg.Response)) {
	tl.Every(h.Conn(client, broker), dt.At(at), step, n, lat, clientID, mk)
}

// fastProduce: 100 Produce answered in lat, 50 ms apart from 1 s, the
// API's usual latency.
func fastProduce(h *dt.Harness, tl *dt.Timeline, lat time.Duration) {
	series(h, tl, "10.2.0.5:40000", "producer-1", time.Second, 50*time.Millisecond, 100, lat, produce(9, 0))
}

// slowProduce: n Produce answered in lat, 4 s apart from 2 s.
func slowProduce(h *dt.Harness, tl *dt.Timeline, n int, lat time.Duration) {
	series(h, tl, "10.2.0.6:40000", "producer-2", 2*time.Second, 4*time.Second, n, lat, produce(9, 0))
}

// mix is a hundred exchanges answered in fast and n answered in slow:
// Produce, or Fetch with MaxWaitMillis maxWait if set.
type mix struct {
	fast    time.Duration
	n       int
	slow    time.Duration
	maxWait int32
}

func (m mix) schedule(h *dt.Harness, tl *dt.Timeline) {
	switch {
	case m.n == 0:
	case m.maxWait == 0:
		fastProduce(h, tl, m.fast)
		slowProduce(h, tl, m.n, m.slow)
	default:
		series(h, tl, "10.2.0.7:40000", "consumer-1", time.Second, 10*time.Millisecond, 100, m.fast, fetch(m.maxWait))
		series(h, tl, "10.2.0.8:40000", "consumer-2", time.Second, 7*time.Second, m.n, m.slow, fetch(m.maxWait))
	}
}

func TestSlowResponses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		// mix is the API's usual traffic with some slow exchanges,
		// traffic any other.
		mix         mix
		traffic     func(h *dt.Harness, tl *dt.Timeline)
		want        []dt.Want
		explanation []string
	}{
		{
			name: "five Produce answered after 3 s among a hundred in 2 ms: clients waited 3 s, a warning",
			mix:  mix{fast: ms(2), n: 5, slow: 3 * time.Second},
			want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &slowresponses.Finding{
					Slow: 5, Responses: 105, API: "Produce", MedianMs: 2.0, MaxMs: 3000.0, ThresholdMs: 1000.0,
					WaitedMs: 3000.0, ClientIDs: []string{"producer-2"}, Clients: []string{"10.2.0.6"},
					Servers: []string{broker},
				},
				Summary: []string{"5 Produce responses took over 1.0 s (median 2 ms, slowest 3.0 s) from " + broker},
			}},
			explanation: []string{"A client waited 3.0 s for one response."},
		},
		{
			name:        "near miss: five answered after 2.9 s: slow for the API, but under 3 s: info",
			mix:         mix{fast: ms(2), n: 5, slow: 2900 * time.Millisecond},
			want:        []dt.Want{{Severity: detectors.Info, Detail: &slowresponses.Finding{Slow: 5, WaitedMs: 2900.0}}},
			explanation: []string{"No client waited 3.0 s for one of them: info."},
		},
		{
			name: "near miss: only two slow of 2.9 s, below min-count and min-wait",
			mix:  mix{fast: ms(2), n: 2, slow: 2900 * time.Millisecond},
		},
		{
			name: "near miss the other way: three slow of 2.9 s, exactly min-count: info",
			mix:  mix{fast: ms(2), n: 3, slow: 2900 * time.Millisecond},
			want: []dt.Want{{Severity: detectors.Info, Detail: &slowresponses.Finding{Slow: 3}}},
		},
		{
			name:     "the two with min-count 2",
			settings: map[string]string{"min-count": "2"},
			mix:      mix{fast: ms(2), n: 2, slow: 2 * time.Second},
			want:     []dt.Want{{Severity: detectors.Info, Detail: &slowresponses.Finding{Slow: 2}}},
		},
		{
			name: "near miss: two Produce answered after 13 s are not yet a pattern (min-count)",
			mix:  mix{fast: ms(2), n: 2, slow: 13 * time.Second},
		},
		{
			name: "near miss: three Produce answered after 29.9 s: a warning",
			mix:  mix{fast: ms(2), n: 3, slow: 29900 * time.Millisecond},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &slowresponses.Finding{Slow: 3, WaitedMs: 29900.0}}},
		},
		{
			name: "near miss the other way: three Produce answered after 30 s: an error",
			mix:  mix{fast: ms(2), n: 3, slow: 30 * time.Second},
			want: []dt.Want{{Severity: detectors.Error, Detail: &slowresponses.Finding{Slow: 3, WaitedMs: 30000.0}}},
		},
		{
			name: "a broker slow on every Produce, 4 s each: slow whatever the median",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				series(h, tl, "10.2.0.5:40000", "producer-1", time.Second, 4100*time.Millisecond, 20, 4*time.Second, produce(9, 0))
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &slowresponses.Finding{
				Slow: 20, Responses: 20, MedianMs: 4000.0, ThresholdMs: 3000.0, WaitedMs: 4000.0,
			},
				Summary: []string{"20 Produce responses took over 3.0 s (median 4.0 s, slowest 4.0 s)"}}},
			explanation: []string{"took 3.0 s or more, which clients feel however slow the API usually is (median 4.0 s)"},
		},
		{
			name: "near miss: a broker slow on every Produce, 2.9 s each: not slow for the API, under min-wait",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				series(h, tl, "10.2.0.5:40000", "producer-1", time.Second, 3*time.Second, 20, 2900*time.Millisecond, produce(9, 0))
			},
		},
		{
			name:     "min-wait 5s: five Produce after 4 s are slow for the API, info",
			settings: map[string]string{"min-wait": "5s"},
			mix:      mix{fast: ms(2), n: 5, slow: 4 * time.Second},
			want:     []dt.Want{{Severity: detectors.Info, Detail: &slowresponses.Finding{Slow: 5}}},
		},
		{
			name: "near miss: expired long polls, 500 ms with MaxWaitMillis 500, among fast fetches",
			mix:  mix{fast: ms(0.6), n: 10, slow: ms(500), maxWait: 500},
		},
		{
			name: "near miss: Fetch with MaxWaitMillis 5000 answered after 5.5 s, within the wait and min-latency",
			mix:  mix{fast: ms(1), n: 10, slow: ms(5500), maxWait: 5000},
		},
		{
			name: "near miss the other way: Fetch with MaxWaitMillis 5000 answered after 6.1 s: slow, 1.1 s beyond the wait (info)",
			mix:  mix{fast: ms(1), n: 10, slow: ms(6100), maxWait: 5000},
			want: []dt.Want{{Severity: detectors.Info, Detail: &slowresponses.Finding{
				Slow: 10, API: "Fetch", MaxMs: 6100.0, WaitedMs: 1100.0,
			},
				Summary: []string{"10 Fetch responses took over 1.0 s beyond MaxWaitMillis"}}},
		},
		{
			name: "near miss: Fetch with MaxWaitMillis 5000 answered after 7.9 s: 2.9 s beyond the wait (info)",
			mix:  mix{fast: ms(1), n: 10, slow: ms(7900), maxWait: 5000},
			want: []dt.Want{{Severity: detectors.Info, Detail: &slowresponses.Finding{Slow: 10, WaitedMs: 2900.0}}},
		},
		{
			name:        "near miss the other way: answered after 8 s: 3 s beyond the wait, a warning",
			mix:         mix{fast: ms(1), n: 10, slow: ms(8000), maxWait: 5000},
			want:        []dt.Want{{Severity: detectors.Warning, Detail: &slowresponses.Finding{Slow: 10, WaitedMs: 3000.0}}},
			explanation: []string{"A client waited 3.0 s beyond MaxWaitMillis for one response."},
		},
		{
			name: "Fetch with MaxWaitMillis 500 answered after 3.5 s",
			mix:  mix{fast: ms(20), n: 5, slow: 3500 * time.Millisecond, maxWait: 500},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &slowresponses.Finding{
				Slow: 5, Responses: 105, API: "Fetch", MaxMs: 3500.0, WaitedMs: 3000.0,
				ClientIDs: []string{"consumer-2"},
			}}},
		},
		{
			name: "near miss: Fetches whose request body was lost are not judged (MaxWaitMillis unknown)",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				series(h, tl, "10.2.0.7:40000", "consumer-1", time.Second, 10*time.Millisecond, 100, ms(20), fetch(500))
				tl.Run()
				c := h.Conn("10.2.0.8:40000", broker)
				for i := range 5 {
					at := dt.At(3*time.Second + time.Duration(i)*4*time.Second)
					q := flowstest.MakeRequest(c, at, int32(i+1), "consumer-2", dt.Fetch(500))
					q.Req = nil
					h.RoundTrip(c, q, flowstest.MakeResponse(q, at.Add(4*time.Second), dt.Fetched(0, 0)))
				}
			},
		},
		{
			name: "near miss: 2 s is only five times a 400 ms median",
			mix:  mix{fast: ms(400), n: 5, slow: 2 * time.Second},
		},
		{
			name: "near miss the other way: 2 s is thirteen times a 150 ms median (info)",
			mix:  mix{fast: ms(150), n: 5, slow: 2 * time.Second},
			want: []dt.Want{{Severity: detectors.Info, Detail: &slowresponses.Finding{Slow: 5}}},
		},
		{
			name:     "the 400 ms median with factor 4",
			settings: map[string]string{"factor": "4"},
			mix:      mix{fast: ms(400), n: 5, slow: 2 * time.Second},
			want:     []dt.Want{{Severity: detectors.Info, Detail: &slowresponses.Finding{Slow: 5, ThresholdMs: 1600.0}}},
		},
		{
			name: "near miss: 900 ms is 900 times the median but under min-latency",
			mix:  mix{fast: ms(1), n: 5, slow: 900 * time.Millisecond},
		},
		{
			name: "near miss: exactly min-latency is not over it",
			mix:  mix{fast: ms(1), n: 5, slow: time.Second},
		},
		{
			name: "near miss the other way: 1.1 s is over min-latency (info)",
			mix:  mix{fast: ms(1), n: 5, slow: 1100 * time.Millisecond},
			want: []dt.Want{{Severity: detectors.Info, Detail: &slowresponses.Finding{Slow: 5, MaxMs: 1100.0}}},
		},
		{
			name:     "900 ms with min-latency 500ms",
			settings: map[string]string{"min-latency": "500ms"},
			mix:      mix{fast: ms(1), n: 5, slow: 900 * time.Millisecond},
			want:     []dt.Want{{Severity: detectors.Info, Detail: &slowresponses.Finding{Slow: 5, MaxMs: 900.0}}},
		},
		{
			name:     "the old name min-latency-s, in seconds, still works",
			settings: map[string]string{"min-latency-s": "0.5"},
			mix:      mix{fast: ms(1), n: 5, slow: 900 * time.Millisecond},
			want:     []dt.Want{{Severity: detectors.Info, Detail: &slowresponses.Finding{Slow: 5, ThresholdMs: 500.0}}},
		},
		{
			name: "near miss: JoinGroup held 30 s for a rebalance",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				for i, client := range []string{"10.2.1.1:40000", "10.2.1.2:40000", "10.2.1.3:40000", "10.2.1.4:40000"} {
					c := h.Conn(client, broker)
					tl.Call(c, dt.At(time.Second+time.Duration(i)*ms(10)), ms(1), "member", dt.Join("", 60000), dt.Joined(79, "m"))
					tl.Call(c, dt.At(2*time.Second), 30*time.Second, "member", dt.Join("m", 60000), dt.Joined(0, "m"))
				}
			},
		},
		{
			name: "near miss: Produce v1 held back by a 3 s quota throttle (before KIP-219)",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				series(h, tl, "10.2.0.5:40000", "old-producer", time.Second, 50*time.Millisecond, 100, ms(2), produce(1, 0))
				series(h, tl, "10.2.0.6:40000", "old-producer", 2*time.Second, 4*time.Second, 5, 3*time.Second+ms(2), produce(1, 3000))
			},
		},
		{
			name: "the same on Produce v9, which is throttled after its response (KIP-219), is slow",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				series(h, tl, "10.2.0.5:40000", "producer", time.Second, 50*time.Millisecond, 100, ms(2), produce(9, 0))
				series(h, tl, "10.2.0.6:40000", "producer", 2*time.Second, 4*time.Second, 5, 3*time.Second+ms(2), produce(9, 3000))
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &slowresponses.Finding{Slow: 5}}},
		},
		{
			name: "one finding per API",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				fastProduce(h, tl, ms(2))
				slowProduce(h, tl, 3, 3*time.Second)
				series(h, tl, "10.2.0.7:40000", "consumer-1", time.Second, 10*time.Millisecond, 100, ms(20), fetch(500))
				series(h, tl, "10.2.0.8:40000", "consumer-2", time.Second, 4*time.Second, 4, 3*time.Second, fetch(500))
			},
			want: []dt.Want{
				{Severity: detectors.Warning, Detail: &slowresponses.Finding{API: "Produce", Slow: 3}},
				{Severity: detectors.Info, Detail: &slowresponses.Finding{API: "Fetch", Slow: 4}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, map[string]map[string]string{"slow-responses": tc.settings}, slowresponses.Analyzer)
			tl := dt.NewTimeline(h)
			tc.mix.schedule(h, tl)
			if tc.traffic != nil {
				tc.traffic(h, tl)
			}
			tl.Run()
			fs := h.Findings()
			dt.Check(t, fs, "slow-responses", tc.want...)
			for _, f := range fs {
				if f.Counts["slow"] > 1 && len(f.Evidence) < 2 {
					t.Errorf("evidence %v: want the first, last and slowest", f.Evidence)
				}
				for _, e := range tc.explanation {
					if !strings.Contains(f.Explanation, e) {
						t.Errorf("explanation %q lacks %q", f.Explanation, e)
					}
				}
			}
		})
	}
}

// TestSlowResponsesProse: one slow response is "1 ... response"; the
// slowest are listed slowest first by the time that made them slow, the
// time beyond MaxWaitMillis, with the whole latency beside it.
func TestSlowResponsesProse(t *testing.T) {
	h := dt.New(t, map[string]map[string]string{"slow-responses": {"min-count": "1"}}, slowresponses.Analyzer)
	tl := dt.NewTimeline(h)
	fastProduce(h, tl, ms(2))
	slowProduce(h, tl, 1, 1500*time.Millisecond)
	series(h, tl, "10.2.0.7:40000", "consumer-1", time.Second, 10*time.Millisecond, 100, ms(20), fetch(500))
	series(h, tl, "10.2.0.8:40000", "consumer-2", 2*time.Second, time.Second, 1, 3*time.Second, fetch(500))
	series(h, tl, "10.2.0.9:40000", "consumer-3", 3*time.Second, time.Second, 1, 2900*time.Millisecond, fetch(100))
	tl.Run()
	fs := h.Findings()
	if len(fs) != 2 {
		t.Fatalf("findings:%s", dt.Describe(fs))
	}
	prod, fet := fs[0], fs[1]
	if prod.Detail.(*slowresponses.Finding).API != "Produce" {
		prod, fet = fet, prod
	}
	if want := "1 Produce response took over 1.0 s (median 2 ms, slowest 1.5 s)"; !strings.HasPrefix(prod.Summary, want) {
		t.Errorf("summary %q, want %q...", prod.Summary, want)
	}
	if want := "The slowest: packet "; !strings.Contains(prod.Explanation, want) || !strings.Contains(prod.Explanation, ", 1.5 s. ") {
		t.Errorf("explanation %q lacks the slowest at 1.5 s", prod.Explanation)
	}
	if !strings.Contains(prod.Next, "--api Produce --client-id producer-2 ") {
		t.Errorf("next %q: no filter on the one client id", prod.Next)
	}
	e := fet.Explanation
	i, j := strings.Index(e, ", 2.8 s (2.9 s in all); packet "), strings.Index(e, ", 2.5 s (3.0 s in all)")
	if !strings.Contains(e, "The slowest beyond MaxWaitMillis: packet ") || i < 0 || j < i {
		t.Errorf("explanation %q: want the 2.8 s beyond MaxWaitMillis 100 first, then the 2.5 s beyond 500", e)
	}
	if strings.Contains(fet.Next, "--client-id") {
		t.Errorf("next %q filters on one of two client ids", fet.Next)
	}
}

// TestSlowResponsesSplitOnce: an exchange read back from an agent's
// records comes once per partition, the further ones marked Again; it is
// one slow response, not one per partition.
func TestSlowResponsesSplitOnce(t *testing.T) {
	h := dt.New(t, map[string]map[string]string{"slow-responses": {"min-count": "1"}}, slowresponses.Analyzer)
	tl := dt.NewTimeline(h)
	fastProduce(h, tl, ms(2))
	tl.Run()
	c := h.Conn("10.2.0.6:40000", broker)
	q, r := h.Call(c, dt.At(10*time.Second), 3*time.Second, "producer-2", dt.Produce(9), dt.Produced(9, 0, 0))
	for range 2 {
		h.Exchange(&flows.Exchange{Conn: c, Req: q, Resp: r, Again: true})
	}
	fs := h.Findings()
	if len(fs) != 1 {
		t.Fatalf("findings:%s", dt.Describe(fs))
	}
	if want := "1 Produce response took over 1.0 s"; !strings.HasPrefix(fs[0].Summary, want) {
		t.Errorf("summary %q, want %q...: the exchange's further partitions counted again", fs[0].Summary, want)
	}
}
