package legacy_test

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

const (
	dupTopic  = "src.events"
	dupBroker = "172.31.20.2:9092"
)

var dupTopicID = [16]byte{0x5f, 0x3d, 15: 0x42}

// dupProducer writes a producer connection: Metadata (naming broker 2),
// then one Produce per batch, 4 ms apart, each answered 1.2 ms later with
// bases[i] (and codes[i] if given).
func dupProducer(w *gen.Writer, client, clientID string, t time.Time, batches [][]byte, bases []int64, codes []int16) {
	p := bcDial(w, client, dupBroker, clientID, t)
	mr, mresp := bcMetadata(dupTopic, dupTopicID, map[int32]string{2: dupBroker})
	p.exchange(t.Add(time.Millisecond), time.Millisecond, mr, mresp)
	for i, b := range batches {
		var code int16
		if codes != nil {
			code = codes[i]
		}
		at := t.Add(5*time.Millisecond + time.Duration(i)*4*time.Millisecond)
		p.exchange(at, 1200*time.Microsecond, bcProduce(dupTopic, 0, b), bcProduced(dupTopic, 0, code, bases[i]))
	}
	p.c.Close(t.Add(5*time.Millisecond + time.Duration(len(batches))*4*time.Millisecond))
}

// dupConsumer writes a consumer reading the stored batches in one Fetch.
func dupConsumer(w *gen.Writer, client, clientID string, t time.Time, from, hw int64, stored ...[]byte) {
	c := bcDial(w, client, dupBroker, clientID, t)
	mr, mresp := bcMetadata(dupTopic, dupTopicID, map[int32]string{2: dupBroker})
	c.exchange(t.Add(time.Millisecond), time.Millisecond, mr, mresp)
	c.exchange(t.Add(3*time.Millisecond), time.Millisecond, bcFetch(dupTopicID, 0, from, -1), bcFetched(dupTopicID, 0, hw, stored...))
}

// dupSource is 77 records in batches of 8 (the last of 5), as a
// non-idempotent producer (MirrorMaker 2's) builds them.
func dupSource(t *testing.T, codec *kgo.CompressionCodec) (batches [][]byte, bases []int64) {
	for n := 0; n < 77; n += 8 {
		k := min(8, 77-n)
		batches = append(batches, bcBatch(t, bcBatchSpec{codec: codec, producerID: -1, epoch: -1, sequence: -1, records: bcRecords(n, k)}))
		bases = append(bases, int64(n))
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

// rebatch builds records 0..n-1 in batches of the given sizes.
func rebatch(t *testing.T, codec *kgo.CompressionCodec, pid int64, sizes ...int) (batches [][]byte, bases []int64) {
	n := 0
	for _, k := range sizes {
		seq := int32(-1)
		if pid >= 0 {
			seq = int32(n)
		}
		batches = append(batches, bcBatch(t, bcBatchSpec{codec: codec, producerID: pid, sequence: seq, records: bcRecords(n, k)}))
		bases = append(bases, int64(n))
		n += k
	}
	return batches, bases
}

func crcMD5(batches [][]byte) string {
	h := md5.New()
	for _, b := range batches {
		fmt.Fprintf(h, "%d\n", bcCRC(b))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestDuplicateBatches(t *testing.T) {
	src, srcBases := dupSource(t, nil)
	gz, lz, sn, zs := codecPtr(kgo.GzipCompression()), codecPtr(kgo.Lz4Compression()), codecPtr(kgo.SnappyCompression()), codecPtr(kgo.ZstdCompression())

	replay := func(t *testing.T, w *gen.Writer) {
		dupProducer(w, "172.31.0.100:51000", "mm2-producer", bcAt(0), src, srcBases, nil)
		dupProducer(w, "172.31.0.100:51002", "mm2-producer", bcAt(20000), src, shifted(srcBases, 77), nil)
		// A consumer reads across the seam: copies at known offsets.
		dupConsumer(w, "172.31.0.100:51004", "console-consumer", bcAt(30000), 64, 154,
			bcStored(src[8], 64, 0), bcStored(src[9], 72, 0), bcStored(src[0], 77, 0), bcStored(src[1], 85, 0))
	}
	replayWant := bcWant{
		severity: detectors.Error,
		counts:   map[string]int64{"batches": 20, "records": 154, "duplicate_batches": 10, "duplicate_records": 77},
		fields: map[string]any{
			"topic": dupTopic, "partition": 0, "offset_shift": 77, "shifts": []int64{77}, "contiguous": true,
			"first_offset": 0, "last_offset": 76, "repeat_first_offset": 77, "repeat_last_offset": 153,
			"producer_id": -1, "client_id": "mm2-producer", "compared": "crc", "crc_sequence_md5": crcMD5(src),
		},
		nodes:  []int32{2},
		absent: []string{"duplicate_batches_by_records", "batches_over_cap"},
	}

	// A replay whose batches were rebuilt: other boundaries, another
	// codec, a new (idempotent) producer id after the restart.
	rebatched := func(from, to *kgo.CompressionCodec) func(t *testing.T, w *gen.Writer) {
		return func(t *testing.T, w *gen.Writer) {
			orig, ob := rebatch(t, from, -1, 25, 25, 25, 25)
			again, ab := rebatch(t, to, 9001, 40, 40, 20)
			dupProducer(w, "172.31.0.100:51000", "mm2-producer", bcAt(0), orig, ob, nil)
			dupProducer(w, "172.31.0.100:51002", "mm2-producer", bcAt(20000), again, shifted(ab, 100), nil)
		}
	}
	rebatchedWant := bcWant{
		severity: detectors.Error,
		counts: map[string]int64{"batches": 7, "records": 200, "duplicate_batches": 3, "duplicate_records": 100,
			"duplicate_batches_by_records": 3},
		fields: map[string]any{
			"offset_shift": 100, "contiguous": true, "first_offset": 0, "last_offset": 99,
			"repeat_first_offset": 100, "repeat_last_offset": 199, "producer_id": 9001, "compared": "records",
		},
		absent: []string{"crc_sequence_md5"},
	}

	cases := []struct {
		name      string
		overrides map[string]float64
		script    func(t *testing.T, w *gen.Writer)
		want      []bcWant // one per finding; none: no finding
	}{
		{name: "byte-identical replay at +77 (MM2 after kill -9)", script: replay, want: []bcWant{replayWant}},
		{name: "min-batches above the repeat", overrides: map[string]float64{"duplicate-batches.min-batches": 11}, script: replay},
		{name: "min-batches at the repeat", overrides: map[string]float64{"duplicate-batches.min-batches": 10}, script: replay, want: []bcWant{replayWant}},
		{
			name: "the same batches read by two consumers and a second fetch at the same offsets",
			script: func(t *testing.T, w *gen.Writer) {
				dupProducer(w, "172.31.0.100:51000", "producer-1", bcAt(0), src, srcBases, nil)
				var stored [][]byte
				for i, b := range src {
					stored = append(stored, bcStored(b, srcBases[i], 0))
				}
				dupConsumer(w, "172.31.0.101:52000", "consumer-a", bcAt(1000), 0, 77, stored...)
				dupConsumer(w, "172.31.0.102:52000", "consumer-b", bcAt(1100), 0, 77, stored...)
				dupConsumer(w, "172.31.0.102:52001", "consumer-b", bcAt(1200), 40, 77, stored[5:]...)
			},
		},
		{
			name: "idempotent retries: DUPLICATE_SEQUENCE_NUMBER, and the first offset again",
			script: func(t *testing.T, w *gen.Writer) {
				batches, bases := rebatch(t, nil, 4000, 10, 10, 10)
				// batch 1 retried twice: refused as a duplicate (46,
				// no offset), then answered with its first offset.
				batches = append(batches, batches[1], batches[1])
				bases = append(bases, -1, bases[1])
				codes := []int16{0, 0, 0, 46, 0}
				dupProducer(w, "172.31.0.100:51000", "idempotent-producer", bcAt(0), batches, bases, codes)
				var stored [][]byte
				for i := range 3 {
					stored = append(stored, bcStored(batches[i], bases[i], 0))
				}
				dupConsumer(w, "172.31.0.101:52000", "consumer-a", bcAt(1000), 0, 30, stored...)
			},
		},
		{
			name: "identical payloads at one timestamp are not a replay (perf-test)",
			script: func(t *testing.T, w *gen.Writer) {
				var batches [][]byte
				var bases []int64
				off := int64(0)
				for k := 10; k < 15; k++ {
					recs := make([]bcRecord, k)
					for i := range recs {
						recs[i] = bcRecord{ts: bcStart.UnixMilli(), value: []byte("xxxxxxxxxxxxxxxx")}
					}
					batches = append(batches, bcBatch(t, bcBatchSpec{producerID: -1, epoch: -1, sequence: -1, records: recs}))
					bases = append(bases, off)
					off += int64(k)
				}
				dupProducer(w, "172.31.0.100:51000", "perf-producer", bcAt(0), batches, bases, nil)
			},
		},
		{name: "re-batched replay, gzip to lz4", script: rebatched(gz, lz), want: []bcWant{rebatchedWant}},
		{name: "re-batched replay, snappy to zstd", script: rebatched(sn, zs), want: []bcWant{rebatchedWant}},
		{name: "re-batched replay, lz4 to gzip", script: rebatched(lz, gz), want: []bcWant{rebatchedWant}},
		{name: "re-batched replay, zstd to snappy", script: rebatched(zs, sn), want: []bcWant{rebatchedWant}},
		{name: "re-batched replay, uncompressed to zstd", script: rebatched(nil, zs), want: []bcWant{rebatchedWant}},
		{name: "re-batched replay with records not compared", overrides: map[string]float64{"duplicate-batches.compare-records": 0}, script: rebatched(gz, lz)},
		{name: "re-batched replay over the decompression cap", overrides: map[string]float64{"duplicate-batches.max-decompressed-mib": 0.0005}, script: rebatched(gz, lz)},
		{
			name:      "byte-identical compressed replay over the cap is still found by CRC",
			overrides: map[string]float64{"duplicate-batches.max-decompressed-mib": 0.0001},
			script: func(t *testing.T, w *gen.Writer) {
				orig, ob := rebatch(t, gz, -1, 20, 20)
				dupProducer(w, "172.31.0.100:51000", "mm2-producer", bcAt(0), orig, ob, nil)
				dupProducer(w, "172.31.0.100:51002", "mm2-producer", bcAt(20000), orig, shifted(ob, 40), nil)
			},
			want: []bcWant{{
				severity: detectors.Error,
				counts:   map[string]int64{"duplicate_batches": 2, "duplicate_records": 40, "batches_over_cap": 2},
				fields:   map[string]any{"offset_shift": 40, "compared": "crc"},
			}},
		},
		{
			name: "repeat seen only by a consumer",
			script: func(t *testing.T, w *gen.Writer) {
				var stored [][]byte
				for _, by := range []int64{0, 77} {
					for i, b := range src {
						stored = append(stored, bcStored(b, srcBases[i]+by, 0))
					}
				}
				dupConsumer(w, "172.31.0.101:52000", "audit-reader", bcAt(0), 0, 154, stored...)
			},
			want: []bcWant{{
				severity: detectors.Error,
				counts:   map[string]int64{"batches": 20, "duplicate_batches": 10, "duplicate_records": 77},
				fields:   map[string]any{"client_id": "audit-reader", "offset_shift": 77, "contiguous": true},
			}},
		},
		{
			name: "two replays: two shifts",
			script: func(t *testing.T, w *gen.Writer) {
				replay(t, w)
				dupProducer(w, "172.31.0.100:51006", "mm2-producer", bcAt(40000), src, shifted(srcBases, 154), nil)
			},
			want: []bcWant{{
				severity: detectors.Error,
				counts:   map[string]int64{"batches": 30, "records": 231, "duplicate_batches": 20, "duplicate_records": 154},
				fields:   map[string]any{"offset_shift": 77, "shifts": []int64{77, 154}},
			}},
		},
		{
			name: "partial replay: a hole in the repeat is not contiguous",
			script: func(t *testing.T, w *gen.Writer) {
				dupProducer(w, "172.31.0.100:51000", "mm2-producer", bcAt(0), src, srcBases, nil)
				again := append(append([][]byte{}, src[:3]...), src[4:]...)
				bases := append(append([]int64{}, srcBases[:3]...), srcBases[4:]...)
				dupProducer(w, "172.31.0.100:51002", "mm2-producer", bcAt(20000), again, shifted(bases, 77), nil)
			},
			want: []bcWant{{
				severity: detectors.Error,
				counts:   map[string]int64{"duplicate_batches": 9, "duplicate_records": 69},
				fields:   map[string]any{"contiguous": false, "first_offset": 0, "last_offset": 76},
				absent:   []string{"crc_sequence_md5"},
			}},
		},
		{
			name: "the same records on two clusters under one topic name: topic ids differ",
			script: func(t *testing.T, w *gen.Writer) {
				// MirrorMaker 2 with the identity policy, captured at
				// its host: it reads the source (topic id A, offsets
				// from 5000) and writes the target (id B) anew.
				source := "10.9.0.1:9092"
				idA := [16]byte{0xaa, 15: 1}
				orig, ob := rebatch(t, gz, 4242, 25, 25, 25, 25)
				var stored [][]byte
				for i, b := range orig {
					stored = append(stored, bcStored(b, ob[i]+5000, 3))
				}
				c := bcDial(w, "172.31.0.100:53000", source, "mm2-consumer", bcAt(0))
				mr, mresp := bcMetadata(dupTopic, idA, map[int32]string{1: source})
				c.exchange(bcAt(1), time.Millisecond, mr, mresp)
				c.exchange(bcAt(3), time.Millisecond, bcFetch(idA, 0, 5000, -1), bcFetched(idA, 0, 5100, stored...))
				again, ab := rebatch(t, lz, -1, 40, 40, 20)
				dupProducer(w, "172.31.0.100:51000", "mm2-producer", bcAt(100), again, ab, nil)
				var copies [][]byte
				for i, b := range again {
					copies = append(copies, bcStored(b, ab[i], 0))
				}
				dupConsumer(w, "172.31.0.100:51004", "target-reader", bcAt(500), 0, 100, copies...)
			},
		},
		{
			name: "an aborted transaction sent again",
			script: func(t *testing.T, w *gen.Writer) {
				first := bcBatch(t, bcBatchSpec{producerID: 7000, sequence: 0, attrs: 0x10, records: bcRecords(0, 20)})
				again := bcBatch(t, bcBatchSpec{producerID: 7000, sequence: 20, attrs: 0x10, records: bcRecords(0, 20)})
				dupProducer(w, "172.31.0.100:51000", "txn-producer", bcAt(0), [][]byte{first, again}, []int64{0, 21}, nil)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := bcFindings(t, "duplicate-batches", tc.overrides, tc.script)
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
