package report_test

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/report"
)

// TestIncidentsRecorded: on real recordings, findings that share a cause
// are one incident, its cause first, its severity the highest of them;
// every finding at warning or above is in exactly one incident, and no
// informational one is; the text report and the page lead with them.
func TestIncidentsRecorded(t *testing.T) {
	for _, tc := range []struct {
		capture string
		// incidents: each incident's cause rule and its findings' rules
		// (the cause first, the rest sorted), most severe first.
		incidents [][]string
		severity  []detectors.Severity
	}{{
		// Two of three controllers down: 20 findings, one incident,
		// the quorum lost.
		capture: fixtures + "/kafka/kraft-election-stall.pcap.gz",
		incidents: [][]string{{"metadata-quorum-down",
			"broker-fenced-while-alive", "broker-fenced-while-alive", "broker-fenced-while-alive",
			"connection-refused", "connection-refused", "connection-refused",
			"not-leader-loop", "not-leader-loop", "not-leader-loop",
			"reconnect-storm", "reconnect-storm", "reconnect-storm",
			"slow-responses",
			"stalled-fetch", "stalled-fetch", "stalled-fetch", "stalled-fetch",
			"unanswered-requests", "unanswered-requests"}},
		severity: []detectors.Severity{detectors.Error},
	}, {
		// A broker cut off from the leader controller: its raft fetches
		// refused elsewhere, its heartbeats fine.
		capture: fixtures + "/kafka/kraft-observer-loop.pcap.gz",
		incidents: [][]string{{"not-leader-loop",
			"connection-refused", "liveness-without-replication", "stalled-fetch", "unanswered-requests"}},
		severity: []detectors.Severity{detectors.Error},
	}, {
		// Two nodes advertised at one endpoint: the clients and the
		// follower sent there are refused, the follower's fetches stall.
		capture: fixtures + "/kafka/kraft-listener-conflict.pcap.gz",
		incidents: [][]string{{"advertised-listener-conflict",
			"not-leader-loop", "not-leader-loop", "not-leader-loop",
			"stalled-fetch", "stalled-fetch", "stalled-fetch"}},
		severity: []detectors.Severity{detectors.Error},
	}, {
		// librdkafka through an election stall: the stall first, the
		// not-leader-loop it caused (listed above it in findings[]) after.
		capture:   fixtures + "/clients/election-stall-librdkafka.pcap",
		incidents: [][]string{{"leader-election-stall", "not-leader-loop"}},
		severity:  []detectors.Severity{detectors.Warning},
	}, {
		// kgo refused by the leader of three partitions for 8 s: one
		// finding now (it was six warnings), one incident.
		capture:   fixtures + "/clients/notleader-8s-kgo.pcap",
		incidents: [][]string{{"not-leader-loop"}},
		severity:  []detectors.Severity{detectors.Warning},
	}} {
		t.Run(tc.capture, func(t *testing.T) {
			_, rep := analyse(t, goldenCase{capture: tc.capture}, 1)
			var got [][]string
			var sev []detectors.Severity
			seen := map[int]int{}
			for _, in := range rep.Incidents {
				if in.Findings[0] != in.Cause || rep.Findings[in.Cause].Detector != in.Detector {
					t.Errorf("incident's cause %d (%s) is not its first finding %v", in.Cause, in.Detector, in.Findings)
				}
				rules := []string{rep.Findings[in.Cause].Detector}
				var rest []string
				high := detectors.Info
				for _, i := range in.Findings {
					seen[i]++
					high = max(high, rep.Findings[i].Severity)
					if i != in.Cause {
						rest = append(rest, rep.Findings[i].Detector)
					}
				}
				slices.Sort(rest)
				got = append(got, append(rules, rest...))
				sev = append(sev, in.Severity)
				if in.Severity != high {
					t.Errorf("incident of %s: severity %s, its highest finding %s", in.Detector, in.Severity, high)
				}
				if len(in.Findings) > 1 && !strings.HasPrefix(in.Story, "The cause, "+in.Detector+": ") {
					t.Errorf("story %q does not start with its cause", in.Story)
				}
			}
			if !slices.EqualFunc(got, tc.incidents, slices.Equal[[]string]) {
				t.Errorf("incidents:\n got %q\nwant %q", got, tc.incidents)
			}
			if !slices.Equal(sev, tc.severity) {
				t.Errorf("severities %v, want %v", sev, tc.severity)
			}
			for i, f := range rep.Findings {
				want := 0
				if f.Severity >= detectors.Warning {
					want = 1
				}
				if seen[i] != want {
					t.Errorf("finding %d (%s %s) in %d incidents, want %d", i, f.Severity, f.Detector, seen[i], want)
				}
			}
			// The renderers lead with them: the text's What is wrong
			// names the incident and its cause before the effects.
			var text bytes.Buffer
			if err := report.WriteText(&text, rep); err != nil {
				t.Fatal(err)
			}
			wrong := text.String()[strings.Index(text.String(), "What is wrong"):]
			wrong = wrong[:strings.Index(wrong, "\n\n")]
			if in := rep.Incidents[0]; len(in.Findings) > 1 {
				head := "incident 1: " + strconv.Itoa(len(in.Findings)) + " findings, caused by " + in.Detector
				if !strings.Contains(wrong, head) || strings.Index(wrong, "cause  ") > strings.Index(wrong, "effect ") {
					t.Errorf("What is wrong does not lead with the incident, cause first:\n%s", wrong)
				}
				var page bytes.Buffer
				if err := report.WriteHTML(&page, rep); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(page.String(), `id="incident-1"`) {
					t.Errorf("the page has no incident 1")
				}
			}
		})
	}
}

// TestIncidentsTable: the table's limits, on findings made by hand: the
// rules must be related, share a subject and overlap in time (within the
// slack); an unrelated rule, another node or a time far apart make
// incidents of their own.
func TestIncidentsTable(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := func(rule string, sev detectors.Severity, from, to time.Duration, nodes ...int32) detectors.Finding {
		return detectors.Finding{Detector: rule, Severity: sev, Summary: rule + " summary", First: t0.Add(from), Last: t0.Add(to), Nodes: nodes}
	}
	sizes := func(fs ...detectors.Finding) []int {
		var n []int
		for _, in := range report.Incidents(fs) {
			n = append(n, len(in.Findings))
		}
		return n
	}
	s := time.Second
	for _, tc := range []struct {
		name string
		fs   []detectors.Finding
		want []int
	}{
		{"related", []detectors.Finding{f("stalled-fetch", detectors.Error, 0, 10*s, 1), f("not-leader-loop", detectors.Warning, 0, 10*s, 1)}, []int{2}},
		{"unrelated rules", []detectors.Finding{f("stalled-fetch", detectors.Error, 0, 10*s, 1), f("sasl-failures", detectors.Warning, 0, 10*s, 1)}, []int{1, 1}},
		{"other node", []detectors.Finding{f("stalled-fetch", detectors.Error, 0, 10*s, 1), f("not-leader-loop", detectors.Warning, 0, 10*s, 2)}, []int{1, 1}},
		{"within the slack", []detectors.Finding{f("stalled-fetch", detectors.Error, 20*s, 30*s, 1), f("not-leader-loop", detectors.Warning, 0, 10*s, 1)}, []int{2}},
		{"far apart", []detectors.Finding{f("stalled-fetch", detectors.Error, 60*s, 70*s, 1), f("not-leader-loop", detectors.Warning, 0, 10*s, 1)}, []int{1, 1}},
		{"info in none", []detectors.Finding{f("stalled-fetch", detectors.Info, 0, 10*s, 1), f("not-leader-loop", detectors.Warning, 0, 10*s, 1)}, []int{1}},
		{"shape required", []detectors.Finding{f("advertised-listener-conflict", detectors.Error, 0, 10*s, 1), f("not-leader-loop", detectors.Warning, 0, 10*s, 1)}, []int{1, 1}},
	} {
		if got := sizes(tc.fs...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: incidents of %v findings, want %v", tc.name, got, tc.want)
		}
	}
	// The cause leads whatever the order of findings[], and the
	// severity is the highest.
	in := report.Incidents([]detectors.Finding{f("stalled-fetch", detectors.Error, 0, 10*s, 1), f("not-leader-loop", detectors.Warning, 0, 10*s, 1)})
	if in[0].Cause != 1 || !slices.Equal(in[0].Findings, []int{1, 0}) || in[0].Severity != detectors.Error || in[0].Detector != "not-leader-loop" {
		t.Errorf("incident %+v, want not-leader-loop (1) first, error", in[0])
	}
}
