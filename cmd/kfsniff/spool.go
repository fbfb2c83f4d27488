package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/tlsdec"
)

// spoolSegments is how many segment files the UI's spool divides its
// bound into: the oldest segment is dropped whole, as tcpdump -C/-W
// drops its oldest file, so the spool keeps between (n-1)/n of the bound
// and the bound.
const spoolSegments = 8

// spool keeps the most recent packets analysed, within limit bytes on
// disk, in a ring of pcapng segment files in a temporary directory, so
// that the UI's `w` key can save them (--ui-keep). The files never hold
// more than limit bytes together: before a packet is written, the oldest
// segments are removed until it fits.
type spool struct {
	mu    sync.Mutex
	dir   string
	limit int64
	seg   int64 // a segment's size
	segs  []*spoolSeg
	keys  *tlsdec.Keys
	// dropped counts the packets removed with their segments; err is the
	// first write error (the spool then stops, the analysis goes on).
	dropped int64
	err     error
	seq     int
	io      *spoolIO // the file operations, off the capture's goroutine
}

type spoolSeg struct {
	name        string
	f           *os.File
	w           *capture.Writer
	size        int64 // bytes written to f, buffered ones included
	links       []capture.LinkType
	packets     int64
	first, last time.Time
}

// spoolHeader bounds the section header and interface blocks that open
// each segment file; spoolIface an interface description block.
const (
	spoolHeader = 256
	spoolIface  = 64
)

func newSpool(limitMB int, keys *tlsdec.Keys) (*spool, error) {
	dir, err := os.MkdirTemp("", "kfsniff-spool-")
	if err != nil {
		return nil, fmt.Errorf("temporary capture for the UI: %w", err)
	}
	limit := int64(limitMB) << 20
	return &spool{dir: dir, limit: limit, seg: limit / spoolSegments, keys: keys, io: newSpoolIO()}, nil
}

func (s *spool) total() int64 {
	var n int64
	for _, g := range s.segs {
		n += g.size
	}
	return n
}

// WritePacket implements capture.Sink.
func (s *spool) WritePacket(p *capture.Packet) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil // said once in the UI when saving; the analysis goes on
	}
	// An enhanced packet block: 32 bytes, the data (within the snaplen)
	// padded to 4; and an interface block for a link type new to the
	// segment (at most spoolIface bytes).
	need := int64(32 + (min(len(p.Data), capture.DefaultSnaplen)+3)&^3 + spoolIface)
	if need+spoolHeader > s.limit {
		s.dropped++ // larger than the whole bound: cannot be kept
		return nil
	}
	cur := (*spoolSeg)(nil)
	if len(s.segs) > 0 {
		cur = s.segs[len(s.segs)-1]
	}
	done := (*spoolSeg)(nil) // the segment in use, full
	if cur == nil || (cur.packets > 0 && cur.size+need > s.seg) {
		done, cur = cur, nil
		need += spoolHeader
	}
	// The oldest segments go before anything more is written (the
	// writes are queued in order: the files never hold more than limit).
	for len(s.segs) > 0 && s.total()+need > s.limit {
		if s.segs[0] == cur {
			break // the segment in use is never dropped (need < limit)
		}
		s.drop()
	}
	if done != nil && slices.Contains(s.segs, done) {
		if err := done.w.Flush(); err != nil {
			s.err = err
			return nil
		}
	}
	if cur == nil {
		if cur, s.err = s.open(); s.err != nil {
			return nil
		}
	}
	if err := cur.w.WritePacket(p); err != nil {
		s.err = err
		return nil
	}
	need -= spoolIface
	if !slices.Contains(cur.links, p.Link) {
		cur.links = append(cur.links, p.Link)
		need += spoolIface
	}
	if cur.packets == 0 {
		need -= spoolHeader // counted when the segment was opened
		cur.first = p.Time
	}
	cur.size += need
	cur.packets++
	cur.last = p.Time
	return nil
}

func (s *spool) open() (*spoolSeg, error) {
	s.seq++
	g := &spoolSeg{name: filepath.Join(s.dir, fmt.Sprintf("seg-%06d.pcapng", s.seq))}
	f, err := os.OpenFile(g.name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("temporary capture for the UI: %w", err)
	}
	g.f = f
	// The header is counted as written (flushed now); packets as they
	// are given to the writer, buffered or not.
	out := &spoolFile{io: s.io, f: f}
	w, err := capture.NewWriter(out, true, capture.LinkEthernet, 0, "kfsniff")
	if err == nil {
		err = w.Flush()
		g.size = out.n
	}
	if err != nil {
		s.io.remove(f, g.name)
		return nil, err
	}
	g.links = []capture.LinkType{capture.LinkEthernet}
	g.w = w
	s.segs = append(s.segs, g)
	return g, nil
}

// drop removes the oldest segment.
func (s *spool) drop() {
	g := s.segs[0]
	s.segs = s.segs[1:]
	s.io.remove(g.f, g.name)
	s.dropped += g.packets
}

// Dropped counts the packets no longer kept.
func (s *spool) Dropped() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// save writes what the spool keeps to path as one pcapng file: a section
// comment saying its span and what was dropped, the TLS key log known
// now as a Decryption Secrets Block (so the file alone reads decrypted),
// then the packets. It returns the sentence the UI shows: what was saved
// (packets, local times) and how many older packets were dropped.
func (s *spool) save(path string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return "", fmt.Errorf("the UI's temporary capture failed earlier: %w", s.err)
	}
	var packets int64
	var first, last time.Time
	for _, g := range s.segs {
		if err := g.w.Flush(); err != nil {
			return "", err
		}
	}
	if err := s.io.sync(); err != nil {
		s.err = err
		return "", fmt.Errorf("the UI's temporary capture failed: %w", err)
	}
	for _, g := range s.segs {
		if g.packets > 0 {
			if packets == 0 {
				first = g.first
			}
			packets += g.packets
			last = g.last
		}
	}
	span, short := "no packets", "0 packets"
	if packets > 0 {
		span = fmt.Sprintf("%d packets from %s to %s", packets,
			first.UTC().Format("2006-01-02 15:04:05.000"), last.UTC().Format("15:04:05.000 UTC"))
		short = fmt.Sprintf("%d packets %s-%s", packets, first.Format("15:04:05"), last.Format("15:04:05"))
	}
	what, msg := span, "saved "+short+" to "+path
	if s.dropped > 0 {
		what = fmt.Sprintf("the last %d MB (--ui-keep): %s; %d older packets were dropped and are not in this file",
			s.limit>>20, span, s.dropped)
		msg += fmt.Sprintf("; %d older packets dropped (--ui-keep %d MB)", s.dropped, s.limit>>20)
	}
	out, err := os.Create(path)
	if err != nil {
		return "", err
	}
	w, err := capture.NewWriterComment(out, capture.LinkEthernet, 0, "kfsniff", "kfsniff UI capture: "+what, keySecrets(s.keys)...)
	if err == nil {
		err = s.copyTo(w)
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", err
	}
	return msg, nil
}

// copyTo writes every kept packet to w, oldest first.
func (s *spool) copyTo(w *capture.Writer) error {
	for _, g := range s.segs {
		f, err := capture.Open(g.name, 0)
		if err != nil {
			return err
		}
		var p capture.Packet
		for {
			err = f.Next(&p)
			if err != nil {
				break
			}
			if err = w.WritePacket(&p); err != nil {
				break
			}
		}
		f.Close()
		if err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

func (s *spool) remove() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.segs {
		s.io.remove(g.f, g.name)
	}
	s.segs = nil
	s.err = os.ErrClosed // nothing more is written
	s.io.stop()
	os.RemoveAll(s.dir)
}
