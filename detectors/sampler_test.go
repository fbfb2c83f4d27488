package detectors

import "testing"

func TestSamplerKeepsFirstLastAndASpreadInBetween(t *testing.T) {
	for _, n := range []int{1, 2, 3, 6, 7, 100, 10000} {
		var s Sampler[Evidence]
		for i := 1; i <= n; i++ {
			s.Add(Evidence{Packet: uint64(i)})
		}
		got := s.List()
		if s.N() != n {
			t.Errorf("n=%d: N() = %d", n, s.N())
		}
		if got[0].Packet != 1 || got[len(got)-1].Packet != uint64(n) {
			t.Errorf("n=%d: first/last = %d/%d", n, got[0].Packet, got[len(got)-1].Packet)
		}
		if len(got) > MaxMiddle+2 || (n >= 6 && len(got) < 4) || (n < 6 && len(got) != n) {
			t.Errorf("n=%d: %d pieces of evidence: %v", n, len(got), got)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Packet <= got[i-1].Packet {
				t.Errorf("n=%d: not in packet order or repeated: %v", n, got)
			}
		}
		if n == 10000 && got[len(got)-2].Packet < 1000 {
			t.Errorf("n=%d: the middle evidence is bunched at the start: %v", n, got)
		}
	}
}
