package decode_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"strconv"
	"testing"

	"golang.org/x/crypto/blake2b"
	"golang.org/x/crypto/blake2s"
	"golang.org/x/crypto/sha3"
)

// BenchmarkPrintFunctions is the choice of the record fingerprints'
// function (docs/export.md "Why SHA-256"): each 128-bit-secure candidate
// over one record as a printer hashes it (8 bytes of timestamp, then the
// content), reset and summed per record, at 100, 1,000 and 10,000 bytes.
//
//	go test ./decode -run X -bench PrintFunctions
func BenchmarkPrintFunctions(b *testing.B) {
	key := []byte("0123456789abcdef0123456789abcdef")
	fns := []struct {
		name string
		make func() hash.Hash
	}{
		{"sha256", sha256.New},
		{"hmac-sha256", func() hash.Hash { return hmac.New(sha256.New, key) }},
		{"sha512-256", sha512.New512_256},
		{"blake2b-128-keyed", func() hash.Hash { h, _ := blake2b.New(16, key); return h }},
		{"blake2s-128-keyed", func() hash.Hash { h, _ := blake2s.New128(key); return h }},
		{"sha3-256", func() hash.Hash { return sha3.New256() }},
	}
	for _, fn := range fns {
		for _, n := range []int{100, 1000, 10000} {
			b.Run(fn.name+"/"+strconv.Itoa(n), func(b *testing.B) {
				h, content := fn.make(), make([]byte, n)
				var ts [8]byte
				sum := make([]byte, 0, 64)
				b.SetBytes(int64(8 + n))
				for b.Loop() {
					h.Reset()
					h.Write(ts[:])
					h.Write(content)
					sum = h.Sum(sum[:0])
				}
			})
		}
	}
}
