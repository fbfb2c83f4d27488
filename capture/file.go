// Package capture owns packet sources: capture files (pcap, pcapng, either
// gzip-compressed) read one after another or merged by time.
//
// The readers are kfsniff's own rather than gopacket's pcapgo: pcapgo (as of
// v1.1.19) stores link types in a uint8, so SLL2 (276, what `tcpdump -i any`
// writes) cannot be represented, and it sizes buffers from header fields
// without bounds. Both formats are small; these readers bound every
// allocation, parse records in place in the blocks they read (see File)
// and know the byte offset of every record.
package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
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
//
// The file is read in blocks (blockSize) straight from the input, or
// from the gzip reader, and records are parsed in place: a packet's Data
// is a view of the block. Without Blocks the file reuses one block, so
// Data is valid until the next Next; with Blocks (UseBlocks) every block
// comes from them and is given back once the file has moved past it, so
// Data stays valid until the Blocks' owner reuses the block.
type File struct {
	// OnSecret, when set, is given each pcapng Decryption Secrets Block
	// read from then on (Secrets keeps those before); SecretsDropped
	// counts blocks that did not hold together or passed the bound, the
	// first of them at byte SecretsDroppedAt.
	OnSecret         func(Secret)
	SecretsDropped   int
	SecretsDroppedAt int64
	secrets          []Secret
	secretBytes      int
	Name             string
	Format           string // "pcap", "pcap (nanosecond)", "pcapng"; " gzip" appended when compressed
	Links            []LinkType
	index            int
	closer           io.Closer
	// r is the input (the gzip reader over it when compressed); buf is
	// the block read from it, buf[pos:] not parsed yet, and rerr the
	// error that ended r (io.EOF at its end).
	r      io.Reader
	buf    []byte
	pos    int
	rerr   error
	bsize  int
	blocks Blocks
	// off is the byte offset of buf[pos] in the (uncompressed) file.
	off  int64
	n    uint64
	pcap pcapState
	ng   *ngState
	// in counts the bytes taken from the input as it is (compressed
	// when gzip); zin is the buffer the gzip reader reads it through.
	in  *countingReader
	zin *bufio.Reader
}

// blockSize is how much of a file is read at a time: a block holds
// every record that fits in it whole; a record cut by its end is carried
// into the next block, and a record larger than a block gets a block of
// its own (records are bounded by maxRecord, pcapng blocks by ngMaxBlock).
const blockSize = 256 << 10

// minRead is the least room worth a read into the rest of a block: with
// less, the next block is started (the record begun is carried over).
const minRead = 64 << 10

// Blocks lends a File the memory it reads into, for a reader that keeps
// packets after asking for the next one (the pipeline hands them to other
// goroutines): each block comes from Get, and Done gives it back once
// the file reads no more into it and has returned every packet in it.
// The owner reuses a block only once it no longer needs those packets.
type Blocks interface {
	// Get returns an empty buffer of capacity at least n.
	Get(n int) []byte
	// Done gives back a buffer got from Get (or the file's first block).
	Done(b []byte)
}

// UseBlocks makes f read into blocks from b from now on (see Blocks).
// It reports that it did (Merged's may not).
func (f *File) UseBlocks(b Blocks) bool {
	f.blocks = b
	return true
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
	if f.zin != nil {
		return f.n, f.in.n - int64(f.zin.Buffered())
	}
	return f.n, f.in.n - int64(len(f.buf)-f.pos)
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
	return newFile(name, index, r, blockSize)
}

// newFile is NewFile with blocks of bsize bytes (tests make them small).
func newFile(name string, index int, r io.Reader, bsize int) (*File, error) {
	in := &countingReader{r: r}
	f := &File{Name: name, index: index, r: in, in: in, bsize: bsize, buf: make([]byte, 0, bsize)}
	// The magic alone is read first: a gzip file's bytes go to the gzip
	// reader, which reads the input through a buffer of its own.
	k, err := io.ReadAtLeast(in, f.buf[:min(64, bsize)], 4)
	f.buf = f.buf[:k]
	if err != nil {
		f.rerr = io.EOF
		if err != io.EOF && err != io.ErrUnexpectedEOF {
			f.rerr = err
		}
	}
	magic := f.buf
	gz := ""
	if len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		head := bytes.Clone(f.buf)
		f.zin = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(head), in), 256<<10)
		zr, err := gzip.NewReader(f.zin)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: gzip: %v", ErrUnusable, name, err)
		}
		f.r, f.buf, f.rerr = zr, f.buf[:0], nil
		f.fill(4)
		magic = f.buf
		gz = " gzip"
	}
	if len(magic) < 4 {
		if len(magic) == 0 {
			return nil, fmt.Errorf("%w: %s: empty file, not a capture", ErrUnusable, name)
		}
		return nil, fmt.Errorf("%w: %s: only %d bytes, not a capture", ErrUnusable, name, len(magic))
	}
	switch binary.BigEndian.Uint32(magic) {
	case 0xa1b2c3d4, 0xd4c3b2a1, 0xa1b23c4d, 0x4d3cb2a1:
		err = f.openPcap()
	case ngSHB:
		err = f.openNg()
	default:
		return nil, fmt.Errorf("%w: %s: not a pcap or pcapng capture (starts with %s)", ErrUnusable, name, f.describeHead())
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
func (f *File) describeHead() string {
	f.fill(32)
	head := f.buf[f.pos:min(len(f.buf), f.pos+32)]
	control := slices.ContainsFunc(head, func(c byte) bool { return (c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7f })
	if !control && len(head) > 0 {
		return fmt.Sprintf("text %q", head[:min(20, len(head))])
	}
	return fmt.Sprintf("bytes % x", head[:min(4, len(head))])
}

// fill makes at least n bytes (n <= ngMaxBlock) wait in the block, if the
// input has them, reading as much as the block holds. A record that does
// not fit in the rest of the block is carried into a new one (a block of
// its own if larger than a block); the block left behind goes back to
// Blocks, or, without them, is reused.
func (f *File) fill(n int) {
	if len(f.buf)-f.pos >= n || f.rerr != nil {
		return
	}
	if cap(f.buf)-f.pos < n || cap(f.buf)-len(f.buf) < min(minRead, f.bsize/4) {
		f.carry(n)
	}
	for zero := 0; len(f.buf)-f.pos < n; {
		k, err := f.r.Read(f.buf[len(f.buf):cap(f.buf)])
		f.buf = f.buf[:len(f.buf)+k]
		if err != nil {
			f.rerr = err
			return
		}
		if k == 0 {
			if zero++; zero >= 100 {
				f.rerr = io.ErrNoProgress
				return
			}
		}
	}
}

// carry starts a new block with the bytes not parsed yet, with room for
// at least n.
func (f *File) carry(n int) {
	rest := f.buf[f.pos:]
	size := max(n, f.bsize)
	var b []byte
	switch {
	case f.blocks != nil:
		b = f.blocks.Get(size)
		b = append(b[:0], rest...)
		f.blocks.Done(f.buf[:0])
	case cap(f.buf) >= size:
		// Nothing read before stays valid: move the rest to the front.
		b = f.buf[:copy(f.buf[:cap(f.buf)], rest)]
	default:
		b = append(make([]byte, 0, size), rest...)
	}
	f.buf, f.pos = b, 0
}

// take returns the next n bytes of the file (a view of the block, valid
// until the next take without Blocks) and moves past them. Short of n
// bytes, it returns io.EOF if the file ended where they begin,
// io.ErrUnexpectedEOF if it ended inside them, or the input's error.
func (f *File) take(n int) ([]byte, error) {
	f.fill(n)
	if len(f.buf)-f.pos < n {
		if f.rerr == io.EOF && len(f.buf) > f.pos {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, f.rerr
	}
	b := f.buf[f.pos : f.pos+n : f.pos+n]
	f.pos += n
	f.off += int64(n)
	return b, nil
}

// takeAll is take for the rest of a record: running out is never a
// clean end.
func (f *File) takeAll(n int) ([]byte, error) {
	b, err := f.take(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return b, err
}

// skip moves past n bytes.
func (f *File) skip(n int64) error {
	for n > 0 {
		f.fill(1)
		k := int(min(n, int64(len(f.buf)-f.pos)))
		if k == 0 {
			if f.rerr == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return f.rerr
		}
		f.pos += k
		f.off += int64(k)
		n -= int64(k)
	}
	return nil
}

// Next reads the next packet. At a clean end it returns io.EOF; a record cut
// short or malformed is an error naming the packet number and byte offset.
func (f *File) Next(p *Packet) error {
	start := f.off
	var err error
	if f.ng != nil {
		err = f.ngBlock(p)
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
