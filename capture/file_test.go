package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// classic builds a little-endian microsecond pcap with the given packets.
func classic(link uint32, packets ...[]byte) []byte {
	b := make([]byte, 24)
	binary.LittleEndian.PutUint32(b, 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(b[4:], 2)
	binary.LittleEndian.PutUint16(b[6:], 4)
	binary.LittleEndian.PutUint32(b[16:], 65535)
	binary.LittleEndian.PutUint32(b[20:], link)
	for i, p := range packets {
		var h [16]byte
		binary.LittleEndian.PutUint32(h[0:], uint32(1700000000+i))
		binary.LittleEndian.PutUint32(h[4:], 250)
		binary.LittleEndian.PutUint32(h[8:], uint32(len(p)))
		binary.LittleEndian.PutUint32(h[12:], uint32(len(p)))
		b = append(b, h[:]...)
		b = append(b, p...)
	}
	return b
}

func readAll(t *testing.T, data []byte) (n int, err error) {
	t.Helper()
	f, err := NewFile("t", 0, bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	var p Packet
	for {
		if err := f.Next(&p); err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
		n++
		if p.N != uint64(n) {
			t.Fatalf("packet number %d, want %d", p.N, n)
		}
	}
}

func TestClassicPcap(t *testing.T) {
	data := classic(1, make([]byte, 60), make([]byte, 70))
	f, err := NewFile("t", 0, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var p Packet
	if err := f.Next(&p); err != nil {
		t.Fatal(err)
	}
	if p.Time != time.Unix(1700000000, 250000).UTC() || len(p.Data) != 60 || p.Link != LinkEthernet || p.Offset != 24 {
		t.Errorf("first packet: %+v", p)
	}
	if n, err := readAll(t, data); n != 2 || err != nil {
		t.Errorf("read %d packets, err %v", n, err)
	}
}

func TestTruncatedRecordSaysWhere(t *testing.T) {
	data := classic(1, make([]byte, 60), make([]byte, 70))
	n, err := readAll(t, data[:len(data)-5])
	if n != 1 || err == nil || !strings.Contains(err.Error(), "file ends inside packet 2 (record at byte 100)") {
		t.Errorf("read %d, err %v", n, err)
	}
	// A cut inside the record header is truncation too, not a clean end.
	n, err = readAll(t, data[:24+16+60+7])
	if n != 1 || err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("cut in header: read %d, err %v", n, err)
	}
}

func TestHugeCaplenIsRefusedWithoutAllocating(t *testing.T) {
	data := classic(1, make([]byte, 10))
	binary.LittleEndian.PutUint32(data[24+8:], 0xfffffff0)
	n, err := readAll(t, data)
	if n != 0 || err == nil || !strings.Contains(err.Error(), "corrupt capture") {
		t.Errorf("read %d, err %v", n, err)
	}
}

func TestUnusable(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty":       nil,
		"short":       {0xa1, 0xb2},
		"text":        []byte("hello world, not a pcap"),
		"unsupported": classic(105),
		"cut header":  classic(1)[:20],
	} {
		_, err := NewFile(name, 0, bytes.NewReader(data))
		if !errors.Is(err, ErrUnusable) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err %v, want one-line ErrUnusable", name, err)
		}
	}
}

func TestNetworkLayer(t *testing.T) {
	ipv4 := []byte{0x45, 0, 0, 20}
	cases := []struct {
		name  string
		link  LinkType
		data  []byte
		et    uint16
		vlans int
		ok    bool
	}{
		{"ethernet", LinkEthernet, append(append(make([]byte, 12), 0x08, 0x00), ipv4...), EtherTypeIPv4, 0, true},
		{"qinq", LinkEthernet, append(append(make([]byte, 12), 0x88, 0xa8, 0, 200, 0x81, 0, 0, 100, 0x86, 0xdd), ipv4...), EtherTypeIPv6, 2, true},
		{"arp", LinkEthernet, append(make([]byte, 12), 0x08, 0x06, 0, 0), 0x0806, 0, false},
		{"sll", LinkSLL, append(append(make([]byte, 14), 0x08, 0x00), ipv4...), EtherTypeIPv4, 0, true},
		{"sll2", LinkSLL2, append(append([]byte{0x86, 0xdd}, make([]byte, 18)...), ipv4...), EtherTypeIPv6, 0, true},
		{"null le ipv4", LinkNull, append([]byte{2, 0, 0, 0}, ipv4...), EtherTypeIPv4, 0, true},
		{"null le macos ipv6", LinkNull, append([]byte{30, 0, 0, 0}, ipv4...), EtherTypeIPv6, 0, true},
		{"loop be ipv6", LinkLoop, append([]byte{0, 0, 0, 24}, ipv4...), EtherTypeIPv6, 0, true},
		{"raw v4", LinkRaw, ipv4, EtherTypeIPv4, 0, true},
		{"raw v6", LinkRaw, []byte{0x60, 0, 0, 0}, EtherTypeIPv6, 0, true},
		{"short ethernet", LinkEthernet, make([]byte, 10), 0, 0, false},
		{"empty raw", LinkRaw, nil, 0, 0, false},
	}
	for _, tc := range cases {
		et, _, vlans, ok := tc.link.Network(tc.data)
		if ok != tc.ok || (ok && (et != tc.et || vlans != tc.vlans)) {
			t.Errorf("%s: et %#x vlans %d ok %v; want %#x %d %v", tc.name, et, vlans, ok, tc.et, tc.vlans, tc.ok)
		}
	}
}

func TestMergeOrdersByTime(t *testing.T) {
	mk := func(idx int, secs ...int) *File {
		var pk [][]byte
		for range secs {
			pk = append(pk, make([]byte, 20))
		}
		data := classic(101, pk...)
		// Rewrite the timestamps.
		off := 24
		for _, s := range secs {
			binary.LittleEndian.PutUint32(data[off:], uint32(s))
			off += 16 + 20
		}
		f, err := NewFile("f", idx, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	m := Merge(mk(0, 1, 4, 5), mk(1, 2, 3, 6))
	var p Packet
	var got []int64
	var files []int
	for m.Next(&p) == nil {
		got = append(got, p.Time.Unix())
		files = append(files, p.File)
	}
	want := []int64{1, 2, 3, 4, 5, 6}
	if len(got) != 6 {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v (files %v)", got, want, files)
		}
	}
}
