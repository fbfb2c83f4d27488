package decode

import (
	"encoding/binary"
	"errors"
	"math"
)

// Record is one record of a batch, decompressed. Key, Value and the
// headers' values alias the hasher's decompression buffer (or the batch)
// and are valid only during the callback that receives the record.
type Record struct {
	Offset int64
	// Timestamp is in milliseconds since the epoch (the batch's
	// MaxTimestamp for a batch in LogAppendTime; -1 when a legacy magic 0
	// message has none).
	Timestamp int64
	// Key and Value are nil when null.
	Key, Value []byte
	Headers    []RecordHeader
}

// RecordHeader is one record header; Value is nil when null.
type RecordHeader struct {
	Key   []byte
	Value []byte
}

// ErrLegacyCompressed marks a compressed legacy (magic 0/1) message: its
// value is an inner message set, not a record, and is not listed.
var ErrLegacyCompressed = errors.New("compressed legacy message set")

// Records calls fn for each record of b, in order, decompressing magic 2
// batches with the hasher's codecs and bound (the same bounded buffer as
// Hashes); an uncompressed legacy message is one record. fn returning
// false stops the iteration. The error is ErrOverCap, ErrLegacyCompressed,
// or says why the records are malformed (fn has seen the records before
// the damage). The record passed to fn, its bytes and its headers are
// reused: copy what is kept.
func (r *RecordHasher) Records(b *Batch, fn func(*Record) bool) error {
	if b.Magic < 2 {
		return legacyRecord(b, fn)
	}
	p := b.Payload()
	if p == nil {
		return errRecord
	}
	recs, err := r.decompress(b.Codec(), p)
	if err != nil {
		return err
	}
	var rec Record
	n := int(b.Records)
	if n < 0 || n > len(recs) {
		return errRecord
	}
	for range n {
		length, k := varint(recs)
		if k <= 0 || length < 1 || length > int64(len(recs)-k) {
			return errRecord
		}
		body := recs[k : k+int(length)]
		recs = recs[k+int(length):]
		body = body[1:] // attributes: unused
		tsDelta, k := varint(body)
		if k <= 0 {
			return errRecord
		}
		body = body[k:]
		delta, k := varint(body)
		if k <= 0 || delta < 0 || delta > math.MaxInt32 {
			return errRecord
		}
		body = body[k:]
		rec.Offset = b.BaseOffset + delta
		rec.Timestamp = b.FirstTimestamp + tsDelta
		if b.LogAppendTime() {
			rec.Timestamp = b.MaxTimestamp
		}
		var ok bool
		if rec.Key, body, ok = field(body, true); !ok {
			return errRecord
		}
		if rec.Value, body, ok = field(body, true); !ok {
			return errRecord
		}
		headers, k := varint(body)
		if k <= 0 || headers < 0 || headers > int64(len(body)) {
			return errRecord
		}
		body = body[k:]
		rec.Headers = rec.Headers[:0]
		for range headers {
			var h RecordHeader
			if h.Key, body, ok = field(body, false); !ok {
				return errRecord
			}
			if h.Value, body, ok = field(body, true); !ok {
				return errRecord
			}
			rec.Headers = append(rec.Headers, h)
		}
		if !fn(&rec) {
			return nil
		}
	}
	return nil
}

// field reads a varint-length-prefixed field (-1 is null where nullable).
func field(b []byte, nullable bool) (v, rest []byte, ok bool) {
	l, k := varint(b)
	if k <= 0 || l < -1 || l > int64(len(b)-k) || (l == -1 && !nullable) {
		return nil, nil, false
	}
	b = b[k:]
	if l == -1 {
		return nil, b, true
	}
	return b[:l:l], b[l:], true
}

// legacyRecord reads a magic 0/1 message: offset, size, crc, magic,
// attributes, [timestamp], key, value with int32 lengths.
func legacyRecord(b *Batch, fn func(*Record) bool) error {
	if b.Codec() != CodecNone {
		return ErrLegacyCompressed
	}
	at := 18
	rec := Record{Offset: b.BaseOffset, Timestamp: -1}
	if b.Magic == 1 {
		at += 8
		rec.Timestamp = b.FirstTimestamp
	}
	raw := b.Raw
	bytesAt := func() ([]byte, bool) {
		if at+4 > len(raw) {
			return nil, false
		}
		l := int32(binary.BigEndian.Uint32(raw[at:]))
		at += 4
		if l == -1 {
			return nil, true
		}
		if l < 0 || int(l) > len(raw)-at {
			return nil, false
		}
		v := raw[at : at+int(l) : at+int(l)]
		at += int(l)
		return v, true
	}
	var ok bool
	if rec.Key, ok = bytesAt(); !ok {
		return errRecord
	}
	if rec.Value, ok = bytesAt(); !ok {
		return errRecord
	}
	fn(&rec)
	return nil
}
