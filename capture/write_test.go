package capture

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestWriterRoundTrip writes packets as pcap and pcapng and reads them back
// with File: same link types, times to the nanosecond, wire lengths and
// bytes; pcapng keeps several link types, pcap refuses a second one.
func TestWriterRoundTrip(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
	in := []Packet{
		{Link: LinkEthernet, Time: t0, Len: 60, Data: bytes.Repeat([]byte{1}, 60)},
		{Link: LinkEthernet, Time: t0.Add(time.Microsecond + 7), Len: 1514, Data: bytes.Repeat([]byte{2}, 96)}, // cut by the snaplen
		{Link: LinkSLL2, Time: t0.Add(time.Second), Len: 41, Data: bytes.Repeat([]byte{3}, 41)},                // 41: padded in pcapng
	}
	for _, tc := range []struct {
		name  string
		file  string
		links int
	}{
		{"pcap", "out.pcap", 1},
		{"pcapng", "out.pcapng", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			w, err := Create(path, LinkEthernet, 262144, "lo")
			if err != nil {
				t.Fatal(err)
			}
			want := in
			for i := range in {
				err := w.WritePacket(&in[i])
				if tc.links == 1 && in[i].Link != LinkEthernet {
					if !errors.Is(err, errLinkMix) {
						t.Errorf("pcap took a second link type: %v", err)
					}
					want = in[:i]
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if w.Packets() != uint64(len(want)) {
				t.Errorf("Packets() = %d, want %d", w.Packets(), len(want))
			}
			f, err := Open(path, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if len(f.Links) < 1 || f.Links[0] != LinkEthernet {
				t.Errorf("links %v", f.Links)
			}
			var got []Packet
			var p Packet
			for {
				err := f.Next(&p)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				q := p
				q.Data = slices.Clone(p.Data)
				got = append(got, q)
			}
			if len(got) != len(want) {
				t.Fatalf("read %d packets, wrote %d", len(got), len(want))
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.N != uint64(i+1) || g.Link != w.Link || !g.Time.Equal(w.Time) || g.Len != w.Len || !bytes.Equal(g.Data, w.Data) {
					t.Errorf("packet %d: got n=%d %v %v len %d %d bytes; want %v %v len %d %d bytes",
						i+1, g.N, g.Link, g.Time, g.Len, len(g.Data), w.Link, w.Time, w.Len, len(w.Data))
				}
			}
		})
	}
}

func TestWriterCreateError(t *testing.T) {
	_, err := Create(filepath.Join(t.TempDir(), "no", "such", "dir.pcap"), LinkEthernet, 0, "")
	if err == nil {
		t.Fatal("no error for a file in a missing directory")
	}
}
