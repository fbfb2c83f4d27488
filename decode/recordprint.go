package decode

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"hash/maphash"
)

// Fixed record fingerprints, for shipping (export schema 3,
// docs/export.md): a RecordHasher's are seeded at random per run, so that
// nobody can build records that collide, and so differ between hosts; an
// agent ships fingerprints that every other agent's must equal for the
// same record. A printer's are SHA-256 of the record's absolute
// timestamp and content (the bytes a hasher hashes), or HMAC-SHA256 under
// a key the agents share, cut to 128 bits: two different records
// collide by chance once in 2^64 pairs, and nobody finds a collision on
// purpose without 2^64 work, key or no key (64 bits would take 2^32: an
// afternoon on one GPU). Without a key a short record value (a flag, a
// PIN, a small number) can be guessed from its fingerprint by hashing
// candidates; with one, only holders of the key can.

// PrintKeyMin is the shortest key a printer takes: 16 bytes.
const PrintKeyMin = 16

// printer makes the fixed fingerprints of one RecordHasher.
type printer struct {
	key []byte // nil: keyless
	h   hash.Hash
	ts  [8]byte
	sum []byte
}

func newPrinter(key []byte) *printer {
	p := &printer{key: key, sum: make([]byte, 0, sha256.Size)}
	if key != nil {
		p.h = hmac.New(sha256.New, key)
	} else {
		p.h = sha256.New()
	}
	return p
}

// print is the fingerprint of a record's content (its key, value and
// headers in their minimal encoding) at absolute timestamp ts.
func (p *printer) print(content []byte, ts int64) (lo, hi uint64) {
	p.h.Reset()
	binary.BigEndian.PutUint64(p.ts[:], uint64(ts))
	p.h.Write(p.ts[:])
	p.h.Write(content)
	p.sum = p.h.Sum(p.sum[:0])
	return binary.BigEndian.Uint64(p.sum), binary.BigEndian.Uint64(p.sum[8:])
}

// NewRecordPrinter returns a hasher whose fingerprints are fixed
// (RecordHash.Sum and Hi): SHA-256 of each record, or HMAC-SHA256 under
// key when key is not nil (at least PrintKeyMin bytes), cut to 128 bits.
// It decompresses as NewRecordHasher(limit) does.
func NewRecordPrinter(limit int, key []byte) *RecordHasher {
	r := NewRecordHasher(limit)
	r.fixed = newPrinter(key)
	return r
}

// PrintFunc names the function of a printer with key: "sha256-128", or
// "hmac-sha256-128:" and the key's id (16 hex digits of an HMAC of a
// constant under the key: it tells keys apart and reveals nothing of
// them). Two printers with the same name make the same fingerprints.
func PrintFunc(key []byte) string {
	if key == nil {
		return "sha256-128"
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("kfsniff record fingerprint key id"))
	return "hmac-sha256-128:" + hex.EncodeToString(m.Sum(nil)[:8])
}

// Seal turns fixed fingerprints (a printer's, shipped by an agent) into
// r's: each 128-bit print hashed to 64 bits under r's random seed, so
// that the prints' collisions are r's only if the 128 bits collide.
// Fingerprints sealed by one hasher compare with each other, not with
// those it made itself.
func (r *RecordHasher) Seal(prints, dst []RecordHash) []RecordHash {
	var b [16]byte
	for _, p := range prints {
		binary.LittleEndian.PutUint64(b[:], p.Sum)
		binary.LittleEndian.PutUint64(b[8:], p.Hi)
		dst = append(dst, RecordHash{Sum: maphash.Bytes(r.seed, b[:]), Delta: p.Delta})
	}
	return dst
}
