package kmsgtest

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch is a record batch (magic 2) of n records of 40 zero bytes each
// from base, by producer pid from sequence seq, its length and CRC-32C
// computed as a producer computes them; it returns the bytes and the CRC.
func Batch(base int64, n int, pid int64, seq int32) ([]byte, uint32) {
	rb := kmsg.RecordBatch{FirstOffset: base, Magic: 2, LastOffsetDelta: int32(n - 1), NumRecords: int32(n),
		ProducerID: pid, FirstSequence: seq, FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000000,
		Records: make([]byte, 40*n)}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	crc := crc32.Checksum(b[21:], castagnoli)
	binary.BigEndian.PutUint32(b[17:21], crc)
	return b, crc
}
