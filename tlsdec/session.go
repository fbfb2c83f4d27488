package tlsdec

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Record types.
const (
	typeCCS       = 20
	typeAlert     = 21
	typeHandshake = 22
	typeAppData   = 23
)

// Handshake message types.
const (
	hsClientHello         = 1
	hsServerHello         = 2
	hsNewSessionTicket    = 4
	hsEncryptedExtensions = 8
	hsFinished            = 20
	hsKeyUpdate           = 24
)

// Bounds against hostile streams.
const (
	// MaxRecord is the longest record payload accepted: 2^14 plus the
	// expansion TLS 1.2 allows (RFC 5246 6.2.3); a longer length is not
	// TLS, and the direction is given up.
	MaxRecord = 1<<14 + 2048
	// maxHello bounds a ClientHello, ServerHello or EncryptedExtensions
	// kept whole to be read; other handshake messages are skipped as
	// they pass, never kept.
	maxHello = 1 << 16
	// maxHeld bounds the raw bytes a session holds while it cannot tell
	// yet whether it has keys (a live key log that has not caught up).
	maxHeld = 256 << 10
)

// Dir is a direction of a connection: the client's, or the server's.
type Dir uint8

// Directions.
const (
	Client Dir = 0
	Server Dir = 1
)

// Info is what a connection's TLS says of itself, and how far kfsniff
// could decrypt it.
type Info struct {
	Version uint16 // the negotiated version (VersionTLS12, VersionTLS13), 0 if not seen
	Suite   uint16 // the negotiated cipher suite, 0 if not seen
	SNI     string // the server name the client asked for
	ALPN    string // the protocol negotiated
	// Decrypted: records of the connection were decrypted. NoKeys: the
	// key log holds no secret for its client random. Why says why a
	// connection was not (wholly) decrypted.
	Decrypted bool
	NoKeys    bool
	Why       string
	// Records decrypted, and AuthFailures: records that did not
	// authenticate (wrong keys, corrupted), each given up with its
	// direction.
	Records      int64
	AuthFailures int
	// KeyUpdates counts TLS 1.3 KeyUpdate messages followed.
	KeyUpdates int
	// Undecrypted counts the bytes of directions given up.
	Undecrypted int64
}

// Problem is told of what goes wrong on a session: its text never holds
// key material or key log lines.
type Problem func(text string)

// Session decrypts one TCP connection carrying TLS: Feed it each
// direction's bytes in order; it returns the application data.
type Session struct {
	keys    *Keys
	Info    Info
	problem Problem
	dir     [2]direction
	cr, sr  [32]byte
	haveCR  bool
	haveSR  bool
	// resolved: whether the key log has the session's keys is known;
	// passthrough: it has not, so the bytes go on undecrypted.
	// waiting: encrypted records came before their keys, from a key log
	// that may still give them (live): the bytes are held (Retry).
	resolved    bool
	passthrough bool
	waiting     bool
	sec         secrets
	suite       suite
	// TLS 1.2 resumption: what the ClientHello offered (its session ID,
	// the hash of its ticket) and the ServerHello's session ID.
	clientSID, ticket, serverSID string
	// held: the raw bytes fed before the keys were known, in order, for
	// the caller to take back if there are none (Passthrough).
	held      []heldBytes
	heldBytes int
}

type heldBytes struct {
	dir  Dir
	data []byte
}

// direction is the record layer of one direction.
type direction struct {
	buf []byte // a record's bytes not all there yet
	// hs: handshake message bytes being gathered; hsSkip: bytes of a
	// message not kept still to pass; hsType, hsLen: the message being
	// gathered.
	hs     []byte
	hsSkip int
	key    *recordKey // records are decrypted with key when set
	next   *recordKey // TLS 1.2: the key ChangeCipherSpec switches to
	// app: TLS 1.3 application traffic secret in use (KeyUpdate).
	app       []byte
	encrypted bool // TLS 1.2: ChangeCipherSpec seen
	failed    string
	// lost: a hole in an encrypted direction; the bytes that follow are
	// searched for the next record that authenticates (resync).
	// lostBytes counts the ciphertext bytes between the last record
	// read and where reading resumes; hole the plaintext bytes lost
	// once it has, for the caller (Hole); seqBefore the sequence number
	// at the hole.
	lost      bool
	lostBytes int64
	seqBefore uint64
	hole      int64
	work      int64  // bytes the tries after the hole decrypted
	plain     []byte // reused output
	inner     []byte // reused decryption room
}

// NewSession returns a session decrypting with keys; problem (may be nil)
// is told of failures.
func NewSession(keys *Keys, problem Problem) *Session {
	if problem == nil {
		problem = func(string) {}
	}
	return &Session{keys: keys, problem: problem}
}

// IsClientHello reports whether b begins with a TLS handshake record
// holding a ClientHello: how a connection's first bytes say it is TLS.
func IsClientHello(b []byte) bool {
	return len(b) >= 6 && b[0] == typeHandshake && b[1] == 3 && b[2] <= 4 && b[5] == hsClientHello
}

// Passthrough reports that the session has no keys: the caller takes the
// bytes held (Held) and gives the rest of the connection to whatever
// handles undecrypted TLS.
func (s *Session) Passthrough() bool { return s.passthrough }

// Held returns, once, the raw bytes fed before Passthrough, in order.
func (s *Session) Held() (dirs []Dir, data [][]byte) {
	for _, h := range s.held {
		dirs = append(dirs, h.dir)
		data = append(data, h.data)
	}
	s.held, s.heldBytes = nil, 0
	return dirs, data
}

// Feed takes the next bytes of direction d and returns the application
// data they complete (valid until the next Feed of d). After a hole in d
// call Gap instead.
func (s *Session) Feed(d Dir, data []byte) []byte {
	if s.passthrough {
		return nil
	}
	if !s.Info.Decrypted {
		// Until a record decrypts, the raw bytes are kept for the
		// caller to take back if none will (Passthrough).
		if s.heldBytes+len(data) > maxHeld {
			s.giveUp("the key log did not give this connection's keys in time", false)
			return nil
		}
		s.held = append(s.held, heldBytes{d, append([]byte(nil), data...)})
		s.heldBytes += len(data)
	}
	dir := &s.dir[d]
	dir.plain = dir.plain[:0]
	if s.waiting {
		return nil
	}
	if dir.failed != "" {
		s.Info.Undecrypted += int64(len(data))
		return nil
	}
	if dir.lost {
		dir.buf = append(dir.buf, data...)
		n, found := s.resync(d, dir.buf)
		dir.lostBytes += int64(n)
		rest := dir.buf[n:]
		if !found {
			dir.buf = dir.buf[:copy(dir.buf, rest)]
			if dir.lostBytes > maxResyncScan || len(dir.buf) > 2*(5+MaxRecord) || dir.work > maxResyncWork {
				s.Info.Undecrypted += dir.lostBytes + int64(len(dir.buf))
				s.fail(d, fmt.Sprintf("%d bytes lost, and no record after them authenticates", dir.lostBytes))
			}
			return nil
		}
		data = append([]byte(nil), rest...)
		dir.buf = dir.buf[:0]
	}
	// Records whole in data are read where they lie; a partial one is
	// gathered in buf.
	for len(data) > 0 && dir.failed == "" && !s.passthrough && !s.waiting {
		if len(dir.buf) > 0 || len(data) < 5 {
			need := 5
			if len(dir.buf) >= 5 {
				need = 5 + int(binary.BigEndian.Uint16(dir.buf[3:5]))
			}
			n := min(need-len(dir.buf), len(data))
			dir.buf = append(dir.buf, data[:n]...)
			data = data[n:]
			if len(dir.buf) == 5 {
				if !s.header(d, dir.buf) {
					return dir.plain
				}
				if binary.BigEndian.Uint16(dir.buf[3:5]) > 0 {
					continue
				}
			}
			if len(dir.buf) >= 5 && len(dir.buf) == 5+int(binary.BigEndian.Uint16(dir.buf[3:5])) {
				s.record(d, dir.buf)
				dir.buf = dir.buf[:0]
			}
			continue
		}
		if !s.header(d, data) {
			return dir.plain
		}
		n := 5 + int(binary.BigEndian.Uint16(data[3:5]))
		if n > len(data) {
			dir.buf = append(dir.buf[:0], data...)
			return dir.plain
		}
		s.record(d, data[:n])
		data = data[n:]
	}
	return dir.plain
}

// header checks a record header: a type TLS has, a version 3.x, a length
// within MaxRecord. A direction whose header is not TLS is given up.
func (s *Session) header(d Dir, h []byte) bool {
	t, n := h[0], binary.BigEndian.Uint16(h[3:5])
	if t < typeCCS || t > typeAppData || h[1] != 3 || n > MaxRecord {
		s.fail(d, fmt.Sprintf("not a TLS record header (type %d, version %d.%d, length %d)", t, h[1], h[2], n))
		return false
	}
	return true
}

// Bounds of the search for the next record after a hole.
const (
	// maxResyncScan is how many bytes after a hole are searched for a
	// record that authenticates before the direction is given up.
	maxResyncScan = 4 << 20
	// maxResyncTries is how many sequence numbers are tried for a
	// candidate record, from the fewest records the hole can hold; and
	// maxResyncWork how many bytes all the tries after one hole may
	// decrypt (bytes crafted to look like record headers everywhere
	// must not make a search cost more).
	maxResyncTries = 256
	maxResyncWork  = 64 << 20
)

// Gap says n bytes of direction d were lost. Once records of the
// connection were decrypted, the bytes that follow are searched for the
// next record that authenticates under the direction's key, trying the
// sequence numbers the lost bytes can have held (Hole then says how many
// plaintext bytes were lost); otherwise, and when none is found within
// 4 MiB, the direction is given up.
func (s *Session) Gap(d Dir, n int) {
	dir := &s.dir[d]
	if s.passthrough || dir.failed != "" {
		return
	}
	if dir.key == nil || !s.Info.Decrypted {
		s.fail(d, fmt.Sprintf("%d bytes lost: the records after them cannot be decrypted", n))
		return
	}
	if !dir.lost {
		dir.lost, dir.lostBytes, dir.seqBefore, dir.work = true, 0, dir.key.seq, 0
		// A partial record or handshake message before the hole is
		// lost with it.
		dir.lostBytes += int64(len(dir.buf))
		dir.buf, dir.hs, dir.hsSkip = dir.buf[:0], dir.hs[:0], 0
	}
	dir.lostBytes += int64(n)
}

// Hole returns, once, how many plaintext bytes of direction d a hole
// took, when reading resumed after it (0 if none): the caller's framing
// takes it as a gap before the plaintext Feed returned.
func (s *Session) Hole(d Dir) int64 {
	h := s.dir[d].hole
	s.dir[d].hole = 0
	return h
}

// resync searches buf (the bytes after a hole, gathered) for the next
// record that authenticates, and returns how many bytes of buf were
// searched past (and whether it found one: then buf[n:] begins with it
// and the key's sequence number is set for it).
func (s *Session) resync(d Dir, buf []byte) (int, bool) {
	dir := &s.dir[d]
	k := dir.key
	overhead := int64(5 + k.aead.Overhead())
	if s.tls13() {
		overhead++ // the inner content type
	} else if k.explicit {
		overhead += 8
	}
	for i := 0; i+5 <= len(buf); i++ {
		h := buf[i:]
		typ, n := h[0], int(binary.BigEndian.Uint16(h[3:5]))
		if typ < typeAlert || typ > typeAppData || h[1] != 3 || h[2] != 3 || n > MaxRecord || n < k.aead.Overhead() {
			continue
		}
		if s.tls13() && typ != typeAppData {
			continue
		}
		if i+5+n > len(buf) {
			return i, false // a candidate not all there yet
		}
		var hdr [5]byte
		copy(hdr[:], h[:5])
		gone := dir.lostBytes + int64(i)
		// The fewest and the most records the lost bytes can have been.
		fewest, most := uint64(gone/(5+MaxRecord)), uint64(gone/overhead)
		for r := fewest; r <= most && r < fewest+maxResyncTries; r++ {
			if dir.work += int64(n); dir.work > maxResyncWork {
				return i, false
			}
			k.seq = dir.seqBefore + r
			out, ok := k.open(dir.inner[:0], hdr, h[5:5+n])
			if !ok {
				continue
			}
			dir.inner = out[:0]
			k.seq-- // record reads it again
			lostRecords := int64(k.seq - dir.seqBefore)
			dir.hole = max(0, gone-lostRecords*overhead)
			dir.lost = false
			s.problem(fmt.Sprintf("TLS %s: %d bytes lost (%d records): decryption resumed at the next record", dirName(d), gone, lostRecords))
			return i, true
		}
		k.seq = dir.seqBefore
	}
	return max(0, len(buf)-4), false
}

func (s *Session) fail(d Dir, why string) {
	dir := &s.dir[d]
	if dir.failed != "" {
		return
	}
	dir.failed = why
	dir.buf, dir.hs = nil, nil
	if s.Info.Why == "" {
		s.Info.Why = why
	}
	s.problem(fmt.Sprintf("TLS %s: %s", dirName(d), why))
}

func dirName(d Dir) string {
	if d == Client {
		return "client->server"
	}
	return "server->client"
}

// giveUp ends decryption before any record was decrypted, for want of
// keys (noKeys) or of a way to use them: the caller passes the connection
// through.
func (s *Session) giveUp(why string, noKeys bool) {
	s.passthrough, s.resolved = true, true
	s.Info.NoKeys, s.Info.Why = noKeys, why
	if !noKeys {
		s.problem("TLS: " + why)
	}
}

// record handles one whole record r (header and payload).
func (s *Session) record(d Dir, r []byte) {
	dir := &s.dir[d]
	var hdr [5]byte
	copy(hdr[:], r[:5])
	payload := r[5:]
	typ := hdr[0]
	if dir.key == nil && dir.encrypted && typ != typeCCS {
		// TLS 1.2 after ChangeCipherSpec, without keys.
		switch {
		case !s.resolved && !s.keys.Final():
			s.waiting = true
		case !s.Info.Decrypted:
			s.giveUp("no keys for this connection's client random in the key log", true)
		default:
			s.fail(d, "encrypted records without keys")
		}
		return
	}
	if dir.key != nil && (typ == typeAppData || !s.tls13() && typ != typeCCS) {
		out, ok := dir.key.open(dir.inner[:0], hdr, payload)
		if !ok {
			s.Info.AuthFailures++
			why := fmt.Sprintf("record %d does not authenticate (wrong keys, or corrupted)", dir.key.seq)
			if !s.Info.Decrypted {
				s.giveUp(dirName(d)+" "+why, false)
				return
			}
			s.fail(d, why)
			return
		}
		dir.inner = out[:0]
		s.Info.Records++
		if !s.Info.Decrypted {
			s.Info.Decrypted = true
			s.held, s.heldBytes = nil, 0
		}
		if s.tls13() {
			// The inner type is the last non-zero byte (RFC 8446 5.2).
			i := len(bytes.TrimRight(out, "\x00")) - 1
			if i < 0 {
				s.fail(d, "a record with no inner content type")
				return
			}
			typ, out = out[i], out[:i]
		}
		switch typ {
		case typeAppData:
			dir.plain = append(dir.plain, out...)
		case typeHandshake:
			s.handshake(d, out)
		}
		return
	}
	switch typ {
	case typeHandshake:
		s.handshake(d, payload)
	case typeCCS:
		if !s.tls13() && s.Info.Version != 0 {
			dir.encrypted = true
			dir.key, dir.next = dir.next, nil
		}
	case typeAppData:
		if !s.resolved {
			// The keys may have come since the ServerHello (a followed
			// key log): then this record is read with them.
			s.resolve()
			switch {
			case !s.resolved && !s.keys.Final():
				s.waiting = true
				return
			case s.passthrough:
				return
			case dir.key != nil:
				s.record(d, r)
				return
			}
		}
		if !s.Info.Decrypted {
			s.giveUp("encrypted records before the keys could be known (a handshake not captured, or early data)", false)
			return
		}
		s.fail(d, "encrypted records without keys")
	}
}

func (s *Session) tls13() bool { return s.Info.Version == VersionTLS13 }

// handshake gathers handshake messages from a record's (decrypted)
// payload p: those read are kept whole (bounded), the rest skipped.
func (s *Session) handshake(d Dir, p []byte) {
	dir := &s.dir[d]
	for len(p) > 0 {
		if dir.hsSkip > 0 {
			n := min(dir.hsSkip, len(p))
			dir.hsSkip -= n
			p = p[n:]
			continue
		}
		if len(dir.hs) < 4 {
			n := min(4-len(dir.hs), len(p))
			dir.hs = append(dir.hs, p[:n]...)
			p = p[n:]
			if len(dir.hs) < 4 {
				return
			}
		}
		typ := dir.hs[0]
		n := int(dir.hs[1])<<16 | int(dir.hs[2])<<8 | int(dir.hs[3])
		switch typ {
		case hsClientHello, hsServerHello, hsEncryptedExtensions, hsKeyUpdate, hsFinished, hsNewSessionTicket:
			if n > maxHello {
				s.fail(d, fmt.Sprintf("handshake message %d of %d bytes, over the bound", typ, n))
				return
			}
		default:
			dir.hs = dir.hs[:0]
			dir.hsSkip = n
			continue
		}
		k := min(4+n-len(dir.hs), len(p))
		dir.hs = append(dir.hs, p[:k]...)
		p = p[k:]
		if len(dir.hs) < 4+n {
			return
		}
		s.message(d, typ, dir.hs[4:])
		dir.hs = dir.hs[:0]
		if dir.failed != "" || s.passthrough {
			return
		}
	}
}

// message handles one whole handshake message of type typ, body b.
func (s *Session) message(d Dir, typ byte, b []byte) {
	switch {
	case typ == hsClientHello && d == Client:
		s.clientHello(b)
	case typ == hsServerHello && d == Server:
		s.serverHello(b)
	case typ == hsEncryptedExtensions && d == Server:
		if ext, ok := extensions(b); ok { // EncryptedExtensions
			if a, ok := alpnOf(ext); ok {
				s.Info.ALPN = a
			}
		}
	case typ == hsNewSessionTicket && d == Server && !s.tls13():
		// TLS 1.2 (RFC 5077): lifetime, then the ticket.
		if len(b) >= 6 && s.sec.master != nil {
			if t, ok := vec16(b[4:]); ok && len(t) == 0 {
				s.keys.remember("t"+ticketID(b[6:]), s.sec.master)
			}
		}
	case typ == hsFinished && s.tls13():
		// This direction's records are under its application traffic
		// secret from here.
		dir := &s.dir[d]
		secret := s.sec.cts0
		if d == Server {
			secret = s.sec.sts0
		}
		if secret == nil {
			s.fail(d, "the key log has the handshake secrets but not the application traffic secret")
			return
		}
		dir.app = secret
		dir.key = s.suite.key13(secret)
	case typ == hsKeyUpdate && s.tls13():
		dir := &s.dir[d]
		if dir.app == nil {
			s.fail(d, "KeyUpdate before Finished")
			return
		}
		dir.app = s.suite.expandLabel(dir.app, "traffic upd", s.suite.hashLen())
		dir.key = s.suite.key13(dir.app)
		s.Info.KeyUpdates++
	}
}

// clientHello reads the client random, SNI and ALPN offered.
func (s *Session) clientHello(b []byte) {
	if len(b) < 34 || s.haveCR {
		return
	}
	copy(s.cr[:], b[2:34])
	s.haveCR = true
	r, ok := vec8(b[34:]) // session id
	if !ok {
		return
	}
	s.clientSID = string(b[35 : len(b)-len(r)])
	if r, ok = vec16(r); !ok { // cipher suites
		return
	}
	if r, ok = vec8(r); !ok { // compression methods
		return
	}
	ext, ok := extensions(r)
	if !ok {
		return
	}
	if sni, ok := ext[0]; ok {
		s.Info.SNI = sniOf(sni)
	}
	if t, ok := ext[35]; ok && len(t) > 0 {
		s.ticket = "t" + ticketID(t)
	}
	if s.keys.Final() && !s.keys.Has(s.cr) && s.keys.resumed(s.ticket) == nil && s.keys.resumed("s"+s.clientSID) == nil &&
		!s.keys.hasSessionIDs() {
		s.giveUp("no keys for this connection's client random in the key log", true)
	}
}

// helloRetry is the random of a HelloRetryRequest (RFC 8446 4.1.3).
var helloRetry = [32]byte{0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C}

// serverHello reads the version, suite and server random, and makes the
// keys.
func (s *Session) serverHello(b []byte) {
	if len(b) < 38 {
		return
	}
	var sr [32]byte
	copy(sr[:], b[2:34])
	if sr == helloRetry {
		return // a second ClientHello and the real ServerHello follow
	}
	s.sr, s.haveSR = sr, true
	version := binary.BigEndian.Uint16(b)
	r, ok := vec8(b[34:]) // session id
	if !ok || len(r) < 3 {
		return
	}
	s.serverSID = string(b[35 : len(b)-len(r)])
	s.Info.Suite = binary.BigEndian.Uint16(r)
	r = r[3:]
	if ext, ok := extensions(r); ok {
		if v, ok := ext[43]; ok && len(v) == 2 {
			version = binary.BigEndian.Uint16(v)
		}
		if a, ok := alpnOf(ext); ok {
			s.Info.ALPN = a
		}
	}
	s.Info.Version = version
	if version != VersionTLS12 && version != VersionTLS13 {
		s.giveUp(fmt.Sprintf("%s is not decrypted (TLS 1.2 and 1.3 are)", VersionName(version)), false)
		return
	}
	st, ok := suites[s.Info.Suite]
	if !ok || (version == VersionTLS13) != (s.Info.Suite>>8 == 0x13) {
		s.giveUp(fmt.Sprintf("cipher suite %s is not decrypted (AEAD suites are: AES-GCM, ChaCha20-Poly1305)", SuiteName(s.Info.Suite)), false)
		return
	}
	s.suite = st
	s.resolve()
}

// resolve looks the session's keys up once the ServerHello said how to
// use them, or gives up if the key log is final and has none.
func (s *Session) resolve() {
	if s.resolved || !s.haveCR || !s.haveSR {
		if !s.haveCR && s.keys.Final() {
			s.giveUp("the ClientHello was not captured: the session cannot be found in the key log", true)
		}
		return
	}
	sec, ok := s.keys.lookup(s.cr)
	if !s.tls13() && sec.master == nil && s.serverSID != "" && s.serverSID == s.clientSID {
		// A resumed TLS 1.2 session: by its ticket, or its session ID.
		if m := s.keys.resumed(s.ticket); m != nil && s.ticket != "" {
			sec.master, ok = m, true
		} else if m := s.keys.resumed("s" + s.serverSID); m != nil {
			sec.master, ok = m, true
		}
	}
	if !s.tls13() && sec.master == nil && s.serverSID != "" {
		// The older NSS line: the master secret by the session ID the
		// server gave (full handshake or resumption).
		if m := s.keys.bySessionID(s.serverSID); m != nil {
			sec.master, ok = m, true
		}
	}
	// TLS 1.3 needs the handshake secrets, and the application ones from
	// the Finished on: a client writes those after the server's Finished,
	// so a followed key log may not hold them yet and its session waits
	// for all four.
	tls13 := sec.chts != nil && sec.shts != nil && (sec.cts0 != nil && sec.sts0 != nil || s.keys.Final())
	usable := ok && (s.tls13() && tls13 || !s.tls13() && sec.master != nil)
	if !usable {
		if s.keys.Final() {
			s.giveUp("no keys for this connection's client random in the key log", true)
		}
		return
	}
	s.resolved, s.sec = true, sec
	if s.tls13() {
		s.dir[Client].key = s.suite.key13(sec.chts)
		s.dir[Server].key = s.suite.key13(sec.shts)
		return
	}
	if s.serverSID != "" {
		s.keys.remember("s"+s.serverSID, sec.master)
	}
	c, sv := s.suite.keys12(sec.master, s.cr, s.sr)
	for i, k := range []*recordKey{c, sv} {
		dir := &s.dir[i]
		if dir.encrypted {
			dir.key = k
		} else {
			dir.next = k
		}
	}
}

// Poll retries finding the keys of a session that waits for them (a live
// key log read again); false once it gave up for want of them.
func (s *Session) Poll() bool {
	if !s.resolved {
		s.resolve()
	}
	return !s.passthrough
}

// Waiting reports that the session holds bytes until its keys come
// (Retry).
func (s *Session) Waiting() bool { return s.waiting && !s.passthrough }

// HeldBytes is how many raw bytes the session holds (until a record
// decrypts, or its keys come).
func (s *Session) HeldBytes() int { return s.heldBytes }

// Abandon gives up waiting for keys (a bound reached, the capture
// ended): the caller passes the connection through (Passthrough, Held);
// it counts as without keys (those it has, if any, came incomplete).
func (s *Session) Abandon(why string) {
	if !s.passthrough {
		s.giveUp(why, true)
	}
}

// Retry looks again for the keys of a waiting session (the key log has
// grown, or is now final): found, the bytes held are decrypted, and their
// application data returned in order with their directions; if the key
// log is final and still has none, the session gives up (Passthrough).
func (s *Session) Retry() (dirs []Dir, plain [][]byte) {
	if !s.Waiting() {
		return nil, nil
	}
	s.keys.Refresh()
	if !s.keys.Has(s.cr) {
		if s.keys.Final() {
			s.giveUp("no keys for this connection's client random in the key log", true)
		}
		return nil, nil
	}
	ns := NewSession(s.keys, s.problem)
	held := s.held
	for _, h := range held {
		if p := ns.Feed(h.dir, h.data); len(p) > 0 {
			dirs = append(dirs, h.dir)
			plain = append(plain, append([]byte(nil), p...))
		}
	}
	if ns.waiting && !s.keys.Final() {
		return nil, nil // the key log has some of its keys, not all yet
	}
	*s = *ns
	return dirs, plain
}

// ticketID names a session ticket by its SHA-256 (tickets are long).
func ticketID(t []byte) string {
	h := sha256.Sum256(t)
	return string(h[:])
}

func vec8(b []byte) ([]byte, bool) {
	if len(b) < 1 || len(b) < 1+int(b[0]) {
		return nil, false
	}
	return b[1+int(b[0]):], true
}

func vec16(b []byte) ([]byte, bool) {
	if len(b) < 2 {
		return nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return nil, false
	}
	return b[2+n:], true
}

// extensions reads an extensions block (a 16-bit length, then type,
// length, data): by type, the first of each.
func extensions(b []byte) (map[uint16][]byte, bool) {
	if len(b) < 2 {
		return nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return nil, false
	}
	b = b[2 : 2+n]
	m := make(map[uint16][]byte)
	for len(b) >= 4 {
		t, l := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if len(b) < 4+l {
			return m, false
		}
		if _, dup := m[t]; !dup {
			m[t] = b[4 : 4+l]
		}
		b = b[4+l:]
	}
	return m, true
}

// sniOf returns the host name of a server_name extension.
func sniOf(b []byte) string {
	if len(b) < 2 {
		return ""
	}
	b = b[2:]
	for len(b) >= 3 {
		t, l := b[0], int(binary.BigEndian.Uint16(b[1:]))
		if len(b) < 3+l {
			return ""
		}
		if t == 0 {
			return string(b[3 : 3+l])
		}
		b = b[3+l:]
	}
	return ""
}

// alpnOf returns the protocol of an ALPN extension with one (a server's
// choice).
func alpnOf(ext map[uint16][]byte) (string, bool) {
	b, ok := ext[16]
	if !ok || len(b) < 3 {
		return "", false
	}
	l := int(b[2])
	if len(b) < 3+l {
		return "", false
	}
	return string(b[3 : 3+l]), true
}
