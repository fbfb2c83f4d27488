package decode_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/kfsniff/kfsniff/decode"
)

// reheader sets a batch's base offset, producer id, epoch and base
// sequence, with a CRC made again, as a producer retrying the same records
// under a new identity (or a broker writing them at another offset) does.
func reheader(raw []byte, offset, pid int64, epoch int16, seq int32) []byte {
	out := bytes.Clone(raw)
	binary.BigEndian.PutUint64(out[0:], uint64(offset))
	binary.BigEndian.PutUint64(out[43:], uint64(pid))
	binary.BigEndian.PutUint16(out[51:], uint16(epoch))
	binary.BigEndian.PutUint32(out[53:], uint32(seq))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}

func scanOne(t *testing.T, raw []byte) decode.Batch {
	t.Helper()
	var got decode.Batch
	if _, err := decode.ScanBatches(raw, func(b *decode.Batch) { got = *b }); err != nil || got.Raw == nil {
		t.Fatalf("scan: %v", err)
	}
	return got
}

// TestPayloadSum: the same records sent again under another producer
// epoch and sequence, at another offset, keep their sum though the CRC
// changes; other records, or the same records at another timestamp, do
// not.
func TestPayloadSum(t *testing.T) {
	orig := batch(0, 3, 20)
	a := scanOne(t, orig)
	again := scanOne(t, reheader(orig, 500, 4242, 4, 0))
	if a.CRC == again.CRC {
		t.Fatal("test batches share a CRC; the header change did not take")
	}
	if a.PayloadSum() == 0 || a.PayloadSum() != again.PayloadSum() {
		t.Errorf("same records under a new epoch: sums %x and %x, want equal and non-zero", a.PayloadSum(), again.PayloadSum())
	}
	if len(a.Payload()) != len(orig)-61 {
		t.Errorf("payload of %d bytes, want the %d after the header", len(a.Payload()), len(orig)-61)
	}
	other := scanOne(t, batch(0, 3, 21))
	if other.PayloadSum() == a.PayloadSum() {
		t.Error("other records share the sum")
	}
	moved := bytes.Clone(orig)
	binary.BigEndian.PutUint64(moved[27:], batchTime+1)
	binary.BigEndian.PutUint32(moved[17:], crc32.Checksum(moved[21:], castagnoli))
	if m := scanOne(t, moved); m.PayloadSum() == a.PayloadSum() {
		t.Error("the same records at another first timestamp share the sum")
	}
	legacy := decode.Batch{Magic: 1, Raw: []byte("whatever, it is not read")}
	if legacy.Payload() != nil || legacy.PayloadSum() != 0 {
		t.Error("a magic-1 message has a payload sum")
	}
	gone := a
	gone.Raw = nil
	if gone.PayloadSum() != 0 {
		t.Error("a batch whose bytes are gone has a payload sum")
	}
}
