package pipeline

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/notleaderloop"
	"github.com/kfsniff/kfsniff/detectors/stalledfetch"
)

// Real clients held up for seconds by a failure that then heals (issue 12's
// severity policy; recorded by fixtures/clients/cmd/held). What the policy
// gives is computed from what the recorder decoded from the same bytes with
// kmsg (the sidecars), not from kfsniff: how long each client was held up,
// and that it healed.

// defaultCount is rule a's default for count parameter name.
func defaultCount(t *testing.T, a *detectors.Analyzer, name string) int {
	t.Helper()
	for _, p := range a.Params() {
		if p.Name == name {
			n, err := strconv.Atoi(p.Default)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("%s has no parameter %s", a.Name, name)
	return 0
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// TestRealClientsNotLeaderHealed: the case. The broker leading
// every partition of orders, named by Metadata throughout, refuses Produce
// with NOT_LEADER_OR_FOLLOWER for 8.5 s, then accepts again. kgo (which
// retries each partition at its 5 s metadata refresh), sarama (3 retries a
// record, then the next) and kafka-go (10 attempts a message) were each
// held up for about 9 s: one warning, not nothing.
func TestRealClientsNotLeaderHealed(t *testing.T) {
	minResponses := defaultCount(t, notleaderloop.Analyzer, "min-responses")
	sidecars, _ := filepath.Glob(filepath.Join("..", "fixtures", "pcaps", "clients", "notleader-8s-*.json"))
	if len(sidecars) < 2 {
		t.Fatalf("found %d recordings, want kgo and another library", len(sidecars))
	}
	for _, sc := range sidecars {
		var side struct {
			Client   string `json:"client"`
			Pcap     string `json:"pcap"`
			Topic    string `json:"topic"`
			LeaderID int32  `json:"leader_id"`
			Observed struct {
				Partitions []struct {
					Partition int32   `json:"partition"`
					NotLeader int64   `json:"not_leader_responses"`
					Written   float64 `json:"written_s"`
					HeldS     float64 `json:"held_s"`
				} `json:"partitions"`
			} `json:"observed"`
		}
		readJSON(t, sc, &side)
		t.Run(side.Client, func(t *testing.T) {
			// The partitions refused min-responses times or more are the
			// loop; it held the client up as long as its longest.
			var parts []int32
			var perPart []int64
			var sum int64
			var held float64
			for _, p := range side.Observed.Partitions {
				if p.NotLeader < int64(minResponses) {
					continue
				}
				if p.Written == 0 {
					t.Fatalf("partition %d never written: not the healed case", p.Partition)
				}
				parts, perPart = append(parts, p.Partition), append(perPart, p.NotLeader)
				sum += p.NotLeader
				held = max(held, p.HeldS)
			}
			want := detectors.Grade(seconds(held), false)
			if want != detectors.Warning {
				t.Fatalf("the recording held the client up %.3fs: the policy gives %s, not the warning this case is about", held, want)
			}
			r := analyseWithDetectors(t, filepath.Join(filepath.Dir(sc), side.Pcap))
			f := findingsOf(t, r.Findings, "not-leader-loop", 1)[0]
			if f.Severity != want {
				t.Errorf("severity %s, want %s: %s", f.Severity, want, f.Summary)
			}
			var gotHeld float64
			var ongoing bool
			var leader int32
			fieldAs(t, &f, "held_s", &gotHeld)
			fieldAs(t, &f, "ongoing", &ongoing)
			fieldAs(t, &f, "leader_id", &leader)
			if !near(gotHeld, held) || ongoing || leader != side.LeaderID || f.Fields["topic"] != side.Topic {
				t.Errorf("held %.3fs ongoing %v leader %d topic %v; the bytes show %.3fs healed, leader %d, %s",
					gotHeld, ongoing, leader, f.Fields["topic"], held, side.LeaderID, side.Topic)
			}
			if f.Counts["not_leader_responses"] != sum {
				t.Errorf("not_leader_responses %d, the bytes show %d over partitions %v", f.Counts["not_leader_responses"], sum, parts)
			}
			if len(parts) > 1 {
				var gotParts []int32
				var gotPer []int64
				fieldAs(t, &f, "partitions", &gotParts)
				fieldAs(t, &f, "not_leader_per_partition", &gotPer)
				if !slices.Equal(gotParts, parts) || !slices.Equal(gotPer, perPart) {
					t.Errorf("partitions %v answers %v, the bytes show %v %v", gotParts, gotPer, parts, perPart)
				}
			}
			if !strings.Contains(f.Summary, "metadata names broker") {
				t.Errorf("summary %q: want the Metadata-names-the-refuser shape", f.Summary)
			}
			onlyInfoBesides(t, r.Findings, "not-leader-loop")
		})
	}
}

// TestRealClientsStalledFetch: a consumer (kgo, sarama) whose fetches of a
// partition with data get KAFKA_STORAGE_ERROR for 8.5 s, then records: a
// warning for the consumer, at the offset it was stuck at, for as long as
// the bytes show it stuck.
func TestRealClientsStalledFetch(t *testing.T) {
	minFetches := defaultCount(t, stalledfetch.Analyzer, "min-fetches")
	for _, name := range []string{"stalled-fetch-kgo", "stalled-fetch-sarama"} {
		t.Run(name, func(t *testing.T) {
			var o struct {
				Stuck    int64   `json:"stuck_answers"`
				HeldS    float64 `json:"held_s"`
				Moved    float64 `json:"moved_s"`
				Offset   int64   `json:"fetch_offset"`
				Produced int     `json:"records_produced_while_stuck"`
			}
			r := analyseWithDetectors(t, faultSidecar(t, name, &o))
			if o.Stuck < int64(minFetches) || o.Moved == 0 || o.Produced == 0 {
				t.Fatalf("the recording shows %d stuck answers, moved at %.3fs, %d records written meanwhile: not a stall over data that heals",
					o.Stuck, o.Moved, o.Produced)
			}
			want := detectors.Grade(seconds(o.HeldS), false)
			f := findingsOf(t, r.Findings, "stalled-fetch", 1)[0]
			if f.Severity != want || want != detectors.Warning {
				t.Errorf("severity %s, the policy gives %s for %.3fs healed (a warning): %s", f.Severity, want, o.HeldS, f.Summary)
			}
			var held float64
			var ongoing bool
			var offset int64
			fieldAs(t, &f, "held_s", &held)
			fieldAs(t, &f, "ongoing", &ongoing)
			fieldAs(t, &f, "fetch_offset", &offset)
			if !near(held, o.HeldS) || ongoing || offset != o.Offset {
				t.Errorf("held %.3fs ongoing %v at offset %d; the bytes show %.3fs, healed, offset %d", held, ongoing, offset, o.HeldS, o.Offset)
			}
			if f.Counts["fetches"] != o.Stuck || f.Counts["errors"] != o.Stuck || f.Fields["error"] != "KAFKA_STORAGE_ERROR" {
				t.Errorf("fetches %d errors %d (%v); the bytes show %d answers KAFKA_STORAGE_ERROR", f.Counts["fetches"], f.Counts["errors"], f.Fields["error"], o.Stuck)
			}
			onlyInfoBesides(t, r.Findings, "stalled-fetch")
		})
	}
}
