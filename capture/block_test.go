package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"unsafe"
)

// keepBlocks is a Blocks that never reuses a block, and checks that the
// file never reads into a block after giving it back.
type keepBlocks struct {
	size      int
	got, done [][]byte
}

func (k *keepBlocks) Get(n int) []byte {
	b := make([]byte, 0, max(n, k.size))
	k.got = append(k.got, b)
	return b
}

func (k *keepBlocks) Done(b []byte) { k.done = append(k.done, b[:cap(b)]) }

// in says whether data lies in b's memory.
func in(data, b []byte) bool {
	if len(data) == 0 || cap(b) == 0 {
		return false
	}
	s := uintptr(unsafe.Pointer(unsafe.SliceData(b[:cap(b)])))
	d := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	return d >= s && d+uintptr(len(data)) <= s+uintptr(cap(b))
}

// varied returns n packets of sizes that cross any small block size at
// every offset, each filled with its own number.
func varied(n int, sizes ...int) [][]byte {
	var out [][]byte
	for i := range n {
		p := bytes.Repeat([]byte{byte(i + 1)}, sizes[i%len(sizes)])
		out = append(out, p)
	}
	return out
}

type readPacket struct {
	p    Packet
	data []byte // a copy, taken when read
}

// readEvery reads data with blocks of bsize bytes (and blocks if set),
// keeping every packet as read and a copy of its bytes.
func readEvery(t *testing.T, data []byte, bsize int, blocks Blocks) ([]readPacket, error) {
	t.Helper()
	f, err := newFile("t", 0, bytes.NewReader(data), bsize)
	if err != nil {
		t.Fatal(err)
	}
	if blocks != nil {
		f.UseBlocks(blocks)
	}
	var out []readPacket
	for {
		var p Packet
		if err := f.Next(&p); err != nil {
			if err == io.EOF {
				err = nil
			}
			return out, err
		}
		out = append(out, readPacket{p: p, data: bytes.Clone(p.Data)})
	}
}

// samePackets compares packets read with small blocks to those read in
// one block, in number, place, time and bytes.
func samePackets(t *testing.T, name string, got, want []readPacket) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d packets, want %d", name, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.p.N != w.p.N || g.p.Offset != w.p.Offset || !g.p.Time.Equal(w.p.Time) || g.p.Len != w.p.Len || g.p.Link != w.p.Link || !bytes.Equal(g.data, w.data) {
			t.Fatalf("%s: packet %d: N %d offset %d len %d, %d bytes; want N %d offset %d len %d, %d bytes", name, i+1, g.p.N, g.p.Offset, g.p.Len, len(g.data), w.p.N, w.p.Offset, w.p.Len, len(w.data))
		}
	}
}

// TestRecordsAcrossBlocks reads captures whose records straddle the
// blocks' ends at every offset, and records larger than a block, in
// small blocks: every packet is the one read in a single block, with
// the file's own reused block and with lent blocks; with lent blocks,
// every packet's bytes stay as read until the end (the sharded pipeline
// keeps them until delivered) and no packet lies in a block given back
// before it was read.
func TestRecordsAcrossBlocks(t *testing.T) {
	packets := varied(120, 60, 1, 0, 77, 130, 250, 33, 1000, 64, 65, 3)
	ngBlocks := func(bo binary.ByteOrder) []byte {
		var extra [][]byte
		for i, p := range packets {
			extra = append(extra, epbOf(bo, p))
			if i%7 == 0 {
				extra = append(extra, ngBlockBytes(bo, 0x0bad, make([]byte, i*5))) // skipped
			}
		}
		return ngFile(bo, extra...)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(classic(1, packets...))
	zw.Close()
	for name, data := range map[string][]byte{
		"pcap":         classic(1, packets...),
		"pcapng le":    ngBlocks(binary.LittleEndian),
		"pcapng be":    ngBlocks(binary.BigEndian),
		"pcap gzip":    gz.Bytes(),
		"two sections": append(ngBlocks(binary.LittleEndian), ngBlocks(binary.BigEndian)...),
	} {
		want, err := readEvery(t, data, 1<<20, nil)
		if err != nil || len(want) < len(packets) {
			t.Fatalf("%s: %d packets read in one block, err %v", name, len(want), err)
		}
		for _, bsize := range []int{32, 100, 256, 257, 1024} {
			got, err := readEvery(t, data, bsize, nil)
			if err != nil {
				t.Fatalf("%s, %d-byte blocks: %v", name, bsize, err)
			}
			samePackets(t, name, got, want)

			kb := &keepBlocks{size: bsize}
			got, err = readEvery(t, data, bsize, kb)
			if err != nil {
				t.Fatalf("%s, %d-byte lent blocks: %v", name, bsize, err)
			}
			samePackets(t, name, got, want)
			if len(kb.done) < 3 {
				t.Fatalf("%s, %d-byte lent blocks: only %d given back", name, bsize, len(kb.done))
			}
			for i, r := range got {
				if !bytes.Equal(r.p.Data, r.data) {
					t.Fatalf("%s, %d-byte lent blocks: packet %d changed after it was read", name, bsize, i+1)
				}
			}
			// A packet read after a block was given back never lies in it
			// (its round would recycle the block too early).
			for _, r := range got {
				for _, b := range kb.done {
					if in(r.p.Data, b) && r.p.N > lastIn(got, b) {
						t.Fatalf("%s: packet %d lies in a block given back before it", name, r.p.N)
					}
				}
			}
		}
	}
}

// lastIn is the number of the last packet lying in b.
func lastIn(ps []readPacket, b []byte) uint64 {
	var n uint64
	for _, r := range ps {
		if in(r.p.Data, b) {
			n = r.p.N
		}
	}
	return n
}

// epbOf is an enhanced packet block of p on interface 0.
func epbOf(bo binary.ByteOrder, p []byte) []byte {
	epb := make([]byte, 20, 20+len(p))
	bo.PutUint32(epb[12:], uint32(len(p)))
	bo.PutUint32(epb[16:], uint32(len(p)))
	return ngBlockBytes(bo, ngEPB, append(epb, p...))
}

// TestBlockGivenBackAfterItsPackets: with lent blocks, a block is given
// back only once the file has returned its last packet and moved on,
// and a record larger than a block gets one of its own.
func TestBlockGivenBackAfterItsPackets(t *testing.T) {
	packets := varied(40, 100, 3000, 10)
	data := classic(1, packets...)
	kb := &keepBlocks{size: 512}
	f, err := newFile("t", 0, bytes.NewReader(data), 512)
	if err != nil {
		t.Fatal(err)
	}
	f.UseBlocks(kb)
	var p Packet
	big := 0
	for {
		done := len(kb.done)
		if err := f.Next(&p); err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		for _, b := range kb.done[done:] {
			if in(p.Data, b) {
				t.Fatalf("packet %d returned in a block given back while reading it", p.N)
			}
		}
		if len(p.Data) == 3000 {
			big++
			if !in(p.Data, f.buf) || cap(f.buf) < 3000 {
				t.Fatalf("packet %d of 3000 bytes not in a block of its own (cap %d)", p.N, cap(f.buf))
			}
		}
		if !bytes.Equal(p.Data, packets[p.N-1]) {
			t.Fatalf("packet %d: wrong bytes", p.N)
		}
	}
	if big != 13 {
		t.Fatalf("%d big packets, want 13", big)
	}
}

// TestCutAcrossBlocks: a file cut inside a record that straddles blocks
// still says which packet and where, as when read in one block; a
// record's bad length is still refused with small blocks.
func TestCutAcrossBlocks(t *testing.T) {
	packets := varied(10, 300, 70)
	data := classic(1, packets...)
	cut := data[:len(data)-50] // inside packet 10, of 70 bytes
	for _, bsize := range []int{64, 200, 1 << 20} {
		f, err := newFile("t", 0, bytes.NewReader(cut), bsize)
		if err != nil {
			t.Fatal(err)
		}
		var p Packet
		n := 0
		for err = f.Next(&p); err == nil; err = f.Next(&p) {
			n++
		}
		var re *ReadError
		// Packet 10's record starts after the header and nine records.
		off := int64(24)
		for _, p := range packets[:9] {
			off += 16 + int64(len(p))
		}
		if n != 9 || !errors.As(err, &re) || re.Packet != 10 || re.Offset != off || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("%d-byte blocks: %d packets, err %v (want packet 10 at byte %d)", bsize, n, err, off)
		}
	}
	bad := classic(1, packets...)
	binary.LittleEndian.PutUint32(bad[24+16+300+8:], maxRecord+1)
	if n, err := readBlocks(bad, 64); n != 1 || err == nil || !strings.Contains(err.Error(), "corrupt capture") {
		t.Errorf("bad caplen in 64-byte blocks: %d packets, err %v", n, err)
	}
}

func readBlocks(data []byte, bsize int) (int, error) {
	f, err := newFile("t", 0, bytes.NewReader(data), bsize)
	if err != nil {
		return 0, err
	}
	var p Packet
	n := 0
	for {
		if err := f.Next(&p); err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
		n++
	}
}

// TestGzipCutAcrossBlocks: a gzip capture cut short is a truncated
// capture at the packet it cuts, read in small blocks or in one.
func TestGzipCutAcrossBlocks(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(classic(1, varied(50, 500, 20)...))
	zw.Close()
	cut := gz.Bytes()[:gz.Len()*2/3]
	var first int
	for i, bsize := range []int{1 << 20, 128, 1000} {
		n, err := readBlocks(cut, bsize)
		if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("%d-byte blocks: %d packets, err %v", bsize, n, err)
		}
		if i == 0 {
			first = n
		} else if n != first {
			t.Errorf("%d-byte blocks: %d packets before the cut, %d in one block", bsize, n, first)
		}
	}
}
