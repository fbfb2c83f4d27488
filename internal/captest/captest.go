// Package captest holds a capture in memory and makes the variants of it
// that real incident captures are: started late (a cut), lossy (packets
// dropped at random or in bursts), one-sided (one direction of every
// connection). A variant keeps the packet numbers of the whole capture, so
// what kfsniff reports on it can be compared with the whole capture. The
// ground truth of a capture (Truth) is worked out here from TCP sequence
// numbers and Kafka size prefixes alone, independently of kfsniff's
// analyzer. Test code only.
package captest

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/kfsniff/kfsniff/capture"
)

// Capture is a capture file held in memory.
type Capture struct {
	Name    string
	Packets []capture.Packet // in file order, Data owned, N as in the file
}

// Load reads every packet of the capture at path.
func Load(path string) (*Capture, error) {
	f, err := capture.Open(path, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c := &Capture{Name: path}
	for {
		var p capture.Packet
		err := f.Next(&p)
		if errors.Is(err, io.EOF) {
			return c, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		p.Data = append([]byte(nil), p.Data...)
		c.Packets = append(c.Packets, p)
	}
}

// Keep returns the packets for which keep is true, in order. The packets
// share their data with the capture.
func (c *Capture) Keep(keep func(n uint64) bool) []capture.Packet {
	var out []capture.Packet
	for _, p := range c.Packets {
		if keep(p.N) {
			out = append(out, p)
		}
	}
	return out
}

// Set is a set of packet numbers; Kept says whether a packet of a variant
// was kept.
type Set map[uint64]bool

// From keeps the packets from number n on: a capture started late.
func From(n uint64) func(uint64) bool {
	return func(m uint64) bool { return m >= n }
}

// Without keeps every packet but the dropped ones.
func Without(dropped Set) func(uint64) bool {
	return func(m uint64) bool { return !dropped[m] }
}

// Random drops each of the capture's packets with probability p, from a
// generator seeded with seed: the same seed drops the same packets.
func (c *Capture) Random(seed uint64, p float64) Set {
	r := rand.New(rand.NewPCG(seed, 0x6b6673))
	out := Set{}
	for _, pk := range c.Packets {
		if r.Float64() < p {
			out[pk.N] = true
		}
	}
	return out
}

// Bursts drops runs of k consecutive packets, each run starting with
// probability p at any packet not already dropped (seeded as Random).
func (c *Capture) Bursts(seed uint64, p float64, k int) Set {
	r := rand.New(rand.NewPCG(seed, 0x627572))
	out := Set{}
	for i := 0; i < len(c.Packets); i++ {
		if r.Float64() >= p {
			continue
		}
		for j := i; j < i+k && j < len(c.Packets); j++ {
			out[c.Packets[j].N] = true
		}
		i += k - 1
	}
	return out
}

// Source yields packets from a slice as a capture file does: each
// packet's data is copied into one buffer reused by the next call, so an
// analysis that kept a packet's bytes past the call would see them change,
// as it would reading a file.
type Source struct {
	pkts []capture.Packet
	i    int
	buf  []byte
}

// NewSource returns a source of pkts.
func NewSource(pkts []capture.Packet) *Source { return &Source{pkts: pkts} }

// Next implements capture.Source.
func (s *Source) Next(p *capture.Packet) error {
	if s.i >= len(s.pkts) {
		return io.EOF
	}
	*p = s.pkts[s.i]
	s.buf = append(s.buf[:0], p.Data...)
	p.Data = s.buf
	s.i++
	return nil
}

// OneSided keeps, of every TCP connection, the packets sent in direction d
// (ToServer: by the client), the client being known from the whole
// capture's truth; other packets are kept.
func OneSided(t *Truth, d int) func(uint64) bool {
	return func(n uint64) bool {
		_, dir, ok := t.Place(n)
		return !ok || dir == d
	}
}
