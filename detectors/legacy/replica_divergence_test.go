package legacy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

const (
	rdTopic  = "lifecycle_test"
	rdLeader = "172.31.2.2:9092"
)

var (
	rdTopicID = [16]byte{0x5f, 0x3d, 0x3b, 0x9e, 15: 0x01}
	rdBrokers = map[int32]string{1: "172.31.1.1:9092", 2: rdLeader, 3: "172.31.3.3:9092"}
)

// rdScript is partition lifecycle_test-0 led by node 2: a producer, the
// replica fetchers of follower 3 and observer 1, and a consumer, each
// batch produced, then fetched by each of them in turn. The hooks change
// what is sent.
type rdScript struct {
	noProduce bool
	// produced changes the batch as the producer sends it; stored what
	// the leader stores (default: as produced), per batch index.
	produced func(b int, batch []byte) []byte
	stored   func(b int, batch []byte) []byte
	// toFollower, toObserver and toConsumer change one copy as sent.
	toFollower, toObserver, toConsumer func(b int, batch []byte) []byte
	produceCode                        func(b int) int16
	noFetchers                         bool
	epoch                              int32
}

func rdBatches(t *testing.T) [][]byte {
	var out [][]byte
	for b := range 5 {
		out = append(out, bcBatch(t, bcBatchSpec{producerID: 5009, sequence: int32(78 * b), records: bcRecords(78*b, 78)}))
	}
	return out
}

func (s rdScript) run(t *testing.T, w *gen.Writer) {
	keep := func(_ int, b []byte) []byte { return b }
	for _, f := range []*func(int, []byte) []byte{&s.produced, &s.stored, &s.toFollower, &s.toObserver, &s.toConsumer} {
		if *f == nil {
			*f = keep
		}
	}
	prod := bcDial(w, "172.31.0.100:50100", rdLeader, "producer-1", bcAt(0))
	mr, mresp := bcMetadata(rdTopic, rdTopicID, rdBrokers)
	prod.exchange(bcAt(1), time.Millisecond, mr, mresp)
	follower := bcDial(w, "172.31.3.3:50300", rdLeader, "broker-3-fetcher-0", bcAt(2))
	observer := bcDial(w, "172.31.1.1:50200", rdLeader, "broker-1-fetcher-0", bcAt(3))
	consumer := bcDial(w, "172.31.0.100:50500", rdLeader, "consumer-1", bcAt(4))
	for b, batch := range rdBatches(t) {
		t0 := bcAt(100 + 20*float64(b))
		base := int64(78 * b)
		sent := s.produced(b, batch)
		stored := bcStored(s.stored(b, sent), base, s.epoch)
		if !s.noProduce {
			code := int16(0)
			if s.produceCode != nil {
				code = s.produceCode(b)
			}
			respBase := base
			if code != 0 {
				respBase = -1
			}
			prod.exchange(t0, time.Millisecond, bcProduce(rdTopic, 0, sent), bcProduced(rdTopic, 0, code, respBase))
		}
		if !s.noFetchers {
			follower.exchange(t0.Add(2*time.Millisecond), 500*time.Microsecond, bcFetch(rdTopicID, 0, base, 3), bcFetched(rdTopicID, 0, base+78, s.toFollower(b, stored)))
			observer.exchange(t0.Add(3*time.Millisecond), 500*time.Microsecond, bcFetch(rdTopicID, 0, base, 1), bcFetched(rdTopicID, 0, base+78, s.toObserver(b, stored)))
		}
		consumer.exchange(t0.Add(4*time.Millisecond), 500*time.Microsecond, bcFetch(rdTopicID, 0, base, -1), bcFetched(rdTopicID, 0, base+78, s.toConsumer(b, stored)))
	}
}

// onBatch returns a hook applying f to batch index i only.
func onBatch(i int, f func([]byte) []byte) func(int, []byte) []byte {
	return func(b int, batch []byte) []byte {
		if b == i {
			return f(batch)
		}
		return batch
	}
}

func TestReplicaDivergence(t *testing.T) {
	batches := rdBatches(t)
	changed := bcCorrupt(bcStored(batches[2], 156, 0), true)
	corrupt := bcCorrupt(bcStored(batches[3], 234, 0), false)
	recompress := func(b int, _ []byte) []byte {
		return bcBatch(t, bcBatchSpec{codec: codecPtr(kgo.GzipCompression()), producerID: 5009, sequence: int32(78 * b), records: bcRecords(78*b, 78)})
	}
	identical := bcWant{
		severity: detectors.Info,
		counts:   map[string]int64{"batches": 5, "copies": 20, "replicas": 3, "mismatches": 0, "bad_crcs": 0},
		fields:   map[string]any{"topic": rdTopic, "partition": 0, "producer_id": 5009},
		nodes:    []int32{1, 2, 3},
		absent:   []string{"single_copy_batches", "rewritten_by_broker"},
	}

	cases := []struct {
		name      string
		overrides map[string]float64
		script    rdScript
		custom    func(t *testing.T, w *gen.Writer) // instead of script
		want      []bcWant                          // in the order findings are reported: errors first
	}{
		{name: "copies identical on leader, follower, observer and consumer", want: []bcWant{identical}},
		{
			name:      "identical, compared early for a small max-batches",
			overrides: map[string]float64{"replica-divergence.max-batches": 1},
			want: []bcWant{{
				severity: detectors.Info,
				counts:   map[string]int64{"batches": 5, "copies": 20, "replicas": 3, "mismatches": 0, "compared_early": 4},
			}},
		},
		{
			name:   "follower's copy differs, its CRC recomputed",
			script: rdScript{toFollower: onBatch(2, func([]byte) []byte { return changed })},
			want: []bcWant{
				{
					severity: detectors.Error,
					counts:   map[string]int64{"crcs": 2, "batches": 1},
					fields: map[string]any{"topic": rdTopic, "partition": 0, "base_offset": 156, "client_id": "broker-3-fetcher-0",
						"crc_leader": int64(bcCRC(batches[2])), "crc_replica": int64(bcCRC(changed)), "leader_id": 2, "replica_id": 3},
					nodes: []int32{2, 3},
				},
				{severity: detectors.Info, counts: map[string]int64{"batches": 5, "mismatches": 1, "bad_crcs": 0}},
			},
		},
		{
			name:   "observer's copy fails its CRC",
			script: rdScript{toObserver: onBatch(3, func([]byte) []byte { return corrupt })},
			want: []bcWant{
				{
					severity: detectors.Error,
					counts:   map[string]int64{"bad_crcs": 1},
					fields: map[string]any{"base_offset": 234, "client_id": "broker-1-fetcher-0", "crc": int64(bcCRC(batches[3])),
						"crc_computed": int64(bcCRC(corrupt)), "crc_valid": false, "path": "replica-fetch"},
					nodes: []int32{1},
				},
				{severity: detectors.Info, counts: map[string]int64{"batches": 5, "mismatches": 0, "bad_crcs": 1}},
			},
		},
		{
			name: "producer's batch fails its CRC and is refused",
			script: rdScript{produced: onBatch(1, func(b []byte) []byte { return bcCorrupt(b, false) }), produceCode: func(b int) int16 { return map[bool]int16{true: 2}[b == 1] }, noFetchers: true,
				// (the retried batch, intact, is what the consumer reads)
				toConsumer: onBatch(1, func([]byte) []byte { return bcStored(batches[1], 78, 0) })},
			want: []bcWant{{
				severity: detectors.Error,
				counts:   map[string]int64{"bad_crcs": 1},
				fields:   map[string]any{"base_offset": -1, "client_id": "producer-1", "crc_valid": false, "path": "produce", "error": "CORRUPT_MESSAGE"},
				nodes:    []int32{2},
			}},
		},
		{
			name:   "broker recompressed what the producer sent: no divergence",
			script: rdScript{stored: recompress},
			want: []bcWant{{
				severity: detectors.Info,
				counts:   map[string]int64{"batches": 5, "copies": 20, "replicas": 3, "mismatches": 0, "rewritten_by_broker": 5},
			}},
		},
		{name: "a producer and a consumer of one broker: nothing to say", script: rdScript{noFetchers: true}},
		{
			name:      "a producer and a consumer of one broker, info-min-replicas 1",
			overrides: map[string]float64{"replica-divergence.info-min-replicas": 1},
			script:    rdScript{noFetchers: true},
			want:      []bcWant{{severity: detectors.Info, counts: map[string]int64{"batches": 5, "copies": 10, "replicas": 1}}},
		},
		{
			name: "copy replaced after a leader change: warning",
			script: rdScript{noProduce: true, epoch: 7,
				toFollower: onBatch(0, func(b []byte) []byte { c := bcCorrupt(b, true); c[15] = 6; return c })},
			want: []bcWant{
				{
					severity: detectors.Warning,
					fields:   map[string]any{"base_offset": 0, "leader_epoch_leader": 7, "leader_epoch_replica": 6},
					nodes:    []int32{2, 3},
				},
				{severity: detectors.Info, counts: map[string]int64{"batches": 5, "copies": 15, "mismatches": 1}},
			},
		},
		{
			name: "one topic name on two clusters: other topic ids are not replicas",
			custom: func(t *testing.T, w *gen.Writer) {
				idOther := [16]byte{0xbb, 15: 2}
				for i, cl := range []struct {
					server string
					id     [16]byte
					batch  []byte
				}{{rdLeader, rdTopicID, batches[0]}, {"10.9.0.1:9092", idOther, batches[1]}, {rdLeader, rdTopicID, batches[0]}} {
					c := bcDial(w, fmt.Sprintf("172.31.0.100:%d", 50600+i), cl.server, "reader", bcAt(float64(10*i)))
					node := map[string]int32{rdLeader: 2}[cl.server] + 7*int32(i%2)
					mr, mresp := bcMetadata(rdTopic, cl.id, map[int32]string{node: cl.server})
					c.exchange(bcAt(float64(10*i+1)), time.Millisecond, mr, mresp)
					c.exchange(bcAt(float64(10*i+3)), time.Millisecond, bcFetch(cl.id, 0, 0, -1), bcFetched(cl.id, 0, 78, bcStored(cl.batch, 0, 0)))
				}
			},
			want: []bcWant{{severity: detectors.Info, counts: map[string]int64{"batches": 1, "copies": 2, "mismatches": 0, "other_topic_id_copies": 1}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := tc.script.run
			if tc.custom != nil {
				run = tc.custom
			}
			fs := bcFindings(t, "replica-divergence", tc.overrides, run)
			if len(fs) != len(tc.want) {
				for _, f := range fs {
					t.Logf("%s: %s counts=%v fields=%v", f.Severity, f.Summary, f.Counts, f.Fields)
				}
				t.Fatalf("%d findings, want %d", len(fs), len(tc.want))
			}
			for i, w := range tc.want {
				bcCheck(t, fs[i], w)
				t.Logf("%s: %s\n%s\n%s", fs[i].Severity, fs[i].Summary, fs[i].Explanation, fs[i].Next)
			}
		})
	}
}
