package export

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSpoolOrderBoundAndReopen: records come back in the order put, across
// segments; past the size bound put refuses; what a closed spool held is
// read by the next one opened on the directory; read-out segments are
// deleted; a second opener of a locked directory is refused.
func TestSpoolOrderBoundAndReopen(t *testing.T) {
	dir := t.TempDir()
	const limit = 3 << 20 // segments of 1 MiB
	s, err := openSpool(dir, limit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openSpool(dir, limit); err == nil {
		t.Error("a second spool opened on a locked directory")
	}
	value := make([]byte, 1000)
	at := time.Unix(1_700_000_000, 0)
	put := 0
	for s.put("t", fmt.Appendf(nil, "k%d", put), value, at.Add(time.Duration(put)*time.Millisecond)) {
		put++
	}
	if s.bytes > limit || put < 3000 || s.records != int64(put) {
		t.Fatalf("%d records put, %d bytes on disk, %d counted; bound %d", put, s.bytes, s.records, limit)
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "*.spool")); len(segs) < 3 {
		t.Errorf("%d segments for %d bytes", len(segs), s.bytes)
	}
	if got := s.oldest(); got != at.Unix() {
		t.Errorf("oldest %d, want %d", got, at.Unix())
	}
	var fr frame
	for i := range 1000 {
		if _, ok := s.next(&fr); !ok || string(fr.key) != fmt.Sprintf("k%d", i) || string(fr.topic) != "t" || len(fr.value) != 1000 {
			t.Fatalf("record %d: %q %q, %d bytes, ok %v", i, fr.topic, fr.key, len(fr.value), ok)
		}
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s, err = openSpool(dir, limit)
	if err != nil {
		t.Fatal(err)
	}
	// The first segment held 1000+ records read before the close: some
	// of its records are read again (at least once, never lost).
	first := -1
	n := 0
	for {
		_, ok := s.next(&fr)
		if !ok {
			break
		}
		var i int
		fmt.Sscanf(string(fr.key), "k%d", &i)
		if first < 0 {
			first = i
		} else if i != first+n {
			t.Fatalf("record %d after %d from %d: out of order", i, n, first)
		}
		n++
	}
	if first < 0 || first > 1000 || first+n != put || s.lost != 0 {
		t.Errorf("reopened: records %d..%d, want up to %d from at most 1000; %d lost", first, first+n, put, s.lost)
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "*.spool")); len(segs) != 0 || s.bytes != 0 || s.records != 0 {
		t.Errorf("read out: %d segments, %d bytes, %d records left", len(segs), s.bytes, s.records)
	}
	// Room again once read out.
	if !s.put("t", nil, value, at) {
		t.Error("put refused once the spool was read out")
	}
	s.close()
}

// TestSpoolDamaged: a segment cut mid-frame (a crash mid-write) gives its
// whole frames and counts the rest lost; a flipped byte fails the CRC.
func TestSpoolDamaged(t *testing.T) {
	dir := t.TempDir()
	s, err := openSpool(dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		s.put("t", fmt.Appendf(nil, "k%d", i), []byte("value"), time.Unix(1, 0))
	}
	s.close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.spool"))
	b, _ := os.ReadFile(segs[0])
	flen := len(b) / 10
	b = b[:len(b)-flen/2] // the last frame cut
	b[3*flen+20] ^= 0xff  // the fourth frame's bytes changed
	os.WriteFile(segs[0], b, 0o600)
	s, err = openSpool(dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if s.records != 3 {
		t.Errorf("%d records counted in the damaged segment, want the 3 before the damage", s.records)
	}
	var fr frame
	n := 0
	for _, ok := s.next(&fr); ok; _, ok = s.next(&fr) {
		n++
	}
	if n != 3 {
		t.Errorf("%d records read back, want 3", n)
	}
}
