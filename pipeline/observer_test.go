package pipeline

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// TestObserverScenario runs the observer fetch loop capture and checks
// what the three rules of a KRaft observer stuck in its fetch loop say of
// it (not-leader-loop, stalled-fetch, liveness-without-replication): each
// once, with the scenario's expectations (written from the incident
// write-up), and the sentences that put the facts side by side. (The
// rules' own tests are specifications on detectortest.)
func TestObserverScenario(t *testing.T) {
	sc, ok := gen.FindScenario("observer-fetch-loop.pcap")
	if !ok {
		t.Fatal("no observer-fetch-loop scenario")
	}
	r := analyseWithDetectors(t, filepath.Join("..", "fixtures", "pcaps", gen.ScenarioDir, sc.Name))
	of := func(rule string) []detectors.Finding {
		var out []detectors.Finding
		for _, f := range r.Findings {
			if f.Detector == rule {
				out = append(out, f)
			}
		}
		return out
	}
	mine := []string{"not-leader-loop", "stalled-fetch", "liveness-without-replication"}
	for _, want := range sc.Expect {
		if !slices.Contains(mine, want.Detector) {
			continue
		}
		got := of(want.Detector)
		if len(got) != 1 {
			t.Errorf("%s: %d findings, want 1:%s", want.Detector, len(got), describe(got))
			continue
		}
		if err := want.Check(got[0].Detector, got[0].Severity.String(), got[0].Nodes, got[0].Counts, got[0].Fields); err != nil {
			t.Error(err)
		}
	}
	if nl := of("not-leader-loop"); len(nl) == 1 && !strings.Contains(nl[0].Summary, "KAFKA-19354") {
		t.Errorf("not-leader-loop summary %q does not name KAFKA-19354", nl[0].Summary)
	}
	if lw := of("liveness-without-replication"); len(lw) == 1 {
		for _, s := range []string{
			"broker 68 is alive by heartbeat: 20 heartbeats to node 1003 (10.30.7.85:8081) answered without error",
			"its metadata replication is not: 2000 raft fetches to 3 other controllers all answered NOT_LEADER_OR_FOLLOWER naming leader 1003",
		} {
			if !strings.Contains(lw[0].Explanation, s) {
				t.Errorf("explanation %q lacks %q", lw[0].Explanation, s)
			}
		}
	}
	if es := of("error-storm"); len(es) != 1 || es[0].Severity != detectors.Info || es[0].Fields["explained_by"] != "not-leader-loop" {
		t.Errorf("the raft fetches' error storm is not explained by the loop:%s", describe(es))
	}
	for _, want := range sc.Roles {
		found := false
		for _, c := range r.Connections {
			if c.Client == want.Client && c.Server == want.Server {
				found = true
				if !slices.Equal(c.Roles, want.Roles) {
					t.Errorf("connection %s -> %s roles %v, want %v", c.Client, c.Server, c.Roles, want.Roles)
				}
			}
		}
		if !found {
			t.Errorf("no connection %s -> %s", want.Client, want.Server)
		}
	}
}
