package captest

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/fixtures/record"
)

const pcaps = "../../fixtures/pcaps"

type kv struct{ key, version int16 }

func countFrames(fs []*Frame) map[kv]int {
	out := map[kv]int{}
	for _, f := range fs {
		out[kv{f.Key, f.Version}]++
	}
	return out
}

// TestTruthCatalogue: the truth of each scripted fixture with handshakes
// has the frames the script wrote (gen.Want), so the cut, loss and
// one-sided tests compare kfsniff with something right.
func TestTruthCatalogue(t *testing.T) {
	n := 0
	life := map[string]bool{}
	for _, fx := range gen.Life() {
		life[fx.Name] = true
	}
	for _, fx := range gen.Catalogue() {
		if life[fx.Name] {
			// Reused 4-tuples, fragments, IPv6 extension headers,
			// simultaneous open: this truth does not model them
			// (gen's catalogue reader does, life_test.go); Study
			// leaves such connections out of the cut and loss tests.
			continue
		}
		c, err := Load(filepath.Join(pcaps, fx.Name))
		if err != nil {
			t.Fatal(err)
		}
		tr := Study(c)
		if fx.Name == "midstream.pcap" {
			if len(tr.Known()) != 0 {
				t.Errorf("%s: frames known on a capture with no handshake", fx.Name)
			}
			continue
		}
		n++
		w := fx.Want
		kafka, notKafka := 0, 0
		for _, c := range tr.Conns {
			switch {
			case c.Known:
				kafka++
			case c.NotKafka:
				notKafka++
			}
		}
		if kafka != w.Conns || notKafka != w.NotKafka {
			t.Errorf("%s: %d Kafka connections, %d not Kafka; want %d, %d", fx.Name, kafka, notKafka, w.Conns, w.NotKafka)
		}
		want := func(cs []gen.Count) map[kv]int {
			out := map[kv]int{}
			for _, c := range cs {
				out[kv{c.Key, c.Version}] = c.N
			}
			return out
		}
		if got := countFrames(tr.Frames(ToServer)); !equalCounts(got, want(w.Requests)) {
			t.Errorf("%s: requests %v, want %v", fx.Name, got, want(w.Requests))
		}
		// Responses counted by the generator include those whose
		// request was cut by a loss but whose header was captured.
		var paired []*Frame
		partial := 0
		for _, c := range tr.Known() {
			for d := range 2 {
				for _, f := range c.Frames[d] {
					if !f.Complete {
						partial++
					}
				}
			}
		}
		for _, f := range tr.Frames(ToClient) {
			if f.Pair != nil {
				paired = append(paired, f)
			}
		}
		if got := countFrames(paired); !equalCounts(got, want(w.Responses)) {
			t.Errorf("%s: responses %v, want %v", fx.Name, got, want(w.Responses))
		}
		if partial != w.Partial {
			t.Errorf("%s: %d partial frames, want %d", fx.Name, partial, w.Partial)
		}
		for _, f := range tr.Frames(ToServer) {
			if !f.Exact && !hasHoleBefore(f) {
				t.Errorf("%s: %s: completing packet not exact with no hole before it", fx.Name, f.Name())
			}
			if ps := f.Packets(); !slices.Contains(ps, f.Packet) && f.Exact {
				// In order, a frame completes at one of its
				// packets unless it waited for earlier bytes.
				t.Logf("%s: %s completes at packet %d, not one of its own %v (reordered)", fx.Name, f.Name(), f.Packet, ps)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d catalogue fixtures with handshakes", n)
	}
}

// hasHoleBefore reports whether bytes before f in its direction were not
// captured.
func hasHoleBefore(f *Frame) bool {
	for _, g := range f.Conn.Frames[f.Dir()] {
		if g == f {
			return false
		}
		if !g.Complete {
			return true
		}
	}
	return false
}

func equalCounts(a, b map[kv]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestTruthRecorded: the truth of the recorded kgo/kfake captures agrees
// with the recording proxy's own framing of the bytes it forwarded.
func TestTruthRecorded(t *testing.T) {
	for _, name := range []string{"recorded-kgo-kfake-group", "recorded-kgo-kfake-admin"} {
		side, err := record.ReadSidecar(filepath.Join(pcaps, name+".counts.json"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := Load(filepath.Join(pcaps, name+".pcap"))
		if err != nil {
			t.Fatal(err)
		}
		tr := Study(c)
		if got := len(tr.Known()); got != side.Counts.Connections || got != len(tr.Conns) {
			t.Errorf("%s: %d known connections of %d, want %d", name, got, len(tr.Conns), side.Counts.Connections)
		}
		reqs, resps := map[kv]int{}, map[kv]int{}
		for _, a := range side.Counts.APIs {
			if a.Requests > 0 {
				reqs[kv{a.Key, a.Version}] = a.Requests
			}
			if a.Responses > 0 {
				resps[kv{a.Key, a.Version}] = a.Responses
			}
		}
		if got := countFrames(tr.Frames(ToServer)); !equalCounts(got, reqs) {
			t.Errorf("%s: requests %v, want %v", name, got, reqs)
		}
		if got := countFrames(tr.Frames(ToClient)); !equalCounts(got, resps) {
			t.Errorf("%s: responses %v, want %v", name, got, resps)
		}
	}
}

// TestExpectVariants: what a variant must show follows from which packets
// it keeps.
func TestExpectVariants(t *testing.T) {
	c, err := Load(filepath.Join(pcaps, "reorder.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	tr := Study(c)
	reqs := tr.Frames(ToServer)
	var big *Frame
	for _, f := range reqs {
		if len(f.Packets()) > 3 {
			big = f
		}
	}
	if big == nil {
		t.Fatal("no request of several packets in reorder.pcap")
	}
	all := tr.Expect(func(uint64) bool { return true })
	for _, f := range reqs {
		if e := all[f]; !e.Must || !e.Exact || e.Packet != f.Packet {
			t.Errorf("whole capture: %s: %+v", f.Name(), e)
		}
	}
	ps := big.Packets()
	// Without one of its packets, the frame is not all there.
	e := tr.Expect(Without(Set{ps[1]: true}))
	if e[big].Must {
		t.Errorf("%s must be found without its packet %d", big.Name(), ps[1])
	}
	// Cut at its second packet, it cannot be found either. The next
	// request can, but segments are swapped in pairs: the segment
	// before the cut is missing from the stream, so the request comes
	// after a hole and its packet is a lower bound.
	e = tr.Expect(From(ps[1]))
	if e[big].Must {
		t.Errorf("%s must be found in a capture starting at its packet %d", big.Name(), ps[1])
	}
	for _, f := range reqs {
		if f.Start > big.Start {
			if g := e[f]; !g.Must || g.Exact || g.Packet != f.Packet {
				t.Errorf("cut at %d: %s: %+v", ps[1], f.Name(), g)
			}
		}
	}
	// Cut at its first packet, which carries its second segment: a
	// reassembler starting there cannot take the first segment, which
	// comes next, so the frame cannot be found; the stream carries on
	// from there without a hole, so the next requests are exact.
	e = tr.Expect(From(ps[0]))
	if e[big].Must {
		t.Errorf("%s must be found in a capture starting at its packet %d", big.Name(), ps[0])
	}
	for _, f := range reqs {
		if f.Start > big.Start {
			if g := e[f]; !g.Must || !g.Exact || g.Packet != f.Packet {
				t.Errorf("cut at %d: %s: %+v", ps[0], f.Name(), g)
			}
		}
	}
	// Requests only: every request as in the whole capture, no response.
	e = tr.Expect(OneSided(tr, ToServer))
	for _, f := range reqs {
		if g := e[f]; !g.Must || g.Packet != f.Packet {
			t.Errorf("requests only: %s: %+v", f.Name(), g)
		}
	}
	for _, f := range tr.Frames(ToClient) {
		if e[f].Must {
			t.Errorf("requests only: response %s must be found", f.Name())
		}
	}
}
