package tlsdec

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/internal/fuzzing"
)

// FuzzKeyLog: any input reads without panicking; every line is counted
// at most once, as a key or malformed; malformed lines are placed by
// number only (their content is never kept).
func FuzzKeyLog(f *testing.F) {
	_, keylog := session(f, tls.VersionTLS13, 0, []string{"x"})
	f.Add(keylog)
	f.Add([]byte("CLIENT_RANDOM 00 11\n# c\n\n"))
	f.Add(bytes.Repeat([]byte("A"), 5000))
	f.Fuzz(func(t *testing.T, in []byte) {
		defer fuzzing.Input("FuzzKeyLog", in)()
		k := NewKeys()
		if err := k.Read(bytes.NewReader(in), "k"); err != nil {
			t.Fatal(err)
		}
		lines := bytes.Count(in, []byte("\n")) + 1
		if k.Lines+k.Malformed > lines {
			t.Fatalf("%d keys and %d malformed of %d lines", k.Lines, k.Malformed, lines)
		}
		for _, at := range k.MalformedAt {
			if !strings.HasPrefix(at, "k:") || strings.ContainsAny(at[2:], " \t") {
				t.Fatalf("a malformed line placed as %q", at)
			}
		}
		if all, _ := k.Sessions(); all > k.Lines {
			t.Fatalf("%d sessions from %d lines", all, k.Lines)
		}
	})
}

// FuzzSession: a session fed any bytes (the input split into records'
// worth for each direction by 2-byte lengths, a length of 0 a hole) never panics, never gives
// more application data than it was given bytes, and holds at most its
// bounds. Seeded with a real TLS 1.3 and TLS 1.2 session and their key
// logs.
func FuzzSession(f *testing.F) {
	for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		log, keylog := session(f, v, 0, []string{"ApiVersions", "Metadata"})
		var in []byte
		for _, c := range log {
			for d := c.data; len(d) > 0; {
				n := min(len(d), 0x7fff)
				in = binary.BigEndian.AppendUint16(in, uint16(n)|uint16(c.dir)<<15)
				in = append(in, d[:n]...)
				d = d[n:]
			}
		}
		f.Add(in, keylog)
	}
	f.Fuzz(func(t *testing.T, in, keylog []byte) {
		defer fuzzing.Input("FuzzSession", in, keylog)()
		k := NewKeys()
		k.Read(bytes.NewReader(keylog), "k")
		k.SetFinal(len(keylog)%2 == 0)
		s := NewSession(k, nil)
		total, out := 0, 0
		for len(in) >= 2 {
			h := binary.BigEndian.Uint16(in)
			d, n := Dir(h>>15), int(h&0x7fff)
			in = in[2:]
			if n == 0 {
				// A hole: 100 bytes of direction d lost.
				s.Gap(d, 100)
				continue
			}
			n = min(n, len(in))
			total += n
			out += len(s.Feed(d, in[:n]))
			in = in[n:]
			for i := range s.dir {
				if len(s.dir[i].buf) > 5+MaxRecord || len(s.dir[i].hs) > 4+maxHello {
					t.Fatalf("direction %d holds %d record and %d handshake bytes", i, len(s.dir[i].buf), len(s.dir[i].hs))
				}
			}
			if s.heldBytes > maxHeld {
				t.Fatalf("%d bytes held", s.heldBytes)
			}
			if s.Waiting() {
				dirs, plain := s.Retry()
				for i := range dirs {
					out += len(plain[i])
				}
			}
		}
		if out > total {
			t.Fatalf("%d bytes of application data from %d bytes", out, total)
		}
	})
}
