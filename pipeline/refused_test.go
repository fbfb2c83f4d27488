package pipeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
)

// refusedSidecar is what fixtures/clients/refused writes beside a
// recording, from the application's dialer and from the packets decoded
// with gopacket, not from kfsniff.
type refusedSidecar struct {
	Broker  string `json:"broker"`
	Refused string `json:"refused"`
	App     struct {
		Dials []struct {
			At float64 `json:"at_s"`
		} `json:"dials"`
		Error string `json:"error"`
	} `json:"application"`
	Wire struct {
		Attempts int     `json:"attempts"`
		SYNs     int     `json:"syns"`
		RSTs     int     `json:"rsts"`
		Accepted int     `json:"accepted"`
		First    float64 `json:"first_attempt_s"`
		Last     float64 `json:"last_attempt_s"`
	} `json:"wire"`
}

// TestRefusedBootstrapRecordings: real clients whose only bootstrap server
// is a port nothing listens on, on the host where kfake serves another
// client (issue 12's third case), recorded for real on loopback. The
// endpoint is not advertised, not a Kafka port and never spoke Kafka; its
// host did, on another port: a dead bootstrap server, a warning however
// quickly the client gave up (kgo, sarama), an error when the client was
// still refused 10 s on at the end (librdkafka never gives up). The counts
// are the sidecar's, on one worker and on two (the listeners seen are
// learned by the reader there).
func TestRefusedBootstrapRecordings(t *testing.T) {
	for _, tc := range []struct {
		client string
		dials  bool // the sidecar has the application's dials
	}{
		{"kgo", true},
		{"sarama", true},
		{"librdkafka", false},
	} {
		t.Run(tc.client, func(t *testing.T) {
			dir := filepath.Join("..", "fixtures", "pcaps", "clients")
			name := "refused-bootstrap-" + tc.client
			data, err := os.ReadFile(filepath.Join(dir, name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var sc refusedSidecar
			if err := json.Unmarshal(data, &sc); err != nil {
				t.Fatal(err)
			}
			if sc.Wire.Accepted != 0 || sc.Wire.Attempts < 3 || sc.App.Error == "" {
				t.Fatalf("the recording is not of a client refused every time that gave up: %+v", sc)
			}
			if tc.dials && len(sc.App.Dials) != sc.Wire.Attempts {
				t.Fatalf("sidecar: %d dials, %d attempts on the wire", len(sc.App.Dials), sc.Wire.Attempts)
			}
			// The policy: a dead bootstrap server is a misconfiguration
			// that bites (warning); clients still refused 10 s on when
			// the capture ended: an error.
			unable := sc.Wire.Last - sc.Wire.First
			want := detectors.Warning
			if unable >= detectors.HealAfter.Seconds() {
				want = detectors.Error
			}
			for _, workers := range []int{1, 2} {
				r := runFileOn(t, filepath.Join(dir, name+".pcap"), workers)
				fs := findingsOf(t, r.Findings, "connection-refused", 1)
				f := &fs[0]
				if f.Severity != want {
					t.Errorf("%d workers: severity %s, want %s: %s", workers, f.Severity, want, f.Summary)
				}
				for k, n := range map[string]int64{"attempts": int64(sc.Wire.Attempts), "refused": int64(sc.Wire.RSTs),
					"syns": int64(sc.Wire.SYNs), "unanswered": 0} {
					if f.Counts[k] != n {
						t.Errorf("%d workers: %s = %d, want %d (sidecar)", workers, k, f.Counts[k], n)
					}
				}
				var endpoint string
				var same []string
				var kafka, accepted bool
				var unableS float64
				fieldAs(t, f, "endpoint", &endpoint)
				fieldAs(t, f, "same_host_kafka", &same)
				fieldAs(t, f, "kafka_endpoint", &kafka)
				fieldAs(t, f, "accepted", &accepted)
				fieldAs(t, f, "unable_s", &unableS)
				if endpoint != sc.Refused || !slices.Equal(same, []string{sc.Broker}) || !kafka || accepted {
					t.Errorf("%d workers: endpoint %s same host %v kafka %v accepted %v, want %s, [%s], a Kafka endpoint never accepting",
						workers, endpoint, same, kafka, accepted, sc.Refused, sc.Broker)
				}
				if !near(unableS, unable) {
					t.Errorf("%d workers: unable to connect for %.3f s, the wire says %.3f s", workers, unableS, unable)
				}
				onlyInfoBesides(t, r.Findings, "connection-refused")
			}
		})
	}
}
