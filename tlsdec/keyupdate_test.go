package tlsdec

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"testing"
)

// seal13 encrypts one TLS 1.3 record as RFC 8446 5.2 says, from a
// traffic secret, written here apart from the package's key schedule:
// key and IV by HKDF-Expand-Label, the nonce the IV XOR the sequence
// number, the inner type after the content.
func seal13(t *testing.T, secret []byte, seq uint64, inner byte, content []byte) []byte {
	label := func(l string, n int) []byte {
		info := []byte{byte(n >> 8), byte(n), byte(len("tls13 " + l))}
		info = append(info, "tls13 "+l...)
		info = append(info, 0)
		out, err := hkdf.Expand(sha256.New, secret, string(info), n)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	b, _ := aes.NewCipher(label("key", 16))
	gcm, _ := cipher.NewGCM(b)
	nonce := label("iv", 12)
	for i := 0; i < 8; i++ {
		nonce[11-i] ^= byte(seq >> (8 * i))
	}
	plain := append(append([]byte(nil), content...), inner)
	hdr := []byte{typeAppData, 3, 3, 0, 0}
	binary.BigEndian.PutUint16(hdr[3:], uint16(len(plain)+gcm.Overhead()))
	return gcm.Seal(hdr, nonce, plain, hdr)
}

// TestKeyUpdate: after a real TLS 1.3 session (AES-128-GCM), the client
// sends KeyUpdate under its application key, then records under the next
// one (RFC 8446 7.2): they are decrypted, and a second KeyUpdate is
// followed too.
func TestKeyUpdate(t *testing.T) {
	log, keylog := session(t, tls.VersionTLS13, 0, []string{"before"})
	keys := NewKeys()
	keys.Read(bytes.NewReader(keylog), "k")
	keys.SetFinal(true)
	s := NewSession(keys, func(p string) { t.Log(p) })
	var got []byte
	for _, c := range log {
		if p := s.Feed(c.dir, c.data); c.dir == Client {
			got = append(got, p...)
		}
	}
	if string(got) != "before" || s.Info.Suite != tls.TLS_AES_128_GCM_SHA256 {
		t.Fatalf("before the update: %q, suite %x", got, s.Info.Suite)
	}
	sec, _ := keys.lookup(s.cr)
	secret := sec.cts0
	seq := s.dir[Client].key.seq
	next := func(secret []byte) []byte {
		info := []byte{0, 32, byte(len("tls13 traffic upd"))}
		info = append(info, "tls13 traffic upd"...)
		info = append(info, 0)
		out, _ := hkdf.Expand(sha256.New, secret, string(info), 32)
		return out
	}
	keyUpdate := []byte{hsKeyUpdate, 0, 0, 1, 0}
	var wire []byte
	wire = append(wire, seal13(t, secret, seq, typeHandshake, keyUpdate)...)
	secret = next(secret)
	wire = append(wire, seal13(t, secret, 0, typeAppData, []byte("after one update"))...)
	wire = append(wire, seal13(t, secret, 1, typeHandshake, keyUpdate)...)
	secret = next(secret)
	wire = append(wire, seal13(t, secret, 0, typeAppData, []byte(", and two"))...)
	out := s.Feed(Client, wire)
	if string(out) != "after one update, and two" || s.Info.KeyUpdates != 2 || s.Info.AuthFailures != 0 {
		t.Fatalf("after KeyUpdate: %q, %+v", out, s.Info)
	}
}
