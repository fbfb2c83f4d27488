package captest

import (
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/kfsniff/kfsniff/capture"
)

// TestVariants: the variants drop what they say, the same way for the
// same seed, and keep the file's packet numbers.
func TestVariants(t *testing.T) {
	c, err := Load(filepath.Join(pcaps, "clients", "notleader-kgo-nobackoff.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	n := len(c.Packets)
	if n < 1000 {
		t.Fatalf("%d packets", n)
	}
	for _, p := range []float64{0.01, 0.05} {
		a, b := c.Random(7, p), c.Random(7, p)
		if len(a) != len(b) || len(a) < int(float64(n)*p/2) || len(a) > int(float64(n)*p*2) {
			t.Errorf("%.0f%% random loss: %d and %d of %d packets", p*100, len(a), len(b), n)
		}
		for k := range a {
			if !b[k] {
				t.Errorf("%.0f%% random loss differs for the same seed at packet %d", p*100, k)
			}
		}
		if d := c.Random(8, p); len(d) == len(a) && equalSets(d, a) {
			t.Errorf("%.0f%% random loss: seeds 7 and 8 drop the same packets", p*100)
		}
	}
	bs := c.Bursts(1, 0.01, 5)
	if len(bs) == 0 || len(bs)%5 != 0 && !bs[c.Packets[n-1].N] {
		t.Errorf("bursts of 5: %d packets dropped", len(bs))
	}
	for k := range bs {
		// Every dropped packet is in a run of 5 (runs may touch).
		run := 1
		for j := k - 1; bs[j]; j-- {
			run++
		}
		for j := k + 1; bs[j]; j++ {
			run++
		}
		if run < 5 && k > 4 && k < c.Packets[n-1].N-4 {
			t.Errorf("bursts of 5: packet %d dropped in a run of %d", k, run)
		}
	}
	kept := c.Keep(Without(bs))
	if len(kept) != n-len(bs) {
		t.Errorf("kept %d of %d with %d dropped", len(kept), n, len(bs))
	}
	for _, p := range kept {
		if bs[p.N] {
			t.Errorf("packet %d kept though dropped", p.N)
		}
	}
	cut := c.Keep(From(c.Packets[n/2].N))
	if len(cut) != n-n/2 || cut[0].N != c.Packets[n/2].N {
		t.Errorf("cut at packet %d: %d packets from %d", c.Packets[n/2].N, len(cut), cut[0].N)
	}
}

func equalSets(a, b Set) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return len(a) == len(b)
}

// TestSource: a slice source yields the packets in order, each in a
// buffer the next call reuses, as a capture file does, then io.EOF.
func TestSource(t *testing.T) {
	c, err := Load(filepath.Join(pcaps, "basic.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	src := NewSource(c.Packets[:3])
	orig := string(c.Packets[0].Data)
	var p, q capture.Packet
	if err := src.Next(&p); err != nil || p.N != 1 || string(p.Data) != string(c.Packets[0].Data) {
		t.Fatalf("first packet %d, %v", p.N, err)
	}
	first := p.Data
	if err := src.Next(&q); err != nil || q.N != 2 || string(q.Data) != string(c.Packets[1].Data) {
		t.Fatalf("second packet %d, %v", q.N, err)
	}
	if &first[0] != &q.Data[0] {
		t.Errorf("the second packet's data is not in the first one's buffer")
	}
	if string(c.Packets[0].Data) != orig {
		t.Errorf("reading the source changed the capture's first packet")
	}
	src.Next(&p)
	if err := src.Next(&p); !errors.Is(err, io.EOF) {
		t.Errorf("after the last packet: %v", err)
	}
}
