package pipeline

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
)

// TestKafka40ReadinessOnRealClients: the public captures hold real clients
// of several ages. Checked against KIP-896 by hand: kafka-python's Produce
// v1 (go-sniffer), the 0.10 console producer's Produce v2 (deepflow) and a
// ListOffsets v0 (arkime) are versions Kafka 4.0 refuses; kafka-python's
// Metadata v0 and librdkafka's Metadata v2 and Produce v3 (ndpi) were
// deprecated in 3.7 but 4.0 kept them, and the rest of deepflow's (Produce
// v7/v9, Fetch v12/v13, group APIs) are recent. The rule must warn on the
// first three, naming the version, and stay silent on the others.
func TestKafka40ReadinessOnRealClients(t *testing.T) {
	for _, tc := range []struct {
		capture, clientID, removed, library string
	}{
		{"go-sniffer/kafka.pcap", "kafka-python-producer-1", "Produce v1", "kafka-python"},
		{"deepflow/00-produce-v2.pcap", "console-producer", "Produce v2", "Apache Kafka Java client"},
		{"arkime/kafka.pcap", "", "ListOffsets v0", ""},
		{"ndpi/kafka.pcapng", "", "", ""},
		{"deepflow/00-produce-v7-sw8.pcap", "", "", ""},
		{"deepflow/00-produce-v9.pcap", "", "", ""},
		{"deepflow/01-fetch-v12-ok.pcap", "", "", ""},
		{"deepflow/11-join-group-v7.pcap", "", "", ""},
		{"deepflow/mixed-with-unsupported.pcap", "", "", ""},
	} {
		t.Run(tc.capture, func(t *testing.T) {
			r := analyseWithDetectors(t, sharedPath(t, tc.capture))
			var got []detectors.Finding
			for _, f := range r.Findings {
				if f.Detector == "kafka40-removed-versions" {
					got = append(got, f)
				}
			}
			if tc.removed == "" {
				if len(got) != 0 {
					t.Errorf("findings on versions Kafka 4.0 serves:%s", describe(got))
				}
				for _, c := range r.Clients {
					if !c.Kafka40Ready {
						t.Errorf("inventory: %q not ready: %+v", c.ClientID, c.APIs)
					}
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d findings, want one for %s:%s", len(got), tc.removed, describe(got))
			}
			f := got[0]
			if f.Severity != detectors.Warning || f.Fields["client_id"] != tc.clientID ||
				!slices.Equal(f.Fields["removed_versions"].([]string), []string{tc.removed}) {
				t.Errorf("got %s %v %v, want warning for %q on %s", f.Severity, f.Fields["client_id"], f.Fields["removed_versions"], tc.clientID, tc.removed)
			}
			if lib, _ := f.Fields["library"].(string); lib != tc.library {
				t.Errorf("library %q, want %q", lib, tc.library)
			}
			if len(f.Evidence) == 0 || f.Counts["removed_version_requests"] != 1 {
				t.Errorf("evidence %v, counts %v", f.Evidence, f.Counts)
			}
			if len(r.Clients) != 1 || r.Clients[0].Kafka40Ready {
				t.Errorf("inventory: %+v, want the one client not ready", r.Clients)
			}
		})
	}
}

// TestKafka40ReadinessQuietOnRecordedClients: today's kgo, sarama, kafka-go
// and kafkajs use versions Kafka 4.0 serves (the kafka40-* recordings are
// clients set up to send old ones: TestKafka40ReadinessRecorded).
func TestKafka40ReadinessQuietOnRecordedClients(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "fixtures", "pcaps", "clients", "*.pcap"))
	more, _ := filepath.Glob(filepath.Join("..", "fixtures", "pcaps", "recorded-*.pcap"))
	for _, f := range append(files, more...) {
		if strings.HasPrefix(filepath.Base(f), "kafka40-") {
			continue
		}
		r := analyseWithDetectors(t, f)
		for _, fd := range r.Findings {
			if fd.Detector == "kafka40-removed-versions" {
				t.Errorf("%s: %s", filepath.Base(f), fd.Summary)
			}
		}
	}
}

// TestKafka40ReadinessRecorded: real clients set up with old settings,
// recorded by fixtures/clients/upgrade. The sidecar lists every request
// version each client sent, decoded from the bytes with kmsg; the finding
// must be a warning (a misconfiguration that will bite) naming exactly
// those of them KIP-896 removed, with their counts. Independently of
// kfsniff's table, the clients' own sources say what must be among them:
// sarama at Config.Version V0_11_0_0 sends DescribeConfigs and DescribeAcls
// at v0 (admin.go picks v1 from 1.1 and 2.0), and librdkafka with
// broker.version.fallback 0.9.0 sends Produce v1 (v2 needs 0.10's message
// format); kfake, like a 4.0 broker, closes the connection on that Produce.
func TestKafka40ReadinessRecorded(t *testing.T) {
	for _, tc := range []struct {
		name, clientID, library string
		must                    []string
		refused                 bool // the broker closed the connection on them
	}{
		{"kafka40-sarama", "sarama", "Sarama", []string{"DescribeACLs v0", "DescribeConfigs v0"}, false},
		{"kafka40-librdkafka", "rdkafka", "librdkafka", []string{"Produce v1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("..", "fixtures", "pcaps", "clients")
			data, err := os.ReadFile(filepath.Join(dir, tc.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var sc struct {
				Observed struct {
					Sent []struct {
						ClientID   string `json:"client_id"`
						Key        int16  `json:"key"`
						Version    int16  `json:"version"`
						Requests   int64  `json:"requests"`
						Unanswered int64  `json:"unanswered"`
					} `json:"sent"`
				} `json:"observed"`
			}
			if err := json.Unmarshal(data, &sc); err != nil {
				t.Fatal(err)
			}
			var removed []string
			counts := map[string]int64{}
			var total, unanswered int64
			for _, s := range sc.Observed.Sent {
				if s.ClientID != tc.clientID {
					t.Fatalf("sidecar: a request of client id %q", s.ClientID)
				}
				if _, ok := decode.RemovedIn40(s.Key, s.Version); !ok {
					continue
				}
				name := fmt.Sprintf("%s v%d", decode.Name(s.Key), s.Version)
				removed = append(removed, name)
				counts[name] = s.Requests
				total += s.Requests
				unanswered += s.Unanswered
			}
			for _, m := range tc.must {
				if !slices.Contains(removed, m) {
					t.Fatalf("the recording lacks %s (sent: %+v)", m, sc.Observed.Sent)
				}
			}
			if tc.refused != (unanswered == total) || !tc.refused && unanswered != 0 {
				t.Errorf("%d of %d removed-version requests unanswered, want all refused %v", unanswered, total, tc.refused)
			}

			r := analyseWithDetectors(t, filepath.Join(dir, tc.name+".pcap"))
			f := findingsOf(t, r.Findings, "kafka40-removed-versions", 1)[0]
			var got []string
			fieldAs(t, &f, "removed_versions", &got)
			slices.Sort(got)
			slices.Sort(removed)
			if f.Severity != detectors.Warning || !slices.Equal(got, removed) || f.Fields["client_id"] != tc.clientID ||
				f.Fields["library"] != tc.library {
				t.Errorf("%s %v (client %v, library %v), want a warning naming %v for %q (%s)", f.Severity, got,
					f.Fields["client_id"], f.Fields["library"], removed, tc.clientID, tc.library)
			}
			if f.Counts["removed_version_requests"] != total {
				t.Errorf("removed_version_requests %d, the client sent %d", f.Counts["removed_version_requests"], total)
			}
			for name, n := range counts {
				if f.Counts[name] != n {
					t.Errorf("%s: %d counted, the client sent %d", name, f.Counts[name], n)
				}
			}
			for _, c := range r.Clients {
				if c.ClientID == tc.clientID && c.Kafka40Ready {
					t.Errorf("inventory: %q marked ready for Kafka 4.0", c.ClientID)
				}
			}
		})
	}
}
