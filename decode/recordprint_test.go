package decode_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

// want128 is the fixed fingerprint of rec computed here from its
// definition (docs/export.md: SHA-256, or HMAC-SHA256 under key, of the
// absolute timestamp as 8 big-endian bytes then the key, value and
// headers as the record encodes them), cut to 128 bits.
func want128(rec kmsg.Record, key []byte) (lo, hi uint64) {
	r := rec
	r.TimestampDelta64, r.OffsetDelta = 0, 0
	enc := r.AppendTo(nil)
	// length, attributes, timestamp delta 0, offset delta 0: one byte each
	// for a short record; the content follows.
	_, n := binary.Varint(enc)
	content := enc[n+3:]
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(rec.TimestampDelta64))
	var sum []byte
	if key != nil {
		m := hmac.New(sha256.New, key)
		m.Write(ts[:])
		m.Write(content)
		sum = m.Sum(nil)
	} else {
		s := sha256.Sum256(append(ts[:], content...))
		sum = s[:]
	}
	return binary.BigEndian.Uint64(sum), binary.BigEndian.Uint64(sum[8:])
}

// TestRecordPrinterFixed (issue 30 item 8): a printer's fingerprints are
// the function docs/export.md names, computed here independently, so two
// agents (two printers, each with its own hasher state) agree; the same
// records in other codecs and batches print the same; a key changes
// every print, and two printers with one key agree.
func TestRecordPrinterFixed(t *testing.T) {
	key := []byte("0123456789abcdef-shared")
	recs := sourceRecords(0, 40)
	whole := compressed(t, nil, recs)
	for _, k := range [][]byte{nil, key} {
		a, b := decode.NewRecordPrinter(1<<20, k), decode.NewRecordPrinter(1<<20, k)
		ref, err := a.Hashes(&whole, nil)
		if err != nil || len(ref) != 40 {
			t.Fatalf("key %v: %d prints, %v", k != nil, len(ref), err)
		}
		for i, r := range ref {
			if lo, hi := want128(recs[i], k); r.Sum != lo || r.Hi != hi || r.Delta != int32(i) {
				t.Fatalf("key %v: record %d printed %x%x delta %d, want %x%x delta %d", k != nil, i, r.Sum, r.Hi, r.Delta, lo, hi, i)
			}
		}
		for name, codec := range codecs {
			x, y := compressed(t, codec, recs[:15]), compressed(t, codec, recs[15:])
			got, err := b.Hashes(&x, nil)
			if err == nil {
				got, err = b.Twin().Hashes(&y, got)
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for i := range got {
				if got[i].Sum != ref[i].Sum || got[i].Hi != ref[i].Hi {
					t.Fatalf("%s: record %d printed differently", name, i)
				}
			}
		}
	}
	keyless, _ := decode.NewRecordPrinter(1<<20, nil).Hashes(&whole, nil)
	keyed, _ := decode.NewRecordPrinter(1<<20, key).Hashes(&whole, nil)
	other, _ := decode.NewRecordPrinter(1<<20, []byte("another key of 16+ bytes")).Hashes(&whole, nil)
	for i := range keyless {
		if keyless[i].Sum == keyed[i].Sum || keyed[i].Sum == other[i].Sum {
			t.Fatalf("record %d: the key does not change its print", i)
		}
	}
	if decode.PrintFunc(nil) != "sha256-128" || decode.PrintFunc(key) == decode.PrintFunc([]byte("another key of 16+ bytes")) ||
		decode.PrintFunc(key) != decode.PrintFunc(append([]byte(nil), key...)) {
		t.Errorf("PrintFunc: %q %q", decode.PrintFunc(nil), decode.PrintFunc(key))
	}
}

// TestSealComparesPrints: prints sealed by one hasher are equal exactly
// where the prints are, keep their deltas, and differ between hashers
// (random seeds).
func TestSealComparesPrints(t *testing.T) {
	p := decode.NewRecordPrinter(1<<20, nil)
	a := compressed(t, nil, sourceRecords(0, 10))
	b := compressed(t, codecs["zstd"], sourceRecords(5, 10))
	pa, _ := p.Hashes(&a, nil)
	pb, _ := p.Hashes(&b, nil)
	h, h2 := decode.NewRecordHasher(1), decode.NewRecordHasher(1)
	sa, sb := h.Seal(pa, nil), h.Seal(pb, nil)
	for i := range 5 {
		if sa[5+i].Sum != sb[i].Sum || sb[i].Delta != int32(i) {
			t.Fatalf("record %d: sealed prints differ", 5+i)
		}
		if sa[i].Sum == sb[i].Sum {
			t.Fatalf("records %d and %d: sealed alike", i, 5+i)
		}
	}
	if h2.Seal(pa, nil)[0].Sum == sa[0].Sum {
		t.Error("two hashers sealed alike: not seeded")
	}
}
