package consumerfallingbehind_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/consumerfallingbehind"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/flows"
)

const broker = "10.1.0.10:9092"

// consumer fetches every 200 ms from a second in, n times: fetch i asks
// partition p from offsets(i)[p] and is answered with high watermarks
// hws(i)[p], 2 ms later.
type consumer struct {
	h       *dt.Harness
	c       *flows.Conn
	id      string
	at      time.Duration
	every   time.Duration
	replica int32
}

func newConsumer(h *dt.Harness, client, id string) *consumer {
	return &consumer{h: h, c: h.Conn(client, broker), id: id, at: time.Second, every: 200 * time.Millisecond, replica: -1}
}

// pattern gives fetch i's offsets and the high watermarks answered, per
// partition.
type pattern struct{ offsets, hws func(i int) []int64 }

func pat(offsets, hws func(i int) []int64) pattern { return pattern{offsets, hws} }

func (c *consumer) run(n int, p pattern) {
	c.at = c.h.Fetches(c.c, c.id, c.replica, "orders", c.at, c.every, n, p.offsets, p.hws)
}

// ramp is a lag rising by rise/55 records a fetch: fetch 55, the floor of
// the slice 12-14 s, is at rise.
func ramp(rise int64) pattern {
	return pattern{func(i int) []int64 { return []int64{int64(i) * 10} }, func(i int) []int64 { return []int64{int64(i)*10 + int64(i)*rise/55} }}
}

// linear is a partition 0 whose producers write w records and whose
// consumer reads r records per fetch, from offset base.
func linear(base, w, r int64) pattern {
	return pattern{func(i int) []int64 { return []int64{base + r*int64(i)} }, func(i int) []int64 { return []int64{base + w*int64(i)} }}
}

func TestConsumerFallingBehind(t *testing.T) {
	dt.Run(t, consumerfallingbehind.Analyzer, []dt.Case{
		{
			Name: "falling behind for 12 s and still behind at the end: error",
			Traffic: func(h *dt.Harness) {
				c := newConsumer(h, "10.2.0.5:40000", "slow-app")
				c.run(61, linear(1000, 100, 40)) // 60 records further behind per fetch, 12 s
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				// Slices of 2 s: the last floor is fetch 55's lag (3300).
				Detail: &consumerfallingbehind.Finding{
					Fetches: 61, FloorRise: 3300, LagMax: 3600, ClientID: "slow-app", Client: "10.2.0.5",
					Groups: []string{}, Topic: "orders", Partition: int32(0), LagStart: int64(0),
					LagEnd: int64(3600), BehindSeconds: 12.0, GrowthPerSec: 300.0, StillBehind: true,
					OffsetFrom: int64(1000), OffsetTo: int64(3400), Partitions: []string{"orders-0"},
				}, Exact: []string{"Groups", "Partition", "LagStart"},
				Summary:  []string{`consumer "slow-app" on 10.2.0.5 (unknown group) falling behind on orders-0: lag grew from 0 to 3600 records in 12.0 s (300/s) over 61 fetches, 3600 behind at the end`},
				Evidence: []uint64{2, 112, 122},
			}},
		},
		{
			Name: "fell behind for 12 s, then caught up: warning",
			Traffic: func(h *dt.Harness) {
				c := newConsumer(h, "10.2.0.5:40000", "app")
				c.run(61, linear(1000, 100, 40))
				// Producers stop at 7000; the consumer reads 600 a fetch.
				c.run(7, pat(func(i int) []int64 { return []int64{3400 + 600*int64(i)} }, func(int) []int64 { return []int64{7000} }))
			},
			// The slice 12-14 s (floor 1800 at 13.8 s) still holds half
			// of the rise; the next (floor 0 at 14.4 s) ends it.
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &consumerfallingbehind.Finding{
				FloorRise: 2700, Fetches: 65, StillBehind: false, BehindSeconds: 12.8, LagEnd: int64(1800),
				LagMax: int64(3600),
			}, Exact: []string{"StillBehind"},
				Summary: []string{"then caught up"}}},
		},
		{
			Name: "fell behind for 40 s, then caught up: error (lasted long)",
			Traffic: func(h *dt.Harness) {
				c := newConsumer(h, "10.2.0.5:40000", "app")
				c.run(201, linear(0, 100, 90))
				c.run(3, pat(func(i int) []int64 { return []int64{18000 + 1000*int64(i)} }, func(int) []int64 { return []int64{20000} }))
			},
			// The slice 40-42 s ends it (floor 0); the last floor in it
			// is 38-40 s's, fetch 185's lag.
			Want: []dt.Want{{Severity: detectors.Error, Detail: &consumerfallingbehind.Finding{
				StillBehind: false, FloorRise: int64(1850), BehindSeconds: 38.8,
			}, Exact: []string{"StillBehind"}}},
		},
		{
			Name: "near miss: growth over 9.8 s, short of the window",
			Traffic: func(h *dt.Harness) {
				newConsumer(h, "10.2.0.5:40000", "app").run(50, linear(0, 100, 40))
			},
		},
		{
			Name: "near miss the other way: growth over exactly 10 s",
			Traffic: func(h *dt.Harness) {
				newConsumer(h, "10.2.0.5:40000", "app").run(51, linear(0, 100, 40))
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &consumerfallingbehind.Finding{
				BehindSeconds: 10.0, FloorRise: int64(2700),
			}}},
		},
		{
			// A ramp whose last floor (fetch 55, at 12 s) is 490.
			Name: "near miss: the floor rose by 490 records in 12 s",
			Traffic: func(h *dt.Harness) {
				newConsumer(h, "10.2.0.5:40000", "app").run(61, ramp(490))
			},
		},
		{
			Name: "near miss the other way: the floor rose by 500 records in 12 s",
			Traffic: func(h *dt.Harness) {
				newConsumer(h, "10.2.0.5:40000", "app").run(61, ramp(500))
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &consumerfallingbehind.Finding{FloorRise: 500}}},
		},
		{
			Name: "near miss: 4 fetches, 4 s apart (min-fetches 5)",
			Traffic: func(h *dt.Harness) {
				c := newConsumer(h, "10.2.0.5:40000", "app")
				c.every = 4 * time.Second
				c.run(4, linear(0, 2000, 100))
			},
		},
		{
			Name: "near miss the other way: 5 fetches, 3 s apart",
			Traffic: func(h *dt.Harness) {
				c := newConsumer(h, "10.2.0.5:40000", "app")
				c.every = 3 * time.Second
				c.run(5, linear(0, 2000, 100))
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &consumerfallingbehind.Finding{Fetches: 5, FloorRise: 7600}}},
		},
		{
			Name: "healthy: idle at the high watermark, long polls for a minute",
			Traffic: func(h *dt.Harness) {
				c := newConsumer(h, "10.2.0.5:40000", "app")
				c.every = 500 * time.Millisecond
				c.run(120, pat(func(int) []int64 { return []int64{5000} }, func(int) []int64 { return []int64{5000} }))
			},
		},
		{
			Name: "healthy: keeping up with a busy topic, lag a few hundred up and down",
			Traffic: func(h *dt.Harness) {
				newConsumer(h, "10.2.0.5:40000", "app").run(300, pat(func(i int) []int64 { return []int64{int64(i) * 1000} },
					func(i int) []int64 { return []int64{int64(i)*1000 + int64(i*7919%400)} }))
			},
		},
		{
			Name: "healthy: keeping up in big bursts, lag anywhere from 0 to 2000",
			Traffic: func(h *dt.Harness) {
				newConsumer(h, "10.2.0.5:40000", "app").run(300, pat(func(i int) []int64 { return []int64{int64(i) * 1000} },
					func(i int) []int64 { return []int64{int64(i)*1000 + int64(i*7919%2000)} }))
			},
		},
		{
			Name: "healthy: catching up, lag shrinking from 20000 to 0 over 40 s",
			Traffic: func(h *dt.Harness) {
				newConsumer(h, "10.2.0.5:40000", "app").run(201, pat(func(i int) []int64 { return []int64{int64(i) * 500} },
					func(i int) []int64 { return []int64{20000 + int64(i)*400} }))
			},
		},
		{
			Name: "a large steady lag that does not grow",
			Traffic: func(h *dt.Harness) {
				newConsumer(h, "10.2.0.5:40000", "app").run(200, pat(func(i int) []int64 { return []int64{int64(i) * 300} },
					func(i int) []int64 { return []int64{50000 + int64(i)*300 + int64(i*7919%300)} }))
			},
		},
		{
			Name: "growth with a sawtooth: the consumer reads in bursts",
			Traffic: func(h *dt.Harness) {
				// Every third fetch brings 250 records, the others 0;
				// producers write 100 per fetch interval.
				newConsumer(h, "10.2.0.5:40000", "app").run(76, pat(func(i int) []int64 { return []int64{int64(i/3) * 250} },
					linear(0, 100, 0).hws))
			},
			// Troughs (every third fetch) rise by 50; the last floor is
			// fetch 75's, 1250.
			Want: []dt.Want{{Severity: detectors.Error, Detail: &consumerfallingbehind.Finding{
				BehindSeconds: 15.0, LagStart: int64(0), FloorRise: int64(1250),
			}, Exact: []string{"LagStart"}}},
		},
		{
			Name: "stuck: fetches keep coming, the offset never moves",
			Traffic: func(h *dt.Harness) {
				newConsumer(h, "10.2.0.5:40000", "app").run(61, linear(700, 50, 0))
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &consumerfallingbehind.Finding{
				OffsetFrom: int64(700), OffsetTo: int64(700),
			}}},
		},
		{
			Name: "the group comes from the coordinator connection of the same client id and host",
			Traffic: func(h *dt.Harness) {
				coord := h.Conn("10.2.0.5:40001", "10.1.0.11:9092")
				h.Call(coord, dt.At(500*time.Millisecond), time.Millisecond, "app", dt.ClassicHeartbeat("orders-app", 1, "member-1"), dt.Beat(0))
				other := h.Conn("10.2.0.6:40001", "10.1.0.11:9092")
				h.Call(other, dt.At(600*time.Millisecond), time.Millisecond, "app", dt.ClassicHeartbeat("someone-else", 1, "member-1"), dt.Beat(0))
				newConsumer(h, "10.2.0.5:40000", "app").run(61, linear(0, 100, 40))
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &consumerfallingbehind.Finding{Groups: []string{"orders-app"}},
				Summary: []string{`consumer "app" on 10.2.0.5 (group "orders-app")`}}},
		},
		{
			Name: "per consumer: two partitions behind, one keeping up; another consumer keeping up",
			Traffic: func(h *dt.Harness) {
				newConsumer(h, "10.2.0.5:40000", "app").run(61, pat(
					func(i int) []int64 { return []int64{int64(i) * 40, int64(i) * 100, int64(i) * 10} },
					func(i int) []int64 { return []int64{int64(i) * 100, int64(i) * 100, int64(i) * 50} }))
				newConsumer(h, "10.2.0.7:40000", "other").run(61, linear(0, 100, 100))
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &consumerfallingbehind.Finding{
				FloorRise: 3300, Partitions: []string{"orders-0", "orders-2"}, Partition: int32(0),
			}, Exact: []string{"Partition"},
				Summary: []string{"(and 1 more partition)"}}},
		},
		{
			Name: "a follower's fetches are not a consumer's",
			Traffic: func(h *dt.Harness) {
				c := newConsumer(h, "10.1.0.12:50000", "broker-2-fetcher-0")
				c.replica = 2
				c.run(61, linear(0, 100, 40))
			},
		},
		{
			Name:     "window raised to 20 s: 12 s of growth is quiet",
			Settings: map[string]string{"window": "20s"},
			Traffic: func(h *dt.Harness) {
				newConsumer(h, "10.2.0.5:40000", "app").run(61, linear(0, 100, 40))
			},
		},
	}, func(t *testing.T, f *detectors.Finding) {
		if !strings.Contains(f.Next, "kafka-consumer-groups.sh") || !strings.Contains(f.Next, "records-lag-max") {
			t.Errorf("check next names neither the command nor the metric: %s", f.Next)
		}
	})
}

// TestSnapshotChangesNothing: findings asked for mid-capture do not change
// the final ones.
func TestSnapshotChangesNothing(t *testing.T) {
	run := func(snap bool) []detectors.Finding {
		h := dt.New(t, nil, consumerfallingbehind.Analyzer)
		c := newConsumer(h, "10.2.0.5:40000", "app")
		c.run(40, linear(0, 100, 40))
		if snap {
			h.Snapshot()
		}
		c.run(40, pat(func(i int) []int64 { return []int64{1560 + int64(i)*40} }, func(i int) []int64 { return []int64{3900 + int64(i)*100} }))
		return h.Findings()
	}
	a, b := run(false), run(true)
	if len(a) != 1 || len(b) != 1 || a[0].Summary != b[0].Summary {
		t.Errorf("with a snapshot:%s\nwithout:%s", dt.Describe(b), dt.Describe(a))
	}
}
