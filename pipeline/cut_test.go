package pipeline

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kfsniff/kfsniff/internal/captest"
)

// cutCaptures are the committed captures and fixtures whose connections
// begin with their handshake (hostile inputs aside), and the shared ones
// that have handshakes.
func cutCaptures(t *testing.T) []*studied {
	t.Helper()
	dir := filepath.Join("..", "fixtures", "pcaps")
	caps := withHandshakes(t,
		filepath.Join(dir, "*.pcap"), filepath.Join(dir, "*.pcapng"), filepath.Join(dir, "*.pcap.gz"),
		filepath.Join(dir, "clients", "*.pcap"), filepath.Join(dir, "scenarios", "*.pcap"),
		filepath.Join(sharedDir, "*", "*.pcap"), filepath.Join(sharedDir, "*", "*.pcapng"))
	if len(caps) < 30 {
		t.Fatalf("only %d captures with handshakes", len(caps))
	}
	return caps
}

// TestWholeCaptureTruth: on every capture of the cut test, kfsniff finds
// exactly the frames that framing each direction from its handshake finds
// (captest.Study): the same requests and responses with the same key,
// version, correlation id and completing packet, every response paired
// with the request it answers, every connection the right way round, and
// no connection called one-sided. The cut, loss and one-sided tests
// compare kfsniff with that truth.
func TestWholeCaptureTruth(t *testing.T) {
	var all tally
	for _, s := range cutCaptures(t) {
		t.Run(s.id, func(t *testing.T) {
			a := analyseVariant(t, s, func(uint64) bool { return true }, 1)
			problems, n := check(s, func(uint64) bool { return true }, a, checkOpts{pairing: true})
			for _, c := range a.rep.Connections {
				cl, err1 := netip.ParseAddrPort(c.Client)
				sv, err2 := netip.ParseAddrPort(c.Server)
				if tc := s.tr.Conn(cl, sv); err1 != nil || err2 != nil || tc == nil || !tc.Known {
					continue // both directions are in the capture when the handshake is
				}
				if c.OneSided != nil && *c.OneSided != "" {
					problems.add(other, fmt.Sprintf("connection #%d %s -> %s called one-sided (%s) in a capture of both directions", c.ID, c.Client, c.Server, *c.OneSided))
				}
			}
			if problems.n > 0 {
				n.failed = 1
				t.Errorf("%s (whole capture): %s", s.name, &problems)
			}
			all.add(n)
		})
	}
	t.Logf("whole captures: %s", all)
}

// cutPoint is where a cut capture begins, and why there.
type cutPoint struct {
	n   uint64
	why string
}

// maxLargeFrames bounds, per capture, the frames spanning several packets
// that are cut inside (up to three cuts each), spread over the capture.
const maxLargeFrames = 6

// cutPoints returns the cuts of a capture: at every 10% of its packets,
// and at the 2nd, middle and last packet of frames (requests and
// responses) that span several packets.
func cutPoints(s *studied) []cutPoint {
	var out []cutPoint
	seen := map[uint64]bool{}
	add := func(n uint64, why string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, cutPoint{n, why})
		}
	}
	pk := s.c.Packets
	for k := 1; k <= 9; k++ {
		add(pk[len(pk)*k/10].N, fmt.Sprintf("%d%%", k*10))
	}
	var large []*captest.Frame
	for _, d := range []int{captest.ToServer, captest.ToClient} {
		for _, f := range s.tr.Frames(d) {
			if len(f.Packets()) >= 2 {
				large = append(large, f)
			}
		}
	}
	slices.SortFunc(large, func(a, b *captest.Frame) int { return int(a.Packet) - int(b.Packet) })
	for i := range min(len(large), maxLargeFrames) {
		f := large[i*len(large)/min(len(large), maxLargeFrames)]
		ps := f.Packets()
		add(ps[1], "2nd packet of "+f.Name())
		add(ps[len(ps)/2], "middle packet of "+f.Name())
		add(ps[len(ps)-1], "last packet of "+f.Name())
	}
	return out
}

// TestCuts: a capture that begins mid-connection, as real incident
// captures do, cut from every capture of the whole-capture test at every
// 10% of its packets and inside frames of several packets. In every cut,
// every connection has the client and server of the whole capture; every
// request whose packets are all in the cut (from where reassembly of its
// direction starts) is found with its key, version, correlation id and
// completing packet, and every response there with its request is paired
// with it; nothing is reported that the whole capture does not have (in
// particular no response read as a request).
func TestCuts(t *testing.T) {
	var all tally
	caps := cutCaptures(t)
	for _, s := range caps {
		t.Run(s.id, func(t *testing.T) {
			var n tally
			shown := 0
			for i, cp := range cutPoints(s) {
				keep := captest.From(cp.n)
				what := fmt.Sprintf("cut at packet %d of %d (%s)", cp.n, len(s.c.Packets), cp.why)
				a := analyseVariant(t, s, keep, 1)
				if i == 4 { // the 50% cut: the result must not depend on the workers
					sameOnWorkers(t, s, what, keep, a, 2)
				}
				problems, m := check(s, keep, a, checkOpts{pairing: true})
				n.add(m)
				if problems.n == 0 {
					continue
				}
				if shown < 3 {
					t.Errorf("%s, %s: %s", s.name, what, &problems)
				} else {
					t.Errorf("%s, %s: %d problems, first: %s", s.name, what, problems.n, problems.first())
				}
				shown++
			}
			if n.failed > 0 {
				t.Logf("%s: %d of %d cuts fail", s.name, n.failed, n.variants)
			}
			all.add(n)
		})
	}
	t.Logf("cuts of %d captures: %s", len(caps), all)
}
