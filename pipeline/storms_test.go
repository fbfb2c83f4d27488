package pipeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/fixtures/record"
)

// stormSidecar is what fixtures/clients/storms wrote beside each capture:
// what the injector did (Answered), counted by the control function, and
// the per API counts framed from the proxy's bytes without kfsniff.
type stormSidecar struct {
	Pcap     string           `json:"pcap"`
	Clients  []string         `json:"client_ids"`
	Group    string           `json:"group"`
	Answered map[string]int64 `json:"answered"`
	Client   map[string]int64 `json:"client"`
	Counts   record.Counts    `json:"counts"`
}

func readStorm(t *testing.T, name string) (stormSidecar, []detectors.Finding) {
	t.Helper()
	dir := filepath.Join("..", "fixtures", "pcaps", "clients")
	var sc stormSidecar
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sc); err != nil {
		t.Fatal(err)
	}
	return sc, analyseWithDetectors(t, filepath.Join(dir, sc.Pcap)).Findings
}

// only returns the findings of rule, failing unless there are want of
// them at least at min severity.
func only(t *testing.T, fs []detectors.Finding, rule string, want int, min detectors.Severity) []detectors.Finding {
	t.Helper()
	var out []detectors.Finding
	for _, f := range fs {
		if f.Detector == rule {
			out = append(out, f)
		}
	}
	if len(out) != want {
		t.Fatalf("%d %s findings, want %d:%s", len(out), rule, want, describe(fs))
	}
	for _, f := range out {
		if f.Severity < min {
			t.Errorf("%s: severity %s, want at least %s: %s", rule, f.Severity, min, f.Summary)
		}
	}
	return out
}

// TestRecordedRebalanceLoops: kgo consumers of a classic group whose
// heartbeats the coordinator answered REBALANCE_IN_PROGRESS for 8 s, and
// of a KIP-848 group fenced with FENCED_MEMBER_EPOCH once a second per
// member for 8 s, are each a rebalance loop of the group, a warning (the
// loop lasted more than 3 s, less than 30 s, and settled before the end),
// and the error storm of the same errors is explained by it.
func TestRecordedRebalanceLoops(t *testing.T) {
	t.Run("classic", func(t *testing.T) {
		sc, fs := readStorm(t, "rebalance-kgo-classic")
		f := only(t, fs, "rebalance-loop", 1, detectors.Warning)[0]
		if f.Severity != detectors.Warning || f.Fields["group"] != sc.Group || f.Fields["protocol"] != "classic" || f.Fields["ongoing"] != false {
			t.Errorf("want a warning for group %s, classic, settled: %s %v", sc.Group, f.Severity, f.Fields)
		}
		// kfake answered a few REBALANCE_IN_PROGRESS itself while the
		// group formed; the injector answered the rest.
		if injected := sc.Answered["REBALANCE_IN_PROGRESS"]; f.Counts["rebalance_errors"] < injected || injected < 20 {
			t.Errorf("rebalance_errors %d, the injector answered %d", f.Counts["rebalance_errors"], injected)
		}
		if f.Counts["members_joined"] != 2 || f.Counts["members_left"] != 2 {
			t.Errorf("joined %d, left %d: want the 2 consumers joining and leaving", f.Counts["members_joined"], f.Counts["members_left"])
		}
		for _, g := range fs {
			if g.Detector == "error-storm" && g.Severity != detectors.Info {
				t.Errorf("the error storm of REBALANCE_IN_PROGRESS is not explained by the loop: %s", g.Summary)
			}
		}
	})
	t.Run("KIP-848", func(t *testing.T) {
		sc, fs := readStorm(t, "rebalance-kgo-consumer")
		f := only(t, fs, "rebalance-loop", 1, detectors.Warning)[0]
		if f.Severity != detectors.Warning || f.Fields["group"] != sc.Group || f.Fields["protocol"] != "consumer" {
			t.Errorf("want a warning for group %s, consumer protocol: %s %v", sc.Group, f.Severity, f.Fields)
		}
		if got, injected := f.Counts["fences"], sc.Answered["FENCED_MEMBER_EPOCH"]; got != injected || injected < 4 {
			t.Errorf("fences %d, the injector fenced %d", got, injected)
		}
	})
}

// TestRecordedMetadataStorm: a kgo producer with metadata.max.age at
// 100 ms refreshing for 8 s is a metadata storm of its client id, a
// warning, counting every Metadata request the client sent.
func TestRecordedMetadataStorm(t *testing.T) {
	sc, fs := readStorm(t, "metadata-storm-kgo")
	f := only(t, fs, "metadata-storm", 1, detectors.Warning)[0]
	if f.Severity != detectors.Warning || f.Fields["client_id"] != sc.Clients[0] {
		t.Errorf("want a warning for %s: %s %v", sc.Clients[0], f.Severity, f.Fields)
	}
	req, _ := sc.Counts.ByKey(3)
	if f.Counts["metadata_requests"] != int64(req) || req < 50 {
		t.Errorf("metadata_requests %d, the client sent %d", f.Counts["metadata_requests"], req)
	}
}

// TestRecordedReconnectStorm: an application making a kgo client per
// attempt every 150 ms against a broker closing connections at
// ApiVersions is a reconnect storm of that broker, a warning, counting
// every connection the proxy accepted, all short-lived.
func TestRecordedReconnectStorm(t *testing.T) {
	sc, fs := readStorm(t, "reconnect-storm-kgo")
	f := only(t, fs, "reconnect-storm", 1, detectors.Warning)[0]
	if f.Severity != detectors.Warning || f.Fields["storm"] != true {
		t.Errorf("want a warning, a storm: %s %v", f.Severity, f.Fields)
	}
	if f.Counts["attempts"] != int64(sc.Counts.Connections) || f.Counts["short_lived"] != int64(sc.Counts.Connections) {
		t.Errorf("attempts %d, short-lived %d: the proxy accepted %d connections, each closed within a second",
			f.Counts["attempts"], f.Counts["short_lived"], sc.Counts.Connections)
	}
	if closed := sc.Answered["connection closed at ApiVersions"]; f.Counts["handshake_only"] < closed || closed < 20 {
		t.Errorf("handshake_only %d, the broker closed %d connections at ApiVersions", f.Counts["handshake_only"], closed)
	}
}

// TestRecordedSASLFailures: against a SASL listener enabling PLAIN and
// SCRAM with connections.max.reauth.ms at 2 s, kgo asking for OAUTHBEARER
// and kgo with a wrong PLAIN password are each a warning naming their
// error; kgo with SCRAM, re-authenticating every 2 s, gives nothing.
func TestRecordedSASLFailures(t *testing.T) {
	sc, fs := readStorm(t, "sasl-kgo")
	got := only(t, fs, "sasl-failure", 2, detectors.Warning)
	byClient := map[string]detectors.Finding{}
	for _, f := range got {
		byClient[f.Fields["client_id"].(string)] = f
	}
	oauth, bad := byClient["kfsniff-oauth"], byClient["kfsniff-badpass"]
	if !slices.Equal(oauth.Fields["mechanisms"].([]string), []string{"OAUTHBEARER"}) || oauth.Subject.Error != 33 {
		t.Errorf("OAUTHBEARER client: %v", oauth.Fields)
	}
	if bad.Counts["failures"] != sc.Answered["SASL_AUTHENTICATION_FAILED"] || bad.Subject.Error != 58 {
		t.Errorf("wrong password: %d failures, the injector answered %d: %v", bad.Counts["failures"], sc.Answered["SASL_AUTHENTICATION_FAILED"], bad.Fields)
	}
	if msgs, _ := bad.Fields["messages"].([]string); !slices.Equal(msgs, []string{"Authentication failed: Invalid username or password"}) {
		t.Errorf("messages %v", bad.Fields["messages"])
	}
	if sc.Client["kfsniff-scram produced"] == 0 {
		t.Errorf("the SCRAM client produced nothing: %v", sc.Client)
	}
}
