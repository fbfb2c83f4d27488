package main

import (
	"os"
	"sync"
)

// The spool's file operations run on a goroutine of their own, in order,
// so that the capture's goroutine never waits for the disk: a write() into
// the page cache costs as much as analysing the packet, and once the
// kernel throttles dirty pages it blocks for tens of milliseconds, while
// at 8 Gbit/s the capture ring fills in 32. The capture's goroutine copies
// what it writes into a buffer and queues it; it waits only when
// spoolQueue buffers (spoolQueue x 64 KiB, the bufio's size: 16 MiB) are
// waiting already, the disk being slower than the traffic for that long.
const spoolQueue = 256

// spoolWrite is the most one queued write holds: the capture.Writer's
// buffer (packets larger than it are written whole, and still count
// within --ui-keep).
const spoolWrite = 64 << 10

// spoolIO is the spool's writing goroutine and its queue.
type spoolIO struct {
	ops  chan spoolOp
	free chan []byte // written buffers, for reuse
	mu   sync.Mutex
	err  error // the first write or close error
	done chan struct{}
}

// spoolOp is one operation: write buf to f, or close f and remove name,
// or (ack) tell that every operation before it is done.
type spoolOp struct {
	f     *os.File
	buf   []byte
	close bool
	name  string
	ack   chan struct{}
}

func newSpoolIO() *spoolIO {
	s := &spoolIO{ops: make(chan spoolOp, spoolQueue), free: make(chan []byte, spoolQueue+4), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *spoolIO) run() {
	defer close(s.done)
	for op := range s.ops {
		var err error
		switch {
		case op.ack != nil:
			close(op.ack)
		case op.close:
			err = op.f.Close()
			os.Remove(op.name)
		default:
			_, err = op.f.Write(op.buf)
			select {
			case s.free <- op.buf[:0]:
			default:
			}
		}
		if err != nil {
			s.mu.Lock()
			if s.err == nil {
				s.err = err
			}
			s.mu.Unlock()
		}
	}
}

// failed returns the first error the goroutine met.
func (s *spoolIO) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// write queues a copy of b for f.
func (s *spoolIO) write(f *os.File, b []byte) error {
	if err := s.failed(); err != nil {
		return err
	}
	var buf []byte
	select {
	case buf = <-s.free:
	default:
	}
	s.ops <- spoolOp{f: f, buf: append(buf, b...)}
	return nil
}

// remove queues closing f and removing its file.
func (s *spoolIO) remove(f *os.File, name string) { s.ops <- spoolOp{f: f, close: true, name: name} }

// sync waits until every operation queued so far is done, and returns
// the first error met.
func (s *spoolIO) sync() error {
	ack := make(chan struct{})
	s.ops <- spoolOp{ack: ack}
	<-ack
	return s.failed()
}

// stop ends the goroutine once the queue is done.
func (s *spoolIO) stop() {
	close(s.ops)
	<-s.done
}

// spoolFile is an io.Writer of one segment file through the queue; n
// counts the bytes written.
type spoolFile struct {
	io *spoolIO
	f  *os.File
	n  int64
}

func (w *spoolFile) Write(b []byte) (int, error) {
	if err := w.io.write(w.f, b); err != nil {
		return 0, err
	}
	w.n += int64(len(b))
	return len(b), nil
}
