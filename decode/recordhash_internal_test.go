package decode

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"testing"
)

// refParse is the fingerprinting duplicate-batches shipped with first,
// field by field through a maphash.Hash: the reference for what records
// are equal and what is malformed. parse must agree with it on both.
func refParse(seed maphash.Seed, b []byte, firstTS int64, n int) ([]RecordHash, error) {
	var h maphash.Hash
	h.SetSeed(seed)
	field := func(b []byte, nullable bool) ([]byte, bool) {
		l, k := binary.Varint(b)
		if k <= 0 || l < -1 || l > int64(len(b)-k) || (l == -1 && !nullable) {
			return nil, false
		}
		var lb [8]byte
		binary.BigEndian.PutUint64(lb[:], uint64(l))
		h.Write(lb[:])
		if l <= 0 {
			return b[k:], true
		}
		h.Write(b[k : k+int(l)])
		return b[k+int(l):], true
	}
	var dst []RecordHash
	if n < 0 || n > len(b) {
		return dst, errRecord
	}
	var ts [8]byte
	for i := 0; i < n; i++ {
		length, k := binary.Varint(b)
		if k <= 0 || length < 0 || length > int64(len(b)-k) {
			return dst, errRecord
		}
		rec := b[k : k+int(length)]
		b = b[k+int(length):]
		if len(rec) < 1 {
			return dst, errRecord
		}
		rec = rec[1:]
		tsDelta, k := binary.Varint(rec)
		if k <= 0 {
			return dst, errRecord
		}
		rec = rec[k:]
		delta, k := binary.Varint(rec)
		if k <= 0 || delta < 0 || delta > math.MaxInt32 {
			return dst, errRecord
		}
		rec = rec[k:]
		h.Reset()
		binary.BigEndian.PutUint64(ts[:], uint64(firstTS+tsDelta))
		h.Write(ts[:])
		var ok bool
		if rec, ok = field(rec, true); !ok {
			return dst, errRecord
		}
		if rec, ok = field(rec, true); !ok {
			return dst, errRecord
		}
		headers, k := binary.Varint(rec)
		if k <= 0 || headers < 0 || headers > int64(len(rec)) {
			return dst, errRecord
		}
		rec = rec[k:]
		for range headers {
			if rec, ok = field(rec, false); !ok {
				return dst, errRecord
			}
			if rec, ok = field(rec, true); !ok {
				return dst, errRecord
			}
		}
		dst = append(dst, RecordHash{Sum: h.Sum64(), Delta: int32(delta)})
	}
	return dst, nil
}

// genRecord encodes one record; long makes every varint one byte longer
// than needed (the wire allows it) and trail adds bytes after the headers.
type genRec struct {
	tsDelta, delta int64
	key, value     []byte // nil: null
	nullKey        bool
	headers        [][2][]byte
}

func putVarint(dst []byte, v int64, long bool) []byte {
	if !long {
		return binary.AppendVarint(dst, v)
	}
	ux := uint64(v)<<1 ^ uint64(v>>63)
	for ux >= 0x80 {
		dst = append(dst, byte(ux)|0x80)
		ux >>= 7
	}
	return append(dst, byte(ux)|0x80, 0) // a redundant zero group
}

func (g genRec) encode(long, trail bool) []byte {
	field := func(dst, b []byte) []byte {
		if b == nil {
			return putVarint(dst, -1, long)
		}
		return append(putVarint(dst, int64(len(b)), long), b...)
	}
	body := []byte{0}
	body = putVarint(body, g.tsDelta, long)
	body = putVarint(body, g.delta, long)
	body = field(body, g.key)
	body = field(body, g.value)
	body = putVarint(body, int64(len(g.headers)), long)
	for _, h := range g.headers {
		body = field(body, h[0])
		body = field(body, h[1])
	}
	if trail {
		body = append(body, 0xde, 0xad)
	}
	return append(putVarint(nil, int64(len(body)), long), body...)
}

func randRec(r *rand.Rand) genRec {
	bs := func() []byte {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		b := make([]byte, r.IntN(3)+r.IntN(2)*200)
		for i := range b {
			b[i] = byte('a' + r.IntN(2))
		}
		return b
	}
	g := genRec{tsDelta: int64(r.IntN(3)) - 1, delta: int64(r.IntN(2)), key: bs(), value: bs()}
	for range r.IntN(3) {
		k := bs()
		if k == nil {
			k = []byte{}
		}
		g.headers = append(g.headers, [2][]byte{k, bs()})
	}
	return g
}

// TestParseAgreesWithReference: records equal by content get equal
// fingerprints and others different ones exactly when the reference says
// so, whatever the varint lengths and trailing bytes; malformed sections
// fail alike.
func TestParseAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	h := NewRecordHasher(1 << 20)
	type one struct{ new, ref uint64 }
	for round := range 300 {
		var recs []one
		for range 40 {
			g := randRec(r)
			firstTS := int64(1000 + r.IntN(2))
			enc := g.encode(r.IntN(3) == 0, r.IntN(4) == 0)
			got, err := h.parse(enc, firstTS, 1, nil)
			want, werr := refParse(h.seed, enc, firstTS, 1)
			if err != nil || werr != nil || len(got) != 1 || len(want) != 1 {
				t.Fatalf("round %d: %v / %v", round, err, werr)
			}
			if got[0].Delta != want[0].Delta {
				t.Fatalf("delta %d, reference %d", got[0].Delta, want[0].Delta)
			}
			recs = append(recs, one{got[0].Sum, want[0].Sum})
		}
		for i := range recs {
			for j := range recs {
				if (recs[i].new == recs[j].new) != (recs[i].ref == recs[j].ref) {
					t.Fatalf("round %d: records %d and %d: equal %v, reference %v", round, i, j,
						recs[i].new == recs[j].new, recs[i].ref == recs[j].ref)
				}
			}
		}
	}
	// Damaged sections: the same verdict and the same records before it.
	for range 20000 {
		var sec []byte
		n := 1 + r.IntN(3)
		for range n {
			sec = append(sec, randRec(r).encode(r.IntN(2) == 0, false)...)
		}
		for range 1 + r.IntN(3) {
			switch r.IntN(3) {
			case 0:
				sec = sec[:r.IntN(len(sec)+1)]
			case 1:
				if len(sec) > 0 {
					sec[r.IntN(len(sec))] = byte(r.Uint32())
				}
			case 2:
				n += r.IntN(3) - 1
			}
		}
		got, err := h.parse(sec, 0, n, nil)
		want, werr := refParse(h.seed, sec, 0, n)
		if (err == nil) != (werr == nil) || len(got) != len(want) {
			t.Fatalf("section %x (n %d): %d records, %v; reference %d, %v", sec, n, len(got), err, len(want), werr)
		}
	}
}

func FuzzParseAgreesWithReference(f *testing.F) {
	f.Add(genRec{key: []byte("k"), value: []byte("v")}.encode(false, false), 1)
	f.Add(genRec{key: []byte("k"), value: nil, headers: [][2][]byte{{[]byte("h"), nil}}}.encode(true, true), 1)
	h := NewRecordHasher(1 << 16)
	f.Fuzz(func(t *testing.T, sec []byte, n int) {
		got, err := h.parse(sec, 0, n, nil)
		want, werr := refParse(h.seed, sec, 0, n)
		if (err == nil) != (werr == nil) || len(got) != len(want) {
			t.Fatalf("%d records, %v; reference %d, %v", len(got), err, len(want), werr)
		}
		for i := range got {
			for j := range got {
				if (got[i].Sum == got[j].Sum) != (want[i].Sum == want[j].Sum) {
					t.Fatalf("records %d and %d: equal %v, reference %v", i, j, got[i].Sum == got[j].Sum, want[i].Sum == want[j].Sum)
				}
			}
		}
	})
}

func TestVarintIsBinaryVarint(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.Uint32())
			if r.IntN(3) == 0 {
				b[i] &= 0x7f
			}
		}
		v, n := varint(b)
		w, m := binary.Varint(b)
		if v != w || n != m {
			t.Fatalf("varint(%x) = %d, %d; binary.Varint %d, %d", b, v, n, w, m)
		}
	}
}
