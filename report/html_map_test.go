package report_test

import (
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/report"
)

// TestMapFailingEdges: on healthy captures of real clients (kgo against
// kfake: a consumer group whose first JoinGroup is answered
// MEMBER_ID_REQUIRED, admin calls, producers and consumers of every codec,
// transactions) no edge of the map is failing, whatever error responses
// or cut-off fetches they hold; on captures of incidents the edges the
// findings implicate are failing and carry the findings' numbers.
func TestMapFailingEdges(t *testing.T) {
	healthy := append(captures(t, fixtures+"/compressed"),
		fixtures+"/recorded-kgo-kfake-group.pcap", fixtures+"/recorded-kgo-kfake-admin.pcap",
		fixtures+"/recorded-kgo-kfake-apiversions-fallback.pcap",
		// the Java client against real Apache Kafka 4.1.1: every API of a busy healthy
		// cluster, SASL, a leader's controlled shutdown
		fixtures+"/kafka/kraft-healthy-load.pcap.gz", fixtures+"/kafka/kraft-healthy-startup.pcap.gz",
		fixtures+"/kafka/java-sasl-plain.pcap.gz", fixtures+"/kafka/java-leader-moves.pcap.gz")
	sawErrors := false
	for _, c := range healthy {
		t.Run(c, func(t *testing.T) {
			_, rep := analyse(t, goldenCase{capture: c}, 1)
			for _, f := range rep.Findings {
				if f.Severity >= detectors.Warning {
					t.Fatalf("not healthy: %s %s", f.Severity, f.Summary)
				}
			}
			for _, e := range report.BuildPage(rep).Map.Edges {
				sawErrors = sawErrors || e.Errors > 0 || e.Unanswered > 0 || e.Resets > 0
				if e.Failing || len(e.Findings) > 0 {
					t.Errorf("edge %s -> %s failing (findings %v, %d error responses)", e.From, e.To, e.Findings, e.Errors)
				}
			}
		})
	}
	if !sawErrors {
		t.Errorf("no healthy capture had an error response, unanswered request or reset: the test shows nothing")
	}
	for _, c := range []string{fixtures + "/clients/mm2-replay-kgo.pcap", fixtures + "/clients/notleader-8s-kgo.pcap",
		fixtures + "/scenarios/observer-fetch-loop.pcap"} {
		t.Run(c, func(t *testing.T) {
			_, rep := analyse(t, goldenCase{capture: c}, 1)
			marked := map[int]bool{}
			for _, e := range report.BuildPage(rep).Map.Edges {
				if e.Failing != (len(e.Findings) > 0) {
					t.Errorf("edge %s -> %s: failing %v, findings %v", e.From, e.To, e.Failing, e.Findings)
				}
				for _, n := range e.Findings {
					marked[n] = true
				}
			}
			for i, f := range rep.Findings {
				if f.Severity >= detectors.Warning && len(f.Evidence) > 0 && !marked[i+1] {
					t.Errorf("finding %d (%s) marks no edge", i+1, f.Detector)
				}
			}
			if len(marked) == 0 {
				t.Errorf("no failing edge on an incident capture")
			}
		})
	}
}

// TestMapEdgesCarryIncidents: the edges of an incident are marked with its
// number. On Apache Kafka 4.1.1 with the controller quorum lost
// (fixtures/pcaps/kafka/kraft-election-stall) every finding at warning or
// above is one incident: every failing edge carries incident 1 and no
// other; on a capture of two incidents each failing edge carries the
// incidents of its findings.
func TestMapEdgesCarryIncidents(t *testing.T) {
	_, rep := analyse(t, goldenCase{capture: fixtures + "/kafka/kraft-election-stall.pcap.gz"}, 1)
	page := report.BuildPage(rep)
	failing := 0
	for _, e := range page.Map.Edges {
		if !e.Failing {
			if len(e.Incidents) > 0 {
				t.Errorf("edge %s -> %s is not failing but carries incidents %v", e.From, e.To, e.Incidents)
			}
			continue
		}
		failing++
		if len(e.Incidents) != 1 || e.Incidents[0] != 1 {
			t.Errorf("edge %s -> %s: incidents %v, want [1] (findings %v)", e.From, e.To, e.Incidents, e.Findings)
		}
	}
	if failing == 0 {
		t.Fatal("no failing edge on the quorum-lost recording")
	}
}
