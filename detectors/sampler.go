package detectors

import (
	"cmp"
	"slices"
)

// MaxMiddle bounds the evidence a Sampler keeps between the first and the
// last.
const MaxMiddle = 4

// Sampler keeps representative evidence in bounded memory: the first, the
// last, and a few spread in between (every step-th, the step doubling
// whenever the middle fills up). It holds what the evidence is made of (T),
// not the Evidence, so that a rule seeing thousands of exchanges formats
// only the few it lists.
type Sampler[T Evidencer] struct {
	first, last T
	mid         [MaxMiddle + 1]T
	nmid        int
	n           int
	step        int
}

// Evidencer is what a Sampler holds: anything that becomes Evidence.
type Evidencer interface{ Evidence() Evidence }

// Evidence makes Evidence an Evidencer.
func (e Evidence) Evidence() Evidence { return e }

// Add offers e.
func (s *Sampler[T]) Add(e T) {
	s.n++
	if s.n == 1 {
		s.first, s.step = e, 1
		return
	}
	if s.n > 2 && (s.n-2)%s.step == 0 {
		// The previous last becomes a middle candidate.
		s.mid[s.nmid] = s.last
		s.nmid++
		if s.nmid > MaxMiddle {
			kept := 0
			for i := 0; i < s.nmid; i += 2 {
				s.mid[kept] = s.mid[i]
				kept++
			}
			clear(s.mid[kept:])
			s.nmid = kept
			s.step *= 2
		}
	}
	s.last = e
}

// N is how many were offered.
func (s *Sampler[T]) N() int { return s.n }

// List returns the evidence kept, in packet order.
func (s *Sampler[T]) List() []Evidence {
	if s.n == 0 {
		return nil
	}
	out := make([]Evidence, 0, s.nmid+2)
	out = append(out, s.first.Evidence())
	for _, m := range s.mid[:s.nmid] {
		out = append(out, m.Evidence())
	}
	if s.n > 1 {
		out = append(out, s.last.Evidence())
	}
	SortEvidence(out)
	return out
}

// SortEvidence orders evidence by file and packet.
func SortEvidence(ev []Evidence) {
	slices.SortStableFunc(ev, func(a, b Evidence) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Packet, b.Packet))
	})
}

// HasPacket reports whether ev points at packet of file already: a
// finding names each packet once.
func HasPacket(ev []Evidence, file int, packet uint64) bool {
	return slices.ContainsFunc(ev, func(e Evidence) bool { return e.File == file && e.Packet == packet })
}
