package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/fixtures/record"
)

// tlsFixtures are the TLS recordings (kgo against kfake, fixtures/record
// tlsrec.go): NAME.pcap, NAME.keylog, NAME-plain.pcap.
func tlsFixtures(t *testing.T) []string {
	keylogs, err := filepath.Glob(fixture(filepath.Join(record.TLSDir, "*.keylog")))
	if err != nil || len(keylogs) == 0 {
		t.Fatalf("no TLS fixtures (%v)", err)
	}
	var names []string
	for _, k := range keylogs {
		names = append(names, strings.TrimSuffix(k, ".keylog"))
	}
	return names
}

// onTheWire are the report's fields that differ between a TLS capture
// and its plaintext twin by the bytes on the wire: packet numbers and
// counts, bytes, capture times and latencies (the twin's bytes were
// written by the broker a few microseconds from their ciphertext's), and
// the TLS description itself.
var onTheWire = map[string]bool{
	"capture": true, "tcp_packets": true, "bytes_to_server": true, "bytes_to_client": true,
	"first_packet": true, "last_packet": true, "first_seen": true, "last_seen": true, "first": true, "last": true,
	"latency_ms": true, "tls": true, "tls_session": true, "packet": true, "time": true, "evidence": true,
}

func scrub(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k := range x {
			if onTheWire[k] {
				delete(x, k)
			} else {
				x[k] = scrub(x[k])
			}
		}
	case []any:
		for i := range x {
			x[i] = scrub(x[i])
		}
	}
	return v
}

func reportJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, errs := kfsniff(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// framesByConn is --frames' lines without packet numbers, times and
// latencies, each connection's in order (connections interleave
// differently in the twin: its times are not the ciphertext's).
func framesByConn(t *testing.T, args ...string) []string {
	t.Helper()
	code, out, errs := kfsniff(t, append(args, "--frames", "-v")...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	head := regexp.MustCompile(`^ *[0-9:]+ [0-9:.]+ (#[0-9]+) `)
	lat := regexp.MustCompile(` latency=[0-9.]+ms`)
	by := map[string][]string{}
	conn := ""
	for _, l := range strings.Split(out, "\n") {
		if m := head.FindStringSubmatch(l); m != nil {
			conn = m[1]
			l = lat.ReplaceAllString(l[len(m[0])-len(m[1])-1:], "")
		}
		by[conn] = append(by[conn], l)
	}
	var conns []string
	for c := range by {
		conns = append(conns, c)
	}
	sort.Strings(conns)
	var lines []string
	for _, c := range conns {
		lines = append(lines, by[c]...)
	}
	return lines
}

func firstDiff(a, b any, path string) string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return path
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range keys {
				if !yield(k) {
					return
				}
			}
		}) {
			if d := firstDiff(x[k], y[k], path+"."+k); d != "" {
				return d
			}
		}
		return ""
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return fmt.Sprintf("%s (lengths %d, %v)", path, len(x), b)
		}
		for i := range x {
			if d := firstDiff(x[i], y[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a, b) {
		return fmt.Sprintf("%s: %v vs %v", path, a, b)
	}
	return ""
}

// TestDecryptedEqualsPlaintextTwin: every TLS recording, decrypted with
// its client's key log, gives the report and the --frames -v of its
// plaintext twin (the same Kafka bytes as the broker read and wrote
// them), bytes on the wire aside; every connection is decrypted, with its
// version, suite and SNI.
//
// With two workers too: a resumed TLS 1.2 session learns its master
// secret from the connection that made it, and with connections spread
// by load the two ran on two workers at once: the resumed ones were
// decrypted or not by their race (3, 6 or 17 requests from run to run).
func TestDecryptedEqualsPlaintextTwin(t *testing.T) {
	for _, base := range tlsFixtures(t) {
		for _, w := range []string{"1", "2"} {
			t.Run(filepath.Base(base)+"/workers-"+w, func(t *testing.T) { decryptedEqualsTwin(t, base, w) })
		}
	}
}

func decryptedEqualsTwin(t *testing.T, base, workers string) {
	{
		{
			enc := reportJSON(t, "-r", base+".pcap", "--tls-keylog", base+".keylog", "--workers", workers)
			plain := reportJSON(t, "-r", base+"-plain.pcap")
			tlsSec, _ := enc["tls"].(map[string]any)
			conns, _ := enc["connections"].([]any)
			if tlsSec == nil || tlsSec["decrypted"] != float64(len(conns)) || tlsSec["connections"] != float64(len(conns)) ||
				tlsSec["auth_failures"] != float64(0) || tlsSec["unused_key_log_sessions"] != float64(0) || len(conns) == 0 {
				t.Fatalf("TLS section %v for %d connections", tlsSec, len(conns))
			}
			for _, c := range conns {
				s, _ := c.(map[string]any)["tls_session"].(map[string]any)
				if s == nil || s["decrypted"] != true || s["sni"] != record.TLSServerName ||
					!strings.HasPrefix(s["version"].(string), "TLS 1.") || s["cipher_suite"] == "" {
					t.Errorf("connection %v: tls_session %v", c.(map[string]any)["id"], s)
				}
			}
			if d := firstDiff(scrub(enc), scrub(plain), ""); d != "" {
				t.Errorf("the decrypted report differs from the plaintext twin's at %s", d)
			}
			ef := framesByConn(t, "-r", base+".pcap", "--tls-keylog", base+".keylog", "--workers", workers)
			pf := framesByConn(t, "-r", base+"-plain.pcap")
			if !slices.Equal(ef, pf) {
				for i := range min(len(ef), len(pf)) {
					if ef[i] != pf[i] {
						t.Errorf("--frames -v line %d differs:\n%s\n%s", i, ef[i], pf[i])
						break
					}
				}
				t.Errorf("--frames -v: %d lines decrypted, %d in the twin", len(ef), len(pf))
			}
		}
	}
}

// TestTLSWithoutKeys: without a key log a TLS capture says what it said
// before (TLS records, not decodable); with a key log for other sessions,
// a truncated one, or one whose secrets are wrong, each connection is
// counted and said, and no key log line is echoed.
func TestTLSWithoutKeys(t *testing.T) {
	base := fixture(filepath.Join(record.TLSDir, "tls-kgo-kfake-tls13-aes128gcm"))
	keylog, err := os.ReadFile(base + ".keylog")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(keylog)), "\n")
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Other sessions: another recording's key log.
	other := fixture(filepath.Join(record.TLSDir, "tls-kgo-kfake-tls12-ecdhe-aes128gcm.keylog"))
	// Wrong: every secret's last digit changed.
	var wrong []string
	for _, l := range lines {
		f := strings.Fields(l)
		last := f[2][len(f[2])-1]
		c := "0"
		if last == '0' {
			c = "1"
		}
		wrong = append(wrong, f[0]+" "+f[1]+" "+f[2][:len(f[2])-1]+c)
	}
	// Truncated: the first connection's lines whole, the next one's cut.
	truncated := strings.Join(lines[:4], "\n") + "\n" + lines[4][:len(lines[4])/2]
	for _, c := range []struct {
		name    string
		keylog  string
		want    []string
		decrypt float64
	}{
		{"none", "", []string{"TLS records on a Kafka connection: not decodable without keys"}, -1},
		{"other sessions", other, []string{"TLS: 6 connections, 0 decrypted; no keys for 6 TLS connections; key log lines for 6 other sessions unused"}, 0},
		{"wrong", write("wrong.keylog", strings.Join(wrong, "\n")+"\n"), []string{"6 records failed authentication (first: packet"}, 0},
		{"truncated", write("truncated.keylog", truncated), []string{"1 key log lines malformed", "TLS: 6 connections, 1 decrypted; no keys for 5 TLS connections"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"-r", base + ".pcap"}
			if c.keylog != "" {
				args = append(args, "--tls-keylog", c.keylog)
			}
			code, out, errs := kfsniff(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(out+errs, w) {
					t.Errorf("no %q in:\n%s%s", w, errs, out)
				}
			}
			for _, l := range lines {
				for _, f := range strings.Fields(l)[1:] {
					if strings.Contains(out+errs, f[:16]) {
						t.Errorf("a key log field is echoed")
					}
				}
			}
			if c.decrypt >= 0 {
				m := reportJSON(t, args...)
				if got := m["tls"].(map[string]any)["decrypted"]; got != c.decrypt {
					t.Errorf("decrypted %v, want %v", got, c.decrypt)
				}
			}
		})
	}
}

// TestTLSInHTMLAndInventory: a capture carrying its keys shows, in the
// HTML page, the TLS counts and each connection's session, and in the
// client inventory each client's TLS.
func TestTLSInHTMLAndInventory(t *testing.T) {
	path := fixture(filepath.Join(record.TLSDir, "tls-kgo-kfake-tls13-secrets.pcapng"))
	html := filepath.Join(t.TempDir(), "r.html")
	code, out, errs := kfsniff(t, "-r", path, "--html", html)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TLS decrypted", "TLS 1.3 TLS_AES_128_GCM_SHA256 SNI " + record.TLSServerName + " ALPN kafka, decrypted"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the HTML page lacks %q", want)
		}
	}
	if n := strings.Count(out, "     TLS: TLS 1.3 TLS_AES_128_GCM_SHA256\n"); n != 2 {
		t.Errorf("%d clients with their TLS in the inventory, want 2:\n%s", n, out)
	}
}

// TestTLSCorruptedRecord: one byte of one encrypted record flipped in a
// TLS recording (in its authentication tag): that record fails
// authentication, counted with its packet number, the rest of its
// direction is not decrypted (counted skipped as tls), and every other
// connection is decrypted as before.
func TestTLSCorruptedRecord(t *testing.T) {
	base := fixture(filepath.Join(record.TLSDir, "tls-kgo-kfake-tls13-aes128gcm"))
	pcap, err := os.ReadFile(base + ".pcap")
	if err != nil {
		t.Fatal(err)
	}
	// The pcap is gen's: little-endian, microseconds, Ethernet, IPv4,
	// TCP without options past the first packets' (header lengths read).
	var n, victim uint64
	for b := pcap[24:]; len(b) >= 16; {
		caplen := int(binary.LittleEndian.Uint32(b[8:]))
		n++
		frame := b[16 : 16+caplen]
		ihl := int(frame[14]&0x0f) * 4
		tcp := frame[14+ihl:]
		payload := tcp[int(tcp[12]>>4)*4:]
		// An application data record from the server after the first
		// connection's handshake: a packet from port 9092 of more than
		// 100 bytes that begins with a record header of type 23.
		if victim == 0 && n > 20 && binary.BigEndian.Uint16(tcp) == 9092 && len(payload) > 100 && payload[0] == 23 {
			victim = n
			payload[len(payload)-1] ^= 0x01
		}
		b = b[16+caplen:]
	}
	if victim == 0 {
		t.Fatal("no server record to corrupt")
	}
	bad := filepath.Join(t.TempDir(), "corrupted.pcap")
	if err := os.WriteFile(bad, pcap, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := kfsniff(t, "-r", bad, "--tls-keylog", base+".keylog")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if want := fmt.Sprintf("1 records failed authentication (first: packet %d", victim); !strings.Contains(out, want) {
		t.Errorf("no %q in:\n%s", want, out)
	}
	m := reportJSON(t, "-r", bad, "--tls-keylog", base+".keylog")
	tl := m["tls"].(map[string]any)
	if tl["decrypted"] != float64(6) || tl["auth_failures"] != float64(1) {
		t.Errorf("tls %v", tl)
	}
	skipped := m["totals"].(map[string]any)["skipped_bytes"].(map[string]any)
	if skipped["tls"] == nil || skipped["tls"].(float64) == 0 {
		t.Errorf("skipped bytes %v: want the rest of the direction counted as tls", skipped)
	}
}

// TestTLSJoinedMidConnection: a TLS recording cut to begin at its 25th
// packet, with its key log: the connections whose ClientHello came
// before are counted as joined mid-connection and say why they are not
// decrypted; the others are decrypted.
func TestTLSJoinedMidConnection(t *testing.T) {
	base := fixture(filepath.Join(record.TLSDir, "tls-kgo-kfake-tls13-aes128gcm"))
	pcap, err := os.ReadFile(base + ".pcap")
	if err != nil {
		t.Fatal(err)
	}
	cut := append([]byte(nil), pcap[:24]...)
	n := 0
	for b := pcap[24:]; len(b) >= 16; {
		l := 16 + int(binary.LittleEndian.Uint32(b[8:]))
		if n++; n >= 25 {
			cut = append(cut, b[:l]...)
		}
		b = b[l:]
	}
	path := filepath.Join(t.TempDir(), "cut.pcap")
	if err := os.WriteFile(path, cut, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := kfsniff(t, "-r", path, "--tls-keylog", base+".keylog")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"TLS: 4 connections, 4 decrypted; 2 more joined mid-connection (no ClientHello: their keys cannot be found); key log lines for 2 other sessions unused",
		"TLS records on a Kafka connection without its ClientHello (joined mid-connection): its keys cannot be found in the key log",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// TestTLSHoleResync: the packet carrying connection 6's second request
// (packet 120 of the TLS 1.3 recording) removed: decryption resumes at
// the next record, the hole is a gap of the plaintext it held (111
// bytes: 133 on the wire less one record's 22 bytes of TLS), the
// request's response is decoded unmatched as the connection's Fetch, and
// every later frame is decoded: 16 requests, as the recording's 17 less
// the one lost.
func TestTLSHoleResync(t *testing.T) {
	base := fixture(filepath.Join(record.TLSDir, "tls-kgo-kfake-tls13-aes128gcm"))
	pcap, err := os.ReadFile(base + ".pcap")
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), pcap[:24]...)
	n := 0
	for b := pcap[24:]; len(b) >= 16; {
		l := 16 + int(binary.LittleEndian.Uint32(b[8:]))
		if n++; n != 120 {
			out = append(out, b[:l]...)
		}
		b = b[l:]
	}
	path := filepath.Join(t.TempDir(), "hole.pcap")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	m := reportJSON(t, "-r", path, "--tls-keylog", base+".keylog")
	tot := m["totals"].(map[string]any)
	tl := m["tls"].(map[string]any)
	if tot["requests"] != float64(16) || tot["gaps"] != float64(1) || tot["lost_bytes"] != float64(111) || tot["unmatched_responses"] != float64(1) ||
		tl["decrypted"] != float64(6) || tl["auth_failures"] != float64(0) {
		t.Errorf("totals %v, tls %v", tot, tl)
	}
	_, text, _ := kfsniff(t, "-r", path, "--tls-keylog", base+".keylog")
	if !strings.Contains(text, "TLS client->server: 133 bytes lost (1 records): decryption resumed at the next record") {
		t.Errorf("the connection does not say decryption resumed:\n%s", text)
	}
}
