package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/tlsdec"
)

func readAll(t *testing.T, name string) []capture.Packet {
	t.Helper()
	f, err := capture.Open(name, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ps []capture.Packet
	for {
		var p capture.Packet
		if f.Next(&p) != nil {
			return ps
		}
		p.Data = bytes.Clone(p.Data)
		ps = append(ps, p)
	}
}

// TestSpoolRing feeds a real client's capture through a spool of 32 KiB:
// its files never hold more than that (checked after every packet), and
// what it saves is exactly the input's last packets, the rest counted as
// dropped.
func TestSpoolRing(t *testing.T) {
	in := readAll(t, fixture("recorded-kgo-kfake-group.pcap"))
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	s, err := newSpool(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.limit, s.seg = 32<<10, 4<<10
	var inBytes int64
	for i := range in {
		inBytes += int64(len(in[i].Data))
		if err := s.WritePacket(&in[i]); err != nil {
			t.Fatal(err)
		}
		if err := s.io.sync(); err != nil { // the files as written so far
			t.Fatal(err)
		}
		if n := dirSize(tmp); n > s.limit {
			t.Fatalf("after packet %d the spool's files hold %d bytes, more than %d", i+1, n, s.limit)
		}
	}
	if inBytes < 2*s.limit {
		t.Fatalf("the input has %d bytes: too few for a 32 KiB spool", inBytes)
	}
	out := filepath.Join(t.TempDir(), "saved.pcapng")
	msg, err := s.save(out)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, out)
	kept, _, _, dropped := s.state()
	if int64(len(got)) != kept || kept+dropped != int64(len(in)) || dropped == 0 {
		t.Fatalf("saved %d, kept %d, dropped %d of %d packets", len(got), kept, dropped, len(in))
	}
	tail := in[len(in)-len(got):]
	for i := range got {
		if !got[i].Time.Equal(tail[i].Time) || !bytes.Equal(got[i].Data, tail[i].Data) || got[i].Len != tail[i].Len {
			t.Fatalf("saved packet %d is not the input's packet %d", i+1, len(in)-len(got)+i+1)
		}
	}
	t.Logf("%s", msg)
	s.remove()
	if n := dirSize(tmp); n != 0 {
		t.Errorf("%d bytes left in $TMPDIR", n)
	}
}

// TestSpoolSavesKeyLog: what `w` saves from a TLS capture analysed with
// its key log carries the key log (a Decryption Secrets Block), so that
// kfsniff -r reads the saved file alone decrypted, as with --tls-keylog.
func TestSpoolSavesKeyLog(t *testing.T) {
	base := tlsFixtures(t)[0]
	keys := tlsdec.NewKeys()
	kf, err := os.Open(base + ".keylog")
	if err != nil {
		t.Fatal(err)
	}
	err = keys.Read(kf, base+".keylog")
	kf.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	s, err := newSpool(16, keys)
	if err != nil {
		t.Fatal(err)
	}
	defer s.remove()
	in := readAll(t, base+".pcap")
	for i := range in {
		s.WritePacket(&in[i])
	}
	out := filepath.Join(t.TempDir(), "saved.pcapng")
	if _, err := s.save(out); err != nil {
		t.Fatal(err)
	}
	f, err := capture.Open(out, 0)
	if err != nil {
		t.Fatal(err)
	}
	secrets := f.Secrets()
	f.Close()
	if len(secrets) != 1 || secrets[0].Type != capture.SecretsTLSKeyLog || !bytes.Equal(secrets[0].Data, keys.AppendNSS(nil)) {
		t.Fatalf("the saved file's secrets: %d blocks, not the key log", len(secrets))
	}
	saved := reportJSON(t, "-r", out)
	withKeys := reportJSON(t, "-r", base+".pcap", "--tls-keylog", base+".keylog")
	delete(saved, "capture")
	delete(withKeys, "capture")
	if !reflect.DeepEqual(saved, withKeys) {
		t.Errorf("the saved file read alone differs from the capture read with its key log")
	}
}

// state is what the spool keeps now: packets, their time span, and how
// many older ones were dropped.
func (s *spool) state() (packets int64, first, last time.Time, dropped int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.segs {
		if g.packets == 0 {
			continue
		}
		if packets == 0 {
			first = g.first
		}
		packets += g.packets
		last = g.last
	}
	return packets, first, last, s.dropped
}

// TestSpoolWritesOffCapture: the spool's disk writes run on a goroutine
// of their own: while that goroutine is stuck (here on a pipe nobody
// reads, as on a disk the kernel throttles), the capture's goroutine
// goes on handing packets to the spool, and once the writes resume
// every packet is saved, in order.
func TestSpoolWritesOffCapture(t *testing.T) {
	in := readAll(t, fixture("recorded-kgo-kfake-group.pcap"))
	t.Setenv("TMPDIR", t.TempDir())
	s, err := newSpool(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.remove()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s.io.ops <- spoolOp{f: w, buf: make([]byte, 1<<20)} // more than a pipe holds: stuck
	fed := make(chan error)
	go func() {
		for i := range in {
			if err := s.WritePacket(&in[i]); err != nil {
				fed <- err
				return
			}
		}
		fed <- nil
	}()
	select {
	case err := <-fed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the spool's caller waited for its stuck writes")
	}
	go io.Copy(io.Discard, r) // the writes resume
	out := filepath.Join(t.TempDir(), "saved.pcapng")
	if _, err := s.save(out); err != nil {
		t.Fatal(err)
	}
	w.Close()
	got := readAll(t, out)
	if len(got) != len(in) {
		t.Fatalf("saved %d of %d packets", len(got), len(in))
	}
	for i := range got {
		if !got[i].Time.Equal(in[i].Time) || !bytes.Equal(got[i].Data, in[i].Data) {
			t.Fatalf("saved packet %d differs", i+1)
		}
	}
}
