package flows

import "math/bits"

// A deferred analyzer copies each frame it hands on (own), because its
// events outlive the reassembly buffers; small frames go into shared
// chunks. Left to the garbage collector, a capture of hundreds of MB
// allocates, clears and faults in a fresh chunk for every MiB of frames,
// which on a bulk capture cost more than the framing itself. So whoever
// delivers the events gives the chunks back: it takes the chunks filled
// so far with Seal, when it takes the events handed on so far, and gives
// them back with Recycle once those events have been delivered (the
// Delivery drops every reference into a frame when its handlers are done
// with it; what handlers keep is copied, see Keeper).

// arenaChunk is the largest size of a chunk; frames over a quarter of it
// get a buffer of their own (own). Every Seal starts a new chunk, so a
// worker holds a chunk per round in flight, however little of it the
// round used: chunks of 1 MiB made a run of small frames hold 20 MiB more
// heap. So a new chunk is sized for what the last sealed round took,
// twice that rounded up to a power of two, from arenaMin to arenaChunk: a
// round of the retry storm's 256 small packets takes about 25 KiB of
// frames, and chunks of 256 KiB held 2.6 MiB on each worker.
const (
	arenaChunk = 256 << 10
	arenaMin   = 16 << 10
)

// arenaSpares bounds the chunks given back and not yet reused, and
// arenaFilled the chunks remembered for Seal (an analyzer whose caller
// never seals remembers no more).
const (
	arenaSpares = 16
	arenaFilled = 256
)

type arena struct {
	cur    []byte
	filled [][]byte
	spares chan []byte
	used   int // bytes taken since the last Seal
	size   int // of a new chunk (0: arenaMin)
}

// take returns room for n bytes (n <= arenaChunk), starting a chunk, a
// given-back one if there is one of a size for now, when the current one
// is full.
func (r *arena) take(n int) []byte {
	r.used += n
	if cap(r.cur)-len(r.cur) < n {
		size := max(r.size, arenaMin, n)
		var b []byte
		select {
		case b = <-r.spares:
			if c := cap(b); c < n || c > 4*size {
				b = nil // left to the collector
			}
		default:
		}
		if b == nil {
			b = make([]byte, 0, size)
		}
		r.cur = b[:0]
		if len(r.filled) < arenaFilled {
			r.filled = append(r.filled, b)
		}
	}
	return r.cur
}

// Seal appends to dst the chunks the frames handed on since the last Seal
// were copied into, and makes the next frame start a new chunk: once the
// events handed on before the call are delivered, the chunks may be given
// back (Recycle).
func (a *Analyzer) Seal(dst [][]byte) [][]byte {
	dst = append(dst, a.ar.filled...)
	clear(a.ar.filled)
	a.ar.filled = a.ar.filled[:0]
	a.ar.cur = nil
	a.ar.size = min(1<<bits.Len(uint(2*a.ar.used)), arenaChunk)
	a.ar.used = 0
	return dst
}

// Recycle gives back chunks returned by Seal whose events have all been
// delivered. It may be called on another goroutine than the analyzer's.
func (a *Analyzer) Recycle(chunks [][]byte) {
	for _, b := range chunks {
		select {
		case a.ar.spares <- b:
		default:
			return
		}
	}
}
