package flows

import (
	"bytes"
	"testing"
)

// TestArenaChunksFitRounds: the chunks a deferred analyzer copies small
// frames into are sized for what its rounds take, so the rounds in flight
// hold little more than their frames (the retry storm's rounds took 25 KiB
// each in chunks of 256 KiB); a round of bigger frames gets bigger chunks,
// and every frame keeps its bytes until its chunk is given back.
func TestArenaChunksFitRounds(t *testing.T) {
	a := &Analyzer{}
	a.ar.spares = make(chan []byte, arenaSpares)
	type frame struct {
		b    []byte
		fill byte
	}
	round := func(n, size int, fill byte) (held int, frames []frame) {
		for i := range n {
			f := bytes.Repeat([]byte{fill + byte(i)}, size)
			b := a.ar.take(len(f))
			start := len(b)
			a.ar.cur = append(b, f...)
			frames = append(frames, frame{a.ar.cur[start:len(a.ar.cur)], fill + byte(i)})
		}
		chunks := a.Seal(nil)
		for _, c := range chunks {
			held += cap(c)
		}
		for _, f := range frames {
			if f.b[0] != f.fill || f.b[len(f.b)-1] != f.fill {
				t.Fatalf("a frame lost its bytes before its chunk was given back")
			}
		}
		a.Recycle(chunks)
		return held, frames
	}
	round(100, 250, 1) // the first round, before any is known
	for r := range 20 {
		held, _ := round(100, 250, byte(r)) // 25 KB of frames a round
		if held > 4*25000 {
			t.Fatalf("round %d of 25 KB of small frames holds %d bytes of chunks", r, held)
		}
	}
	for r := range 5 {
		held, _ := round(20, 60<<10, byte(r)) // 1.2 MB a round
		if held < 20*60<<10 || held > 2*20*60<<10 {
			t.Fatalf("round %d of 1.2 MB of frames holds %d bytes of chunks", r, held)
		}
	}
	for r := range 5 {
		held, _ := round(100, 250, byte(r))
		if r > 0 && held > 4*25000 {
			t.Fatalf("back to small frames: round %d holds %d bytes of chunks", r, held)
		}
	}
}
