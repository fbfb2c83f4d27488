package flows_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/tlsdec"
)

// tlsFixture reads a TLS recording of fixtures/pcaps/tls and its key log.
func tlsFixture(t *testing.T, name string) (pcap, keylog []byte) {
	base := filepath.Join("..", "fixtures", "pcaps", "tls", name)
	pcap, err := os.ReadFile(base + ".pcap")
	if err != nil {
		t.Fatal(err)
	}
	keylog, err = os.ReadFile(base + ".keylog")
	if err != nil {
		t.Fatal(err)
	}
	return pcap, keylog
}

// feedPcap gives the analyzer the packets of a gen-written pcap, calling
// at(n) before packet n.
func feedPcap(a *flows.Analyzer, pcap []byte, at func(n uint64)) {
	var p capture.Packet
	p.Link = capture.LinkEthernet
	for b := pcap[24:]; len(b) >= 16; {
		n := int(binary.LittleEndian.Uint32(b[8:]))
		p.N++
		at(p.N)
		p.Time = time.Unix(int64(binary.LittleEndian.Uint32(b)), int64(binary.LittleEndian.Uint32(b[4:]))*1000).UTC()
		p.Len = int(binary.LittleEndian.Uint32(b[12:]))
		p.Data = b[16 : 16+n]
		a.Packet(&p)
		b = b[16+n:]
	}
	a.Close()
}

func requests(a *flows.Analyzer) (n int) {
	for _, c := range a.Conns() {
		n += c.Requests
	}
	return n
}

// TestTLSKeysArriveLate: a live key log that gains its lines while the
// capture runs (a client appends as it connects): the records of each
// connection are held until its keys come, then decrypted, all 17
// requests as with the whole key log up front; keys that come after a
// connection ended, or never, leave it undecrypted, counted; held
// records count against the buffer budget.
func TestTLSKeysArriveLate(t *testing.T) {
	pcap, keylog := tlsFixture(t, "tls-kgo-kfake-tls13-aes128gcm")
	whole := flows.DefaultConfig()
	whole.TLSKeys = tlsdec.NewKeys()
	whole.TLSKeys.Read(bytes.NewReader(keylog), "k")
	whole.TLSKeys.SetFinal(true)
	a := flows.New(whole)
	feedPcap(a, pcap, func(uint64) {})
	want := requests(a)
	if want != 17 || a.Stats().TLS.Decrypted != 6 {
		t.Fatalf("with the key log up front: %d requests, %d decrypted", want, a.Stats().TLS.Decrypted)
	}

	for _, lateBy := range []uint64{20, 60} {
		late := flows.DefaultConfig()
		late.TLSKeys = tlsdec.NewKeys()
		a := flows.New(late)
		feedPcap(a, pcap, func(n uint64) {
			if n == lateBy {
				late.TLSKeys.Read(bytes.NewReader(keylog), "k")
			}
		})
		if got := requests(a); got != want || a.Stats().TLS.Decrypted != 6 {
			t.Errorf("keys at packet %d: %d requests (want %d), %d of 6 decrypted", lateBy, got, want, a.Stats().TLS.Decrypted)
		}
	}

	// Keys after a connection ended come too late for it: the first
	// three connections closed by packet 82.
	after := flows.DefaultConfig()
	after.TLSKeys = tlsdec.NewKeys()
	a = flows.New(after)
	feedPcap(a, pcap, func(n uint64) {
		if n == 140 {
			after.TLSKeys.Read(bytes.NewReader(keylog), "k")
		}
	})
	if st := a.Stats().TLS; st.Decrypted != 3 || st.NoKeys != 3 {
		t.Errorf("keys at packet 140: %+v", st)
	}

	never := flows.DefaultConfig()
	never.TLSKeys = tlsdec.NewKeys()
	a = flows.New(never)
	feedPcap(a, pcap, func(uint64) {})
	if st := a.Stats().TLS; st.Decrypted != 0 || st.NoKeys != 6 || requests(a) != 0 {
		t.Errorf("keys never given: %+v, %d requests", st, requests(a))
	}
	for _, c := range a.Conns() {
		if !c.TLS || c.TLSInfo == nil || c.TLSInfo.Decrypted {
			t.Errorf("connection %d: TLS %v, %+v", c.ID, c.TLS, c.TLSInfo)
		}
	}

	// Held records count against the buffer budget: past it, a
	// connection waiting for its keys is given up.
	tight := flows.DefaultConfig()
	tight.TLSKeys = tlsdec.NewKeys()
	tight.BufferBudget = 2000
	a = flows.New(tight)
	feedPcap(a, pcap, func(uint64) {})
	if st := a.Stats().TLS; st.Decrypted != 0 || st.NoKeys != 6 {
		t.Errorf("with a 2000-byte budget: %+v", st)
	}
	// The bytes a session holds before its first record decrypts (its
	// ClientHello, about 300 bytes) count too, with the whole key log up
	// front: a budget below them gives the connections up.
	tight.TLSKeys = whole.TLSKeys
	tight.BufferBudget = 200
	a = flows.New(tight)
	feedPcap(a, pcap, func(uint64) {})
	if st := a.Stats().TLS; st.Decrypted+st.NoKeys != 6 || st.NoKeys == 0 {
		t.Errorf("keys up front, a 200-byte budget: %+v", st)
	}
}
