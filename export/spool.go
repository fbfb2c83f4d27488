package export

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A spool holds the records the sink cannot take yet, on disk, bounded:
// segment files of framed records written in order and read back in
// order, each deleted once read whole. Records left in it when a run
// ends are read first by the next run given the same directory (an agent
// restarted during an outage loses nothing it had spooled). One process
// at a time: the directory is locked (flock).
//
// A frame: length of the rest (4 bytes), CRC-32C of the rest (4), the
// time the record was made (Unix ns, 8), topic length (2), topic, key
// length (4), key, value. A frame cut short or whose CRC does not match
// (a crash mid-write) ends its segment: the rest is counted lost.
//
// Not safe for concurrent use: the Exporter holds its lock around it.
type spool struct {
	dir  string
	max  int64 // bytes on disk at most
	lock *os.File
	// segs are the segment numbers on disk, oldest first; the last is
	// written, the first read.
	segs   []uint64
	size   map[uint64]int64
	count  map[uint64]int64 // records not yet read, per segment
	bytes  int64            // on disk, all segments
	segMax int64

	w     *os.File
	bw    *bufio.Writer
	wseg  uint64
	r     *os.File
	br    *bufio.Reader
	rseg  uint64
	rread bool // r is open on segs[0]

	records int64
	ages    ages
	// lost counts records of frames found damaged.
	lost int64
	buf  []byte
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const frameHead = 4 + 4 + 8

// openSpool opens (making it) the spool directory, locks it, and counts
// what earlier runs left in it.
func openSpool(dir string, limit int64) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool: %v", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool: %v", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("spool %s is in use by another kfsniff (%v): give each a directory of its own", dir, err)
	}
	s := &spool{dir: dir, max: limit, lock: lock, size: map[uint64]int64{}, count: map[uint64]int64{}}
	s.segMax = min(max(limit/16, 1<<20), 64<<20)
	ents, err := os.ReadDir(dir)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("spool: %v", err)
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".spool")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		s.segs = append(s.segs, n)
	}
	slices.Sort(s.segs)
	for _, n := range s.segs {
		if err := s.scan(n); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

func (s *spool) path(n uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%020d.spool", n))
}

// scan counts an earlier run's segment: its records and their times.
func (s *spool) scan(n uint64) error {
	f, err := os.Open(s.path(n))
	if err != nil {
		return fmt.Errorf("spool: %v", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	for {
		at, _, err := s.readFrame(br, nil)
		if err != nil {
			break
		}
		s.count[n]++
		s.records++
		s.ages.add(at.Unix())
	}
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("spool: %v", err)
	}
	s.size[n] = st.Size()
	s.bytes += st.Size()
	return nil
}

// frame is one record read back.
type frame struct {
	topic, key, value []byte
}

// readFrame reads a frame from br into fr (its slices views of s.buf,
// valid until the next read), returning its time and length on disk.
func (s *spool) readFrame(br *bufio.Reader, fr *frame) (time.Time, int64, error) {
	var h [frameHead]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return time.Time{}, 0, err
	}
	l := binary.LittleEndian.Uint32(h[0:])
	if l < 4+8+2+4 || l > 1<<30 {
		return time.Time{}, 0, errDamaged
	}
	s.buf = slices.Grow(s.buf[:0], int(l)-12)[:int(l)-12]
	if _, err := io.ReadFull(br, s.buf); err != nil {
		return time.Time{}, 0, errDamaged
	}
	c := crc32.Update(crc32.Checksum(h[8:], castagnoli), castagnoli, s.buf)
	if c != binary.LittleEndian.Uint32(h[4:]) {
		return time.Time{}, 0, errDamaged
	}
	at := time.Unix(0, int64(binary.LittleEndian.Uint64(h[8:])))
	b := s.buf
	tl := int(binary.LittleEndian.Uint16(b))
	if 2+tl+4 > len(b) {
		return time.Time{}, 0, errDamaged
	}
	topic := b[2 : 2+tl]
	kl := int(binary.LittleEndian.Uint32(b[2+tl:]))
	if 2+tl+4+kl > len(b) {
		return time.Time{}, 0, errDamaged
	}
	if fr != nil {
		fr.topic, fr.key, fr.value = topic, b[2+tl+4:2+tl+4+kl], b[2+tl+4+kl:]
	}
	return at, int64(l) + 4, nil
}

var errDamaged = errors.New("damaged frame")

// put appends a record; false when the spool is full or cannot be
// written (the record is then dropped by the caller).
func (s *spool) put(topic string, key, value []byte, at time.Time) bool {
	l := int64(frameHead + 2 + len(topic) + 4 + len(key) + len(value))
	if s.bytes+l > s.max {
		return false
	}
	if s.w == nil || s.size[s.wseg] >= s.segMax {
		if err := s.rotate(); err != nil {
			return false
		}
	}
	var h [frameHead + 2]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(l-4))
	binary.LittleEndian.PutUint64(h[8:], uint64(at.UnixNano()))
	binary.LittleEndian.PutUint16(h[16:], uint16(len(topic)))
	var kl [4]byte
	binary.LittleEndian.PutUint32(kl[:], uint32(len(key)))
	c := crc32.Checksum(h[8:], castagnoli)
	c = crc32.Update(c, castagnoli, []byte(topic))
	c = crc32.Update(c, castagnoli, kl[:])
	c = crc32.Update(c, castagnoli, key)
	c = crc32.Update(c, castagnoli, value)
	binary.LittleEndian.PutUint32(h[4:], c)
	s.bw.Write(h[:])
	s.bw.WriteString(topic)
	s.bw.Write(kl[:])
	s.bw.Write(key)
	if _, err := s.bw.Write(value); err != nil {
		return false
	}
	s.size[s.wseg] += l
	s.bytes += l
	s.count[s.wseg]++
	s.records++
	s.ages.add(at.Unix())
	return true
}

// rotate starts a new segment to write.
func (s *spool) rotate() error {
	if s.w != nil {
		if err := s.bw.Flush(); err != nil {
			return err
		}
		s.w.Close()
		s.w = nil
	}
	n := uint64(1)
	if len(s.segs) > 0 {
		n = s.segs[len(s.segs)-1] + 1
	}
	f, err := os.OpenFile(s.path(n), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	s.segs = append(s.segs, n)
	s.size[n] = 0
	s.w, s.wseg = f, n
	if s.bw == nil {
		s.bw = bufio.NewWriterSize(f, 1<<18)
	} else {
		s.bw.Reset(f)
	}
	return nil
}

// next reads the oldest record into fr; false when the spool is empty.
func (s *spool) next(fr *frame) (time.Time, bool) {
	for len(s.segs) > 0 {
		n := s.segs[0]
		if !s.rread {
			f, err := os.Open(s.path(n))
			if err != nil {
				s.drop(n)
				continue
			}
			s.r, s.rseg, s.rread = f, n, true
			if s.br == nil {
				s.br = bufio.NewReaderSize(f, 1<<18)
			} else {
				s.br.Reset(f)
			}
		}
		writing := s.w != nil && s.wseg == n
		if writing && s.bw.Buffered() > 0 {
			if err := s.bw.Flush(); err != nil {
				return time.Time{}, false
			}
		}
		at, _, err := s.readFrame(s.br, fr)
		if err == nil {
			s.count[n]--
			s.records--
			s.ages.remove(at.Unix())
			return at, true
		}
		if writing && err == io.EOF {
			// Read up to the writer: empty. Start afresh, so that the
			// disk is given back.
			s.w.Close()
			s.w = nil
			s.drop(n)
			return time.Time{}, false
		}
		// Read whole, or damaged past here: its unread records are lost.
		s.drop(n)
	}
	return time.Time{}, false
}

// drop deletes segment n (read whole or unreadable), counting the records
// it held still unread as lost. (Their ages stay counted until the spool
// is empty: a damaged segment is rare, and the oldest age is then an
// overstatement, never an understatement.)
func (s *spool) drop(n uint64) {
	s.lost += s.count[n]
	s.records -= s.count[n]
	delete(s.count, n)
	if s.rread && s.rseg == n {
		s.r.Close()
		s.rread = false
	}
	os.Remove(s.path(n))
	s.bytes -= s.size[n]
	delete(s.size, n)
	if i := slices.Index(s.segs, n); i >= 0 {
		s.segs = slices.Delete(s.segs, i, i+1)
	}
	if len(s.segs) == 0 {
		s.ages.runs = s.ages.runs[:0]
	}
}

// oldest is the time of the oldest record in the spool (zero if none).
func (s *spool) oldest() int64 { return s.ages.oldest() }

// close writes out what is buffered and releases the directory.
func (s *spool) close() error {
	var err error
	if s.w != nil {
		err = s.bw.Flush()
		if e := s.w.Sync(); err == nil {
			err = e
		}
		s.w.Close()
		s.w = nil
	}
	if s.rread {
		s.r.Close()
		s.rread = false
	}
	if s.lock != nil {
		s.lock.Close()
		s.lock = nil
	}
	return err
}

// ages counts records by the second they were made, to know the oldest
// still waiting: runs of (second, count) in order of seconds.
type ages struct {
	runs []ageRun
}

type ageRun struct{ sec, n int64 }

func (a *ages) add(sec int64) {
	if k := len(a.runs); k > 0 && a.runs[k-1].sec == sec {
		a.runs[k-1].n++
		return
	} else if k == 0 || a.runs[k-1].sec < sec {
		a.runs = append(a.runs, ageRun{sec, 1})
		return
	}
	i := sort.Search(len(a.runs), func(i int) bool { return a.runs[i].sec >= sec })
	if i < len(a.runs) && a.runs[i].sec == sec {
		a.runs[i].n++
		return
	}
	a.runs = slices.Insert(a.runs, i, ageRun{sec, 1})
}

func (a *ages) remove(sec int64) {
	i := sort.Search(len(a.runs), func(i int) bool { return a.runs[i].sec >= sec })
	if i == len(a.runs) || a.runs[i].sec != sec {
		return
	}
	if a.runs[i].n--; a.runs[i].n == 0 {
		a.runs = slices.Delete(a.runs, i, i+1)
	}
}

// oldest is the earliest second counted, 0 when none.
func (a *ages) oldest() int64 {
	if len(a.runs) == 0 {
		return 0
	}
	return a.runs[0].sec
}
