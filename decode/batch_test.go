package decode_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchTime is the first timestamp of test batches (ms since the epoch).
const batchTime = 1715005800000

// batch returns an uncompressed magic-2 record batch of n records at
// baseOffset, each valueSize bytes of value, with the header fields of
// testBatch and a correct CRC-32C, encoded by kmsg.
func batch(baseOffset int64, n, valueSize int) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{
			TimestampDelta64: int64(i),
			OffsetDelta:      int32(i),
			Key:              []byte("key-" + strconv.Itoa(i)),
			Value:            bytes.Repeat([]byte{byte('a' + i%26)}, valueSize),
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // what follows a one-byte zero length
		recs = r.AppendTo(recs)
	}
	tb := testBatch(baseOffset, n)
	tb.Records = recs
	out := tb.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}

// testBatch is the header of the batches built by batch.
func testBatch(baseOffset int64, n int) kmsg.RecordBatch {
	return kmsg.RecordBatch{
		FirstOffset:          baseOffset,
		PartitionLeaderEpoch: 17,
		Magic:                2,
		Attributes:           0x10, // transactional
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       batchTime,
		MaxTimestamp:         batchTime + int64(n-1),
		ProducerID:           4242,
		ProducerEpoch:        3,
		FirstSequence:        100,
		NumRecords:           int32(n),
	}
}

// legacyMessage returns a magic 0 or 1 message with a correct CRC-32
// (IEEE, over magic to the end), encoded by kmsg.
func legacyMessage(magic int8, offset, ts int64, key, value []byte) []byte {
	var out []byte
	if magic == 0 {
		m := kmsg.MessageV0{Offset: offset, Magic: 0, Key: key, Value: value}
		out = m.AppendTo(nil)
	} else {
		m := kmsg.MessageV1{Offset: offset, Magic: 1, Timestamp: ts, Key: key, Value: value}
		out = m.AppendTo(nil)
	}
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[12:], crc32.ChecksumIEEE(out[16:]))
	return out
}

func flip(in []byte, i int) []byte {
	out := bytes.Clone(in)
	out[i] ^= 0x40
	return out
}

func TestScanBatches(t *testing.T) {
	b1, b2 := batch(1000, 3, 10), batch(1003, 5, 100)
	v0 := legacyMessage(0, 7, 0, []byte("k"), []byte("hello"))
	v1 := legacyMessage(1, 8, batchTime, nil, []byte("world"))
	type want struct {
		magic      int8
		base, last int64
		crcOK      bool
		records    int32
		size       int
	}
	for _, tc := range []struct {
		name      string
		in        []byte
		batches   []want
		badCRC    int
		truncated bool
		err       error
	}{
		{name: "empty"},
		{
			name:    "one magic-2 batch",
			in:      b1,
			batches: []want{{2, 1000, 1002, true, 3, len(b1)}},
		},
		{
			name:    "two batches",
			in:      cat(b1, b2),
			batches: []want{{2, 1000, 1002, true, 3, len(b1)}, {2, 1003, 1007, true, 5, len(b2)}},
		},
		{
			name:    "a flipped record byte breaks the CRC",
			in:      cat(b1, flip(b2, len(b2)-3)),
			batches: []want{{2, 1000, 1002, true, 3, len(b1)}, {2, 1003, 1007, false, 5, len(b2)}},
			badCRC:  1,
		},
		{
			name:    "a flipped attributes byte breaks the CRC",
			in:      flip(b1, 22),
			batches: []want{{2, 1000, 1002, false, 3, len(b1)}},
			badCRC:  1,
		},
		{
			// The CRC starts at the attributes: brokers rewrite the
			// base offset and leader epoch without recomputing it.
			name:    "the base offset is not covered by the CRC",
			in:      flip(b1, 7),
			batches: []want{{2, 1000 ^ 0x40, 1002 ^ 0x40, true, 3, len(b1)}},
		},
		{
			name:      "truncated last batch, as Fetch responses end",
			in:        cat(b1, b2[:len(b2)-10]),
			batches:   []want{{2, 1000, 1002, true, 3, len(b1)}},
			truncated: true,
		},
		{
			name:      "truncated inside the header",
			in:        cat(b1, b2[:12]),
			batches:   []want{{2, 1000, 1002, true, 3, len(b1)}},
			truncated: true,
		},
		{
			name:      "only a partial header",
			in:        b1[:10],
			truncated: true,
		},
		{
			name:    "magic 0 message",
			in:      v0,
			batches: []want{{0, 7, 7, true, 1, len(v0)}},
		},
		{
			name:    "magic 1 message",
			in:      v1,
			batches: []want{{1, 8, 8, true, 1, len(v1)}},
		},
		{
			name:    "magic 0 and 1 messages with a bad CRC",
			in:      cat(flip(v0, len(v0)-1), v1, flip(v1, 16+2)),
			batches: []want{{0, 7, 7, false, 1, len(v0)}, {1, 8, 8, true, 1, len(v1)}, {1, 8, 8, false, 1, len(v1)}},
			badCRC:  2,
		},
		{
			name:    "garbage magic after a good batch",
			in:      cat(b1, flip(b2, 16)),
			batches: []want{{2, 1000, 1002, true, 3, len(b1)}},
			err:     decode.ErrBatch,
		},
		{
			name: "magic -1",
			in:   func() []byte { x := bytes.Clone(b1); x[16] = 0xff; return x }(),
			err:  decode.ErrBatch,
		},
		{
			name: "magic-2 length shorter than its header",
			in:   func() []byte { x := bytes.Clone(b1); binary.BigEndian.PutUint32(x[8:], 40); return x }(),
			err:  decode.ErrBatch,
		},
		{
			name: "negative length",
			in:   func() []byte { x := bytes.Clone(b1); binary.BigEndian.PutUint32(x[8:], 0xfffffff0); return x }(),
			err:  decode.ErrBatch,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []decode.Batch
			s, err := decode.ScanBatches(tc.in, func(b *decode.Batch) { got = append(got, *b) })
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if s.Batches != len(tc.batches) || s.BadCRC != tc.badCRC || s.Truncated != tc.truncated {
				t.Errorf("scan %+v, want %d batches, %d bad CRC, truncated %v", s, len(tc.batches), tc.badCRC, tc.truncated)
			}
			if len(got) != len(tc.batches) {
				t.Fatalf("fn called for %d batches, want %d", len(got), len(tc.batches))
			}
			off := 0
			for i, w := range tc.batches {
				g := got[i]
				if g.Magic != w.magic || g.BaseOffset != w.base || g.LastOffset() != w.last || g.CRCOK != w.crcOK || g.Records != w.records || len(g.Raw) != w.size {
					t.Errorf("batch %d: magic %d offsets %d-%d CRC ok %v records %d size %d; want magic %d offsets %d-%d CRC ok %v records %d size %d",
						i, g.Magic, g.BaseOffset, g.LastOffset(), g.CRCOK, g.Records, len(g.Raw), w.magic, w.base, w.last, w.crcOK, w.records, w.size)
				}
				// The checksum of the bytes as they are, kept for
				// a copy that fails its check: what it should carry.
				sum := crc32.ChecksumIEEE(g.Raw[16:])
				if g.Magic == 2 {
					sum = crc32.Checksum(g.Raw[21:], castagnoli)
				}
				if g.ComputedCRC != sum || g.CRCOK != (sum == g.CRC) {
					t.Errorf("batch %d: computed CRC %d (ok %v), its bytes give %d against %d", i, g.ComputedCRC, g.CRCOK, sum, g.CRC)
				}
				if !bytes.Equal(g.Raw, tc.in[off:off+w.size]) {
					t.Errorf("batch %d: Raw is not the input's bytes %d..%d", i, off, off+w.size)
				}
				off += w.size
			}
		})
	}
}

// TestScanBatchesHeader checks every magic-2 header field against the
// kmsg value the batch was encoded from, and the magic-1 timestamp.
func TestScanBatchesHeader(t *testing.T) {
	raw := batch(5000, 4, 20)
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	var got decode.Batch
	if _, err := decode.ScanBatches(raw, func(b *decode.Batch) { got = *b }); err != nil {
		t.Fatal(err)
	}
	want := decode.Batch{
		Magic:                2,
		BaseOffset:           5000,
		Length:               kb.Length,
		PartitionLeaderEpoch: 17,
		CRC:                  uint32(kb.CRC),
		ComputedCRC:          uint32(kb.CRC),
		CRCOK:                true,
		Attributes:           0x10,
		LastOffsetDelta:      3,
		FirstTimestamp:       batchTime,
		MaxTimestamp:         batchTime + 3,
		ProducerID:           4242,
		ProducerEpoch:        3,
		BaseSequence:         100,
		Records:              4,
	}
	got.Raw = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("batch header\n got %+v\nwant %+v", got, want)
	}
	if !got.Transactional() || got.Control() || got.Codec() != decode.CodecNone || got.LogAppendTime() {
		t.Errorf("attributes 0x10: transactional %v control %v codec %v log-append %v", got.Transactional(), got.Control(), got.Codec(), got.LogAppendTime())
	}

	v1 := legacyMessage(1, 8, batchTime, []byte("k"), []byte("v"))
	if _, err := decode.ScanBatches(v1, func(b *decode.Batch) { got = *b }); err != nil {
		t.Fatal(err)
	}
	if got.FirstTimestamp != batchTime || got.MaxTimestamp != batchTime || got.ProducerID != -1 || got.Transactional() {
		t.Errorf("magic 1: timestamps %d/%d producer %d transactional %v", got.FirstTimestamp, got.MaxTimestamp, got.ProducerID, got.Transactional())
	}
}

// TestScanBatchesAllocs bounds what scanning a record set allocates: it
// runs for every partition of every Produce request and Fetch response.
// The one allocation is the Batch handed to fn, which escapes to the heap
// because fn is not known at compile time.
func TestScanBatchesAllocs(t *testing.T) {
	records := cat(batch(0, 10, 100), batch(10, 10, 100), batch(20, 10, 100))
	n := 0
	if a := testing.AllocsPerRun(100, func() {
		if _, err := decode.ScanBatches(records, func(*decode.Batch) { n++ }); err != nil {
			t.Fatal(err)
		}
	}); a > 1 {
		t.Errorf("ScanBatches allocates %v times per record set, want at most 1", a)
	}
}
