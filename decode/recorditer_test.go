package decode_test

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/internal/fuzzing"
)

// TestRecordsEveryCodec: the records a client packed with each codec
// (franz-go's compressors, kmsg's record encoding) come back as written:
// offsets, absolute timestamps, keys and values (null ones null), headers.
func TestRecordsEveryCodec(t *testing.T) {
	src := sourceRecords(0, 30)
	src[3].Key = nil
	src[4].Value = nil
	src[5].Headers = append(src[5].Headers, kmsg.Header{Key: "null", Value: nil}, kmsg.Header{Key: "bin", Value: []byte{0, 0x1b, 0xff}})
	h := decode.NewRecordHasher(1 << 20)
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			b := compressed(t, codec, src)
			b.BaseOffset = 1000
			if name != "none" && b.Codec().String() != name {
				t.Fatalf("batch codec %s", b.Codec())
			}
			i := 0
			err := h.Records(&b, func(r *decode.Record) bool {
				w := src[i]
				if r.Offset != 1000+int64(i) || r.Timestamp != w.TimestampDelta64 {
					t.Errorf("record %d: offset %d timestamp %d, want %d %d", i, r.Offset, r.Timestamp, 1000+i, w.TimestampDelta64)
				}
				if !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) || !bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) {
					t.Errorf("record %d: key %q value %q, want %q %q", i, r.Key, r.Value, w.Key, w.Value)
				}
				if len(r.Headers) != len(w.Headers) {
					t.Fatalf("record %d: %d headers, want %d", i, len(r.Headers), len(w.Headers))
				}
				for j, hd := range r.Headers {
					if string(hd.Key) != w.Headers[j].Key || !bytes.Equal(hd.Value, w.Headers[j].Value) || (hd.Value == nil) != (w.Headers[j].Value == nil) {
						t.Errorf("record %d header %d: %q=%q, want %q=%q", i, j, hd.Key, hd.Value, w.Headers[j].Key, w.Headers[j].Value)
					}
				}
				i++
				return true
			})
			if err != nil || i != len(src) {
				t.Fatalf("%d records, %v; want %d", i, err, len(src))
			}
		})
	}
}

// TestRecordsBounded: the iterator shares the hasher's bound (over it,
// nothing is listed), stops when asked, and lists the records before
// damage with an error.
func TestRecordsBounded(t *testing.T) {
	src := sourceRecords(0, 30)
	b := compressed(t, codecs["zstd"], src)
	n := 0
	if err := decode.NewRecordHasher(1000).Records(&b, func(*decode.Record) bool { n++; return true }); !errors.Is(err, decode.ErrOverCap) || n != 0 {
		t.Errorf("over the cap: %d records, %v", n, err)
	}
	h := decode.NewRecordHasher(1 << 20)
	n = 0
	if err := h.Records(&b, func(*decode.Record) bool { n++; return n < 5 }); err != nil || n != 5 {
		t.Errorf("stopped at 5: %d records, %v", n, err)
	}
	plain := compressed(t, nil, src)
	plain.Raw = plain.Raw[:len(plain.Raw)-60] // the last record cut
	n = 0
	if err := h.Records(&plain, func(*decode.Record) bool { n++; return true }); err == nil || n != len(src)-1 {
		t.Errorf("damaged: %d records, %v; want %d and an error", n, err, len(src)-1)
	}
}

// FuzzRecords: on any batch the iterator lists records exactly where the
// fingerprints are made (the same count, the same outcome: they read the
// same bytes), never more than the batch says it holds, and each record's
// offset is in the batch's range of deltas from its base.
func FuzzRecords(f *testing.F) {
	for _, codec := range codecs {
		f.Add(compressed(f, codec, sourceRecords(0, 3)).Raw)
	}
	h := decode.NewRecordHasher(1 << 16)
	f.Fuzz(func(t *testing.T, raw []byte) {
		defer fuzzing.Input("FuzzRecords", raw)()
		_, _ = decode.ScanBatches(raw, func(b *decode.Batch) {
			n := 0
			err := h.Records(b, func(r *decode.Record) bool {
				n++
				if r.Offset < b.BaseOffset || r.Offset-b.BaseOffset > math.MaxInt32 {
					t.Fatalf("offset %d outside the batch at %d", r.Offset, b.BaseOffset)
				}
				return true
			})
			if n > max(int(b.Records), 0) {
				t.Fatalf("%d records listed of %d", n, b.Records)
			}
			if b.Magic < 2 {
				return
			}
			hs, herr := h.Hashes(b, nil)
			if (err == nil) != (herr == nil) || (err == nil && len(hs) != n) {
				t.Fatalf("records: %d, %v; fingerprints: %d, %v", n, err, len(hs), herr)
			}
		})
	})
}
