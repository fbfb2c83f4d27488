package tlsdec

import (
	"bytes"
	"crypto/tls"
	"strings"
	"testing"
)

// TestHostileRecords: a record longer than TLS allows gives the
// direction up without gathering it; a handshake message claiming more
// than the bound is given up; a real ClientHello cut into one-byte
// records is still read; a flood of empty records holds nothing.
func TestHostileRecords(t *testing.T) {
	keys := NewKeys()
	keys.SetFinal(false) // keep the sessions going whatever the keys
	t.Run("huge record", func(t *testing.T) {
		s := NewSession(keys, nil)
		s.Feed(Client, []byte{typeHandshake, 3, 1, 0xff, 0xff, hsClientHello})
		if !strings.Contains(s.Failed(Client), "not a TLS record header") || len(s.dir[Client].buf) > 5 {
			t.Errorf("failed %q, %d bytes gathered", s.Failed(Client), len(s.dir[Client].buf))
		}
	})
	t.Run("huge handshake message", func(t *testing.T) {
		s := NewSession(keys, nil)
		rec := []byte{typeHandshake, 3, 1, 0, 4, hsClientHello, 0xff, 0xff, 0xff}
		s.Feed(Client, rec)
		if !strings.Contains(s.Failed(Client), "over the bound") || cap(s.dir[Client].hs) > 64 {
			t.Errorf("failed %q, %d bytes room", s.Failed(Client), cap(s.dir[Client].hs))
		}
	})
	t.Run("fragmented ClientHello", func(t *testing.T) {
		log, _ := session(t, tls.VersionTLS13, 0, []string{"x"})
		hello := log[0].data // the ClientHello record
		body := hello[5:]
		var frag []byte
		for _, b := range body {
			frag = append(frag, typeHandshake, 3, 1, 0, 1, b)
		}
		s := NewSession(keys, nil)
		for i := 0; i < len(frag); i += 3 {
			s.Feed(Client, frag[i:min(i+3, len(frag))])
		}
		if s.Info.SNI != "kafka.test" || s.Failed(Client) != "" {
			t.Errorf("SNI %q, failed %q", s.Info.SNI, s.Failed(Client))
		}
	})
	t.Run("flood of empty records", func(t *testing.T) {
		s := NewSession(keys, nil)
		empty := bytes.Repeat([]byte{typeAlert, 3, 3, 0, 0}, 1<<16)
		for i := 0; i < 16; i++ {
			s.Feed(Server, empty)
		}
		if len(s.dir[Server].buf) != 0 || s.heldBytes > maxHeld {
			t.Errorf("%d bytes gathered, %d held", len(s.dir[Server].buf), s.heldBytes)
		}
	})
}

// Failed returns why direction d is no longer decrypted ("" while it is).
func (s *Session) Failed(d Dir) string { return s.dir[d].failed }
