package pipeline

import (
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/report"
)

// sentAPI is a request count as the recorder's own framer counted what was
// sent, without kfsniff.
type sentAPI struct {
	Key      int16 `json:"key"`
	Version  int16 `json:"version"`
	Requests int64 `json:"requests"`
}

// apisOf sums clients' API counts by key and version.
func apisOf(clients ...report.ClientEntry) map[[2]int16]int64 {
	m := map[[2]int16]int64{}
	for _, c := range clients {
		for _, a := range c.APIs {
			m[[2]int16{a.Key, a.Version}] += a.Requests
		}
	}
	return m
}

func sentAPIs(apis []sentAPI) map[[2]int16]int64 {
	m := map[[2]int16]int64{}
	for _, a := range apis {
		if a.Requests > 0 {
			m[[2]int16{a.Key, a.Version}] += a.Requests
		}
	}
	return m
}

// TestInventoryRealClients: the inventory of each real client recording
// (kgo, sarama, kafka-go, kafkajs producing to kfake) against what its
// sidecar says the application was: the library and version, the client
// id and acks it was configured with, and the requests the recorder
// counted on the wire.
func TestInventoryRealClients(t *testing.T) {
	sidecars, _ := filepath.Glob(filepath.Join("..", "fixtures", "pcaps", "clients", "notleader-*.json"))
	if len(sidecars) < 4 {
		t.Fatalf("found %d client recordings, want kgo, sarama, kafka-go, kafkajs", len(sidecars))
	}
	// What each library calls itself in ApiVersions v3+ (KIP-511).
	software := map[string]string{"github.com/twmb/franz-go/pkg/kgo": "kgo", "github.com/IBM/sarama": "sarama"}
	for _, sc := range sidecars {
		var side struct {
			Client      string `json:"client"`
			Pcap        string `json:"pcap"`
			Topic       string `json:"topic"`
			Application struct {
				Library  string `json:"library"`
				Version  string `json:"version"`
				Settings []struct {
					Name  string `json:"name"`
					Value string `json:"value"`
				} `json:"settings"`
			} `json:"application"`
			Counts struct {
				APIs []sentAPI `json:"apis"`
			} `json:"counts"`
		}
		readJSON(t, sc, &side)
		t.Run(side.Client, func(t *testing.T) {
			r := analyseWithDetectors(t, filepath.Join(filepath.Dir(sc), side.Pcap))
			if len(r.Clients) != 1 {
				t.Fatalf("%d clients, want the one application", len(r.Clients))
			}
			c := r.Clients[0]
			var clientID, acks string
			for _, s := range side.Application.Settings {
				switch lower := strings.ToLower(s.Name); {
				case strings.HasSuffix(lower, "clientid"):
					clientID = strings.TrimSuffix(s.Value, "(empty)")
				case strings.Contains(lower, "acks"):
					acks = "1"
					if strings.Contains(s.Value, "All") || strings.Contains(s.Value, "-1") {
						acks = "all"
					}
				}
			}
			if c.ClientID != clientID || c.Host != "127.0.0.1" {
				t.Errorf("client %s %q, want 127.0.0.1 %q", c.Host, c.ClientID, clientID)
			}
			sentV3 := false
			var produces int64
			for _, a := range side.Counts.APIs {
				sentV3 = sentV3 || a.Key == 18 && a.Version >= 3
				if a.Key == 0 {
					produces += a.Requests
				}
			}
			switch name, ok := software[side.Application.Library]; {
			case ok && sentV3:
				if len(c.Software) != 1 || c.Software[0].Name != name || c.Software[0].Version != side.Application.Version {
					t.Errorf("software %+v, want %s %s", c.Software, name, side.Application.Version)
				}
			case sentV3:
				t.Errorf("%s sent ApiVersions v3+: add the name it gives itself to this test", side.Application.Library)
			default:
				if len(c.Software) != 0 {
					t.Errorf("software %+v from a client that sent no ApiVersions v3+", c.Software)
				}
			}
			if got, want := apisOf(c), sentAPIs(side.Counts.APIs); !maps.Equal(got, want) {
				t.Errorf("apis %v, the recorder counted %v", got, want)
			}
			if !slices.Equal(c.Topics, []string{side.Topic}) {
				t.Errorf("topics %v, want %s", c.Topics, side.Topic)
			}
			if len(c.Acks) != 1 || c.Acks[acks] != produces {
				t.Errorf("acks %v, want %s on all %d Produce requests", c.Acks, acks, produces)
			}
			if !c.Kafka40Ready {
				t.Errorf("%s %s is not ready for Kafka 4.0: %+v", side.Application.Library, side.Application.Version, c.APIs)
			}
		})
	}
}

// TestInventoryRecordedKgo: the kgo/kfake recordings hold several kgo
// clients (producer, consumers, admin); together their requests are what
// the recorder counted, their topics what the scenario used, and the
// producers show kgo's defaults: acks=all, snappy, idempotent.
func TestInventoryRecordedKgo(t *testing.T) {
	counts, _ := filepath.Glob(filepath.Join("..", "fixtures", "pcaps", "recorded-*.counts.json"))
	if len(counts) < 3 {
		t.Fatalf("found %d recordings", len(counts))
	}
	for _, cf := range counts {
		var side struct {
			Pcap string `json:"pcap"`
			Sent struct {
				Topics []string `json:"topics"`
			} `json:"sent"`
			Counts struct {
				APIs []sentAPI `json:"apis"`
			} `json:"counts"`
		}
		readJSON(t, cf, &side)
		t.Run(side.Pcap, func(t *testing.T) {
			r := analyseWithDetectors(t, filepath.Join(filepath.Dir(cf), side.Pcap))
			if len(r.Clients) < 2 {
				t.Fatalf("%d clients, want the scenario's producer and consumers", len(r.Clients))
			}
			if got, want := apisOf(r.Clients...), sentAPIs(side.Counts.APIs); !maps.Equal(got, want) {
				t.Errorf("apis %v, the recorder counted %v", got, want)
			}
			topics := map[string]bool{}
			producers := 0
			for _, c := range r.Clients {
				if len(c.Software) != 1 || c.Software[0].Name != "kgo" || !strings.HasPrefix(c.Software[0].Version, "v1.") {
					t.Errorf("%q: software %+v, want kgo v1.x", c.ClientID, c.Software)
				}
				if !c.Kafka40Ready {
					t.Errorf("%q: kgo not ready for Kafka 4.0: %+v", c.ClientID, c.APIs)
				}
				for _, tp := range c.Topics {
					topics[tp] = true
				}
				if len(c.Acks) == 0 {
					continue
				}
				producers++
				if len(c.Acks) != 1 || c.Acks["all"] == 0 || len(c.Compression) != 1 || c.Compression["snappy"] == 0 ||
					!c.Idempotent || len(c.ProducerIDs) == 0 || c.Transactional {
					t.Errorf("%q: acks %v, compression %v, idempotent %v (ids %v), transactional %v: want kgo's defaults",
						c.ClientID, c.Acks, c.Compression, c.Idempotent, c.ProducerIDs, c.Transactional)
				}
			}
			want := append([]string{}, side.Sent.Topics...)
			sort.Strings(want)
			got := make([]string, 0, len(topics))
			for tp := range topics {
				got = append(got, tp)
			}
			sort.Strings(got)
			if !slices.Equal(got, want) || producers == 0 {
				t.Errorf("topics %v, want %v; %d producers", got, want, producers)
			}
		})
	}
}
