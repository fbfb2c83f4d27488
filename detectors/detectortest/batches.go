package detectortest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch encodes records (absolute timestamps in TimestampDelta64) as one
// magic-2 batch with codec (nil: none) and returns it decoded as flows
// delivers it.
func Batch(t testing.TB, codec *kgo.CompressionCodec, recs []kmsg.Record) decode.Batch {
	t.Helper()
	var firstTS int64
	if len(recs) > 0 {
		firstTS = recs[0].TimestampDelta64
	}
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
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	var got decode.Batch
	if _, err := decode.ScanBatches(out, func(b *decode.Batch) { got = *b }); err != nil || got.Raw == nil {
		t.Fatalf("scan: %v", err)
	}
	return got
}

// Records returns n records numbered from, with absolute timestamps (in
// TimestampDelta64), keys, 100-byte values and a header.
func Records(from, n int) []kmsg.Record {
	out := make([]kmsg.Record, n)
	for i := range out {
		k := from + i
		out[i] = kmsg.Record{TimestampDelta64: 1_700_000_000_000 + int64(k), Key: []byte(fmt.Sprintf("k%d", k)),
			Value: bytes.Repeat([]byte{byte('a' + k%26)}, 100), Headers: []kmsg.Header{{Key: "h", Value: []byte{byte(k)}}}}
	}
	return out
}
