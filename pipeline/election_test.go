package pipeline

import (
	"slices"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
)

// Real clients producing while partitions have no leader for a few
// seconds, and while Metadata advertises two node ids at one host:port,
// recorded by fixtures/clients/election against kfake. The findings are
// held to the policy and to what the recorder decoded from the same bytes
// with kmsg (the sidecar's "observed").

// stallObserved is fixtures/clients/election's StallObserved.
type stallObserved struct {
	InjectedFromS    float64 `json:"injected_from_s"`
	InjectedToS      float64 `json:"injected_to_s"`
	Partitions       []int32 `json:"partitions"`
	FirstLeaderlessS float64 `json:"first_leaderless_s"`
	LedS             float64 `json:"led_s"`
	LeaderlessS      float64 `json:"leaderless_s"`
	NewLeaders       []int32 `json:"new_leaders"`
	Clients          []struct {
		ClientID        string `json:"client_id"`
		Host            string `json:"host"`
		MetadataAnswers int64  `json:"metadata_answers"`
		ProduceRefused  int64  `json:"produce_refused"`
	} `json:"clients"`
	NextWriteS map[int32]float64 `json:"next_write_s"`
}

// TestElectionStallRealClients: kgo, sarama and librdkafka producing while
// orders-0 and orders-1 have no leader for 6 s (Metadata LEADER_NOT_AVAILABLE,
// Produce NOT_LEADER_OR_FOLLOWER) each waited seconds: a warning, for the
// partitions the cluster left without a leader, for as long as the client
// was told so, naming the client and how many of its requests waited.
func TestElectionStallRealClients(t *testing.T) {
	for _, client := range []string{"kgo", "sarama", "librdkafka"} {
		t.Run(client, func(t *testing.T) {
			var o stallObserved
			path := faultSidecar(t, "election-stall-"+client, &o)
			// The recording shows the scenario: the first answer without a
			// leader came while the stall was on, the first naming one
			// after it ended, and the client wrote the partitions again.
			if o.FirstLeaderlessS < o.InjectedFromS || o.FirstLeaderlessS > o.InjectedToS || o.LedS < o.InjectedToS ||
				len(o.NextWriteS) != len(o.Partitions) || len(o.Clients) != 1 {
				t.Fatalf("the recording does not show a stall the client waited out: %+v", o)
			}
			r := analyseWithDetectors(t, path)
			f := findingsOf(t, r.Findings, "leader-election-stall", 1)[0]
			held := time.Duration(o.LeaderlessS * float64(time.Second))
			if want := detectors.Grade(held, false); f.Severity != want || want != detectors.Warning {
				t.Errorf("severity %s; the policy gives %s for %v of waiting, which should be a warning: %s", f.Severity, want, held, f.Summary)
			}
			var (
				parts, leaders []int32
				secs           float64
				ongoing        bool
				waited         []struct {
					ClientID        string `json:"client_id"`
					Host            string `json:"host"`
					MetadataAnswers int64  `json:"metadata_answers"`
					ProduceRefused  int64  `json:"produce_refused"`
				}
			)
			fieldAs(t, &f, "partitions", &parts)
			fieldAs(t, &f, "new_leaders", &leaders)
			fieldAs(t, &f, "duration_s", &secs)
			fieldAs(t, &f, "ongoing", &ongoing)
			fieldAs(t, &f, "waited", &waited)
			if !slices.Equal(parts, o.Partitions) || !slices.Equal(leaders, o.NewLeaders) || f.Fields["topic"] != "orders" || ongoing {
				t.Errorf("orders partitions %v, new leaders %v, ongoing %v; the recording has %v led by %v after the stall",
					parts, leaders, ongoing, o.Partitions, o.NewLeaders)
			}
			if !near(secs, o.LeaderlessS) {
				t.Errorf("leaderless for %.3f s; the recording: %.3f s, from %.3f s to %.3f s (stall injected from %.3f s to %.3f s)",
					secs, o.LeaderlessS, o.FirstLeaderlessS, o.LedS, o.InjectedFromS, o.InjectedToS)
			}
			c := o.Clients[0]
			if len(waited) != 1 || waited[0].ClientID != c.ClientID || waited[0].Host != c.Host ||
				waited[0].MetadataAnswers != c.MetadataAnswers || waited[0].ProduceRefused != c.ProduceRefused {
				t.Errorf("waited %+v; the recording: %+v", waited, c)
			}
			if f.Counts["responses"] != c.MetadataAnswers || f.Counts["clients"] != 1 || f.Counts["refused"] != c.ProduceRefused {
				t.Errorf("counts %v; the recording: %d Metadata answers without a leader, %d Produce refused", f.Counts,
					c.MetadataAnswers, c.ProduceRefused)
			}
		})
	}
}

// conflictObserved is fixtures/clients/election's ConflictObserved.
type conflictObserved struct {
	Advertised        map[string][]int32 `json:"advertised"`
	Refused           int64              `json:"refused"`
	FirstRefusedS     float64            `json:"first_refused_s"`
	LastRefusedS      float64            `json:"last_refused_s"`
	Rebootstrap       int64              `json:"rebootstrap"`
	RebootstrapNodes  []int32            `json:"rebootstrap_nodes"`
	RefusedPartitions []int32            `json:"refused_partitions"`
	WrittenAfter      []int32            `json:"written_after"`
	Clients           []string           `json:"clients"`
}

// TestListenerConflictRealClients: kgo and sarama meeting a cluster that
// advertises node 1 at node 0's address. sarama's requests for node 1's
// partitions reach node 0 and are refused NOT_LEADER_OR_FOLLOWER; kgo
// (KIP-1242) names the node it expects and node 0 answers
// REBOOTSTRAP_REQUIRED. Either way the partitions were never written again:
// refused to the end after 10 s or more, an error.
func TestListenerConflictRealClients(t *testing.T) {
	for _, client := range []string{"kgo", "sarama"} {
		t.Run(client, func(t *testing.T) {
			var o conflictObserved
			path := faultSidecar(t, "listener-conflict-"+client, &o)
			const shared = "127.0.0.1:9092"
			if len(o.Advertised[shared]) < 2 || o.Refused+o.Rebootstrap == 0 || len(o.WrittenAfter) > 0 {
				t.Fatalf("the recording does not show clients refused at a shared endpoint to the end: %+v", o)
			}
			r := analyseWithDetectors(t, path)
			f := findingsOf(t, r.Findings, "advertised-listener-conflict", 1)[0]
			span := time.Duration((o.LastRefusedS - o.FirstRefusedS) * float64(time.Second))
			if want := max(detectors.Warning, detectors.Grade(span, true)); f.Severity != want || want != detectors.Error {
				t.Errorf("severity %s; refused from %.3f s to %.3f s and never written again: the policy gives %s, an error",
					f.Severity, o.FirstRefusedS, o.LastRefusedS, want)
			}
			var (
				ids     []int32
				secs    float64
				ongoing bool
			)
			fieldAs(t, &f, "node_ids", &ids)
			fieldAs(t, &f, "refused_s", &secs)
			fieldAs(t, &f, "ongoing", &ongoing)
			if f.Fields["endpoint"] != shared || !slices.Equal(ids, o.Advertised[shared]) {
				t.Errorf("endpoint %v nodes %v; the recording advertises %v at %s", f.Fields["endpoint"], ids, o.Advertised[shared], shared)
			}
			// Refused from the first refusal to the end of the capture:
			// at least as long as from the first to the last.
			if !ongoing || secs < o.LastRefusedS-o.FirstRefusedS {
				t.Errorf("refused for %.3f s (ongoing %v); the recording: refused from %.3f s to %.3f s and never written again",
					secs, ongoing, o.FirstRefusedS, o.LastRefusedS)
			}
			if f.Counts["refused_answers"] != o.Refused || f.Counts["rebootstrap_answers"] != o.Rebootstrap {
				t.Errorf("counts %v; the recording: %d NOT_LEADER_OR_FOLLOWER partition answers, %d REBOOTSTRAP_REQUIRED",
					f.Counts, o.Refused, o.Rebootstrap)
			}
		})
	}
}
