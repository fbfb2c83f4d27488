package duplicatebatches_test

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/duplicatebatches"
	"github.com/kfsniff/kfsniff/flows"
)

const (
	topic  = "src.events"
	broker = "172.31.20.2:9092"
)

var topicID = [16]byte{0x5f, 0x3d, 15: 0x42}

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// producer opens a producer connection at at: Metadata (naming broker 2),
// then one Produce per batch, 4 ms apart, each answered 1.2 ms later with
// bases[i] (and codes[i] if given). It returns the Produce requests.
func producer(h *dt.Harness, client, clientID string, at time.Duration, batches [][]byte, bases []int64, codes []int16) []*flows.Message {
	c := h.Conn(client, broker)
	mr, mresp := dt.MetadataBrokers(topic, topicID, map[int32]string{2: broker})
	h.Call(c, dt.At(at+ms(1)), ms(1), clientID, mr, mresp)
	var out []*flows.Message
	for i, b := range batches {
		var code int16
		if codes != nil {
			code = codes[i]
		}
		q, _ := h.Call(c, dt.At(at+ms(5)+time.Duration(i)*ms(4)), ms(1.2), clientID, dt.ProduceRaw(topic, 0, b), dt.ProducedAt(topic, 0, code, bases[i]))
		out = append(out, q)
	}
	return out
}

// consumer opens a consumer connection at at reading the stored batches in
// one Fetch from offset from.
func consumer(h *dt.Harness, client, clientID string, at time.Duration, from, hw int64, stored ...[]byte) {
	c := h.Conn(client, broker)
	mr, mresp := dt.MetadataBrokers(topic, topicID, map[int32]string{2: broker})
	h.Call(c, dt.At(at+ms(1)), ms(1), clientID, mr, mresp)
	h.Call(c, dt.At(at+ms(3)), ms(1), clientID, dt.FetchOf(topicID, 0, from, -1), dt.FetchedBatches(topicID, 0, hw, stored...))
}

// records returns records n..n+count-1 of a replayed source.
func records(n, count int) []kmsg.Record { return dt.Records(n, count) }

// source is 77 records in batches of 8 (the last of 5), as a
// non-idempotent producer (MirrorMaker 2's) builds them.
func source(t *testing.T) (batches [][]byte, bases []int64) {
	for n := 0; n < 77; n += 8 {
		spec := dt.BatchSpec{ProducerID: dt.NoProducer, Epoch: dt.NoProducer, Sequence: dt.NoProducer, Records: records(n, min(8, 77-n))}
		batches = append(batches, spec.Encode(t))
		bases = append(bases, int64(n))
	}
	return batches, bases
}

// rebatch builds records 0..n-1 in batches of the given sizes.
func rebatch(t *testing.T, codec *kgo.CompressionCodec, pid int64, sizes ...int) (batches [][]byte, bases []int64) {
	n := 0
	for _, k := range sizes {
		seq := int32(-1)
		if pid >= 0 {
			seq = int32(n)
		}
		batches = append(batches, dt.BatchSpec{Codec: codec, ProducerID: pid, Sequence: seq, Records: records(n, k)}.Encode(t))
		bases = append(bases, int64(n))
		n += k
	}
	return batches, bases
}

func shifted(bases []int64, by int64) []int64 {
	out := make([]int64, len(bases))
	for i, b := range bases {
		out[i] = b + by
	}
	return out
}

func stored(batches [][]byte, bases []int64) [][]byte {
	var out [][]byte
	for i, b := range batches {
		out = append(out, dt.Stored(b, bases[i], 0))
	}
	return out
}

// crcMD5 is the MD5 of the batches' CRCs, one per line.
func crcMD5(batches [][]byte) string {
	h := md5.New()
	for _, b := range batches {
		fmt.Fprintf(h, "%d\n", dt.CRC(b))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestDuplicateBatches(t *testing.T) {
	src, srcBases := source(t)
	gz, lz, sn, zs := dt.Codec(kgo.GzipCompression()), dt.Codec(kgo.Lz4Compression()), dt.Codec(kgo.SnappyCompression()), dt.Codec(kgo.ZstdCompression())

	var firstProduce, replayProduce uint64
	replay := func(t *testing.T, h *dt.Harness) {
		firstProduce = producer(h, "172.31.0.100:51000", "mm2-producer", 0, src, srcBases, nil)[0].Packet
		replayProduce = producer(h, "172.31.0.100:51002", "mm2-producer", 20*time.Second, src, shifted(srcBases, 77), nil)[0].Packet
		// A consumer reads across the seam: copies at known offsets.
		consumer(h, "172.31.0.100:51004", "console-consumer", 30*time.Second, 64, 154,
			dt.Stored(src[8], 64, 0), dt.Stored(src[9], 72, 0), dt.Stored(src[0], 77, 0), dt.Stored(src[1], 85, 0))
	}
	replayWant := dt.Want{
		Severity: detectors.Error,
		Detail: &duplicatebatches.Finding{
			Batches: 20, Records: 154, DupBatches: 10, DupRecords: 77, Topic: topic, Partition: int32(0),
			OffsetShift: int64(77), Shifts: []int64{77}, Contiguous: true, FirstOffset: int64(0),
			LastOffset: int64(76), RepeatFirstOffset: int64(77), RepeatLastOffset: int64(153),
			ProducerID: int64(-1), ClientID: "mm2-producer", Compared: "crc",
			CRCSequenceMD5: crcMD5(src), Replay: true,
		}, Exact: []string{"Topic", "Partition", "FirstOffset", "CRCSequenceMD5"},
		Summary: []string{"src.events-0: 10 batches (77 records) written twice, offsets 0-76 again at 77-153 (shift +77), producerId -1"},
	}

	// A replay whose batches were rebuilt: other boundaries, another
	// codec, a new (idempotent) producer id after the restart.
	rebatched := func(from, to *kgo.CompressionCodec) func(t *testing.T, h *dt.Harness) {
		return func(t *testing.T, h *dt.Harness) {
			orig, ob := rebatch(t, from, -1, 25, 25, 25, 25)
			again, ab := rebatch(t, to, 9001, 40, 40, 20)
			producer(h, "172.31.0.100:51000", "mm2-producer", 0, orig, ob, nil)
			producer(h, "172.31.0.100:51002", "mm2-producer", 20*time.Second, again, shifted(ab, 100), nil)
		}
	}
	// 100 records rebuilt into 3 batches: below replay-batches (6) and
	// replay-records (1000), a warning.
	rebatchedWant := dt.Want{
		Severity: detectors.Warning,
		Detail: &duplicatebatches.Finding{
			Batches: 7, Records: 200, DupBatches: 3, DupRecords: 100, DupByRecords: 3,
			OffsetShift: int64(100), Contiguous: true, FirstOffset: int64(0), LastOffset: int64(99),
			RepeatFirstOffset: int64(100), RepeatLastOffset: int64(199), ProducerID: int64(9001),
			Compared: "records", Replay: false,
		}, Exact: []string{"FirstOffset", "Replay"},
		Summary: []string{"3 batches (100 records) written twice", "producerId 9001"},
	}

	sameValueBy := func(pid int64) func(t *testing.T, h *dt.Harness) {
		return func(t *testing.T, h *dt.Harness) {
			var batches [][]byte
			var bases []int64
			for i := range 40 {
				rec := []kmsg.Record{{TimestampDelta64: dt.T0.UnixMilli(), Value: []byte("hello")}}
				spec := dt.BatchSpec{ProducerID: pid, Epoch: dt.NoProducer, Sequence: dt.NoProducer, Records: rec}
				if pid >= 0 {
					spec.Epoch, spec.Sequence = 0, int32(i)
				}
				batches = append(batches, spec.Encode(t))
				bases = append(bases, int64(i))
			}
			producer(h, "172.31.0.100:51000", "kgo", 0, batches, bases, nil)
		}
	}
	sameValue := sameValueBy(4000)

	for _, tc := range []struct {
		name     string
		settings map[string]string
		traffic  func(t *testing.T, h *dt.Harness)
		want     []dt.Want
		absent   []string // fields or counts the finding must not have
		check    func(t *testing.T, f detectors.Finding)
	}{
		{
			name: "byte-identical replay at +77 (MM2 after kill -9)", traffic: replay, want: []dt.Want{replayWant},
			absent: []string{"duplicate_batches_by_records", "batches_over_cap"},
			check: func(t *testing.T, f detectors.Finding) {
				if !slices.Equal(f.Nodes, []int32{2}) || len(f.Evidence) < 2 || f.Evidence[0].Packet != firstProduce ||
					f.Evidence[1].Packet != replayProduce {
					t.Errorf("nodes %v, evidence %v: want broker 2, the first copy at packet %d then the repeat at %d",
						f.Nodes, f.Evidence, firstProduce, replayProduce)
				}
			},
		},
		{name: "min-batches above the repeat", settings: map[string]string{"min-batches": "11"}, traffic: replay},
		{name: "min-batches at the repeat", settings: map[string]string{"min-batches": "10"}, traffic: replay, want: []dt.Want{replayWant}},
		{
			name: "near miss: the same batches read by two consumers and a second fetch at the same offsets",
			traffic: func(t *testing.T, h *dt.Harness) {
				producer(h, "172.31.0.100:51000", "producer-1", 0, src, srcBases, nil)
				all := stored(src, srcBases)
				consumer(h, "172.31.0.101:52000", "consumer-a", time.Second, 0, 77, all...)
				consumer(h, "172.31.0.102:52000", "consumer-b", ms(1100), 0, 77, all...)
				consumer(h, "172.31.0.102:52001", "consumer-b", ms(1200), 40, 77, all[5:]...)
			},
		},
		{
			name: "near miss: idempotent retries (DUPLICATE_SEQUENCE_NUMBER, then the first offset again)",
			traffic: func(t *testing.T, h *dt.Harness) {
				batches, bases := rebatch(t, nil, 4000, 10, 10, 10)
				// batch 1 retried twice: refused as a duplicate (46,
				// no offset), then answered with its first offset.
				batches = append(batches, batches[1], batches[1])
				bases = append(bases, -1, bases[1])
				producer(h, "172.31.0.100:51000", "idempotent-producer", 0, batches, bases, []int16{0, 0, 0, 46, 0})
				consumer(h, "172.31.0.101:52000", "consumer-a", time.Second, 0, 30, stored(batches[:3], bases[:3])...)
			},
		},
		{
			name: "near miss: identical payloads at one timestamp are not a replay (perf-test)",
			traffic: func(t *testing.T, h *dt.Harness) {
				var batches [][]byte
				var bases []int64
				off := int64(0)
				for k := 10; k < 15; k++ {
					recs := make([]kmsg.Record, k)
					for i := range recs {
						recs[i] = kmsg.Record{TimestampDelta64: dt.T0.UnixMilli(), Value: []byte("xxxxxxxxxxxxxxxx")}
					}
					batches = append(batches, dt.BatchSpec{ProducerID: -1, Epoch: -1, Sequence: -1, Records: recs}.Encode(t))
					bases = append(bases, off)
					off += int64(k)
				}
				producer(h, "172.31.0.100:51000", "perf-producer", 0, batches, bases, nil)
			},
		},
		{
			// Seen in a kgo ProduceSync loop of one value: one-record
			// batches sent within the same millisecond are equal
			// records; each has its own sequence number.
			name: "near miss: one idempotent session sends the same record again moments later", traffic: sameValue,
		},
		{
			// kafka-go (no idempotence): byte-identical one-record
			// batches, each acknowledged on the connection that sends
			// the next; a resend follows a lost acknowledgement.
			name: "near miss: a producer without idempotence sends the same record again on its connection", traffic: sameValueBy(dt.NoProducer),
		},
		{
			name: "same-producer-window 0: byte-identical batches on one connection are reported", settings: map[string]string{"same-producer-window": "0"},
			traffic: sameValueBy(dt.NoProducer),
			want: []dt.Want{{Severity: detectors.Warning, Detail: &duplicatebatches.Finding{
				OffsetShift: int64(1), ProducerID: int64(-1), Compared: "crc",
			}}},
		},
		{
			name: "same-producer-window 0: the same record sent again is reported", settings: map[string]string{"same-producer-window": "0"},
			traffic: sameValue,
			want: []dt.Want{{Severity: detectors.Warning, Detail: &duplicatebatches.Finding{
				OffsetShift: int64(1), ProducerID: int64(4000), Compared: "records",
			}}},
		},
		{
			// The other side: the same session writing the same
			// records again 20 s later (a consume-transform-produce
			// app that re-read its input after a rebalance, its
			// producer kept) is a replay.
			name: "one idempotent session writes the same records again after 20 s",
			traffic: func(t *testing.T, h *dt.Harness) {
				orig, ob := rebatch(t, nil, 4000, 10, 10, 10, 10, 10, 10)
				again, ab := rebatch(t, nil, 4000, 10, 10, 10, 10, 10, 10)
				for i := range again {
					again[i] = dt.BatchSpec{ProducerID: 4000, Sequence: int32(60 + 10*i), Records: records(10*i, 10)}.Encode(t)
				}
				producer(h, "172.31.0.100:51000", "streams-app", 0, orig, ob, nil)
				producer(h, "172.31.0.100:51002", "streams-app", 20*time.Second, again, shifted(ab, 60), nil)
			},
			want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &duplicatebatches.Finding{
					DupBatches: 6, DupRecords: 60, DupByRecords: 6, OffsetShift: int64(60),
					ProducerID: int64(4000), Compared: "records",
				},
			}},
		},
		{name: "re-batched replay, gzip to lz4", traffic: rebatched(gz, lz), want: []dt.Want{rebatchedWant}, absent: []string{"crc_sequence_md5"}},
		{name: "re-batched replay, snappy to zstd", traffic: rebatched(sn, zs), want: []dt.Want{rebatchedWant}},
		{name: "re-batched replay, lz4 to gzip", traffic: rebatched(lz, gz), want: []dt.Want{rebatchedWant}},
		{name: "re-batched replay, zstd to snappy", traffic: rebatched(zs, sn), want: []dt.Want{rebatchedWant}},
		{name: "re-batched replay, uncompressed to zstd", traffic: rebatched(nil, zs), want: []dt.Want{rebatchedWant}},
		{name: "re-batched replay with records not compared", settings: map[string]string{"compare-records": "false"}, traffic: rebatched(gz, lz)},
		{name: "compare-records=0, as it was written when it was a number", settings: map[string]string{"compare-records": "0"}, traffic: rebatched(gz, lz)},
		{name: "re-batched replay over the decompression cap", settings: map[string]string{"max-decompressed": "512B"}, traffic: rebatched(gz, lz)},
		{
			name:     "byte-identical compressed replay over the cap (its old name, in MiB) is still found by CRC",
			settings: map[string]string{"max-decompressed-mib": "0.0001"},
			traffic: func(t *testing.T, h *dt.Harness) {
				orig, ob := rebatch(t, gz, -1, 20, 20)
				producer(h, "172.31.0.100:51000", "mm2-producer", 0, orig, ob, nil)
				producer(h, "172.31.0.100:51002", "mm2-producer", 20*time.Second, orig, shifted(ob, 40), nil)
			},
			want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &duplicatebatches.Finding{
					DupBatches: 2, DupRecords: 40, OverCap: 2, OffsetShift: int64(40), Compared: "crc",
				},
			}},
		},
		{
			name: "repeat seen only by a consumer",
			traffic: func(t *testing.T, h *dt.Harness) {
				consumer(h, "172.31.0.101:52000", "audit-reader", 0, 0, 154,
					append(stored(src, srcBases), stored(src, shifted(srcBases, 77))...)...)
			},
			want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &duplicatebatches.Finding{
					Batches: 20, DupBatches: 10, DupRecords: 77, ClientID: "audit-reader",
					OffsetShift: int64(77), Contiguous: true,
				},
			}},
		},
		{
			name: "the repeat seen before its original (the original's Produce lost, a later Fetch shows it)",
			traffic: func(t *testing.T, h *dt.Harness) {
				producer(h, "172.31.0.100:51002", "mm2-producer", 0, src, shifted(srcBases, 77), nil)
				consumer(h, "172.31.0.101:52000", "audit-reader", time.Second, 0, 154, stored(src, srcBases)...)
			},
			want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &duplicatebatches.Finding{
					DupBatches: 10, DupRecords: 77, OffsetShift: int64(77), FirstOffset: int64(0),
					RepeatFirstOffset: int64(77), ClientID: "audit-reader",
				}, Exact: []string{"FirstOffset"},
				// The pair is found when the original is fetched:
				// the reader is who saw it.
			}},
			check: func(t *testing.T, f detectors.Finding) {
				for _, e := range f.Evidence[1:] {
					if !strings.Contains(e.What, "seen after its copy at") {
						t.Errorf("evidence %q does not say the copy was seen first", e.What)
					}
				}
			},
		},
		{
			name: "two replays: two shifts",
			traffic: func(t *testing.T, h *dt.Harness) {
				replay(t, h)
				producer(h, "172.31.0.100:51006", "mm2-producer", 40*time.Second, src, shifted(srcBases, 154), nil)
			},
			want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &duplicatebatches.Finding{
					Batches: 30, Records: 231, DupBatches: 20, DupRecords: 154, OffsetShift: int64(77),
					Shifts: []int64{77, 154},
				},
			}},
		},
		{
			name: "partial replay: a hole in the repeat is not contiguous",
			traffic: func(t *testing.T, h *dt.Harness) {
				producer(h, "172.31.0.100:51000", "mm2-producer", 0, src, srcBases, nil)
				again := slices.Delete(slices.Clone(src), 3, 4)
				bases := slices.Delete(slices.Clone(srcBases), 3, 4)
				producer(h, "172.31.0.100:51002", "mm2-producer", 20*time.Second, again, shifted(bases, 77), nil)
			},
			want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &duplicatebatches.Finding{
					DupBatches: 9, DupRecords: 69, Contiguous: false, FirstOffset: int64(0),
					LastOffset: int64(76),
				}, Exact: []string{"Contiguous", "FirstOffset"},
			}},
			absent: []string{"crc_sequence_md5"},
		},
		{
			name: "near miss: the same records on two clusters under one topic name (topic ids differ)",
			traffic: func(t *testing.T, h *dt.Harness) {
				// MirrorMaker 2 with the identity policy, captured at
				// its host: it reads the source (topic id A, offsets
				// from 5000) and writes the target (id B) anew.
				source := "10.9.0.1:9092"
				idA := [16]byte{0xaa, 15: 1}
				orig, ob := rebatch(t, gz, 4242, 25, 25, 25, 25)
				var copies [][]byte
				for i, b := range orig {
					copies = append(copies, dt.Stored(b, ob[i]+5000, 3))
				}
				c := h.Conn("172.31.0.100:53000", source)
				mr, mresp := dt.MetadataBrokers(topic, idA, map[int32]string{1: source})
				h.Call(c, dt.At(ms(1)), ms(1), "mm2-consumer", mr, mresp)
				h.Call(c, dt.At(ms(3)), ms(1), "mm2-consumer", dt.FetchOf(idA, 0, 5000, -1), dt.FetchedBatches(idA, 0, 5100, copies...))
				again, ab := rebatch(t, lz, -1, 40, 40, 20)
				producer(h, "172.31.0.100:51000", "mm2-producer", ms(100), again, ab, nil)
				consumer(h, "172.31.0.100:51004", "target-reader", ms(500), 0, 100, stored(again, ab)...)
			},
		},
		{
			name: "near miss: an aborted transaction sent again",
			traffic: func(t *testing.T, h *dt.Harness) {
				first := dt.BatchSpec{ProducerID: 7000, Sequence: 0, Attrs: 0x10, Records: records(0, 20)}.Encode(t)
				again := dt.BatchSpec{ProducerID: 7000, Sequence: 20, Attrs: 0x10, Records: records(0, 20)}.Encode(t)
				producer(h, "172.31.0.100:51000", "txn-producer", 0, [][]byte{first, again}, []int64{0, 21}, nil)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, map[string]map[string]string{"duplicate-batches": tc.settings}, duplicatebatches.Analyzer)
			tc.traffic(t, h)
			fs := h.Findings()
			dt.Check(t, fs, "duplicate-batches", tc.want...)
			for _, f := range fs {
				for _, k := range tc.absent {
					if _, ok := f.Fields[k]; ok {
						t.Errorf("field %s present: %v", k, f.Fields[k])
					}
					if _, ok := f.Counts[k]; ok {
						t.Errorf("count %s present: %v", k, f.Counts[k])
					}
				}
				if tc.check != nil {
					tc.check(t, f)
				}
			}
		})
	}
}

// TestDuplicateBatchesSeverity: duplicates never heal, so the severity is
// how much was written twice and how (the Doc): an MM2-style replay
// (replay-batches, 6, batches at one shift) or replay-records (1000)
// records written twice are an error; less, such as a producer resending
// the at most 5 batches it had in flight, a warning; never info.
func TestDuplicateBatchesSeverity(t *testing.T) {
	// batches of n records each, k of them, non-idempotent.
	batches := func(k, n int) [][]byte {
		var out [][]byte
		for i := range k {
			out = append(out, dt.BatchSpec{ProducerID: dt.NoProducer, Epoch: dt.NoProducer, Sequence: dt.NoProducer,
				Records: records(i*n, n)}.Encode(t))
		}
		return out
	}
	// resend: k batches of n records written at 0.., then the same bytes
	// again right after them, as a producer's retry of its in-flight
	// batches (or a replay) appends them.
	resend := func(k, n int) func(h *dt.Harness) {
		return func(h *dt.Harness) {
			bs := batches(k, n)
			var bases []int64
			for i := range bs {
				bases = append(bases, int64(i*n))
			}
			producer(h, "172.31.0.100:51000", "app", 0, bs, bases, nil)
			producer(h, "172.31.0.100:51002", "app", 5*time.Second, bs, shifted(bases, int64(k*n)), nil)
		}
	}
	dt.Run(t, duplicatebatches.Analyzer, []dt.Case{
		{
			Name:    "a producer's resend of its 5 in-flight batches: warning",
			Traffic: resend(5, 8),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &duplicatebatches.Finding{
				DupBatches: 5, DupRecords: 40, Replay: false, OffsetShift: int64(40),
			}, Exact: []string{"Replay"}}},
			Explanation: []string{"5 batches at one shift, fewer than replay-batches (6)", "fewer than replay-records (1000)"},
		},
		{
			Name:    "near miss the other way: 6 batches at one shift are an MM2-style replay, error",
			Traffic: resend(6, 8),
			Want: []dt.Want{{Severity: detectors.Error, Detail: &duplicatebatches.Finding{
				DupBatches: 6, DupRecords: 48, Replay: true,
			}}},
			Explanation: []string{"6 batches appended again at one shift (replay-batches is 6) are a replay, not a retry"},
		},
		{
			Name:     "replay-batches raised to 7: the 6 batches are a warning",
			Settings: map[string]string{"replay-batches": "7"},
			Traffic:  resend(6, 8),
			Want:     []dt.Want{{Severity: detectors.Warning, Detail: &duplicatebatches.Finding{Replay: false}, Exact: []string{"Replay"}}},
		},
		{
			Name:    "near miss: 5 large batches, 995 records written twice: warning",
			Traffic: resend(5, 199),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &duplicatebatches.Finding{
				DupRecords: 995, Replay: false,
			}, Exact: []string{"Replay"}}},
		},
		{
			Name:    "near miss the other way: 5 batches, 1000 records written twice reach replay-records: error",
			Traffic: resend(5, 200),
			Want: []dt.Want{{Severity: detectors.Error, Detail: &duplicatebatches.Finding{
				DupBatches: 5, DupRecords: 1000, Replay: false,
			}, Exact: []string{"Replay"}}},
			Explanation: []string{"But 1000 records written twice reach replay-records (1000): an error whatever the pattern."},
		},
		{
			Name: "scattered resends: 6 batches at four shifts, none a replay: warning",
			Traffic: func(h *dt.Harness) {
				bs := batches(6, 8)
				// The order the log holds them in: b0 b1 b0 b1 b2 b3 b4
				// b2 b3 b5 b5 b4, at 8 records each.
				// A producer resends what it has no acknowledgement
				// for, after its connection dropped: the connections
				// are b0 b1 | b0 b1 b2 b3 b4 | b2 b3 b5 | b5 b4.
				off := int64(0)
				for i, conn := range [][]int{{0, 1}, {0, 1, 2, 3, 4}, {2, 3, 5}, {5, 4}} {
					var seq [][]byte
					var bases []int64
					for _, b := range conn {
						seq = append(seq, bs[b])
						bases = append(bases, off)
						off += 8
					}
					producer(h, fmt.Sprintf("172.31.0.100:%d", 51000+i), "app", time.Duration(i)*time.Second, seq, bases, nil)
				}
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &duplicatebatches.Finding{
				DupBatches: 6, DupRecords: 48, Replay: false, Shifts: []int64{8, 16, 24, 40},
			}, Exact: []string{"Replay"}}},
		},
		{
			Name:    "a single batch written twice is a warning, not info",
			Traffic: resend(1, 3),
			Want:    []dt.Want{{Severity: detectors.Warning, Detail: &duplicatebatches.Finding{DupBatches: 1, DupRecords: 3}}},
		},
	}, nil)
}
