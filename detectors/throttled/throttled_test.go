package throttled_test

import (
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/throttled"
)

const broker, broker2 = "10.1.0.10:9092", "10.1.0.11:9092"

// produce sends Produce requests 200 ms apart from a second in, throttled
// by the given milliseconds in turn (0: not throttled).
func produce(h *dt.Harness, client, server, id string, version int16, throttles ...int32) {
	c := h.Conn(client, server)
	for i, ms := range throttles {
		h.Call(c, dt.At(time.Second+time.Duration(i)*200*time.Millisecond), 2*time.Millisecond, id, dt.Produce(version), dt.Produced(version, 0, ms))
	}
}

func TestThrottled(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		traffic  func(h *dt.Harness)
		want     []dt.Want
	}{
		{
			name: "a producer throttled on most responses",
			traffic: func(h *dt.Harness) {
				produce(h, "10.2.0.5:40000", broker, "bulk-loader", 9, 0, 500, 500, 0, 500, 800, 500, 500)
			},
			want: []dt.Want{{
				Severity: detectors.Warning,
				Counts:   map[string]int64{"throttled_responses": 6, "throttle_ms_total": 3300, "throttle_ms_max": 800},
				Fields: map[string]any{"client_id": "bulk-loader", "api": "Produce", "quota": "producer_byte_rate",
					"clients": []string{"10.2.0.5"}, "servers": []string{broker}, "after_response": true},
				Summary: []string{`client "bulk-loader" throttled on Produce: 6 response(s), 3.3 s in all (longest 800 ms)`},
			}},
		},
		{
			name:    "a single short throttle is info",
			traffic: func(h *dt.Harness) { produce(h, "10.2.0.5:40000", broker, "app", 9, 0, 0, 120, 0, 0) },
			want: []dt.Want{{Severity: detectors.Info,
				Counts: map[string]int64{"throttled_responses": 1, "throttle_ms_total": 120, "throttle_ms_max": 120}}},
		},
		{
			name:    "near miss: two short throttles stay info",
			traffic: func(h *dt.Harness) { produce(h, "10.2.0.5:40000", broker, "app", 9, 0, 300, 0, 300, 0) },
			want:    []dt.Want{{Severity: detectors.Info, Counts: map[string]int64{"throttled_responses": 2, "throttle_ms_total": 600}}},
		},
		{
			name:    "near miss the other way: three short throttles are a warning",
			traffic: func(h *dt.Harness) { produce(h, "10.2.0.5:40000", broker, "app", 9, 100, 100, 100) },
			want:    []dt.Want{{Severity: detectors.Warning, Counts: map[string]int64{"throttled_responses": 3, "throttle_ms_total": 300}}},
		},
		{
			name:    "a single long throttle is a warning",
			traffic: func(h *dt.Harness) { produce(h, "10.2.0.5:40000", broker, "app", 9, 0, 1500, 0) },
			want:    []dt.Want{{Severity: detectors.Warning, Counts: map[string]int64{"throttled_responses": 1, "throttle_ms_max": 1500}}},
		},
		{
			name: "near miss: throttleTimeMs 0 everywhere",
			traffic: func(h *dt.Harness) {
				produce(h, "10.2.0.5:40000", broker, "app", 9, 0, 0, 0, 0, 0, 0)
				c := h.Conn("10.2.0.6:40000", broker)
				for i := range 20 {
					h.Call(c, dt.At(time.Second+time.Duration(i)*100*time.Millisecond), time.Millisecond, "consumer", dt.Fetch(500), dt.Fetched(0, 0))
				}
			},
		},
		{
			name:     "min-responses raised: the throttled producer is info",
			settings: map[string]string{"min-responses": "10", "min-total": "10s"},
			traffic: func(h *dt.Harness) {
				produce(h, "10.2.0.5:40000", broker, "bulk-loader", 9, 0, 500, 500, 0, 500, 800, 500, 500)
			},
			want: []dt.Want{{Severity: detectors.Info, Counts: map[string]int64{"throttled_responses": 6}}},
		},
		{
			name:     "the old name of min-total, in milliseconds, still works",
			settings: map[string]string{"min-responses": "10", "min-total-ms": "3000"},
			traffic: func(h *dt.Harness) {
				produce(h, "10.2.0.5:40000", broker, "bulk-loader", 9, 0, 500, 500, 0, 500, 800, 500, 500)
			},
			want: []dt.Want{{Severity: detectors.Warning, Counts: map[string]int64{"throttle_ms_total": 3300}}},
		},
		{
			name: "per client id and API: two clients on two connections each, and a throttled Fetch",
			traffic: func(h *dt.Harness) {
				produce(h, "10.2.0.5:40000", broker, "alpha", 9, 400, 400)
				produce(h, "10.2.0.5:40001", broker2, "alpha", 9, 400, 400)
				produce(h, "10.2.0.7:40000", broker, "beta", 9, 100)
				c := h.Conn("10.2.0.7:40001", broker)
				for i := range 4 {
					h.Call(c, dt.At(2*time.Second+time.Duration(i)*time.Second), time.Millisecond, "beta", dt.Fetch(500), dt.Fetched(0, 700))
				}
			},
			want: []dt.Want{
				{Severity: detectors.Warning, Counts: map[string]int64{"throttled_responses": 4, "throttle_ms_total": 1600},
					Fields: map[string]any{"client_id": "alpha", "api": "Produce", "servers": []string{broker, broker2}}},
				{Severity: detectors.Warning, Counts: map[string]int64{"throttled_responses": 4, "throttle_ms_total": 2800},
					Fields: map[string]any{"client_id": "beta", "api": "Fetch", "quota": "consumer_byte_rate"}},
				{Severity: detectors.Info, Counts: map[string]int64{"throttled_responses": 1},
					Fields: map[string]any{"client_id": "beta", "api": "Produce"}},
			},
		},
		{
			name:    "before KIP-219 (Produce v1) the response itself was held back",
			traffic: func(h *dt.Harness) { produce(h, "10.2.0.5:40000", broker, "old-client", 1, 600, 600, 600) },
			want:    []dt.Want{{Severity: detectors.Warning, Fields: map[string]any{"after_response": false, "versions": []int{1}}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, map[string]map[string]string{"throttled": tc.settings}, throttled.Analyzer)
			tc.traffic(h)
			dt.Check(t, h.Findings(), "throttled", tc.want...)
		})
	}
}
