package legacy_test

import (
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// sfBatch is one stored batch of n records at base.
func sfBatch(base int64, n int) []byte {
	recs := make([]gen.Record, n)
	for i := range recs {
		recs[i] = gen.Record{Value: []byte("value")}
	}
	return gen.RecordBatch(base, nlT0, recs)
}

func TestStalledFetch(t *testing.T) {
	type want struct {
		severity string
		summary  []string
		counts   map[string]int64
		fields   map[string]any
		nodes    []int32
	}
	cases := []struct {
		name      string
		overrides map[string]float64
		build     func(tr *nlTraffic)
		want      []want
	}{
		{
			name: "consumer behind the high watermark gets nothing back",
			build: func(tr *nlTraffic) {
				c := tr.conn("10.3.0.5:41000", "10.3.0.1:9092")
				for i := range 40 {
					tr.exchange(c, "stuck-consumer", nlAt(time.Duration(i)*500*time.Millisecond), 2*time.Millisecond,
						nlConsumerFetch("payments", 3, 100, 0), nlConsumerFetched("payments", 3, 0, 500, 500, -1, -1, nil))
				}
			},
			want: []want{{
				severity: "warning",
				summary:  []string{"stuck-consumer", "offset 100 of payments-3", "40 fetches", "0 records", "high watermark 500"},
				counts:   map[string]int64{"fetches": 40, "records": 0, "errors": 0},
				fields: map[string]any{"client_id": "stuck-consumer", "topic": "payments", "partition": int32(3),
					"fetch_offset": int64(100), "high_watermark": int64(500), "role": "consumer"},
			}},
		},
		{
			name: "raft observer answered with errors, high watermark unknown",
			build: func(tr *nlTraffic) {
				c := tr.conn("10.3.0.9:41100", "10.3.0.2:9093")
				for i := range 30 {
					tr.exchange(c, "raft-client-9", nlAt(time.Duration(i)*time.Second), time.Millisecond,
						nlRaftFetch(9, 777, 3), nlRaftFetched(6, -1, 1, 3, "10.3.0.3", 9093, nil))
				}
			},
			want: []want{{
				severity: "warning",
				summary:  []string{"raft-client-9 (node 9", "offset 777 of __cluster_metadata-0", "NOT_LEADER_OR_FOLLOWER x30"},
				counts:   map[string]int64{"fetches": 30, "records": 0, "errors": 30},
				fields: map[string]any{"topic": "__cluster_metadata", "fetch_offset": int64(777), "high_watermark": int64(-1),
					"error": "NOT_LEADER_OR_FOLLOWER", "role": "raft"},
				nodes: []int32{9},
			}},
		},
		{
			name: "consumer in an incremental fetch session keeps getting an error",
			// 29 erroring fetches over 14 s.
			build: func(tr *nlTraffic) {
				c := tr.conn("10.3.0.4:41050", "10.3.0.1:9092")
				for i := range 30 {
					req := nlConsumerFetch("payments", 1, 600, 0)
					req.SessionID, req.SessionEpoch = 77, int32(i)
					if i > 0 {
						req.Topics = nil // incremental: the offset has not changed
					}
					// The full fetch that opens the session finds the consumer
					// caught up; the errors start with the incremental ones.
					resp := nlConsumerFetched("payments", 1, 6, -1, -1, -1, -1, nil)
					if i == 0 {
						resp = nlConsumerFetched("payments", 1, 0, 600, 600, -1, -1, nil)
					}
					resp.SessionID = 77
					tr.exchange(c, "session-consumer", nlAt(time.Duration(i)*500*time.Millisecond), time.Millisecond, req, resp)
				}
			},
			want: []want{{
				severity: "warning",
				counts:   map[string]int64{"fetches": 29, "errors": 29},
				fields:   map[string]any{"fetch_offset": int64(600), "partition": int32(1), "error": "NOT_LEADER_OR_FOLLOWER"},
			}},
		},
		{
			name: "near miss: idle consumer caught up with the high watermark",
			build: func(tr *nlTraffic) {
				c := tr.conn("10.3.0.6:41200", "10.3.0.1:9092")
				for i := range 120 {
					tr.exchange(c, "idle-consumer", nlAt(time.Duration(i)*500*time.Millisecond), 500*time.Millisecond,
						nlConsumerFetch("payments", 0, 4242, 0), nlConsumerFetched("payments", 0, 0, 4242, 4242, -1, -1, nil))
				}
			},
		},
		{
			name: "near miss: idle consumer after one transient error",
			build: func(tr *nlTraffic) {
				c := tr.conn("10.3.0.6:41300", "10.3.0.1:9092")
				tr.exchange(c, "idle-consumer", nlAt(0), time.Millisecond,
					nlConsumerFetch("payments", 0, 4242, 0), nlConsumerFetched("payments", 0, 6, -1, -1, 1, 2, nil))
				for i := range 60 {
					tr.exchange(c, "idle-consumer", nlAt(time.Second+time.Duration(i)*500*time.Millisecond), 500*time.Millisecond,
						nlConsumerFetch("payments", 0, 4242, 0), nlConsumerFetched("payments", 0, 0, 4242, 4242, -1, -1, nil))
				}
			},
		},
		{
			name: "near miss: consumer reading a backlog advances",
			build: func(tr *nlTraffic) {
				c := tr.conn("10.3.0.7:41400", "10.3.0.1:9092")
				for i := range 60 {
					off := int64(1000 + 10*i)
					tr.exchange(c, "busy-consumer", nlAt(time.Duration(i)*300*time.Millisecond), time.Millisecond,
						nlConsumerFetch("payments", 0, off, 0), nlConsumerFetched("payments", 0, 0, 5000, 5000, -1, -1, sfBatch(off, 10)))
				}
			},
		},
		{
			name: "near miss: high watermark moves each fetch (producer appending)",
			build: func(tr *nlTraffic) {
				c := tr.conn("10.3.0.7:41500", "10.3.0.1:9092")
				for i := range 60 {
					tr.exchange(c, "slow-poll", nlAt(time.Duration(i)*300*time.Millisecond), time.Millisecond,
						nlConsumerFetch("payments", 0, 900, 0), nlConsumerFetched("payments", 0, 0, int64(1000+i), int64(1000+i), -1, -1, nil))
				}
			},
		},
		{
			name: "near miss: read_committed consumer waits on an open transaction",
			build: func(tr *nlTraffic) {
				c := tr.conn("10.3.0.8:41600", "10.3.0.1:9092")
				for i := range 60 {
					tr.exchange(c, "txn-reader", nlAt(time.Duration(i)*500*time.Millisecond), 500*time.Millisecond,
						nlConsumerFetch("payments", 0, 300, 1), nlConsumerFetched("payments", 0, 0, 350, 300, -1, -1, nil))
				}
			},
		},
		{
			name:      "min-fetches raised above what the consumer sent",
			overrides: map[string]float64{"stalled-fetch.min-fetches": 41},
			build: func(tr *nlTraffic) {
				c := tr.conn("10.3.0.5:41000", "10.3.0.1:9092")
				for i := range 40 {
					tr.exchange(c, "stuck-consumer", nlAt(time.Duration(i)*500*time.Millisecond), 2*time.Millisecond,
						nlConsumerFetch("payments", 3, 100, 0), nlConsumerFetched("payments", 3, 0, 500, 500, -1, -1, nil))
				}
			},
		},
		{
			name:      "a short stall is reported once min-duration is lowered",
			overrides: map[string]float64{"stalled-fetch.min-duration": 2},
			build: func(tr *nlTraffic) {
				c := tr.conn("10.3.0.5:41000", "10.3.0.1:9092")
				for i := range 25 {
					tr.exchange(c, "stuck-consumer", nlAt(time.Duration(i)*200*time.Millisecond), 2*time.Millisecond,
						nlConsumerFetch("payments", 3, 100, 0), nlConsumerFetched("payments", 3, 0, 500, 500, -1, -1, nil))
				}
			},
			want: []want{{severity: "warning", counts: map[string]int64{"fetches": 25}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newNLTraffic(t)
			tc.build(tr)
			got := findingsOf(tr.run(tc.overrides), "stalled-fetch")
			if len(got) != len(tc.want) {
				t.Fatalf("%d findings, want %d:%s", len(got), len(tc.want), nlDescribe(got))
			}
			for i, w := range tc.want {
				nlCheck(t, got[i], w.severity, w.summary, w.counts, w.fields, w.nodes)
			}
		})
	}
}
