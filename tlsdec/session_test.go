package tlsdec

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// chunk is what one side wrote, as the wire carried it.
type chunk struct {
	dir  Dir
	data []byte
}

// tap records the bytes a conn writes, in order across both ends.
type tap struct {
	net.Conn
	dir Dir
	mu  *sync.Mutex
	log *[]chunk
}

func (t *tap) Write(p []byte) (int, error) {
	t.mu.Lock()
	*t.log = append(*t.log, chunk{t.dir, append([]byte(nil), p...)})
	t.mu.Unlock()
	return t.Conn.Write(p)
}

func testCert(t testing.TB) tls.Certificate {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kafka.test"},
		DNSNames: []string{"kafka.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}

// session runs a real crypto/tls client and server over a pipe: the
// client sends each of msgs, the server echoes it back upper-cased. It
// returns the wire bytes in order and the key log the client wrote.
func session(t testing.TB, version uint16, suite uint16, msgs []string) ([]chunk, []byte) {
	t.Helper()
	var (
		mu     sync.Mutex
		log    []chunk
		keylog bytes.Buffer
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	cert := testCert(t)
	scfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: version, MaxVersion: version, NextProtos: []string{"kafka"}}
	ccfg := &tls.Config{InsecureSkipVerify: true, ServerName: "kafka.test", MinVersion: version, MaxVersion: version,
		KeyLogWriter: &keylog, NextProtos: []string{"kafka"}}
	if suite != 0 {
		ccfg.CipherSuites = []uint16{suite}
	}
	cl := tls.Client(&tap{c, Client, &mu, &log}, ccfg)
	sv := tls.Server(&tap{s, Server, &mu, &log}, scfg)
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := sv.Read(buf)
			if err != nil {
				done <- nil
				return
			}
			if _, err := sv.Write(bytes.ToUpper(buf[:n])); err != nil {
				done <- err
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for _, m := range msgs {
		if _, err := cl.Write([]byte(m)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(cl, buf[:len(m)]); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	<-done
	sv.Close()
	mu.Lock()
	defer mu.Unlock()
	return log, keylog.Bytes()
}

func decrypt(t *testing.T, keys *Keys, log []chunk, split int) (client, server []byte, s *Session) {
	t.Helper()
	s = NewSession(keys, func(p string) { t.Log(p) })
	for _, c := range log {
		d := c.data
		for len(d) > 0 {
			n := len(d)
			if split > 0 {
				n = min(split, n)
			}
			p := s.Feed(c.dir, d[:n])
			if c.dir == Client {
				client = append(client, p...)
			} else {
				server = append(server, p...)
			}
			d = d[n:]
		}
	}
	return client, server, s
}

func TestDecryptCryptoTLS(t *testing.T) {
	msgs := []string{"ApiVersions request", "Metadata request", string(bytes.Repeat([]byte("produce "), 5000))}
	want := []byte{}
	for _, m := range msgs {
		want = append(want, m...)
	}
	for _, c := range []struct {
		name    string
		version uint16
		suite   uint16
	}{
		{"TLS 1.3", tls.VersionTLS13, 0},
		{"TLS 1.2 ECDHE-ECDSA AES-128-GCM", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		{"TLS 1.2 ECDHE-ECDSA AES-256-GCM", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384},
		{"TLS 1.2 ECDHE-ECDSA ChaCha20-Poly1305", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256},
	} {
		t.Run(c.name, func(t *testing.T) {
			log, keylog := session(t, c.version, c.suite, msgs)
			keys := NewKeys()
			if err := keys.Read(bytes.NewReader(keylog), "keys.log"); err != nil {
				t.Fatal(err)
			}
			keys.SetFinal(true)
			for _, split := range []int{0, 1, 7, 1000} {
				cl, sv, s := decrypt(t, keys, log, split)
				if !bytes.Equal(cl, want) || !bytes.Equal(sv, bytes.ToUpper(want)) {
					t.Fatalf("split %d: decrypted %d and %d bytes, want %d each (%+v)", split, len(cl), len(sv), len(want), s.Info)
				}
				if s.Info.Version != c.version || c.suite != 0 && s.Info.Suite != c.suite || s.Info.SNI != "kafka.test" || s.Info.ALPN != "kafka" || !s.Info.Decrypted {
					t.Errorf("info %+v", s.Info)
				}
			}
			if _, unused := keys.Sessions(); unused != 0 {
				t.Errorf("%d sessions unused", unused)
			}
		})
	}
}

// TestNoKeysPassesThrough: without the session's keys, or with wrong
// ones, or with a record corrupted, the session says so and gives the
// bytes back (before any record decrypted) or gives the direction up.
func TestNoKeysPassesThrough(t *testing.T) {
	log, keylog := session(t, tls.VersionTLS13, 0, []string{"hello", "again"})
	t.Run("missing", func(t *testing.T) {
		keys := NewKeys()
		keys.SetFinal(true)
		_, _, s := decrypt(t, keys, log, 0)
		if !s.Passthrough() || !s.Info.NoKeys {
			t.Fatalf("passthrough %v, info %+v", s.Passthrough(), s.Info)
		}
		dirs, data := s.Held()
		if len(dirs) == 0 || !bytes.Equal(data[0], log[0].data) {
			t.Error("the ClientHello was not given back")
		}
	})
	t.Run("wrong", func(t *testing.T) {
		bad := bytes.Clone(keylog)
		// Change the last hex digit of every secret.
		lines := bytes.Split(bad, []byte("\n"))
		for i, l := range lines {
			if len(l) > 0 {
				if l[len(l)-1] == '0' {
					l[len(l)-1] = '1'
				} else {
					l[len(l)-1] = '0'
				}
				lines[i] = l
			}
		}
		keys := NewKeys()
		keys.Read(bytes.NewReader(bytes.Join(lines, []byte("\n"))), "keys.log")
		keys.SetFinal(true)
		_, _, s := decrypt(t, keys, log, 0)
		if !s.Passthrough() || s.Info.NoKeys || s.Info.AuthFailures != 1 {
			t.Fatalf("passthrough %v, info %+v", s.Passthrough(), s.Info)
		}
	})
	t.Run("corrupted", func(t *testing.T) {
		keys := NewKeys()
		keys.Read(bytes.NewReader(keylog), "keys.log")
		keys.SetFinal(true)
		bad := make([]chunk, len(log))
		copy(bad, log)
		last := len(bad) - 1
		for bad[last].dir != Server || len(bad[last].data) < 40 {
			last--
		}
		bad[last].data = bytes.Clone(bad[last].data)
		bad[last].data[len(bad[last].data)-3] ^= 0x40
		_, _, s := decrypt(t, keys, bad, 0)
		if s.Passthrough() || s.Info.AuthFailures != 1 || s.Failed(Server) == "" || s.Failed(Client) != "" {
			t.Fatalf("info %+v, failed %q", s.Info, s.Failed(Server))
		}
	})
	t.Run("late keys", func(t *testing.T) {
		keys := NewKeys()
		s := NewSession(keys, nil)
		var got []byte
		for _, c := range log {
			got = append(got, s.Feed(c.dir, c.data)...)
		}
		if !s.Waiting() || len(got) != 0 {
			t.Fatalf("waiting %v with %d bytes", s.Waiting(), len(got))
		}
		keys.Read(bytes.NewReader(keylog), "keys.log")
		dirs, plain := s.Retry()
		var cl []byte
		for i, d := range dirs {
			if d == Client {
				cl = append(cl, plain[i]...)
			}
		}
		if string(cl) != "helloagain" {
			t.Fatalf("after the keys came: %q", cl)
		}
	})
}

func TestKeyLogLines(t *testing.T) {
	cr := "0102030405060708091011121314151617181920212223242526272829303132"
	sec := "aa" + string(bytes.Repeat([]byte("bb"), 47))
	in := "# comment\n\nCLIENT_RANDOM " + cr + " " + sec + "\nCLIENT_RANDOM zz " + sec + "\nEXPORTER_SECRET " + cr + " " + sec[:64] +
		"\n" + string(bytes.Repeat([]byte("x"), 5000)) + "\nCLIENT_TRAFFIC_SECRET_0 " + cr + " " + sec[:64]
	k := NewKeys()
	if err := k.Read(bytes.NewReader([]byte(in)), "keys.log"); err != nil {
		t.Fatal(err)
	}
	if k.Lines != 2 || k.Malformed != 2 || k.MalformedAt[0] != "keys.log:4" || k.MalformedAt[1] != "keys.log:6" {
		t.Errorf("lines %d, malformed %d at %v", k.Lines, k.Malformed, k.MalformedAt)
	}
	if all, unused := k.Sessions(); all != 1 || unused != 1 {
		t.Errorf("sessions %d, unused %d", all, unused)
	}
}

// TestHoleResync: a record lost from a real session (its bytes given as a
// hole): decryption resumes at the next record, found by trying the
// sequence numbers the hole can have held, and Hole says how many
// plaintext bytes were lost; a hole before any record decrypted, or one
// after which nothing authenticates, gives the direction up.
func TestHoleResync(t *testing.T) {
	msgs := []string{"first", "second", "third, lost", "fourth", "fifth"}
	for _, c := range []struct {
		name    string
		version uint16
		suite   uint16
	}{
		{"TLS 1.3", tls.VersionTLS13, 0},
		{"TLS 1.2 AES-GCM", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		{"TLS 1.2 ChaCha20-Poly1305", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256},
	} {
		t.Run(c.name, func(t *testing.T) {
			log, keylog := session(t, c.version, c.suite, msgs)
			keys := NewKeys()
			keys.Read(bytes.NewReader(keylog), "k")
			keys.SetFinal(true)
			s := NewSession(keys, nil)
			// The client's chunks after its handshake: one per message.
			var app []int
			for i, ch := range log {
				if ch.dir == Client && ch.data[0] == typeAppData {
					app = append(app, i)
				}
			}
			// (TLS 1.3's Finished goes with the ChangeCipherSpec.)
			lost := app[2] // "third, lost"
			var got []byte
			for i, ch := range log {
				if i == lost {
					s.Gap(Client, len(ch.data))
					continue
				}
				p := s.Feed(ch.dir, ch.data)
				if ch.dir == Client {
					if h := s.Hole(Client); h > 0 {
						got = append(got, fmt.Sprintf("[%d lost]", h)...)
					}
					got = append(got, p...)
				}
			}
			want := "firstsecond[11 lost]fourthfifth"
			if string(got) != want || s.Failed(Client) != "" {
				t.Errorf("got %q, want %q (failed %q)", got, want, s.Failed(Client))
			}
		})
	}
	t.Run("nothing authenticates", func(t *testing.T) {
		log, keylog := session(t, tls.VersionTLS13, 0, msgs)
		keys := NewKeys()
		keys.Read(bytes.NewReader(keylog), "k")
		keys.SetFinal(true)
		s := NewSession(keys, nil)
		for _, ch := range log {
			s.Feed(ch.dir, ch.data)
		}
		s.Gap(Client, 100)
		junk := bytes.Repeat([]byte{typeAppData, 3, 3, 0, 40}, 1<<20)
		s.Feed(Client, junk)
		if s.Failed(Client) == "" || len(s.dir[Client].buf) > 2*(5+MaxRecord) {
			t.Errorf("failed %q, %d bytes gathered", s.Failed(Client), len(s.dir[Client].buf))
		}
	})
}

// TestKeyLogSessionIDLines: the older NSS line for TLS 1.2, "RSA
// Session-ID:<hex> Master-Key:<hex>", which the Java agent
// extract-tls-secrets writes for TLS 1.2 (fixtures/pcaps/kafka/
// java-tls12.pcapng.gz decrypts with them): read by session ID, malformed
// ones counted, counted among the sessions, written back by AppendNSS.
func TestKeyLogSessionIDLines(t *testing.T) {
	sid := strings.Repeat("91ED", 16)
	mk := strings.Repeat("ab", 48)
	in := "RSA Session-ID:" + sid + " Master-Key:" + mk + " \n" + // the agent's trailing space
		"RSA Session-ID:" + sid + "Z Master-Key:" + mk + "\n" + // odd hex
		"RSA Session-ID:" + sid + " Master-Key:" + mk[:94] + "\n" + // a short master key
		"RSA Master-Key:" + mk + "\n"
	k := NewKeys()
	if err := k.Read(strings.NewReader(in), "agent.log"); err != nil {
		t.Fatal(err)
	}
	if k.Lines != 1 || k.Malformed != 3 {
		t.Errorf("lines %d, malformed %d at %v: want 1 and 3", k.Lines, k.Malformed, k.MalformedAt)
	}
	id, _ := hex.DecodeString(sid)
	if got := k.bySessionID(string(id)); hex.EncodeToString(got) != mk {
		t.Errorf("master by session ID %x, want %s", got, mk)
	}
	if all, unused := k.Sessions(); all != 1 || unused != 0 {
		t.Errorf("sessions %d, unused %d: want 1 used", all, unused)
	}
	back := NewKeys()
	if err := back.Read(bytes.NewReader(k.AppendNSS(nil)), "dsb"); err != nil || back.Lines != 1 || back.Malformed != 0 {
		t.Errorf("AppendNSS read back: %v, %d lines, %d malformed", err, back.Lines, back.Malformed)
	}
}

// TestKeysBetweenHelloAndRecords: a followed key log that gives a TLS 1.3
// session's keys after its ServerHello was read, before its first
// encrypted record: the records are decrypted with them, not given up as
// "encrypted records before the keys could be known".
func TestKeysBetweenHelloAndRecords(t *testing.T) {
	log, keylog := session(t, tls.VersionTLS13, 0, []string{"ApiVersions request"})
	keys := NewKeys() // not final: more lines may come
	s := NewSession(keys, func(p string) { t.Log(p) })
	var server []byte
	added := false
	for _, c := range log {
		for i := range c.data {
			if p := s.Feed(c.dir, c.data[i:i+1]); c.dir == Server {
				server = append(server, p...)
			}
			if s.Info.Version != 0 && !added {
				if err := keys.Read(bytes.NewReader(keylog), "keys.log"); err != nil {
					t.Fatal(err)
				}
				added = true
			}
		}
	}
	if s.Passthrough() || string(server) != "APIVERSIONS REQUEST" {
		t.Errorf("passthrough %v, server's application data %q (%+v)", s.Passthrough(), server, s.Info)
	}
}

// TestKeysHandshakeThenApplication: a followed key log that holds a TLS
// 1.3 session's handshake secrets when its records come, and its
// application secrets only later (a client writes those after the
// server's Finished): the session waits for all four, then decrypts
// everything, instead of giving a direction up at the Finished.
func TestKeysHandshakeThenApplication(t *testing.T) {
	log, keylog := session(t, tls.VersionTLS13, 0, []string{"ApiVersions request"})
	var hs, app []byte
	for _, l := range bytes.SplitAfter(keylog, []byte("\n")) {
		if bytes.Contains(l, []byte("HANDSHAKE_TRAFFIC_SECRET")) {
			hs = append(hs, l...)
		} else {
			app = append(app, l...)
		}
	}
	keys := NewKeys() // not final: more lines may come
	if err := keys.Read(bytes.NewReader(hs), "keys.log"); err != nil {
		t.Fatal(err)
	}
	s := NewSession(keys, func(p string) { t.Log(p) })
	var client, server []byte
	add := func(d Dir, p []byte) {
		if d == Client {
			client = append(client, p...)
		} else {
			server = append(server, p...)
		}
	}
	for i, c := range log {
		if i == len(log)/2 {
			if err := keys.Read(bytes.NewReader(app), "keys.log"); err != nil {
				t.Fatal(err)
			}
		}
		if s.Waiting() {
			dirs, plain := s.Retry()
			for j, d := range dirs {
				add(d, plain[j])
			}
		}
		add(c.dir, s.Feed(c.dir, c.data))
	}
	if s.Passthrough() || string(client) != "ApiVersions request" || string(server) != "APIVERSIONS REQUEST" {
		t.Errorf("passthrough %v, decrypted %q and %q (%+v)", s.Passthrough(), client, server, s.Info)
	}
}
