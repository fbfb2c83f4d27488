package legacy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

func TestFifoForgetsOldestFirst(t *testing.T) {
	var evicted []string
	f := newFifo(3, func(k string, _ int) { evicted = append(evicted, k) })
	for i, k := range []string{"a", "b", "c"} {
		f.put(k, i)
	}
	f.del("b")
	f.put("d", 3) // evicts a
	f.put("e", 4) // b's slot is stale: nothing evicted
	f.put("b", 5) // evicts c
	f.put("d", 6) // replaces in place
	if !slices.Equal(evicted, []string{"a", "c"}) || f.evicted != 2 {
		t.Errorf("evicted %v (%d), want [a c]", evicted, f.evicted)
	}
	var order []string
	f.each(func(k string, v int) { order = append(order, fmt.Sprint(k, v)) })
	if !slices.Equal(order, []string{"d6", "e4", "b5"}) {
		t.Errorf("each = %v, want oldest first [d6 e4 b5]", order)
	}
	if _, ok := f.get("a"); ok || f.len() != 3 {
		t.Errorf("a still there or len %d", f.len())
	}
}

func TestOffsetRangesMerge(t *testing.T) {
	var s offsetRanges
	s.add(100, 177)
	s.add(0, 77)
	s.add(78, 99) // joins both
	s.add(300, 300)
	s.add(250, 260)
	if len(s.r) != 3 || s.r[0] != (offsetRange{0, 177}) {
		t.Fatalf("ranges %v", s.r)
	}
	for x, want := range map[int64]bool{0: true, 99: true, 177: true, 178: false, 255: true, 261: false, 300: true, -1: false} {
		if s.contains(x) != want {
			t.Errorf("contains(%d) = %v", x, !want)
		}
	}
	for i := range maxRanges + 10 {
		s.add(int64(1000+2*i), int64(1000+2*i))
	}
	if len(s.r) != maxRanges || s.dropped == 0 {
		t.Errorf("%d ranges, %d dropped: not bounded", len(s.r), s.dropped)
	}
}

// testBatch encodes records as one magic-2 batch with codec and returns it
// decoded as the flows analyzer delivers it.
func testBatch(t testing.TB, codec *kgo.CompressionCodec, firstTS int64, recs []kmsg.Record) decode.Batch {
	t.Helper()
	var raw []byte
	for i := range recs {
		r := recs[i]
		r.OffsetDelta = int32(i)
		r.TimestampDelta64 -= firstTS
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1)
		raw = r.AppendTo(raw)
	}
	var attrs int16
	if codec != nil {
		c, err := kgo.DefaultCompressor(*codec)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		out, typ := c.Compress(&buf, raw)
		raw, attrs = bytes.Clone(out), int16(typ)
	}
	b := kmsg.RecordBatch{Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: firstTS,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)), Records: raw}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoliTable))
	var got decode.Batch
	if _, err := decode.ScanBatches(out, func(b *decode.Batch) { got = *b }); err != nil || got.Raw == nil {
		t.Fatalf("scan: %v", err)
	}
	return got
}

// records returns n records with absolute timestamps (in TimestampDelta64).
func testRecords(from, n int) []kmsg.Record {
	out := make([]kmsg.Record, n)
	for i := range out {
		k := from + i
		out[i] = kmsg.Record{TimestampDelta64: 1_700_000_000_000 + int64(k), Key: []byte(fmt.Sprintf("k%d", k)),
			Value: bytes.Repeat([]byte{byte('a' + k%26)}, 100), Headers: []kmsg.Header{{Key: "h", Value: []byte{byte(k)}}}}
	}
	return out
}

var testCodecs = map[string]*kgo.CompressionCodec{
	"none": nil, "gzip": ptr(kgo.GzipCompression()), "snappy": ptr(kgo.SnappyCompression()),
	"lz4": ptr(kgo.Lz4Compression()), "zstd": ptr(kgo.ZstdCompression()),
}

func ptr[T any](v T) *T { return &v }

func TestRecordHasherSameRecordsAnyCodecAndBatching(t *testing.T) {
	h := newRecordHasher(1 << 20)
	recs := testRecords(0, 40)
	ref, err := h.hashes(ptr(testBatch(t, nil, recs[0].TimestampDelta64, recs)), nil)
	if err != nil || len(ref) != 40 {
		t.Fatalf("reference: %d hashes, %v", len(ref), err)
	}
	for name, codec := range testCodecs {
		// The same records split in two batches with other first timestamps.
		a, err := h.hashes(ptr(testBatch(t, codec, recs[0].TimestampDelta64, recs[:15])), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := h.hashes(ptr(testBatch(t, codec, recs[15].TimestampDelta64, recs[15:])), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, x := range append(a, b...) {
			if x.h != ref[i].h {
				t.Errorf("%s: record %d hashes differently", name, i)
				break
			}
		}
		if b[0].delta != 0 || b[len(b)-1].delta != 24 {
			t.Errorf("%s: offset deltas %d..%d", name, b[0].delta, b[len(b)-1].delta)
		}
	}
}

func TestRecordHasherTellsRecordsApart(t *testing.T) {
	h := newRecordHasher(1 << 20)
	base := kmsg.Record{TimestampDelta64: 1000, Key: []byte{}, Value: []byte("v"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}}
	variants := map[string]func(r *kmsg.Record){
		"null key":        func(r *kmsg.Record) { r.Key = nil },
		"other value":     func(r *kmsg.Record) { r.Value = []byte("w") },
		"null value":      func(r *kmsg.Record) { r.Value = nil },
		"other timestamp": func(r *kmsg.Record) { r.TimestampDelta64 = 1001 },
		"other header":    func(r *kmsg.Record) { r.Headers[0].Value = []byte("y") },
		"null header":     func(r *kmsg.Record) { r.Headers[0].Value = nil },
		"no header":       func(r *kmsg.Record) { r.Headers = nil },
		"key moved to value": func(r *kmsg.Record) {
			r.Key, r.Value = []byte("v"), []byte{}
		},
	}
	one := func(r kmsg.Record) uint64 {
		hs, err := h.hashes(ptr(testBatch(t, nil, 1000, []kmsg.Record{r})), nil)
		if err != nil || len(hs) != 1 {
			t.Fatalf("%v %v", hs, err)
		}
		return hs[0].h
	}
	want := one(base)
	for name, f := range variants {
		r := base
		r.Headers = slices.Clone(base.Headers)
		f(&r)
		if one(r) == want {
			t.Errorf("%s: same hash as the original", name)
		}
	}
}

func TestRecordHasherCap(t *testing.T) {
	recs := testRecords(0, 50) // about 6 kB decompressed
	for name, codec := range testCodecs {
		if codec == nil {
			continue
		}
		b := testBatch(t, codec, recs[0].TimestampDelta64, recs)
		small := newRecordHasher(4096)
		if _, err := small.hashes(&b, nil); !errors.Is(err, errOverCap) {
			t.Errorf("%s: 4096-byte cap: %v, want errOverCap", name, err)
		}
		big := newRecordHasher(1 << 16)
		if hs, err := big.hashes(&b, nil); err != nil || len(hs) != 50 {
			t.Errorf("%s: 64 KiB cap: %d hashes, %v", name, len(hs), err)
		}
	}
}

func TestRecordHasherMalformed(t *testing.T) {
	h := newRecordHasher(1 << 16)
	for name, codec := range testCodecs {
		b := testBatch(t, codec, 0, testRecords(0, 5))
		for cut := 62; cut < len(b.Raw); cut += 7 {
			c := b
			c.Raw = b.Raw[:cut]
			if hs, err := h.hashes(&c, nil); err == nil && len(hs) == 5 {
				t.Errorf("%s cut at %d: %d hashes and no error", name, cut, len(hs))
			}
		}
		c := b
		c.Records = 6 // claims one more record than it holds
		if _, err := h.hashes(&c, nil); err == nil {
			t.Errorf("%s: a missing record went unnoticed", name)
		}
	}
	legacy := decode.Batch{Magic: 1, Raw: make([]byte, 80)}
	if _, err := h.hashes(&legacy, nil); !errors.Is(err, errNotHashable) {
		t.Errorf("legacy message: %v", err)
	}
}

// FuzzRecordHasher: whatever the bytes, no panic, and a batch that hashes
// without error yields one fingerprint per record it claims.
func FuzzRecordHasher(f *testing.F) {
	for _, codec := range testCodecs {
		f.Add(testBatch(f, codec, 0, testRecords(0, 3)).Raw)
	}
	h := newRecordHasher(1 << 16)
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = decode.ScanBatches(raw, func(b *decode.Batch) {
			hs, err := h.hashes(b, nil)
			if err == nil && len(hs) != int(b.Records) {
				t.Fatalf("%d hashes for %d records", len(hs), b.Records)
			}
		})
	})
}

func BenchmarkRecordHasher(b *testing.B) {
	for _, name := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		b.Run(name, func(b *testing.B) {
			recs := testRecords(0, 78)
			batch := testBatch(b, testCodecs[name], recs[0].TimestampDelta64, recs)
			h := newRecordHasher(16 << 20)
			var dst []recordHash
			b.SetBytes(int64(len(batch.Raw)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = h.hashes(&batch, dst[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
