package main

import (
	"context"
	"errors"
	"io"
)

// errInterrupted is what an interruptible reader returns once its
// context is done.
var errInterrupted = errors.New("interrupted")

// interruptible reads r (standard input) on a goroutine of its own, so
// that a read blocked on a pipe whose writer neither writes nor closes
// does not hold the run past Ctrl-C or --duration: once ctx is done, Read
// returns errInterrupted at once, and the run reports what it read (the
// goroutine stays blocked in its read until the process exits).
type interruptible struct {
	ctx    context.Context
	chunks chan chunk
	free   chan []byte
	cur    chunk
	off    int
}

type chunk struct {
	b   []byte
	err error
}

const interruptibleChunk = 256 << 10

func newInterruptible(ctx context.Context, r io.Reader) *interruptible {
	in := &interruptible{ctx: ctx, chunks: make(chan chunk, 2), free: make(chan []byte, 3)}
	for range 3 {
		in.free <- make([]byte, interruptibleChunk)
	}
	go func() {
		for {
			var b []byte
			select {
			case b = <-in.free:
			case <-ctx.Done():
				return
			}
			n, err := r.Read(b)
			select {
			case in.chunks <- chunk{b[:n], err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return in
}

func (in *interruptible) Read(p []byte) (int, error) {
	for in.off == len(in.cur.b) {
		if in.cur.err != nil {
			return 0, in.cur.err
		}
		if in.cur.b != nil {
			in.free <- in.cur.b[:cap(in.cur.b)]
			in.cur.b = nil
		}
		select {
		case <-in.ctx.Done():
			return 0, errInterrupted
		case c := <-in.chunks:
			in.cur, in.off = c, 0
		}
	}
	n := copy(p, in.cur.b[in.off:])
	in.off += n
	return n, nil
}
