package pipeline

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/captest"
)

// findingsFrom runs every rule on the capture's packets from number from
// on (1: the whole capture).
func findingsFrom(t *testing.T, c *captest.Capture, from uint64) []detectors.Finding {
	t.Helper()
	set, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := RunSource(context.Background(), captest.NewSource(c.Keep(captest.From(from))), Options{
		Flows: flows.DefaultConfig(), Detectors: set, Workers: 1})
	return res.Report.Findings
}

// TestLateJoin: issue 30's late joins, on the recordings of its families
// (fixtures/clients/forensics). Each is analysed whole and cut to begin at
// 30 % of its packets, as a capture started in the middle of the episode:
// the rule that finds the episode finds it from the middle too, at the
// same severity, and the healthy recordings stay quiet both ways.
func TestLateJoin(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule string // "" for quiet: nothing at warning or above
		sev  detectors.Severity
		// atStart: the cut finding says the episode was under way when
		// the capture began.
		atStart bool
		// also is a finding at warning or above that may come too.
		also string
	}{
		{name: "storm-nobackoff-kgo", rule: "error-storm", sev: detectors.Warning},
		{name: "storm-nobackoff-sarama", rule: "error-storm", sev: detectors.Warning},
		{name: "storm-nobackoff-librdkafka", rule: "error-storm", sev: detectors.Warning},
		{name: "coordinator-stall-kgo", rule: "no-progress", sev: detectors.Warning, atStart: true},
		// sarama asks Metadata for __consumer_offsets after each refusal,
		// which kfake (without that topic) answers UNKNOWN_TOPIC_OR_PARTITION.
		{name: "coordinator-stall-sarama", rule: "no-progress", sev: detectors.Warning, atStart: true, also: "error-storm"},
		{name: "coordinator-stall-librdkafka", rule: "no-progress", sev: detectors.Warning, atStart: true},
		// Evicted before the cut, back after it: "silent since before the
		// capture began" (the group's other member beating meanwhile).
		{name: "evicted-kgo", rule: "member-evicted", sev: detectors.Warning},
		{name: "evicted-sarama", rule: "member-evicted", sev: detectors.Warning},
		{name: "evicted-librdkafka", rule: "member-evicted", sev: detectors.Warning},
		{name: "too-large-librdkafka", rule: "records-rejected", sev: detectors.Warning},
		{name: "fenced-librdkafka", rule: "transactional-fencing", sev: detectors.Warning},
		{name: "storm-backoff-kgo"},
		{name: "coordinator-blip-kgo"},
		{name: "leader-moves-kgo"},
		{name: "leader-moves-sarama"},
		{name: "group-churn-kgo"},
		{name: "group-churn-sarama"},
		{name: "same-value-kgo"},
		{name: "same-value-sarama"},
		{name: "same-value-kafka-go"},
		{name: "rebalance-kgo-classic", rule: "rebalance-loop", sev: detectors.Warning},
		{name: "stalled-fetch-kgo", rule: "stalled-fetch", sev: detectors.Warning},
		{name: "notleader-8s-sarama", rule: "not-leader-loop", sev: detectors.Warning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := captest.Load(filepath.Join("..", "fixtures", "pcaps", "clients", tc.name+".pcap"))
			if err != nil {
				t.Fatal(err)
			}
			cut := uint64(len(c.Packets))*3/10 + 1
			for _, run := range []struct {
				what string
				from uint64
			}{{"whole", 1}, {"from 30 %", cut}} {
				fs := findingsFrom(t, c, run.from)
				var best *detectors.Finding
				for i := range fs {
					f := &fs[i]
					if f.Severity >= detectors.Warning && f.Detector != tc.rule && f.Detector != tc.also {
						t.Errorf("%s: %s %s: %s", run.what, f.Severity, f.Detector, f.Summary)
					}
					if f.Detector == tc.rule && (best == nil || f.Severity > best.Severity) {
						best = f
					}
				}
				if tc.rule == "" {
					continue
				}
				if best == nil || best.Severity < tc.sev {
					t.Errorf("%s: no %s finding at %s or above (%v)", run.what, tc.rule, tc.sev, best)
					continue
				}
				t.Logf("%s: %s %s: %s", run.what, best.Severity, best.Detector, best.Summary)
				if tc.atStart && run.from > 1 && best.Fields["at_start"] != true {
					t.Errorf("%s: the stall does not say it was under way at the start: %s", run.what, best.Summary)
				}
			}
		})
	}
}
