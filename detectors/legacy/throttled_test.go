package legacy_test

import (
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
)

func TestThrottled(t *testing.T) {
	type want struct {
		sev    detectors.Severity
		counts map[string]int64
		fields map[string]any
	}
	// produce schedules n Produce v9 exchanges 200 ms apart, throttled by
	// the given milliseconds in turn (0: not throttled).
	produce := func(p *opsPeer, version int16, throttles ...int32) {
		for i, ms := range throttles {
			p.call(opsAt(time.Second+time.Duration(i)*200*time.Millisecond), opsMs(2), opsProduce(version), opsProduced(version, 0, ms))
		}
	}
	for _, tc := range []struct {
		name      string
		overrides map[string]float64
		script    func(tl *opsTimeline)
		want      []want
	}{
		{
			name: "a producer throttled on most responses",
			script: func(tl *opsTimeline) {
				produce(tl.dial("10.2.0.5:40000", opsBroker, "bulk-loader"), 9, 0, 500, 500, 0, 500, 800, 500, 500)
			},
			want: []want{{
				sev:    detectors.Warning,
				counts: map[string]int64{"throttled_responses": 6, "throttle_ms_total": 3300, "throttle_ms_max": 800},
				fields: map[string]any{"client_id": "bulk-loader", "api": "Produce", "quota": "producer_byte_rate",
					"clients": []string{"10.2.0.5"}, "servers": []string{opsBroker}, "after_response": true},
			}},
		},
		{
			name: "a single short throttle is info",
			script: func(tl *opsTimeline) {
				produce(tl.dial("10.2.0.5:40000", opsBroker, "app"), 9, 0, 0, 120, 0, 0)
			},
			want: []want{{
				sev:    detectors.Info,
				counts: map[string]int64{"throttled_responses": 1, "throttle_ms_total": 120, "throttle_ms_max": 120},
			}},
		},
		{
			name: "near miss: two short throttles stay info",
			script: func(tl *opsTimeline) {
				produce(tl.dial("10.2.0.5:40000", opsBroker, "app"), 9, 0, 300, 0, 300, 0)
			},
			want: []want{{sev: detectors.Info, counts: map[string]int64{"throttled_responses": 2, "throttle_ms_total": 600}}},
		},
		{
			name: "a single long throttle is a warning",
			script: func(tl *opsTimeline) {
				produce(tl.dial("10.2.0.5:40000", opsBroker, "app"), 9, 0, 1500, 0)
			},
			want: []want{{sev: detectors.Warning, counts: map[string]int64{"throttled_responses": 1, "throttle_ms_max": 1500}}},
		},
		{
			name: "near miss: throttleTimeMs 0 everywhere",
			script: func(tl *opsTimeline) {
				produce(tl.dial("10.2.0.5:40000", opsBroker, "app"), 9, 0, 0, 0, 0, 0, 0)
				p := tl.dial("10.2.0.6:40000", opsBroker, "consumer")
				for i := range 20 {
					p.call(opsAt(time.Second+time.Duration(i)*100*time.Millisecond), opsMs(1), opsFetch(500), opsFetched(0, 0))
				}
			},
		},
		{
			name:      "min-responses raised: the throttled producer is info",
			overrides: map[string]float64{"throttled.min-responses": 10, "throttled.min-total-ms": 10000},
			script: func(tl *opsTimeline) {
				produce(tl.dial("10.2.0.5:40000", opsBroker, "bulk-loader"), 9, 0, 500, 500, 0, 500, 800, 500, 500)
			},
			want: []want{{sev: detectors.Info, counts: map[string]int64{"throttled_responses": 6}}},
		},
		{
			name: "per client id and API: two clients on two connections each, and a throttled Fetch",
			script: func(tl *opsTimeline) {
				produce(tl.dial("10.2.0.5:40000", opsBroker, "alpha"), 9, 400, 400)
				produce(tl.dial("10.2.0.5:40001", opsBroker2, "alpha"), 9, 400, 400)
				produce(tl.dial("10.2.0.7:40000", opsBroker, "beta"), 9, 100)
				c := tl.dial("10.2.0.7:40001", opsBroker, "beta")
				for i := range 4 {
					c.call(opsAt(2*time.Second+time.Duration(i)*time.Second), opsMs(1), opsFetch(500), opsFetched(0, 700))
				}
			},
			want: []want{
				{sev: detectors.Warning, counts: map[string]int64{"throttled_responses": 4, "throttle_ms_total": 1600},
					fields: map[string]any{"client_id": "alpha", "api": "Produce", "servers": []string{opsBroker, opsBroker2}}},
				{sev: detectors.Warning, counts: map[string]int64{"throttled_responses": 4, "throttle_ms_total": 2800},
					fields: map[string]any{"client_id": "beta", "api": "Fetch", "quota": "consumer_byte_rate"}},
				{sev: detectors.Info, counts: map[string]int64{"throttled_responses": 1},
					fields: map[string]any{"client_id": "beta", "api": "Produce"}},
			},
		},
		{
			name: "before KIP-219 (Produce v1) the response itself was held back",
			script: func(tl *opsTimeline) {
				produce(tl.dial("10.2.0.5:40000", opsBroker, "old-client"), 1, 600, 600, 600)
			},
			want: []want{{sev: detectors.Warning, fields: map[string]any{"after_response": false, "versions": []int{1}}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := opsOf(opsAnalyse(t, tc.overrides, opsCapture(t, tc.script)), "throttled")
			if len(got) != len(tc.want) {
				t.Fatalf("%d throttled findings, want %d:%s", len(got), len(tc.want), opsDescribe(got))
			}
			// Findings come most severe first, then by time.
			for i, w := range tc.want {
				opsCheck(t, got[i], w.sev, w.counts, w.fields)
			}
		})
	}
}
