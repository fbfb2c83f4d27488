package decode

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// Codec is the compression codec of a record batch (attributes bits 0-2).
type Codec int8

// Codecs as numbered by Kafka.
const (
	CodecNone Codec = iota
	CodecGzip
	CodecSnappy
	CodecLZ4
	CodecZstd
)

var codecNames = [...]string{CodecNone: "none", CodecGzip: "gzip", CodecSnappy: "snappy", CodecLZ4: "lz4", CodecZstd: "zstd"}

func (c Codec) String() string {
	if c >= 0 && int(c) < len(codecNames) {
		return codecNames[c]
	}
	return "codec?"
}

// Batch is the header of one record batch (magic 2) or one message of a
// magic 0/1 message set, with its checksum verified.
type Batch struct {
	Magic                int8
	BaseOffset           int64
	Length               int32 // batchLength (magic 2) or message size (magic 0/1)
	PartitionLeaderEpoch int32
	CRC                  uint32
	// ComputedCRC is the checksum of the batch's bytes as they are:
	// CRC-32C from the attributes to the end (magic 2), CRC-32 (IEEE)
	// from the magic byte on (magic 0/1). CRCOK is ComputedCRC == CRC.
	ComputedCRC     uint32
	CRCOK           bool
	Attributes      int16
	LastOffsetDelta int32
	FirstTimestamp  int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	Records         int32
	// Raw is the whole batch as on the wire. It aliases the frame and is
	// valid only while the frame is being handled.
	Raw []byte
}

// Codec returns the compression codec.
func (b *Batch) Codec() Codec { return Codec(b.Attributes & 0x7) }

// LogAppendTime reports whether the timestamp type is LogAppendTime.
func (b *Batch) LogAppendTime() bool { return b.Attributes&0x8 != 0 }

// Transactional reports the transactional attribute bit (magic 2).
func (b *Batch) Transactional() bool { return b.Magic >= 2 && b.Attributes&0x10 != 0 }

// Control reports the control-batch attribute bit (magic 2).
func (b *Batch) Control() bool { return b.Magic >= 2 && b.Attributes&0x20 != 0 }

// LastOffset is the offset of the batch's last record.
func (b *Batch) LastOffset() int64 { return b.BaseOffset + int64(b.LastOffsetDelta) }

// Batch layout constants (magic 2).
const (
	batchHeaderLen  = 61 // through the record count
	batchLengthOff  = 8
	batchMagicOff   = 16
	batchCRCOff     = 17
	batchAttrsOff   = 21
	batchOverhead   = 12        // baseOffset + batchLength precede what batchLength counts
	legacyHeaderLen = 4 + 1 + 1 // crc, magic, attributes after offset and size
)

// ErrBatch marks a malformed record batch (not a truncated trailing one).
var ErrBatch = errors.New("malformed record batch")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchScan is the outcome of scanning a records field.
type BatchScan struct {
	Batches   int
	BadCRC    int
	Truncated bool // the last batch was cut short (normal in Fetch responses)
}

// ScanBatches walks the record batches in records, calling fn for each
// complete batch. A trailing partial batch is reported as Truncated, not as
// an error, since brokers cut Fetch responses at the byte limit. An error
// means the bytes do not form batches (bad length or unknown magic); the
// batches before it were still delivered.
func ScanBatches(records []byte, fn func(*Batch)) (BatchScan, error) {
	it := Batches(records)
	var b Batch
	for it.Next(&b) {
		if fn != nil {
			fn(&b)
		}
	}
	return it.Scan, it.Err
}

// BatchIter walks the record batches of a records field as ScanBatches
// does, into a Batch of the caller's (which need not be on the heap).
type BatchIter struct {
	rest []byte
	// Scan counts what was walked so far; Err is ScanBatches' error
	// once Next returned false.
	Scan BatchScan
	Err  error
}

// Batches returns an iterator over the batches in records.
func Batches(records []byte) BatchIter { return BatchIter{rest: records} }

// CountBatches is how many batches Batches(records) gives: the same walk
// by their lengths, without reading or checking them, so that their
// caller can size a slice for them once.
func CountBatches(records []byte) int {
	n := 0
	for {
		total, _ := nextBatch(records)
		if total <= 0 {
			return n
		}
		records = records[total:]
		n++
	}
}

// nextBatch returns the length of the complete batch at the start of
// records, or 0 with ErrBatch (bad length or magic) or nil (none, or
// truncated: truncated is true).
func nextBatch(records []byte) (total int, truncated bool) {
	if len(records) == 0 {
		return 0, false
	}
	if len(records) < batchMagicOff+1 {
		return 0, true
	}
	length := int32(binary.BigEndian.Uint32(records[batchLengthOff:]))
	magic := int8(records[batchMagicOff])
	if magic < 0 || magic > 2 {
		return -1, false
	}
	min := int32(legacyHeaderLen)
	if magic == 2 {
		min = batchHeaderLen - batchOverhead
	}
	if length < min {
		return -1, false
	}
	total = int(length) + batchOverhead
	if total > len(records) || total < 0 {
		return 0, true
	}
	return total, false
}

// Next reads the next complete batch into b, and reports whether there
// was one.
func (it *BatchIter) Next(b *Batch) bool {
	records := it.rest
	s := &it.Scan
	total, truncated := nextBatch(records)
	switch {
	case total < 0:
		it.Err, it.rest = ErrBatch, nil
		return false
	case total == 0:
		s.Truncated = s.Truncated || truncated
		it.rest = nil
		return false
	}
	magic := int8(records[batchMagicOff])
	length := int32(binary.BigEndian.Uint32(records[batchLengthOff:]))
	raw := records[:total]
	it.rest = records[total:]
	*b = Batch{
		Magic:      magic,
		BaseOffset: int64(binary.BigEndian.Uint64(raw)),
		Length:     length,
		Raw:        raw,
	}
	if magic == 2 {
		b.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(raw[12:]))
		b.CRC = binary.BigEndian.Uint32(raw[batchCRCOff:])
		b.ComputedCRC = crc32.Checksum(raw[batchAttrsOff:], castagnoli)
		b.CRCOK = b.ComputedCRC == b.CRC
		b.Attributes = int16(binary.BigEndian.Uint16(raw[21:]))
		b.LastOffsetDelta = int32(binary.BigEndian.Uint32(raw[23:]))
		b.FirstTimestamp = int64(binary.BigEndian.Uint64(raw[27:]))
		b.MaxTimestamp = int64(binary.BigEndian.Uint64(raw[35:]))
		b.ProducerID = int64(binary.BigEndian.Uint64(raw[43:]))
		b.ProducerEpoch = int16(binary.BigEndian.Uint16(raw[51:]))
		b.BaseSequence = int32(binary.BigEndian.Uint32(raw[53:]))
		b.Records = int32(binary.BigEndian.Uint32(raw[57:]))
	} else {
		// Legacy message: offset, size, crc (IEEE over magic..end),
		// magic, attributes, [timestamp], key, value.
		b.CRC = binary.BigEndian.Uint32(raw[12:])
		b.ComputedCRC = crc32.ChecksumIEEE(raw[16:])
		b.CRCOK = b.ComputedCRC == b.CRC
		b.Attributes = int16(raw[17])
		b.Records = 1
		b.ProducerID = -1
		b.BaseSequence = -1
		if magic == 1 && len(raw) >= 26 {
			b.FirstTimestamp = int64(binary.BigEndian.Uint64(raw[18:]))
			b.MaxTimestamp = b.FirstTimestamp
		}
	}
	s.Batches++
	if !b.CRCOK {
		s.BadCRC++
	}
	return true
}
