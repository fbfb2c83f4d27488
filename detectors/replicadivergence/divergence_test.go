package replicadivergence_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/replicadivergence"
	"github.com/kfsniff/kfsniff/flows"
)

const (
	topic  = "lifecycle_test"
	leader = "172.31.2.2:9092"
)

var (
	topicID = [16]byte{0x5f, 0x3d, 0x3b, 0x9e, 15: 0x01}
	brokers = map[int32]string{1: "172.31.1.1:9092", 2: leader, 3: "172.31.3.3:9092"}
)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// script is partition lifecycle_test-0 led by node 2: a producer, the
// replica fetchers of follower 3 and observer 1, and a consumer, each
// batch produced, then fetched by each of them in turn. The hooks change
// what is sent.
type script struct {
	noProduce, noFetchers bool
	// produced changes the batch as the producer sends it; stored what
	// the leader stores (default: as produced), per batch index.
	produced, stored func(b int, batch []byte) []byte
	// toFollower, toObserver and toConsumer change one copy as sent.
	toFollower, toObserver, toConsumer func(b int, batch []byte) []byte
	produceCode                        func(b int) int16
	epoch                              int32
	// between, if set, runs after each batch's copies (a snapshot).
	between func(h *dt.Harness)
}

func batches(t testing.TB) [][]byte {
	var out [][]byte
	for b := range 5 {
		out = append(out, dt.BatchSpec{ProducerID: 5009, Sequence: int32(78 * b), Records: dt.Records(78*b, 78)}.Encode(t))
	}
	return out
}

func (s script) run(t testing.TB, h *dt.Harness) {
	keep := func(_ int, b []byte) []byte { return b }
	for _, f := range []*func(int, []byte) []byte{&s.produced, &s.stored, &s.toFollower, &s.toObserver, &s.toConsumer} {
		if *f == nil {
			*f = keep
		}
	}
	prod := h.Conn("172.31.0.100:50100", leader)
	mr, mresp := dt.MetadataBrokers(topic, topicID, brokers)
	h.Call(prod, dt.At(ms(1)), ms(1), "producer-1", mr, mresp)
	follower := h.Conn("172.31.3.3:50300", leader)
	observer := h.Conn("172.31.1.1:50200", leader)
	consumer := h.Conn("172.31.0.100:50500", leader)
	for b, batch := range batches(t) {
		t0 := ms(100 + 20*float64(b))
		base := int64(78 * b)
		sent := s.produced(b, batch)
		stored := dt.Stored(s.stored(b, sent), base, s.epoch)
		if !s.noProduce {
			code, at := int16(0), base
			if s.produceCode != nil {
				code = s.produceCode(b)
			}
			if code != 0 {
				at = -1
			}
			h.Call(prod, dt.At(t0), ms(1), "producer-1", dt.ProduceRaw(topic, 0, sent), dt.ProducedAt(topic, 0, code, at))
		}
		if !s.noFetchers {
			h.Call(follower, dt.At(t0+ms(2)), ms(0.5), "broker-3-fetcher-0", dt.FetchOf(topicID, 0, base, 3), dt.FetchedBatches(topicID, 0, base+78, s.toFollower(b, stored)))
			h.Call(observer, dt.At(t0+ms(3)), ms(0.5), "broker-1-fetcher-0", dt.FetchOf(topicID, 0, base, 1), dt.FetchedBatches(topicID, 0, base+78, s.toObserver(b, stored)))
		}
		h.Call(consumer, dt.At(t0+ms(4)), ms(0.5), "consumer-1", dt.FetchOf(topicID, 0, base, -1), dt.FetchedBatches(topicID, 0, base+78, s.toConsumer(b, stored)))
		if s.between != nil {
			s.between(h)
		}
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

// extra is what Check does not compare: nodes that must be among the
// finding's, fields and counts it must not have.
type extra struct {
	nodes  []int32
	absent []string
}

func TestReplicaDivergence(t *testing.T) {
	bs := batches(t)
	changed := dt.Damaged(dt.Stored(bs[2], 156, 0), true)
	corrupt := dt.Damaged(dt.Stored(bs[3], 234, 0), false)
	recompress := func(b int, _ []byte) []byte {
		return dt.BatchSpec{Codec: dt.Codec(kgo.GzipCompression()), ProducerID: 5009, Sequence: int32(78 * b), Records: dt.Records(78*b, 78)}.Encode(t)
	}
	identical := dt.Want{
		Severity: detectors.Info,
		Detail: &replicadivergence.Agreement{
			Topic: topic, Partition: int32(0), ProducerID: int64(5009), FirstOffset: int64(0),
			LastOffset: int64(389),
			Agreed:     replicadivergence.Agreed{Batches: 5, Copies: 20, Replicas: 3, Mismatches: 0, BadCRCs: 0},
		}, Exact: []string{"Mismatches", "BadCRCs", "Topic", "Partition", "FirstOffset"},
		Summary: []string{"lifecycle_test-0: 5 batches verified byte-identical across 3 replicas (20 copies compared)"},
	}

	for _, tc := range []struct {
		name     string
		settings map[string]string
		script   script
		custom   func(t *testing.T, h *dt.Harness) // instead of script
		want     []dt.Want                         // in the order findings are reported: errors first
		extra    []extra                           // by finding
	}{
		{name: "copies identical on leader, follower, observer and consumer", want: []dt.Want{identical},
			extra: []extra{{nodes: []int32{1, 2, 3}, absent: []string{"single_copy_batches", "rewritten_by_broker"}}}},
		{
			name:     "identical, compared early for a small max-batches",
			settings: map[string]string{"max-batches": "1"},
			want: []dt.Want{{
				Severity: detectors.Info,
				Detail:   &replicadivergence.Agreement{Agreed: replicadivergence.Agreed{Batches: 5, Copies: 20, Replicas: 3, Mismatches: 0, ComparedEarly: 4}}, Exact: []string{"Mismatches"},
			}},
		},
		{
			name:   "follower's copy differs, its CRC recomputed",
			script: script{toFollower: onBatch(2, func([]byte) []byte { return changed })},
			want: []dt.Want{
				{
					Severity: detectors.Error,
					Detail: &replicadivergence.Finding{
						CRCs: 2, Batches: 1, Topic: topic, Partition: int32(0), BaseOffset: int64(156),
						ClientID: "broker-3-fetcher-0", CRCLeader: int64(dt.CRC(bs[2])),
						CRCReplica: int64(dt.CRC(changed)), LeaderID: dt.Ptr[int32](int32(2)),
						ReplicaID: dt.Ptr[int32](int32(3)), Path: "replica-fetch",
						LeaderEpochLeader: dt.Ptr[int32](int32(0)), LeaderEpochReplica: dt.Ptr[int32](int32(0)),
					}, Exact: []string{"Topic", "Partition", "CRCLeader", "CRCReplica"},
					// Both copies stored at leader epoch 0: node 0 and
					// epoch 0 are values, not absences.
					Summary: []string{fmt.Sprintf("lifecycle_test-0 offset 156: node 3's copy (broker-3-fetcher-0) has crc %d, the leader's %d", dt.CRC(changed), dt.CRC(bs[2]))},
				},
				{Severity: detectors.Info, Detail: &replicadivergence.Agreement{Agreed: replicadivergence.Agreed{Batches: 5, Mismatches: 1, BadCRCs: 0}}, Exact: []string{"BadCRCs"},
					Summary: []string{"4 of 5 batches identical across 3 replicas; 1 batch differs (see the errors)"}},
			},
			extra: []extra{{nodes: []int32{2, 3}}},
		},
		{
			name:   "observer's copy fails its CRC: the checksum of its bytes is shown",
			script: script{toObserver: onBatch(3, func([]byte) []byte { return corrupt })},
			want: []dt.Want{
				{
					Severity: detectors.Error,
					Detail: &replicadivergence.BadCRC{
						Copies: 1, BaseOffset: int64(234), ClientID: "broker-1-fetcher-0", CRC: int64(dt.CRC(bs[3])),
						CRCComputed: int64(dt.CRC(corrupt)), CRCValid: false, Path: "replica-fetch",
					}, Exact: []string{"CRC", "CRCComputed", "CRCValid"},
					Summary: []string{"fails its CRC"},
				},
				{Severity: detectors.Info, Detail: &replicadivergence.Agreement{Agreed: replicadivergence.Agreed{Batches: 5, Mismatches: 0, BadCRCs: 1}}, Exact: []string{"Mismatches"}},
			},
			extra: []extra{{nodes: []int32{1}, absent: []string{"error"}}},
		},
		{
			name: "producer's batch fails its CRC and is refused",
			script: script{produced: onBatch(1, func(b []byte) []byte { return dt.Damaged(b, false) }),
				produceCode: func(b int) int16 { return map[bool]int16{true: 2}[b == 1] }, noFetchers: true,
				// (the retried batch, intact, is what the consumer reads)
				toConsumer: onBatch(1, func([]byte) []byte { return dt.Stored(bs[1], 78, 0) })},
			want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &replicadivergence.BadCRC{
					Copies: 1, BaseOffset: int64(-1), ClientID: "producer-1", CRCValid: false, Path: "produce",
					Error: "CORRUPT_MESSAGE", CRCComputed: int64(dt.CRC(dt.Damaged(bs[1], false))),
				}, Exact: []string{"CRCValid", "CRCComputed"},
				Summary: []string{"producer producer-1 sent a batch whose CRC does not verify"},
			}},
			extra: []extra{{nodes: []int32{2}}},
		},
		{
			name: "a damaged batch sent with acks=0: no offset, the checksum of its bytes still shown",
			custom: func(t *testing.T, h *dt.Harness) {
				c := h.Conn("172.31.0.100:50100", leader)
				mr, mresp := dt.MetadataBrokers(topic, topicID, brokers)
				h.Call(c, dt.At(ms(1)), ms(1), "fire-and-forget", mr, mresp)
				req := dt.ProduceRaw(topic, 0, bs[0], dt.Damaged(bs[1], false))
				req.Acks = 0
				q, _ := h.Call(c, dt.At(ms(5)), 0, "fire-and-forget", req, nil)
				h.Exchange(&flows.Exchange{Conn: c, Req: q, NoResponse: true})
			},
			want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &replicadivergence.BadCRC{
					Copies: 1, BaseOffset: int64(-1), CRC: int64(dt.CRC(bs[1])),
					CRCComputed: int64(dt.CRC(dt.Damaged(bs[1], false))), Path: "produce",
				}, Exact: []string{"CRC", "CRCComputed"},
			}},
			extra: []extra{{absent: []string{"error"}}},
		},
		{
			name:   "broker recompressed what the producer sent: no divergence",
			script: script{stored: recompress},
			want: []dt.Want{{
				Severity: detectors.Info,
				Detail:   &replicadivergence.Agreement{Agreed: replicadivergence.Agreed{Batches: 5, Copies: 20, Replicas: 3, Mismatches: 0, Rewritten: 5}}, Exact: []string{"Mismatches"},
			}},
		},
		{name: "near miss: a producer and a consumer of one broker, nothing to say", script: script{noFetchers: true}},
		{
			name:     "a producer and a consumer of one broker, info-min-replicas 1",
			settings: map[string]string{"info-min-replicas": "1"},
			script:   script{noFetchers: true},
			want:     []dt.Want{{Severity: detectors.Info, Detail: &replicadivergence.Agreement{Agreed: replicadivergence.Agreed{Batches: 5, Copies: 10, Replicas: 1}}}},
		},
		{
			name: "copy replaced after a leader change: warning",
			script: script{noProduce: true, epoch: 7,
				toFollower: onBatch(0, func(b []byte) []byte { c := dt.Damaged(b, true); c[15] = 6; return c })},
			want: []dt.Want{
				{
					Severity: detectors.Warning,
					Detail: &replicadivergence.Finding{
						BaseOffset: int64(0), LeaderEpochLeader: dt.Ptr[int32](int32(7)),
						LeaderEpochReplica: dt.Ptr[int32](int32(6)),
					}, Exact: []string{"BaseOffset"},
				},
				{Severity: detectors.Info, Detail: &replicadivergence.Agreement{Agreed: replicadivergence.Agreed{Batches: 5, Copies: 15, Mismatches: 1}}},
			},
			extra: []extra{{nodes: []int32{2, 3}}},
		},
		{
			name: "near miss: one topic name on two clusters, other topic ids are not replicas",
			custom: func(t *testing.T, h *dt.Harness) {
				other := [16]byte{0xbb, 15: 2}
				for i, cl := range []struct {
					server string
					id     [16]byte
					batch  []byte
				}{{leader, topicID, bs[0]}, {"10.9.0.1:9092", other, bs[1]}, {leader, topicID, bs[0]}} {
					c := h.Conn(fmt.Sprintf("172.31.0.100:%d", 50600+i), cl.server)
					node := map[string]int32{leader: 2}[cl.server] + 7*int32(i%2)
					mr, mresp := dt.MetadataBrokers(topic, cl.id, map[int32]string{node: cl.server})
					h.Call(c, dt.At(ms(float64(10*i+1))), ms(1), "reader", mr, mresp)
					h.Call(c, dt.At(ms(float64(10*i+3))), ms(1), "reader", dt.FetchOf(cl.id, 0, 0, -1), dt.FetchedBatches(cl.id, 0, 78, dt.Stored(cl.batch, 0, 0)))
				}
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &replicadivergence.Agreement{Agreed: replicadivergence.Agreed{Batches: 1, Copies: 2, Mismatches: 0, OtherTopicID: 1}}, Exact: []string{"Mismatches"}}},
		},
		{
			name:     "more partitions than max-info: one finding sums them up",
			settings: map[string]string{"max-info": "1", "info-min-replicas": "1"},
			custom: func(t *testing.T, h *dt.Harness) {
				c := h.Conn("172.31.0.100:50100", leader)
				r := h.Conn("172.31.0.100:50500", leader)
				for part := range int32(3) {
					batch := bs[part]
					h.Call(c, dt.At(ms(float64(10*part+1))), ms(1), "producer-1", dt.ProduceRaw(topic, part, batch), dt.ProducedAt(topic, part, 0, 0))
					fetch, fetched := dt.FetchOf(topicID, part, 0, -1), dt.FetchedBatches(topicID, part, 78, dt.Stored(batch, 0, 0))
					fetch.Topics[0].TopicID, fetch.Version = [16]byte{}, 12
					fetch.Topics[0].Topic, fetched.Topics[0].Topic, fetched.Topics[0].TopicID, fetched.Version = topic, topic, [16]byte{}, 12
					h.Call(r, dt.At(ms(float64(10*part+5))), ms(1), "consumer-1", fetch, fetched)
				}
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &replicadivergence.Agreements{Agreed: replicadivergence.Agreed{Partitions: 3, Batches: 3, Copies: 6}},
				Summary: []string{"3 partitions: 3 batches verified byte-identical across 1 replica"}}},
			extra: []extra{{absent: []string{"topic", "partition"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, map[string]map[string]string{"replica-divergence": tc.settings}, replicadivergence.Analyzer)
			if tc.custom != nil {
				tc.custom(t, h)
			} else {
				tc.script.run(t, h)
			}
			fs := h.Findings()
			dt.Check(t, fs, "replica-divergence", tc.want...)
			for i, x := range tc.extra {
				if i >= len(fs) {
					break
				}
				f := fs[i]
				for _, n := range x.nodes {
					if !slices.Contains(f.Nodes, n) {
						t.Errorf("finding %d: nodes %v lack %d", i, f.Nodes, n)
					}
				}
				for _, k := range x.absent {
					if _, ok := f.Fields[k]; ok {
						t.Errorf("finding %d: field %s present: %v", i, k, f.Fields[k])
					}
					if _, ok := f.Counts[k]; ok {
						t.Errorf("finding %d: count %s present: %v", i, k, f.Counts[k])
					}
				}
			}
		})
	}
}

// TestSnapshotLeavesTheRuleAsItWas: live capture asks for the findings
// as they stand after every batch; each snapshot compares what is held
// without settling it, so the final findings are those of a run never
// asked, and a snapshot after the differing copy already shows it.
func TestSnapshotLeavesTheRuleAsItWas(t *testing.T) {
	bs := batches(t)
	changed := dt.Damaged(dt.Stored(bs[2], 156, 0), true)
	s := script{toFollower: onBatch(2, func([]byte) []byte { return changed })}
	quiet := dt.New(t, nil, replicadivergence.Analyzer)
	s.run(t, quiet)
	want := quiet.Findings()

	var seen []int
	s.between = func(h *dt.Harness) {
		n := 0
		for _, f := range h.Snapshot() {
			if f.Severity == detectors.Error {
				n++
			}
		}
		seen = append(seen, n)
	}
	asked := dt.New(t, nil, replicadivergence.Analyzer)
	s.run(t, asked)
	got := asked.Findings()
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if string(w) != string(g) || len(want) != 2 {
		t.Errorf("with snapshots:%s\nwithout:%s", dt.Describe(got), dt.Describe(want))
	}
	if !slices.Equal(seen, []int{0, 0, 1, 1, 1}) {
		t.Errorf("errors in the snapshots after each batch: %v, want the differing copy from the third on", seen)
	}
}

// TestReplicaDivergenceSeverity: copies that differ do not heal, so there
// is no duration threshold: an error from the first differing copy; the
// one warning is a copy replaced after a leader change that no consumer
// had read (uncommitted data truncated); copies equal but for what the
// CRC does not cover agree.
func TestReplicaDivergenceSeverity(t *testing.T) {
	bs := batches(t)
	// olderEpoch is batch 0 as stored at leader epoch 6, with other
	// data: the copy a leader change replaced (the others are at 7).
	olderEpoch := func(b []byte) []byte { c := dt.Damaged(b, true); c[15] = 6; return c }
	run := func(s script) func(h *dt.Harness) { return func(h *dt.Harness) { s.run(t, h) } }
	agree := dt.Want{Severity: detectors.Info, Detail: &replicadivergence.Agreement{Agreed: replicadivergence.Agreed{Mismatches: 0, BadCRCs: 0}}, Exact: []string{"Mismatches", "BadCRCs"}}
	dt.Run(t, replicadivergence.Analyzer, []dt.Case{
		{
			Name:    "a leader change replaced a copy only a follower had fetched: warning",
			Traffic: run(script{noProduce: true, epoch: 7, toFollower: onBatch(0, olderEpoch)}),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &replicadivergence.Finding{
				Batches: 1, Path: "replica-fetch", LeaderEpochLeader: dt.Ptr[int32](int32(7)),
				LeaderEpochReplica: dt.Ptr[int32](int32(6)),
			}},
				{Severity: detectors.Info, Detail: &replicadivergence.Agreement{Agreed: replicadivergence.Agreed{Mismatches: 1}}}},
		},
		{
			Name:    "near miss: a consumer had read the replaced copy (committed data lost): error",
			Traffic: run(script{noProduce: true, epoch: 7, toConsumer: onBatch(0, olderEpoch)}),
			Want: []dt.Want{{Severity: detectors.Error, Detail: &replicadivergence.Finding{
				Batches: 1, Path: "consumer-fetch", LeaderEpochLeader: dt.Ptr[int32](int32(7)),
				LeaderEpochReplica: dt.Ptr[int32](int32(6)),
			}},
				{Severity: detectors.Info, Detail: &replicadivergence.Agreement{Agreed: replicadivergence.Agreed{Mismatches: 1}}}},
		},
		{
			Name: "near miss: of two differing copies one has the same leader epoch: error",
			Traffic: run(script{noProduce: true, epoch: 7, toFollower: func(b int, batch []byte) []byte {
				switch b {
				case 0:
					return olderEpoch(batch)
				case 1:
					return dt.Damaged(batch, true)
				}
				return batch
			}}),
			Want: []dt.Want{{Severity: detectors.Error, Detail: &replicadivergence.Finding{Batches: 2}},
				{Severity: detectors.Info, Detail: &replicadivergence.Agreement{Agreed: replicadivergence.Agreed{Mismatches: 2}}}},
		},
		{
			Name: "near miss: copies at other leader epochs with the same CRC agree (the epoch is not covered)",
			Traffic: run(script{noProduce: true, epoch: 7, toFollower: onBatch(0, func(b []byte) []byte {
				c := slices.Clone(b)
				c[15] = 6
				return c
			})}),
			Want: []dt.Want{agree},
		},
		{
			Name:    "one differing copy is an error at once: no duration makes it worse or better",
			Traffic: run(script{toObserver: onBatch(4, func(b []byte) []byte { return dt.Damaged(b, true) })}),
			Want: []dt.Want{{Severity: detectors.Error, Detail: &replicadivergence.Finding{
				Batches: 1, CRCs: 2, BaseOffset: int64(312), Path: "replica-fetch",
			}},
				{Severity: detectors.Info, Detail: &replicadivergence.Agreement{Agreed: replicadivergence.Agreed{Mismatches: 1}}}},
		},
		{
			Name: "agreeing copies across 2 replicas (info-min-replicas): info",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("172.31.3.3:50300", leader)
				h.Call(c, dt.At(ms(1)), ms(1), "broker-3-fetcher-0", dt.FetchOf(topicID, 0, 0, 3), dt.FetchedBatches(topicID, 0, 78, dt.Stored(bs[0], 0, 0)))
				r := h.Conn("172.31.0.100:50500", leader)
				h.Call(r, dt.At(ms(5)), ms(1), "consumer-1", dt.FetchOf(topicID, 0, 0, -1), dt.FetchedBatches(topicID, 0, 78, dt.Stored(bs[0], 0, 0)))
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &replicadivergence.Agreement{Agreed: replicadivergence.Agreed{Batches: 1, Copies: 2, Replicas: 2}}}},
		},
		{
			Name: "near miss: the same copies read by two consumers of one broker, one replica: nothing",
			Traffic: func(h *dt.Harness) {
				for i, id := range []string{"consumer-1", "consumer-2"} {
					r := h.Conn(fmt.Sprintf("172.31.0.100:%d", 50500+i), leader)
					h.Call(r, dt.At(ms(float64(1+5*i))), ms(1), id, dt.FetchOf(topicID, 0, 0, -1), dt.FetchedBatches(topicID, 0, 78, dt.Stored(bs[0], 0, 0)))
				}
			},
		},
	}, func(t *testing.T, f *detectors.Finding) {
		// A copy replaced after a leader change says so; if a consumer
		// had read it, that committed data was lost.
		if f.Fields["leader_epoch_replica"] == nil || f.Fields["leader_epoch_leader"] == f.Fields["leader_epoch_replica"] {
			return
		}
		lost := strings.Contains(f.Explanation, "A consumer had read the replaced copy of 1 batch: it was below the high watermark, committed")
		if !strings.Contains(f.Explanation, "rewritten after a leader change") || lost != (f.Fields["path"] == "consumer-fetch") {
			t.Errorf("%s finding (%s): explanation %q", f.Severity, f.Fields["path"], f.Explanation)
		}
	})
}
