package followeroutofsync_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/followeroutofsync"
	"github.com/kfsniff/kfsniff/flows"
)

const leader, leader2 = "10.1.0.10:9092", "10.1.0.11:9092"

// fetcher is a replica fetcher of node 2 fetching every 500 ms from a
// second in; fetch i asks partitions 0, 1, ... from offsets(i) and is
// answered with high watermarks hws(i).
type fetcher struct {
	h       *dt.Harness
	c       *flows.Conn
	id      string
	replica int32
	topic   string
	at      time.Duration
}

func newFetcher(h *dt.Harness, server string) *fetcher {
	return &fetcher{h: h, c: h.Conn("10.1.0.12:50000", server), id: "broker-2-fetcher-0", replica: 2, topic: "orders", at: time.Second}
}

// pattern gives fetch i's offsets and the high watermarks answered.
type pattern struct{ offsets, hws func(i int) []int64 }

func (f *fetcher) run(n int, p pattern) {
	f.at = f.h.Fetches(f.c, f.id, f.replica, f.topic, f.at, 500*time.Millisecond, n, p.offsets, p.hws)
}

// trail is a partition 0 whose leader's high watermark grows by 100 a
// fetch from 10000, the follower trailing it by lag(i).
func trail(lag func(i int) int64) pattern {
	hw := func(i int) int64 { return 10000 + 100*int64(i) }
	return pattern{func(i int) []int64 { return []int64{hw(i) - lag(i)} }, func(i int) []int64 { return []int64{hw(i)} }}
}

// inSync is a follower at the high watermark (an in-sync follower asks
// from its log end, at or past it).
func inSync(i int) int64 { return 0 }

func TestFollowerOutOfSync(t *testing.T) {
	dt.Run(t, followeroutofsync.Analyzer, []dt.Case{
		{
			Name: "healthy: in sync for a minute, asking at or past the high watermark",
			Traffic: func(h *dt.Harness) {
				f := newFetcher(h, leader)
				f.run(120, pattern{func(i int) []int64 { return []int64{10000 + 100*int64(i) + int64(i%2)*100} },
					func(i int) []int64 { return []int64{10000 + 100*int64(i)} }})
			},
		},
		{
			Name: "out of sync for 12 s, 200 behind, then back in step: warning",
			Traffic: func(h *dt.Harness) {
				f := newFetcher(h, leader)
				f.run(4, trail(inSync))
				f.run(25, trail(func(int) int64 { return 200 })) // 12 s
				f.run(4, trail(inSync))
			},
			Want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &followeroutofsync.Finding{
					Fetches: 25, TrailMax: 200, Follower: int32(2), ClientID: "broker-2-fetcher-0",
					Client: "10.1.0.12", Leader: leader, Topic: "orders", Partition: int32(0),
					TrailStart: int64(200), TrailEnd: int64(200), DurationSeconds: 12.0, StillTrailing: false,
					CatchingUp: false, Partitions: []string{"orders-0"},
				}, Exact: []string{"Leader", "Partition", "StillTrailing", "CatchingUp"},
				Summary:  []string{"follower node 2 out of sync with leader 10.1.0.10:9092 on orders-0: its fetch offset trailed the high watermark by 200 to 200 records for 12.0 s, then back in step"},
				Evidence: []uint64{10, 58, 60},
			}},
		},
		{
			Name: "near miss: 9.5 s behind",
			Traffic: func(h *dt.Harness) {
				f := newFetcher(h, leader)
				f.run(20, trail(func(int) int64 { return 200 }))
				f.run(4, trail(inSync))
			},
		},
		{
			Name: "near miss the other way: 10 s behind",
			Traffic: func(h *dt.Harness) {
				f := newFetcher(h, leader)
				f.run(21, trail(func(int) int64 { return 200 }))
				f.run(4, trail(inSync))
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &followeroutofsync.Finding{DurationSeconds: 10.0}}},
		},
		{
			Name: "falling further behind until the end, 15 s: error",
			Traffic: func(h *dt.Harness) {
				f := newFetcher(h, leader)
				f.run(4, trail(inSync))
				f.run(31, trail(func(i int) int64 { return 50 + 20*int64(i) }))
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &followeroutofsync.Finding{
				TrailMax: 650, StillTrailing: true, CatchingUp: false, TrailStart: int64(50),
			}, Exact: []string{"CatchingUp"}}},
		},
		{
			Name: "behind for 35 s, then back in step: error (lasted long)",
			Traffic: func(h *dt.Harness) {
				f := newFetcher(h, leader)
				f.run(71, trail(func(int) int64 { return 300 }))
				f.run(2, trail(inSync))
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &followeroutofsync.Finding{
				DurationSeconds: 35.0, StillTrailing: false,
			}, Exact: []string{"StillTrailing"}}},
		},
		{
			Name: "healthy: caught up after a restart, 5000 behind shrinking over 20 s: info",
			Traffic: func(h *dt.Harness) {
				f := newFetcher(h, leader)
				f.run(41, trail(func(i int) int64 { return 5000 - 125*int64(i) }))
				f.run(4, trail(inSync))
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &followeroutofsync.Finding{
				CatchingUp: true, StillTrailing: false,
			}, Exact: []string{"StillTrailing"},
				Summary: []string{"then caught up"}}},
		},
		{
			Name: "still catching up at the end after 15 s: warning, not unhealed",
			Traffic: func(h *dt.Harness) {
				newFetcher(h, leader).run(31, trail(func(i int) int64 { return 5000 - 100*int64(i) }))
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &followeroutofsync.Finding{
				CatchingUp: true, StillTrailing: true, TrailEnd: int64(2000),
			}}},
		},
		{
			Name:     "min-lag 100: 50 behind for 20 s is quiet",
			Settings: map[string]string{"min-lag": "100"},
			Traffic: func(h *dt.Harness) {
				newFetcher(h, leader).run(41, trail(func(int) int64 { return 50 }))
			},
		},
		{
			Name:     "min-lag 100: 100 behind for 20 s is reported",
			Settings: map[string]string{"min-lag": "100"},
			Traffic: func(h *dt.Harness) {
				newFetcher(h, leader).run(41, trail(func(int) int64 { return 100 }))
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &followeroutofsync.Finding{TrailMax: int64(100)}}},
		},
		{
			Name: "a consumer behind is not a follower",
			Traffic: func(h *dt.Harness) {
				f := newFetcher(h, leader)
				f.id, f.replica = "app", -1
				f.run(41, trail(func(int) int64 { return 300 }))
			},
		},
		{
			// The lag table is shared with the report and consumerlag,
			// but bounded per role: consumers' partitions filling the
			// bound leave followers followed.
			Name: "a consumer asking more partitions than the bound first: the follower out of sync is still seen",
			Traffic: func(h *dt.Harness) {
				many := func(int) []int64 { return make([]int64, flows.DefaultMaxLagSeries+1) }
				h.Fetches(h.Conn("10.1.0.20:40000", leader), "app", -1, "clicks", 0, time.Second, 1, many, many)
				f := newFetcher(h, leader)
				f.run(25, trail(func(int) int64 { return 200 })) // 12 s
				f.run(4, trail(inSync))
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &followeroutofsync.Finding{
				Fetches: 25, TrailMax: 200, Partitions: []string{"orders-0"},
			}}},
		},
		{
			Name: "per follower and leader: two partitions behind one leader, one behind another",
			Traffic: func(h *dt.Harness) {
				f := newFetcher(h, leader)
				f.run(30, pattern{func(int) []int64 { return []int64{100, 200, 300} }, func(int) []int64 { return []int64{500, 200, 900} }})
				g := newFetcher(h, leader2)
				g.c, g.topic = h.Conn("10.1.0.12:50001", leader2), "payments"
				g.run(30, pattern{func(int) []int64 { return []int64{100} }, func(int) []int64 { return []int64{150} }})
			},
			Want: []dt.Want{
				{Severity: detectors.Error, Detail: &followeroutofsync.Finding{
					TrailMax: 600, Partitions: []string{"orders-2", "orders-0"}, Leader: leader,
				}, Exact: []string{"Leader"},
					Summary: []string{"(and 1 more partition)"}},
				{Severity: detectors.Error, Detail: &followeroutofsync.Finding{
					TrailMax: 50, Leader: leader2, Partitions: []string{"payments-0"},
				}, Exact: []string{"Leader"}},
			},
		},
	}, func(t *testing.T, f *detectors.Finding) {
		if !strings.Contains(f.Next, "--under-replicated-partitions") || !strings.Contains(f.Next, "UnderReplicatedPartitions") {
			t.Errorf("check next names neither the command nor the metric: %s", f.Next)
		}
	})
}
