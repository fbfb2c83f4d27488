package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/internal/fuzzing"
)

// FuzzFile reads arbitrary bytes as a capture file, the way every input
// reaches kfsniff: NewFile, then Next until it stops. Besides not
// panicking and finishing:
//   - an input that cannot be opened fails with ErrUnusable, in one line;
//   - every packet read advances the file offset and gets the next packet
//     number; its record lies before the offset reached; its captured
//     bytes are within maxRecord and no more than its length on the wire;
//     its link type is one the file declared;
//   - reading stops at io.EOF or at a *ReadError naming the next packet
//     number and a record offset within what was read, in one line;
//   - the record buffer never exceeds the largest block allowed, and the
//     bytes allocated are bounded by a constant plus twice the bytes read.
func FuzzFile(f *testing.F) {
	for _, seed := range fuzzing.FixtureSeeds(f, filepath.Join("..", "fixtures", "pcaps"), 64<<10) {
		f.Add(seed)
	}
	ether := make([]byte, 60)
	for _, seed := range [][]byte{
		nil,
		[]byte("hello world, not a pcap"),
		classic(1, ether, ether[:20]),
		classic(276, ether),
		classic(1, ether)[:len(classic(1, ether))-7],
		hugeCaplen(),
		ngFile(binary.LittleEndian, ngBlockBytes(binary.LittleEndian, 0x0bad, []byte("skip me!"))),
		ngFile(binary.BigEndian),
		append(ngFile(binary.LittleEndian), ngFile(binary.BigEndian)...),
		ngFile(binary.LittleEndian, ngBlockBytes(binary.LittleEndian, ngSPB, append([]byte{60, 0, 0, 0}, ether...))),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer fuzzing.Input("FuzzFile", data)()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		cf, err := NewFile("fuzz", 3, bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrUnusable) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("NewFile: %q is not a one-line ErrUnusable", err)
			}
			return
		}
		var p Packet
		var n uint64
		last := int64(-1)
		for {
			off := cf.off
			err := cf.Next(&p)
			if err == io.EOF {
				break
			}
			if err != nil {
				var re *ReadError
				if !errors.As(err, &re) {
					t.Fatalf("Next: %v (%T) is neither io.EOF nor a *ReadError", err, err)
				}
				if re.Packet != n+1 || re.File != 3 || re.Offset < off || re.Offset > cf.off || strings.Contains(err.Error(), "\n") {
					t.Fatalf("after %d packets read to byte %d: %q (packet %d, offset %d, file %d)", n, off, err, re.Packet, re.Offset, re.File)
				}
				break
			}
			n++
			if p.N != n || p.File != 3 {
				t.Fatalf("packet %d numbered %d (file %d)", n, p.N, p.File)
			}
			if cf.off <= off || p.Offset < off || p.Offset >= cf.off || p.Offset <= last {
				t.Fatalf("packet %d: record at %d, read from %d to %d, previous record at %d", n, p.Offset, off, cf.off, last)
			}
			last = p.Offset
			if len(p.Data) > maxRecord || p.Len < len(p.Data) {
				t.Fatalf("packet %d: %d captured bytes, length %d", n, len(p.Data), p.Len)
			}
			if !slices.Contains(cf.Links, p.Link) {
				t.Fatalf("packet %d: link type %d not among the declared %v", n, p.Link, cf.Links)
			}
		}
		if cap(cf.buf) > ngMaxBlock {
			t.Fatalf("record buffer grew to %d bytes", cap(cf.buf))
		}
		runtime.ReadMemStats(&after)
		// The block (with a record of its own up to ngMaxBlock), the
		// gzip state and its input buffer, and what reading allocates
		// per byte read.
		bound := uint64(6<<20) + 2*uint64(cf.off)
		if got := after.TotalAlloc - before.TotalAlloc; got > bound {
			t.Fatalf("reading %d bytes (%d packets) allocated %d bytes, more than %d", cf.off, n, got, bound)
		}
	})
}

// hugeCaplen is a pcap whose only record claims 4 GB of captured bytes.
func hugeCaplen() []byte {
	b := classic(1, make([]byte, 10))
	binary.LittleEndian.PutUint32(b[24+8:], 0xfffffff0)
	return b
}

// ngBlockBytes is one pcapng block of type typ around body (padded).
func ngBlockBytes(bo binary.ByteOrder, typ uint32, body []byte) []byte {
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	n := uint32(len(body) + 12)
	b := make([]byte, 8, n)
	bo.PutUint32(b, typ)
	bo.PutUint32(b[4:], n)
	b = append(b, body...)
	b = append(b, 0, 0, 0, 0)
	bo.PutUint32(b[len(b)-4:], n)
	return b
}

// ngFile is a pcapng section with one Ethernet interface, one enhanced
// packet block of a 60-byte frame, then extra blocks.
func ngFile(bo binary.ByteOrder, extra ...[]byte) []byte {
	shb := make([]byte, 16)
	bo.PutUint32(shb, 0x1a2b3c4d)
	bo.PutUint16(shb[4:], 1)
	binary.LittleEndian.PutUint64(shb[8:], ^uint64(0))
	b := ngBlockBytes(bo, ngSHB, shb)
	idb := make([]byte, 8)
	bo.PutUint16(idb, 1)
	bo.PutUint32(idb[4:], 65535)
	b = append(b, ngBlockBytes(bo, ngIDB, idb)...)
	epb := make([]byte, 20, 80)
	bo.PutUint32(epb[12:], 60)
	bo.PutUint32(epb[16:], 60)
	epb = append(epb, make([]byte, 60)...)
	b = append(b, ngBlockBytes(bo, ngEPB, epb)...)
	for _, x := range extra {
		b = append(b, x...)
	}
	return b
}
