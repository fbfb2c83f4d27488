package throttled_test

import (
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/slowresponses"
	"github.com/kfsniff/kfsniff/detectors/throttled"
)

const broker, broker2 = "10.1.0.10:9092", "10.1.0.11:9092"

// produce sends Produce requests 200 ms apart from a second in, throttled
// by the given milliseconds in turn (0: not throttled).
func produce(h *dt.Harness, client, server, id string, version int16, throttles ...int32) {
	throttledEvery(h, client, server, id, version, 200*time.Millisecond, throttles...)
}

// throttledEvery sends Produce requests every apart from a second in,
// answered in 2 ms, throttled by the given milliseconds in turn (0: not
// throttled).
func throttledEvery(h *dt.Harness, client, server, id string, version int16, every time.Duration, throttles ...int32) {
	c := h.Conn(client, server)
	for i, ms := range throttles {
		h.Call(c, dt.At(time.Second+time.Duration(i)*every), 2*time.Millisecond, id, dt.Produce(version), dt.Produced(version, 0, ms))
	}
}

// waits is n throttles of ms each, then the tail.
func waits(n int, ms int32, tail ...int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = ms
	}
	return append(out, tail...)
}

func TestThrottled(t *testing.T) {
	dt.Run(t, throttled.Analyzer, []dt.Case{
		{
			Name: "a producer throttled on most responses for 3.3 s in all, then not: a warning",
			Traffic: func(h *dt.Harness) {
				throttledEvery(h, "10.2.0.5:40000", broker, "bulk-loader", 9, time.Second, 0, 500, 500, 0, 500, 800, 500, 500, 0)
			},
			Want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &throttled.Finding{
					Responses: 6, TotalMs: 3300, MaxMs: 800, HeldMs: 3300, ClientID: "bulk-loader",
					API: "Produce", Quota: "producer_byte_rate", Clients: []string{"10.2.0.5"},
					Servers: []string{broker}, AfterResponse: true, HeldS: 3.3, Ongoing: false,
				},
				Exact: []string{"Ongoing"},
				Summary: []string{`client "bulk-loader" throttled on Produce: 6 response(s), 3.3 s in all (longest 800 ms)`,
					"held up for 3.3 s"},
			}},
			Explanation: []string{"The waits held the client id up for 3.3 s, and then a response came without throttling."},
		},
		{
			Name:    "a single short throttle is info",
			Traffic: func(h *dt.Harness) { produce(h, "10.2.0.5:40000", broker, "app", 9, 0, 0, 120, 0, 0) },
			Want: []dt.Want{{Severity: detectors.Info, Detail: &throttled.Finding{
				Responses: 1, TotalMs: 120, MaxMs: 120,
			}}},
			Explanation: []string{"under 3.0 s: a short burst clients hardly felt"},
		},
		{
			Name: "near miss: held up for 2.9 s in all is info, however many responses",
			Traffic: func(h *dt.Harness) {
				throttledEvery(h, "10.2.0.5:40000", broker, "app", 9, time.Second, waits(29, 100, 0)...)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &throttled.Finding{Responses: 29, HeldMs: 2900, Ongoing: false},
				Exact: []string{"Ongoing"}}},
		},
		{
			Name: "near miss the other way: held up for 3 s in all is a warning",
			Traffic: func(h *dt.Harness) {
				throttledEvery(h, "10.2.0.5:40000", broker, "app", 9, time.Second, waits(30, 100, 0)...)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &throttled.Finding{Responses: 30, HeldMs: 3000}}},
		},
		{
			Name:    "a single throttle of 3 s is a warning",
			Traffic: func(h *dt.Harness) { throttledEvery(h, "10.2.0.5:40000", broker, "app", 9, 5*time.Second, 0, 3000, 0) },
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &throttled.Finding{
				Responses: 1, MaxMs: 3000, HeldMs: 3000,
			}}},
		},
		{
			Name: "near miss: waits overlapping on two connections count once: 5.8 s of throttle, held up 2.9 s",
			Traffic: func(h *dt.Harness) {
				throttledEvery(h, "10.2.0.5:40000", broker, "app", 9, 2*time.Second, 1450, 1450, 0)
				throttledEvery(h, "10.2.0.5:40001", broker2, "app", 9, 2*time.Second, 1450, 1450, 0)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &throttled.Finding{Responses: 4, TotalMs: 5800, HeldMs: 2900}}},
		},
		{
			Name: "near miss the other way: held up 30 s, healed: an error",
			Traffic: func(h *dt.Harness) {
				throttledEvery(h, "10.2.0.5:40000", broker, "app", 9, 1100*time.Millisecond, waits(30, 1000, 0)...)
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &throttled.Finding{HeldMs: 30000, Ongoing: false},
				Exact: []string{"Ongoing"}}},
		},
		{
			Name: "near miss: held up 29.9 s, healed, is a warning",
			Traffic: func(h *dt.Harness) {
				throttledEvery(h, "10.2.0.5:40000", broker, "app", 9, 1100*time.Millisecond, waits(29, 1000, 900, 0)...)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &throttled.Finding{
				HeldMs: 29900, Ongoing: false,
			}, Exact: []string{"Ongoing"}}},
		},
		{
			Name: "near miss: held up 9.9 s and still throttled at the end: a warning",
			Traffic: func(h *dt.Harness) {
				throttledEvery(h, "10.2.0.5:40000", broker, "app", 9, 1100*time.Millisecond, waits(9, 1000, 900)...)
			},
			Want:        []dt.Want{{Severity: detectors.Warning, Detail: &throttled.Finding{HeldMs: 9900, Ongoing: true}}},
			Explanation: []string{"its last response of the API in the capture was still throttled"},
		},
		{
			Name: "near miss the other way: held up 10 s and still throttled at the end: an error",
			Traffic: func(h *dt.Harness) {
				throttledEvery(h, "10.2.0.5:40000", broker, "app", 9, 1100*time.Millisecond, waits(10, 1000)...)
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &throttled.Finding{HeldMs: 10000, Ongoing: true},
				Summary: []string{"held up for 10.0 s, still throttled at the end"}}},
		},
		{
			Name: "near miss: held up 10 s, then a response without throttling: a warning",
			Traffic: func(h *dt.Harness) {
				throttledEvery(h, "10.2.0.5:40000", broker, "app", 9, 1100*time.Millisecond, waits(10, 1000, 0)...)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &throttled.Finding{
				HeldMs: 10000, Ongoing: false,
			}, Exact: []string{"Ongoing"}}},
		},
		{
			Name: "near miss: throttleTimeMs 0 everywhere",
			Traffic: func(h *dt.Harness) {
				produce(h, "10.2.0.5:40000", broker, "app", 9, 0, 0, 0, 0, 0, 0)
				c := h.Conn("10.2.0.6:40000", broker)
				for i := range 20 {
					h.Call(c, dt.At(time.Second+time.Duration(i)*100*time.Millisecond), time.Millisecond, "consumer", dt.Fetch(500), dt.Fetched(0, 0))
				}
			},
		},
		{
			Name:     "min-total raised: the throttled producer is info",
			Settings: map[string]string{"min-total": "10s"},
			Traffic: func(h *dt.Harness) {
				throttledEvery(h, "10.2.0.5:40000", broker, "bulk-loader", 9, time.Second, 0, 500, 500, 0, 500, 800, 500, 500)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &throttled.Finding{Responses: 6}}},
		},
		{
			Name:     "the old name of min-total, in milliseconds, still works",
			Settings: map[string]string{"min-total-ms": "1000"},
			Traffic:  func(h *dt.Harness) { throttledEvery(h, "10.2.0.5:40000", broker, "app", 9, time.Second, 600, 600, 0) },
			Want:     []dt.Want{{Severity: detectors.Warning, Detail: &throttled.Finding{HeldMs: 1200}}},
		},
		{
			Name: "per client id and API: two clients on two connections each, and a throttled Fetch",
			Traffic: func(h *dt.Harness) {
				throttledEvery(h, "10.2.0.5:40000", broker, "alpha", 9, time.Second, 800, 800)
				throttledEvery(h, "10.2.0.5:40001", broker2, "alpha", 9, time.Second, 800, 800)
				produce(h, "10.2.0.7:40000", broker, "beta", 9, 100)
				c := h.Conn("10.2.0.7:40001", broker)
				for i := range 4 {
					h.Call(c, dt.At(2*time.Second+time.Duration(i)*time.Second), time.Millisecond, "beta", dt.Fetch(500), dt.Fetched(0, 700))
				}
			},
			Want: []dt.Want{
				{Severity: detectors.Info, Detail: &throttled.Finding{
					Responses: 4, TotalMs: 3200, HeldMs: 1600, ClientID: "alpha", API: "Produce",
					Servers: []string{broker, broker2},
				}},
				{Severity: detectors.Info, Detail: &throttled.Finding{Responses: 1, ClientID: "beta", API: "Produce"}},
				{Severity: detectors.Info, Detail: &throttled.Finding{
					Responses: 4, TotalMs: 2800, HeldMs: 2800, ClientID: "beta", API: "Fetch",
					Quota: "consumer_byte_rate",
				}},
			},
		},
		{
			Name: "before KIP-219 (Produce v1) the response itself was held back: its wait ends at the response",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.2.0.5:40000", broker)
				// Answered 1.5 s after the request, 1.5 s of it the
				// throttle; the next request right after the response.
				for i := range 3 {
					at := dt.At(time.Second + time.Duration(i)*1510*time.Millisecond)
					h.Call(c, at, 1500*time.Millisecond, "old-client", dt.Produce(1), dt.Produced(1, 0, 1500))
				}
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &throttled.Finding{
				HeldMs: 4500, AfterResponse: false, Versions: []int{1}, Ongoing: true,
			},
				Exact: []string{"AfterResponse"}}},
		},
	}, nil)
}

// TestThrottledExplainsItsWaits: one wait gives one finding. Apache Kafka
// 4.1.1 muting a Java producer over its quota (fixtures/pcaps/kafka/
// java-throttled) gave throttled, slow-responses and unanswered-requests for
// the same waits: slow-responses of the throttled client id alone at the
// same broker is explained by throttled (info, explained_by); slow
// responses that include another client's are not.
func TestThrottledExplainsItsWaits(t *testing.T) {
	for _, withOther := range []bool{false, true} {
		h := dt.New(t, nil, throttled.Analyzer, slowresponses.Analyzer)
		fast := h.Conn("10.2.0.6:40000", broker)
		for i := range 200 {
			h.Call(fast, dt.At(time.Duration(i)*50*time.Millisecond), 2*time.Millisecond, "other", dt.Produce(9), dt.Produced(9, 0, 0))
		}
		muted := h.Conn("10.2.0.5:40000", broker)
		for i := range 12 {
			// each answer held 4 s by the quota, throttle_time_ms saying so
			h.Call(muted, dt.At(time.Duration(i)*5*time.Second), 4*time.Second, "bulk-loader", dt.Produce(9), dt.Produced(9, 0, 4000))
		}
		if withOther {
			slow := h.Conn("10.2.0.7:40000", broker)
			for i := range 12 {
				h.Call(slow, dt.At(time.Duration(i)*5*time.Second+time.Second), 4*time.Second, "unthrottled", dt.Produce(9), dt.Produced(9, 0, 0))
			}
		}
		saw := false
		for _, f := range h.Findings() {
			if f.Detector != "slow-responses" {
				continue
			}
			saw = true
			_, explained := f.Fields["explained_by"]
			switch {
			case withOther && explained:
				t.Errorf("slow responses that include an unthrottled client's explained: %s", f.Summary)
			case !withOther && (f.Severity != detectors.Info || f.Fields["explained_by"] != "throttled"):
				t.Errorf("the throttled client's slow responses: %s %s (explained_by %v), want info explained by throttled",
					f.Severity, f.Summary, f.Fields["explained_by"])
			}
		}
		if !saw {
			t.Fatalf("no slow-responses finding (with another client %v): the case shows nothing", withOther)
		}
	}
}
