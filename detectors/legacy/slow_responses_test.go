package legacy_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
)

// opsSeries schedules n exchanges on their own connection, one every step
// from at, each answered lat after its request.
func opsSeries(tl *opsTimeline, client, clientID string, at, step time.Duration, n int, lat time.Duration,
	mk func() (kmsg.Request, kmsg.Response)) {
	p := tl.dial(client, opsBroker, clientID)
	for i := range n {
		req, resp := mk()
		p.call(opsAt(at+time.Duration(i)*step), lat, req, resp)
	}
}

func TestSlowResponses(t *testing.T) {
	produce := func() (kmsg.Request, kmsg.Response) { return opsProduce(9), opsProduced(9, 0, 0) }
	fetch := func(maxWait int32) func() (kmsg.Request, kmsg.Response) {
		return func() (kmsg.Request, kmsg.Response) { return opsFetch(maxWait), opsFetched(0, 0) }
	}
	// fastProduce: 100 Produce answered in lat, 50 ms apart from 1 s.
	fastProduce := func(tl *opsTimeline, lat time.Duration) {
		opsSeries(tl, "10.2.0.5:40000", "producer-1", time.Second, 50*time.Millisecond, 100, lat, produce)
	}
	type want struct {
		counts map[string]int64
		fields map[string]any
	}
	for _, tc := range []struct {
		name      string
		overrides map[string]float64
		script    func(tl *opsTimeline)
		want      []want
	}{
		{
			name: "five Produce answered after 3 s among a hundred in 2 ms",
			script: func(tl *opsTimeline) {
				fastProduce(tl, opsMs(2))
				opsSeries(tl, "10.2.0.6:40000", "producer-2", 2*time.Second, 4*time.Second, 5, 3*time.Second, produce)
			},
			want: []want{{
				counts: map[string]int64{"slow": 5, "responses": 105},
				fields: map[string]any{"api": "Produce", "p50_ms": 2, "max_ms": 3000, "threshold_ms": 1000,
					"client_ids": []string{"producer-2"}, "clients": []string{"10.2.0.6"}, "servers": []string{opsBroker}},
			}},
		},
		{
			name: "near miss: only two slow, below min-count",
			script: func(tl *opsTimeline) {
				fastProduce(tl, opsMs(2))
				opsSeries(tl, "10.2.0.6:40000", "producer-2", 2*time.Second, 4*time.Second, 2, 3*time.Second, produce)
			},
		},
		{
			name:      "the two with min-count 2",
			overrides: map[string]float64{"slow-responses.min-count": 2},
			script: func(tl *opsTimeline) {
				fastProduce(tl, opsMs(2))
				opsSeries(tl, "10.2.0.6:40000", "producer-2", 2*time.Second, 4*time.Second, 2, 3*time.Second, produce)
			},
			want: []want{{counts: map[string]int64{"slow": 2}}},
		},
		{
			name: "near miss: expired long polls, 500 ms with MaxWaitMillis 500, among fast fetches",
			script: func(tl *opsTimeline) {
				opsSeries(tl, "10.2.0.7:40000", "replica-1", time.Second, 10*time.Millisecond, 100, opsMs(0.6), fetch(500))
				opsSeries(tl, "10.2.0.8:40000", "replica-2", time.Second, time.Second, 10, opsMs(500), fetch(500))
			},
		},
		{
			name: "near miss: Fetch with MaxWaitMillis 5000 answered after 5.5 s, within the wait and min-latency",
			script: func(tl *opsTimeline) {
				opsSeries(tl, "10.2.0.7:40000", "consumer-1", time.Second, 10*time.Millisecond, 100, opsMs(1), fetch(5000))
				opsSeries(tl, "10.2.0.8:40000", "consumer-2", time.Second, 6*time.Second, 10, opsMs(5500), fetch(5000))
			},
		},
		{
			name: "Fetch with MaxWaitMillis 500 answered after 3 s",
			script: func(tl *opsTimeline) {
				opsSeries(tl, "10.2.0.7:40000", "consumer-1", time.Second, 10*time.Millisecond, 100, opsMs(20), fetch(500))
				opsSeries(tl, "10.2.0.8:40000", "consumer-2", time.Second, 4*time.Second, 5, 3*time.Second, fetch(500))
			},
			want: []want{{counts: map[string]int64{"slow": 5, "responses": 105},
				fields: map[string]any{"api": "Fetch", "max_ms": 3000, "client_ids": []string{"consumer-2"}}}},
		},
		{
			name: "near miss: 2 s is only five times a 400 ms median",
			script: func(tl *opsTimeline) {
				fastProduce(tl, opsMs(400))
				opsSeries(tl, "10.2.0.6:40000", "producer-2", 2*time.Second, 4*time.Second, 5, 2*time.Second, produce)
			},
		},
		{
			name:      "the same with factor 4",
			overrides: map[string]float64{"slow-responses.factor": 4},
			script: func(tl *opsTimeline) {
				fastProduce(tl, opsMs(400))
				opsSeries(tl, "10.2.0.6:40000", "producer-2", 2*time.Second, 4*time.Second, 5, 2*time.Second, produce)
			},
			want: []want{{counts: map[string]int64{"slow": 5}, fields: map[string]any{"threshold_ms": 1600}}},
		},
		{
			name: "near miss: 900 ms is 900 times the median but under min-latency-s",
			script: func(tl *opsTimeline) {
				fastProduce(tl, opsMs(1))
				opsSeries(tl, "10.2.0.6:40000", "producer-2", 2*time.Second, 4*time.Second, 5, 900*time.Millisecond, produce)
			},
		},
		{
			name:      "the same with min-latency-s 0.5",
			overrides: map[string]float64{"slow-responses.min-latency-s": 0.5},
			script: func(tl *opsTimeline) {
				fastProduce(tl, opsMs(1))
				opsSeries(tl, "10.2.0.6:40000", "producer-2", 2*time.Second, 4*time.Second, 5, 900*time.Millisecond, produce)
			},
			want: []want{{counts: map[string]int64{"slow": 5}, fields: map[string]any{"max_ms": 900}}},
		},
		{
			name: "near miss: JoinGroup held 30 s for a rebalance",
			script: func(tl *opsTimeline) {
				for i, c := range []string{"10.2.1.1:40000", "10.2.1.2:40000", "10.2.1.3:40000", "10.2.1.4:40000"} {
					p := tl.dial(c, opsBroker, "member")
					p.call(opsAt(time.Second+time.Duration(i)*opsMs(10)), opsMs(1), opsJoin("", 60000), opsJoined(79, "m"))
					p.call(opsAt(2*time.Second), 30*time.Second, opsJoin("m", 60000), opsJoined(0, "m"))
				}
			},
		},
		{
			name: "near miss: Produce v1 held back by a 3 s quota throttle (before KIP-219)",
			script: func(tl *opsTimeline) {
				opsSeries(tl, "10.2.0.5:40000", "old-producer", time.Second, 50*time.Millisecond, 100, opsMs(2),
					func() (kmsg.Request, kmsg.Response) { return opsProduce(1), opsProduced(1, 0, 0) })
				opsSeries(tl, "10.2.0.6:40000", "old-producer", 2*time.Second, 4*time.Second, 5, 3*time.Second+opsMs(2),
					func() (kmsg.Request, kmsg.Response) { return opsProduce(1), opsProduced(1, 0, 3000) })
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := opsOf(opsAnalyse(t, tc.overrides, opsCapture(t, tc.script)), "slow-responses")
			if len(got) != len(tc.want) {
				t.Fatalf("%d slow-responses findings, want %d:%s", len(got), len(tc.want), opsDescribe(got))
			}
			for i, w := range tc.want {
				opsCheck(t, got[i], detectors.Warning, w.counts, w.fields)
				if len(got[i].Evidence) < 2 {
					t.Errorf("evidence %v: want the first, last and slowest", got[i].Evidence)
				}
			}
		})
	}
}
