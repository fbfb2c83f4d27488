// Package capture owns packet sources: capture files (pcap, pcapng, either
// gzip-compressed) read one after another or merged by time.
//
// The readers are kfsniff's own rather than gopacket's pcapgo: pcapgo (as of
// v1.1.19) stores link types in a uint8, so SLL2 (276, what `tcpdump -i any`
// writes) cannot be represented, and it sizes buffers from header fields
// without bounds. Both formats are small; these readers bound every
// allocation, reuse one buffer and know the byte offset of every record.
package capture

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Packet is one captured packet. Data is owned by the source and valid only
// until the source's next Next call.
type Packet struct {
	// N is the 1-based packet number within its file, as tcpdump -r and
	// Wireshark number packets.
	N      uint64
	File   int // index of the file among the inputs
	Time   time.Time
	Len    int // length on the wire
	Link   LinkType
	Data   []byte // captured bytes (len(Data) may be < Len)
	Offset int64  // byte offset of the packet record in the (uncompressed) file
}

// Source yields packets in order. Next returns io.EOF at the end; any other
// error means the input broke at that point (the packets before it are good).
type Source interface {
	Next(p *Packet) error
}

// ErrUnusable marks inputs that cannot be read at all: missing files, files
// that are not captures, unsupported link types.
var ErrUnusable = errors.New("unusable input")

// maxRecord bounds the per-packet buffer a capture can make us allocate;
// real captures use a snaplen of at most 262144.
const maxRecord = 1 << 20

// ReadError says where a capture broke: the packet that could not be read
// and the byte offset of its record. The packets before it are good.
type ReadError struct {
	Name   string
	File   int // index of the file among the inputs
	Packet uint64
	Offset int64
	Err    error
}

func (e *ReadError) Error() string {
	if errors.Is(e.Err, io.ErrUnexpectedEOF) {
		return fmt.Sprintf("%s: file ends inside packet %d (record at byte %d): truncated capture", e.Name, e.Packet, e.Offset)
	}
	return fmt.Sprintf("%s: packet %d (record at byte %d): %v", e.Name, e.Packet, e.Offset, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// File reads one pcap or pcapng file, optionally gzip-compressed.
type File struct {
	Name   string
	Format string // "pcap", "pcap (nanosecond)", "pcapng"; " gzip" appended when compressed
	Links  []LinkType
	index  int
	closer io.Closer
	r      *bufio.Reader
	off    int64
	n      uint64
	buf    []byte
	pcap   pcapState
	ng     *ngState
	// in counts the bytes taken from the input as it is (compressed
	// when gzip) into raw, the buffer over it, for progress.
	in  *countingReader
	raw *bufio.Reader
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// Read returns how many packets have been read so far and how many bytes
// of the input as it is (the compressed file for gzip) have been used.
// Call it from the goroutine reading the file.
func (f *File) Read() (packets uint64, inputBytes int64) {
	return f.n, f.in.n - int64(f.raw.Buffered())
}

// Open opens a capture file ("-" is standard input) and reads its header.
// Errors wrap ErrUnusable and read as one line naming the file.
func Open(name string, index int) (*File, error) {
	var r io.Reader
	var closer io.Closer
	if name == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnusable, err)
		}
		if st, err := f.Stat(); err == nil && st.IsDir() {
			f.Close()
			return nil, fmt.Errorf("%w: %s: is a directory, not a capture", ErrUnusable, name)
		}
		r, closer = f, f
	}
	cf, err := NewFile(name, index, r)
	if err != nil {
		if closer != nil {
			closer.Close()
		}
		return nil, err
	}
	cf.closer = closer
	return cf, nil
}

// NewFile reads a capture from r; name is used in messages.
func NewFile(name string, index int, r io.Reader) (*File, error) {
	in := &countingReader{r: r}
	br := bufio.NewReaderSize(in, 1<<20)
	raw := br
	magic, _ := br.Peek(4)
	gz := ""
	if len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: gzip: %v", ErrUnusable, name, err)
		}
		br = bufio.NewReaderSize(zr, 1<<20)
		magic, _ = br.Peek(4)
		gz = " gzip"
	}
	f := &File{Name: name, index: index, r: br, in: in, raw: raw}
	if len(magic) < 4 {
		if len(magic) == 0 {
			return nil, fmt.Errorf("%w: %s: empty file, not a capture", ErrUnusable, name)
		}
		return nil, fmt.Errorf("%w: %s: only %d bytes, not a capture", ErrUnusable, name, len(magic))
	}
	var err error
	switch binary.BigEndian.Uint32(magic) {
	case 0xa1b2c3d4, 0xd4c3b2a1, 0xa1b23c4d, 0x4d3cb2a1:
		err = f.openPcap()
	case ngSHB:
		err = f.openNg()
	default:
		return nil, fmt.Errorf("%w: %s: not a pcap or pcapng capture (starts with %s)", ErrUnusable, name, describeHead(br))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnusable, name, err)
	}
	f.Format += gz
	for _, lt := range f.Links {
		if !lt.Supported() {
			return nil, fmt.Errorf("%w: %s: unsupported link type %d (%s); kfsniff reads Ethernet, Linux SLL/SLL2, raw IP and BSD NULL/LOOP", ErrUnusable, name, int(lt), lt)
		}
	}
	return f, nil
}

// describeHead says what a non-capture file looks like, for the error.
func describeHead(br *bufio.Reader) string {
	head, _ := br.Peek(32)
	text := true
	for _, c := range head {
		if (c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7f {
			text = false
			break
		}
	}
	if text && len(head) > 0 {
		s := string(head)
		if len(s) > 20 {
			s = s[:20]
		}
		return fmt.Sprintf("text %q", s)
	}
	return fmt.Sprintf("bytes % x", head[:min(4, len(head))])
}

// read fills b from the file, counting the offset. A short read is
// io.ErrUnexpectedEOF unless nothing at all was read (io.EOF).
func (f *File) read(b []byte) error {
	n, err := io.ReadFull(f.r, b)
	f.off += int64(n)
	return err
}

// readAll is read for the rest of a record: running out is never a clean end.
func (f *File) readAll(b []byte) error {
	err := f.read(b)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func (f *File) skip(n int64) error {
	d, err := f.r.Discard(int(n))
	f.off += int64(d)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// record returns a buffer of n bytes, reusing the file's buffer.
func (f *File) record(n int) []byte {
	if cap(f.buf) < n {
		f.buf = make([]byte, n, max(n, 65536))
	}
	return f.buf[:n]
}

// Next reads the next packet. At a clean end it returns io.EOF; a record cut
// short or malformed is an error naming the packet number and byte offset.
func (f *File) Next(p *Packet) error {
	start := f.off
	var err error
	if f.ng != nil {
		err = f.nextNg(p)
	} else {
		err = f.nextPcap(p)
	}
	if err != nil {
		// Readers return io.EOF only at a record boundary; a record
		// cut short is io.ErrUnexpectedEOF.
		if err == io.EOF {
			return io.EOF
		}
		return &ReadError{Name: f.Name, File: f.index, Packet: f.n + 1, Offset: start, Err: err}
	}
	f.n++
	p.N = f.n
	p.File = f.index
	return nil
}

// Close closes the underlying file.
func (f *File) Close() error {
	if f.closer != nil {
		return f.closer.Close()
	}
	return nil
}
