package pipeline

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/kfsniff/kfsniff/collect"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/fixtures/record"
	"github.com/kfsniff/kfsniff/report"
)

// perDetector counts the findings of each detector.
func perDetector(r *report.Report) map[string]int {
	n := map[string]int{}
	for _, f := range r.Findings {
		n[f.Detector]++
	}
	return n
}

// lagRows returns the report's lag series of a client id.
func lagRows(r *report.Report, clientID string) []report.Lag {
	var out []report.Lag
	for _, l := range r.Lag {
		if l.ClientID == clientID {
			out = append(out, l)
		}
	}
	return out
}

// TestRecordedSlowConsumer: kgo against kfake, a consumer group member
// reading one batch a poll while a producer writes faster
// (fixtures/pcaps/injected). The analysis must agree with the proxy's
// counts, list the consumer's lag on clicks-0 under its group (learned
// from the coordinator connection), and report it falling behind, as an
// error (behind for more than 10 s and still behind at the end), with
// numbers that agree with what the clients counted.
func TestRecordedSlowConsumer(t *testing.T) {
	dir := filepath.Join("..", "fixtures", "pcaps", record.InjectedDir)
	side, err := record.ReadSidecar(filepath.Join(dir, "slow-consumer-kgo-kfake.counts.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := analyseWithDetectors(t, filepath.Join(dir, side.Pcap))
	compareRecorded(t, r, side.Counts)

	rows := lagRows(r, "kfsniff-slow-consumer")
	if len(rows) != 1 {
		t.Fatalf("%d lag series of the consumer, want 1 (clicks-0): %+v", len(rows), r.Lag)
	}
	l := rows[0]
	if l.Role != "consumer" || l.Topic != "clicks" || l.Partition != 0 || !slices.Equal(l.Groups, []string{side.Sent.Group}) ||
		l.ReplicaNode != nil || l.ServerNode == nil || *l.ServerNode != 0 {
		t.Errorf("lag series %+v: want consumer of clicks-0 in group %s, from node 0", l, side.Sent.Group)
	}
	// The last fetch asked from what the consumer had read before it,
	// and its high watermark cannot exceed what was produced.
	if l.Last.FetchOffset > int64(side.Sent.Consumed) || l.Last.HighWatermark > int64(side.Sent.Produced) ||
		l.Last.Lag != l.Last.HighWatermark-l.Last.FetchOffset || l.Last.Lag < int64(side.Sent.Behind)/2 {
		t.Errorf("last sample %+v: the clients consumed %d of %d (%d behind)", l.Last, side.Sent.Consumed, side.Sent.Produced, side.Sent.Behind)
	}
	if l.First.Lag >= l.Last.Lag || l.Max.Lag != l.Last.Lag || len(l.Points) < 5 || len(l.Points) > collect.LagPoints+1 {
		t.Errorf("lag from %d to %d (max %d) over %d points: want it growing to its maximum, a few points kept",
			l.First.Lag, l.Last.Lag, l.Max.Lag, len(l.Points))
	}

	counts := perDetector(r)
	if counts["consumer-falling-behind"] != 1 {
		t.Fatalf("%d consumer-falling-behind findings, want 1:%s", counts["consumer-falling-behind"], describe(r.Findings))
	}
	f := finding(t, r, "consumer-falling-behind")
	fs := []detectors.Finding{*f}
	if f.Severity != detectors.Error || f.Fields["client_id"] != "kfsniff-slow-consumer" || f.Fields["still_behind"] != true ||
		!slices.Equal(f.Fields["groups"].([]string), []string{side.Sent.Group}) || f.Fields["topic"] != "clicks" {
		t.Errorf("finding:%s", describe(fs))
	}
	if f.Fields["lag_end"] != l.Last.Lag || f.Counts["lag_max"] != l.Max.Lag || f.Counts["floor_rise"] < 500 {
		t.Errorf("finding lag_end %v, lag_max %d, floor rise %d; the lag series ends at %d, max %d", f.Fields["lag_end"],
			f.Counts["lag_max"], f.Counts["floor_rise"], l.Last.Lag, l.Max.Lag)
	}
	if len(f.Evidence) < 2 || f.Evidence[0].Packet != l.First.Packet {
		t.Errorf("evidence %+v: want the growth's first fetch (packet %d) first", f.Evidence, l.First.Packet)
	}
	for _, other := range []string{"follower-out-of-sync", "broker-fenced-while-alive"} {
		if counts[other] != 0 {
			t.Errorf("%d %s findings on a consumer's traffic", counts[other], other)
		}
	}
}

// TestLagOfHealthyConsumers: a consumer keeping up, idle at the high
// watermark at the end, is listed with its group and lag 0 at the end,
// and no rule on lag says anything, not even info.
func TestLagOfHealthyConsumers(t *testing.T) {
	for _, tc := range []struct {
		path, clientID, group string
		partitions            int
	}{
		{filepath.Join("..", "fixtures", "pcaps", "scenarios", "healthy-group.pcap"), "orders-consumer-1", "orders-app", 1},
		{filepath.Join("..", "fixtures", "pcaps", "recorded-kgo-kfake-group.pcap"), "kfsniff-consumer-0", "kfsniff-healthy", 5},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			r := analyseWithDetectors(t, tc.path)
			rows := lagRows(r, tc.clientID)
			if len(rows) != tc.partitions {
				t.Fatalf("%d lag series of %s, want %d", len(rows), tc.clientID, tc.partitions)
			}
			for _, l := range rows {
				if !slices.Equal(l.Groups, []string{tc.group}) || l.Last.Lag != 0 || l.Role != "consumer" {
					t.Errorf("%s-%d: groups %v, last lag %d: want %s, 0", l.Topic, l.Partition, l.Groups, l.Last.Lag, tc.group)
				}
			}
			counts := perDetector(r)
			for _, d := range []string{"consumer-falling-behind", "follower-out-of-sync", "broker-fenced-while-alive"} {
				if counts[d] != 0 {
					t.Errorf("healthy traffic: %d %s findings:%s", counts[d], d, describe(r.Findings))
				}
			}
		})
	}
}

// TestLagOfFollowers: the replication scenario's lag series: node 2, in
// the ISR, never behind; node 3 behind at every sample; the consumer one
// batch behind at most.
func TestLagOfFollowers(t *testing.T) {
	r := analyseWithDetectors(t, filepath.Join("..", "fixtures", "pcaps", "scenarios", "follower-out-of-sync.pcap"))
	seen := 0
	for _, l := range r.Lag {
		switch {
		case l.Role == "consumer":
			if l.Max.Lag > 5 || l.Last.Lag != 0 || !slices.Equal(l.Groups, []string{"payments-audit"}) {
				t.Errorf("consumer %s-%d: max %d, last %d, groups %v", l.Topic, l.Partition, l.Max.Lag, l.Last.Lag, l.Groups)
			}
		case l.ReplicaNode == nil:
			t.Errorf("replication series without its node: %+v", l)
		case *l.ReplicaNode == 2:
			if l.Max.Lag != 0 {
				t.Errorf("node 2 (in the ISR) behind by %d on %s-%d", l.Max.Lag, l.Topic, l.Partition)
			}
		case *l.ReplicaNode == 3:
			if l.Min.Lag < 1600 || l.Topic != "payments" || l.Partition != 0 {
				t.Errorf("node 3: %s-%d at least %d behind", l.Topic, l.Partition, l.Min.Lag)
			}
		}
		seen++
	}
	if seen != 6 {
		t.Errorf("%d lag series, want 6 (the consumer's 2, node 2's 2, node 3's, node 4's)", seen)
	}
}
