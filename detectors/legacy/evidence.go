package legacy

import (
	"fmt"
	"sort"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
)

// maxMiddle bounds the evidence kept between the first and the last.
const maxMiddle = 4

// sampler keeps representative evidence in bounded memory: the first, the
// last, and a few spread in between (every step-th, the step doubling
// whenever the middle fills up). It holds what the evidence is made of (T),
// not the Evidence: a detector that sees thousands of exchanges formats
// only the few that are listed.
type sampler[T any] struct {
	first, last T
	mid         [maxMiddle + 1]T
	nmid        int
	n           int
	step        int
}

// evidencer is what a sampler holds: anything that becomes Evidence (or
// Evidence itself).
type evidencer interface{ evidence() Evidence }

func asEvidence(x any) Evidence {
	if e, ok := x.(Evidence); ok {
		return e
	}
	return x.(evidencer).evidence()
}

func (s *sampler[T]) add(e T) {
	s.n++
	if s.n == 1 {
		s.first, s.step = e, 1
		return
	}
	if s.n > 2 && (s.n-2)%s.step == 0 {
		// The previous last becomes a middle candidate.
		s.mid[s.nmid] = s.last
		s.nmid++
		if s.nmid > maxMiddle {
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

// list returns the evidence in packet order.
func (s *sampler[T]) list() []Evidence {
	if s.n == 0 {
		return nil
	}
	out := make([]Evidence, 0, s.nmid+2)
	out = append(out, asEvidence(s.first))
	for _, m := range s.mid[:s.nmid] {
		out = append(out, asEvidence(m))
	}
	if s.n > 1 {
		out = append(out, asEvidence(s.last))
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Packet < out[j].Packet
	})
	return out
}

// evidence points at a message's packet.
func evidence(m *flows.Message, what string) Evidence {
	return Evidence{File: m.File, Packet: m.Packet, Conn: m.Conn.ID, What: what}
}

// idSet collects ints (connection ids, node ids) and returns them sorted.
type idSet map[int32]bool

func (s idSet) add(id int32) {
	if id >= 0 {
		s[id] = true
	}
}

func (s idSet) sorted() []int32 {
	out := make([]int32, 0, len(s))
	for id := range s {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (s idSet) ints() []int {
	out := make([]int, 0, len(s))
	for _, id := range s.sorted() {
		out = append(out, int(id))
	}
	return out
}

// codeTally counts the first few distinct error codes seen.
type codeTally [4]struct {
	code int16
	n    int64
}

func (t *codeTally) add(code int16) {
	for i := range t {
		if t[i].n == 0 {
			t[i].code = code
		}
		if t[i].code == code {
			t[i].n++
			return
		}
	}
}

// top is the most frequent code and its count (0, 0 if none).
func (t *codeTally) top() (int16, int64) {
	var code int16
	var n int64
	for _, c := range t {
		if c.n > n {
			code, n = c.code, c.n
		}
	}
	return code, n
}

// parts lists the codes as "NAME xN".
func (t *codeTally) parts() []string {
	var parts []string
	for _, c := range t {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%s x%d", decode.ErrorName(c.code), c.n))
		}
	}
	return parts
}

// apiCounts counts by API key: the usual keys in an array, so that counting
// every exchange costs no map access.
type apiCounts struct {
	low  [128]int64
	high map[int16]int64
}

func (c *apiCounts) add(key int16) {
	if key >= 0 && int(key) < len(c.low) {
		c.low[key]++
		return
	}
	if c.high == nil {
		c.high = make(map[int16]int64)
	}
	c.high[key]++
}

func (c *apiCounts) get(key int16) int64 {
	if key >= 0 && int(key) < len(c.low) {
		return c.low[key]
	}
	return c.high[key]
}
