package tlsdec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/binary"
	"hash"

	"golang.org/x/crypto/chacha20poly1305"
)

// TLS versions as on the wire.
const (
	VersionTLS12 = 0x0303
	VersionTLS13 = 0x0304
)

// aeadKind is how a suite encrypts records.
type aeadKind uint8

const (
	aeadNone   aeadKind = iota
	aesGCM              // TLS 1.2: 4-byte implicit IV, 8-byte explicit nonce
	chachaPoly          // TLS 1.2 (RFC 7905): 12-byte IV, no explicit nonce
)

// suite is what decryption needs of a cipher suite.
type suite struct {
	kind   aeadKind
	keyLen int
	// sha384: the suite's hash (TLS 1.3 key schedule, TLS 1.2 PRF) is
	// SHA-384, not SHA-256.
	sha384 bool
}

// suites are the AEAD suites decrypted: TLS 1.3's three, and TLS 1.2's
// GCM and ChaCha20-Poly1305 ones (ECDHE, DHE and RSA key exchange alike:
// the key log gives the master secret). CBC and the rest are named but
// not decrypted.
var suites = map[uint16]suite{
	tls.TLS_AES_128_GCM_SHA256:       {aesGCM, 16, false},
	tls.TLS_AES_256_GCM_SHA384:       {aesGCM, 32, true},
	tls.TLS_CHACHA20_POLY1305_SHA256: {chachaPoly, 32, false},

	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:       {aesGCM, 16, false},
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256:         {aesGCM, 16, false},
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384:       {aesGCM, 32, true},
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:         {aesGCM, 32, true},
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: {chachaPoly, 32, false},
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256:   {chachaPoly, 32, false},
	tls.TLS_RSA_WITH_AES_128_GCM_SHA256:               {aesGCM, 16, false},
	tls.TLS_RSA_WITH_AES_256_GCM_SHA384:               {aesGCM, 32, true},
	0x009e:                                            {aesGCM, 16, false},     // TLS_DHE_RSA_WITH_AES_128_GCM_SHA256
	0x009f:                                            {aesGCM, 32, true},      // TLS_DHE_RSA_WITH_AES_256_GCM_SHA384
	0xccaa:                                            {chachaPoly, 32, false}, // TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256
}

// SuiteName is a cipher suite's IANA name (crypto/tls's), or 0x%04X.
func SuiteName(id uint16) string { return tls.CipherSuiteName(id) }

// VersionName is "TLS 1.3", "TLS 1.2", ... or 0x%04X.
func VersionName(v uint16) string { return tls.VersionName(v) }

func (s suite) hash() func() hash.Hash {
	if s.sha384 {
		return sha512.New384
	}
	return sha256.New
}

func (s suite) hashLen() int {
	if s.sha384 {
		return 48
	}
	return 32
}

// expandLabel is TLS 1.3's HKDF-Expand-Label with an empty context (RFC
// 8446 7.1).
func (s suite) expandLabel(secret []byte, label string, n int) []byte {
	full := "tls13 " + label
	info := make([]byte, 0, 4+len(full))
	info = binary.BigEndian.AppendUint16(info, uint16(n))
	info = append(info, byte(len(full)))
	info = append(info, full...)
	info = append(info, 0) // context: empty
	out, err := hkdf.Expand(s.hash(), secret, string(info), n)
	if err != nil {
		return nil // only for lengths over 255 hashes
	}
	return out
}

// prf12 is TLS 1.2's PRF (RFC 5246 5) with the suite's hash.
func (s suite) prf12(secret []byte, label string, seed []byte, n int) []byte {
	ls := append([]byte(label), seed...)
	mac := hmac.New(s.hash(), secret)
	out := make([]byte, 0, n+mac.Size())
	a := ls
	for len(out) < n {
		mac.Reset()
		mac.Write(a)
		a = mac.Sum(nil)
		mac.Reset()
		mac.Write(a)
		mac.Write(ls)
		out = mac.Sum(out)
	}
	return out[:n]
}

// recordKey decrypts one direction's records: the AEAD, its IV and the
// sequence number of the next record.
type recordKey struct {
	aead cipher.AEAD
	iv   []byte // TLS 1.3 and ChaCha: 12 bytes; TLS 1.2 GCM: 4
	seq  uint64
	tls13,
	explicit bool // TLS 1.2 GCM: an 8-byte explicit nonce begins each record
	nonce [12]byte
	aad   [13]byte
}

func newAEAD(kind aeadKind, key []byte) (cipher.AEAD, error) {
	if kind == chachaPoly {
		return chacha20poly1305.New(key)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// key13 makes a TLS 1.3 record key from a traffic secret.
func (s suite) key13(secret []byte) *recordKey {
	a, err := newAEAD(s.kind, s.expandLabel(secret, "key", s.keyLen))
	if err != nil {
		return nil
	}
	return &recordKey{aead: a, iv: s.expandLabel(secret, "iv", 12), tls13: true}
}

// keys12 makes the client's and the server's TLS 1.2 record keys from the
// master secret and the randoms (RFC 5246 6.3; AEADs have no MAC key).
func (s suite) keys12(master []byte, clientRandom, serverRandom [32]byte) (client, server *recordKey) {
	ivLen := 4
	if s.kind == chachaPoly {
		ivLen = 12
	}
	seed := append(serverRandom[:], clientRandom[:]...)
	kb := s.prf12(master, "key expansion", seed, 2*s.keyLen+2*ivLen)
	ck, sk := kb[:s.keyLen], kb[s.keyLen:2*s.keyLen]
	civ, siv := kb[2*s.keyLen:2*s.keyLen+ivLen], kb[2*s.keyLen+ivLen:]
	ca, err1 := newAEAD(s.kind, ck)
	sa, err2 := newAEAD(s.kind, sk)
	if err1 != nil || err2 != nil {
		return nil, nil
	}
	explicit := s.kind == aesGCM
	return &recordKey{aead: ca, iv: civ, explicit: explicit}, &recordKey{aead: sa, iv: siv, explicit: explicit}
}

// open decrypts the payload of a record with header hdr into dst's room
// (appending), and returns the plaintext (TLS 1.3: with its inner type
// and padding still on) or false when it does not authenticate.
func (k *recordKey) open(dst []byte, hdr [5]byte, payload []byte) ([]byte, bool) {
	seq := k.seq
	if k.explicit {
		if len(payload) < 8+k.aead.Overhead() {
			return nil, false
		}
		copy(k.nonce[:4], k.iv)
		copy(k.nonce[4:], payload[:8])
		payload = payload[8:]
	} else {
		// TLS 1.3 and ChaCha20-Poly1305: the IV XOR the sequence number.
		copy(k.nonce[:], k.iv)
		for i := 0; i < 8; i++ {
			k.nonce[4+i] ^= byte(seq >> (56 - 8*i))
		}
	}
	if len(payload) < k.aead.Overhead() {
		return nil, false
	}
	aad := append(k.aad[:0], hdr[:]...) // TLS 1.3: the header
	if !k.tls13 {
		binary.BigEndian.PutUint64(k.aad[:8], seq)
		k.aad[8], k.aad[9], k.aad[10] = hdr[0], hdr[1], hdr[2]
		binary.BigEndian.PutUint16(k.aad[11:], uint16(len(payload)-k.aead.Overhead()))
		aad = k.aad[:]
	}
	out, err := k.aead.Open(dst, k.nonce[:], payload, aad)
	if err != nil {
		return nil, false
	}
	k.seq++
	return out, true
}
