package decode_test

import (
	"bytes"
	"errors"
	"hash/crc32"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/internal/fuzzing"
)

// compressed encodes recs (absolute timestamps in TimestampDelta64) as
// one magic-2 batch whose records franz-go's own compressor packed with
// codec (nil: none), as a client sends them, and returns it scanned.
func compressed(t testing.TB, codec *kgo.CompressionCodec, recs []kmsg.Record) decode.Batch {
	t.Helper()
	hdr := testBatch(0, len(recs))
	hdr.Attributes, hdr.FirstTimestamp, hdr.ProducerID = 0, recs[0].TimestampDelta64, -1
	hdr.Records = section(recs, hdr.FirstTimestamp)
	if codec != nil {
		c, err := kgo.DefaultCompressor(*codec)
		if err != nil {
			t.Fatal(err)
		}
		out, typ := c.Compress(new(bytes.Buffer), hdr.Records)
		hdr.Records, hdr.Attributes = bytes.Clone(out), int16(typ)
	}
	hdr.Length = int32(len(hdr.AppendTo(nil)) - 12)
	hdr.CRC = int32(crc32.Checksum(hdr.AppendTo(nil)[21:], castagnoli))
	var bs []decode.Batch
	s, err := decode.ScanBatches(hdr.AppendTo(nil), func(b *decode.Batch) { bs = append(bs, *b) })
	if err != nil || s.Batches != 1 || s.BadCRC != 0 {
		t.Fatalf("scan: %+v, %v", s, err)
	}
	return bs[0]
}

// section is the records section of recs, timestamps relative to first.
func section(recs []kmsg.Record, first int64) (out []byte) {
	for i := range recs {
		r := recs[i]
		r.OffsetDelta, r.TimestampDelta64 = int32(i), r.TimestampDelta64-first
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		out = r.AppendTo(out)
	}
	return out
}

// sourceRecords returns n records numbered from, with absolute timestamps
// (in TimestampDelta64), keys, 100-byte values and a header.
func sourceRecords(from, n int) (out []kmsg.Record) {
	for k := from; k < from+n; k++ {
		out = append(out, kmsg.Record{TimestampDelta64: 1_700_000_000_000 + int64(k), Key: strconv.AppendInt([]byte("k"), int64(k), 10),
			Value: bytes.Repeat([]byte{byte('a' + k%26)}, 100), Headers: []kmsg.Header{{Key: "h", Value: []byte{byte(k)}}}})
	}
	return out
}

func codecOf(c kgo.CompressionCodec) *kgo.CompressionCodec { return &c }

var codecs = map[string]*kgo.CompressionCodec{
	"none": nil, "gzip": codecOf(kgo.GzipCompression()), "snappy": codecOf(kgo.SnappyCompression()),
	"lz4": codecOf(kgo.Lz4Compression()), "zstd": codecOf(kgo.ZstdCompression()),
}

// TestRecordHashesSameRecordsAnyCodecAndBatching: the same records give
// the same fingerprints whatever codec and batch boundaries carried them
// (the replay rebuilt by another producer), with offset deltas in their
// own batch.
func TestRecordHashesSameRecordsAnyCodecAndBatching(t *testing.T) {
	h := decode.NewRecordHasher(1 << 20)
	recs := sourceRecords(0, 40)
	whole := compressed(t, nil, recs)
	ref, err := h.Hashes(&whole, nil)
	if err != nil || len(ref) != 40 {
		t.Fatalf("reference: %d fingerprints, %v", len(ref), err)
	}
	for name, codec := range codecs {
		a, b := compressed(t, codec, recs[:15]), compressed(t, codec, recs[15:])
		got, err := h.Hashes(&a, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		second, err := h.Hashes(&b, got)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, x := range second {
			if x.Sum != ref[i].Sum {
				t.Errorf("%s: record %d fingerprinted differently", name, i)
				break
			}
		}
		if tail := second[15:]; tail[0].Delta != 0 || tail[len(tail)-1].Delta != 24 {
			t.Errorf("%s: offset deltas %d..%d in the second batch, want 0..24", name, tail[0].Delta, tail[len(tail)-1].Delta)
		}
	}
}

// TestRecordHashesTellRecordsApart: any change of timestamp, key, value
// or headers, null against empty included, changes the fingerprint.
func TestRecordHashesTellRecordsApart(t *testing.T) {
	h := decode.NewRecordHasher(1 << 20)
	base := kmsg.Record{TimestampDelta64: 1000, Key: []byte{}, Value: []byte("v"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}}
	one := func(r kmsg.Record) uint64 {
		b := compressed(t, nil, []kmsg.Record{r})
		hs, err := h.Hashes(&b, nil)
		if err != nil || len(hs) != 1 {
			t.Fatalf("%v %v", hs, err)
		}
		return hs[0].Sum
	}
	want := one(base)
	for name, f := range map[string]func(r *kmsg.Record){
		"null key":           func(r *kmsg.Record) { r.Key = nil },
		"other value":        func(r *kmsg.Record) { r.Value = []byte("w") },
		"null value":         func(r *kmsg.Record) { r.Value = nil },
		"other timestamp":    func(r *kmsg.Record) { r.TimestampDelta64 = 1001 },
		"other header":       func(r *kmsg.Record) { r.Headers[0].Value = []byte("y") },
		"null header":        func(r *kmsg.Record) { r.Headers[0].Value = nil },
		"no header":          func(r *kmsg.Record) { r.Headers = nil },
		"key moved to value": func(r *kmsg.Record) { r.Key, r.Value = []byte("v"), []byte{} },
	} {
		r := base
		r.Headers = slices.Clone(base.Headers)
		f(&r)
		if one(r) == want {
			t.Errorf("%s: same fingerprint as the original", name)
		}
	}
	if a, b := h.TopicMix([16]byte{1}), h.TopicMix([16]byte{2}); a == b || a == 0 || h.TopicMix([16]byte{}) != 0 {
		t.Errorf("topic mixes %x %x, unknown %x: want two different non-zero ones and 0", a, b, h.TopicMix([16]byte{}))
	}
}

// TestRecordHashesCap: no codec inflates past the bound (the
// decompression bomb); under it the records are all there.
func TestRecordHashesCap(t *testing.T) {
	recs := sourceRecords(0, 50) // about 6 kB decompressed
	for name, codec := range codecs {
		if codec == nil {
			continue
		}
		b := compressed(t, codec, recs)
		if _, err := decode.NewRecordHasher(4096).Hashes(&b, nil); !errors.Is(err, decode.ErrOverCap) {
			t.Errorf("%s: 4096-byte cap: %v, want ErrOverCap", name, err)
		}
		if hs, err := decode.NewRecordHasher(1<<16).Hashes(&b, nil); err != nil || len(hs) != 50 {
			t.Errorf("%s: 64 KiB cap: %d fingerprints, %v", name, len(hs), err)
		}
	}
}

// TestRecordHashesMalformed: a records section cut short or claiming a
// record more than it holds is an error, never a full set of fingerprints;
// legacy messages are not fingerprinted.
func TestRecordHashesMalformed(t *testing.T) {
	h := decode.NewRecordHasher(1 << 16)
	for name, codec := range codecs {
		b := compressed(t, codec, sourceRecords(0, 5))
		for cut := 62; cut < len(b.Raw); cut += 7 {
			c := b
			c.Raw = b.Raw[:cut]
			if hs, err := h.Hashes(&c, nil); err == nil && len(hs) == 5 {
				t.Errorf("%s cut at %d: %d fingerprints and no error", name, cut, len(hs))
			}
		}
		c := b
		c.Records = 6
		if _, err := h.Hashes(&c, nil); err == nil {
			t.Errorf("%s: a missing record went unnoticed", name)
		}
	}
	old := decode.Batch{Magic: 1, Raw: make([]byte, 80)}
	if _, err := h.Hashes(&old, nil); !errors.Is(err, decode.ErrNotHashable) {
		t.Errorf("legacy message: %v", err)
	}
}

// FuzzRecordHasher: whatever the bytes, no panic; a batch fingerprinted
// without error yields one fingerprint per record it claims, each at an
// offset delta within the batch; the only errors without a malformed
// section are the documented ones; and no fingerprint is appended for a
// batch over the cap.
func FuzzRecordHasher(f *testing.F) {
	for _, codec := range codecs {
		f.Add(compressed(f, codec, sourceRecords(0, 3)).Raw)
	}
	h := decode.NewRecordHasher(1 << 16)
	// budgeted has budgets of a few batches' worth: whatever the input,
	// it decompresses at most its run budget plus one batch's cap, and
	// per frame (each input is one) its frame budget plus one cap.
	const limit, frameBudget, runBudget = 1 << 16, 1 << 17, 1 << 19
	budgeted := decode.NewRecordHasher(limit)
	budgeted.SetBudget(decode.Budget{Frame: frameBudget, Run: runBudget, Ratio: 4})
	f.Fuzz(func(t *testing.T, raw []byte) {
		defer fuzzing.Input("FuzzRecordHasher", raw)()
		budgeted.StartFrame()
		before := budgeted.Counts()
		_, _ = decode.ScanBatches(raw, func(b *decode.Batch) {
			if hs, err := budgeted.Hashes(b, nil); errors.Is(err, decode.ErrOverBudget) && len(hs) != 0 {
				t.Fatalf("%d fingerprints of a batch refused for the budget", len(hs))
			}
		})
		c := budgeted.Counts()
		if c.Out-before.Out > frameBudget+limit || c.Out > runBudget+4*c.In+limit {
			t.Fatalf("decompressed %d bytes in this frame, %d in all for %d compressed: past the budgets", c.Out-before.Out, c.Out, c.In)
		}
		_, _ = decode.ScanBatches(raw, func(b *decode.Batch) {
			hs, err := h.Hashes(b, nil)
			switch {
			case err == nil && len(hs) != int(b.Records):
				t.Fatalf("%d fingerprints for %d records", len(hs), b.Records)
			case errors.Is(err, decode.ErrNotHashable) && b.Magic == 2 && len(b.Raw) >= 61:
				t.Fatalf("a magic 2 batch of %d bytes called not hashable", len(b.Raw))
			case errors.Is(err, decode.ErrOverCap) && len(hs) != 0:
				t.Fatalf("%d fingerprints of a batch over the cap", len(hs))
			case err != nil && len(hs) > max(int(b.Records), 0):
				t.Fatalf("%d fingerprints for %d records before an error", len(hs), b.Records)
			}
		})
	})
}

func BenchmarkRecordHasher(b *testing.B) {
	for _, name := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		b.Run(name, func(b *testing.B) {
			batch := compressed(b, codecs[name], sourceRecords(0, 78))
			h := decode.NewRecordHasher(16 << 20)
			var dst []decode.RecordHash
			b.SetBytes(int64(len(batch.Raw)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = h.Hashes(&batch, dst[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRecordHashesBudget: past a frame's budget the rest of its batches
// are refused (ErrOverBudget, counted) until the next frame; past the
// run's budget (its fixed part and a multiple of the compressed bytes
// offered) every compressed batch is; uncompressed batches cost nothing.
func TestRecordHashesBudget(t *testing.T) {
	for name, codec := range codecs {
		if name == "none" {
			continue
		}
		b := compressed(t, codec, sourceRecords(0, 50))
		h := decode.NewRecordHasher(1 << 16)
		if _, err := h.Hashes(&b, nil); err != nil {
			t.Fatal(err)
		}
		size := h.Counts().Out // what one batch decompresses to
		// A frame of 3 batches' worth; the run 7 batches' (no ratio).
		h = decode.NewRecordHasher(1 << 16)
		h.SetBudget(decode.Budget{Frame: 3 * size, Run: 7 * size})
		var got []string
		for frame := range 3 {
			h.StartFrame()
			s := ""
			for range 4 {
				hs, err := h.Hashes(&b, nil)
				switch {
				case err == nil && len(hs) == 50:
					s += "+"
				case errors.Is(err, decode.ErrOverBudget) && len(hs) == 0:
					s += "-"
				default:
					t.Fatalf("%s frame %d: %d fingerprints, %v", name, frame, len(hs), err)
				}
			}
			got = append(got, s)
		}
		c := h.Counts()
		if want := []string{"+++-", "+++-", "+---"}; !slices.Equal(got, want) || c.OverFrame != 2 || c.OverRun != 3 || c.Out != 7*size {
			t.Errorf("%s: batches by frame %v (+ decompressed), counts %+v; want %v, 2 over the frame's budget, 3 over the run's, %d bytes out",
				name, got, c, want, 7*size)
		}
		// The ratio: each compressed byte offered adds Ratio bytes.
		h = decode.NewRecordHasher(1 << 16)
		h.SetBudget(decode.Budget{Ratio: size / int64(len(b.Payload()))})
		n := 0
		for range 10 {
			if _, err := h.Hashes(&b, nil); err == nil {
				n++
			}
		}
		if n != 10 && size%int64(len(b.Payload())) == 0 || n < 9 {
			t.Errorf("%s: %d of 10 batches within a ratio of their own inflation", name, n)
		}
	}
	// Uncompressed batches are read as they are: no budget applies.
	b := compressed(t, codecs["none"], sourceRecords(0, 50))
	h := decode.NewRecordHasher(1 << 16)
	h.SetBudget(decode.Budget{Frame: 1, Run: 1})
	for range 3 {
		if hs, err := h.Hashes(&b, nil); err != nil || len(hs) != 50 {
			t.Errorf("uncompressed batch: %d fingerprints, %v", len(hs), err)
		}
	}
}
