package pipeline

import (
	"path/filepath"
	"slices"
	"testing"

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
// and kafkajs use versions Kafka 4.0 serves.
func TestKafka40ReadinessQuietOnRecordedClients(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "fixtures", "pcaps", "clients", "*.pcap"))
	more, _ := filepath.Glob(filepath.Join("..", "fixtures", "pcaps", "recorded-*.pcap"))
	for _, f := range append(files, more...) {
		r := analyseWithDetectors(t, f)
		for _, fd := range r.Findings {
			if fd.Detector == "kafka40-removed-versions" {
				t.Errorf("%s: %s", filepath.Base(f), fd.Summary)
			}
		}
	}
}
