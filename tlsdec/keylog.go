// Package tlsdec decrypts TLS 1.2 and 1.3 connections captured on the
// wire with the secrets of an NSS key log (the format browsers, Go's
// tls.Config.KeyLogWriter, Python's SSLKEYLOGFILE, Node, OpenSSL and Java
// agents write): the record layer, the TLS 1.3 key schedule from traffic
// secrets and the TLS 1.2 PRF are here; the AEADs are Go's and
// golang.org/x/crypto's. It imports nothing of kfsniff's and does no I/O
// but reading a key log it is given.
package tlsdec

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"
)

// Key log labels (NSS key log format).
const (
	labelClientRandom = "CLIENT_RANDOM"                   // TLS 1.2: the master secret
	labelCHTS         = "CLIENT_HANDSHAKE_TRAFFIC_SECRET" // TLS 1.3
	labelSHTS         = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
	labelCTS0         = "CLIENT_TRAFFIC_SECRET_0"
	labelSTS0         = "SERVER_TRAFFIC_SECRET_0"
	// labelRSA is the older NSS line for TLS 1.2, keyed by the session ID
	// the server gave: "RSA Session-ID:<hex> Master-Key:<hex>". The Java
	// agent extract-tls-secrets (Maven Central) writes it for TLS 1.2
	// sessions (fixtures/pcaps/kafka/java-tls12.keylog), as old OpenSSL did.
	labelRSA = "RSA"
)

// Bounds of the key log.
const (
	// MaxLine is the longest key log line read; a longer one is counted
	// malformed (a secret is at most 48 bytes, 96 hex digits).
	MaxLine = 1024
	// MaxSessions bounds the sessions (client randoms) kept; lines for
	// more are counted dropped.
	MaxSessions = 1 << 20
)

// secrets are one session's, by client random.
type secrets struct {
	master                 []byte // TLS 1.2
	chts, shts, cts0, sts0 []byte // TLS 1.3
	used                   bool
}

// Keys is a key log: the secrets of sessions by client random. It is safe
// for concurrent use (one analyzer per worker looks sessions up while a
// live capture adds the lines a client appends).
type Keys struct {
	mu       sync.Mutex
	sessions map[[32]byte]*secrets
	// Lines counts the key lines read; Malformed the lines that are not
	// key log lines (their numbers in MalformedAt, the first few), and
	// Dropped the lines past MaxSessions. Lines are never kept or
	// echoed: they are secrets.
	Lines, Malformed, Dropped int
	MalformedAt               []string
	// resumable: TLS 1.2 master secrets by session ticket or session ID
	// ("t"+SHA-256 of the ticket, "s"+the ID), learned from the sessions
	// decrypted, for the ones that resume them (clients log no line for a
	// resumed TLS 1.2 session); bounded by maxResumable.
	resumable map[string][]byte
	// bySID: TLS 1.2 master secrets by session ID (labelRSA lines), with
	// whether a connection used them.
	bySID map[string]*sidSecret
	// refresh reads a followed key log again (SetRefresh), at most every
	// refreshEvery, last at refreshed.
	refresh   func()
	refreshed time.Time
	// final: no more lines will come (reading a file, not following
	// one), so a session without keys will never have them.
	final bool
}

// sidSecret is a master secret by session ID.
type sidSecret struct {
	master []byte
	used   bool
}

// NewKeys returns an empty key log.
func NewKeys() *Keys {
	return &Keys{sessions: make(map[[32]byte]*secrets), resumable: make(map[string][]byte), bySID: make(map[string]*sidSecret)}
}

// bySessionID returns the master secret of a TLS 1.2 session by the
// session ID its server gave (labelRSA lines), marking it used.
func (k *Keys) bySessionID(id string) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.bySID[id]; s != nil {
		s.used = true
		return s.master
	}
	return nil
}

// hasSessionIDs reports whether the key log holds secrets by session ID:
// a session is then found only once its ServerHello gave the ID.
func (k *Keys) hasSessionIDs() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.bySID) > 0
}

// addSessionID reads "RSA Session-ID:<hex> Master-Key:<hex>" (f: its
// fields), reporting whether it was such a line and whether it gave a key.
func (k *Keys) addSessionID(f [][]byte, name string, line int) (isRSA, ok bool) {
	if len(f) != 3 || string(f[0]) != labelRSA {
		return false, false
	}
	id, ok1 := bytes.CutPrefix(f[1], []byte("Session-ID:"))
	mk, ok2 := bytes.CutPrefix(f[2], []byte("Master-Key:"))
	if !ok1 || !ok2 || len(id) == 0 || len(id) > 64 || len(id)%2 != 0 || len(mk) != 96 {
		k.malformed(name, line)
		return true, false
	}
	sid := make([]byte, len(id)/2)
	master := make([]byte, 48)
	_, err1 := hex.Decode(sid, id)
	_, err2 := hex.Decode(master, mk)
	if err1 != nil || err2 != nil {
		k.malformed(name, line)
		return true, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.Lines++
	if _, seen := k.bySID[string(sid)]; !seen && len(k.bySID)+len(k.sessions) >= MaxSessions {
		k.Dropped++
		return true, false
	}
	k.bySID[string(sid)] = &sidSecret{master: master}
	return true, true
}

// maxResumable bounds the sessions remembered for resumption.
const maxResumable = 1 << 16

// remember keeps master as the secret of a TLS 1.2 session resumed by id
// ("t"+ticket hash or "s"+session ID).
func (k *Keys) remember(id string, master []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.resumable) < maxResumable {
		k.resumable[id] = master
	}
}

// resumed returns the master secret of a TLS 1.2 session resumed by id.
func (k *Keys) resumed(id string) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.resumable[id]
}

// SetFinal says whether more lines may come (Follow).
func (k *Keys) SetFinal(final bool) {
	k.mu.Lock()
	k.final = final
	k.mu.Unlock()
}

// refreshEvery bounds how often Refresh reads the key logs again.
const refreshEvery = 20 * time.Millisecond

// SetRefresh gives the function that reads the followed key logs again
// (their Followers' Poll), for Refresh.
func (k *Keys) SetRefresh(f func()) {
	k.mu.Lock()
	k.refresh = f
	k.mu.Unlock()
}

// Refresh reads the followed key logs again now (at most every 20 ms): a
// session waiting for its keys asks before it gives up, so that a client
// that connects, talks and closes between two polls is still decrypted.
func (k *Keys) Refresh() {
	k.mu.Lock()
	f := k.refresh
	if f == nil || k.final || time.Since(k.refreshed) < refreshEvery {
		k.mu.Unlock()
		return
	}
	k.refreshed = time.Now()
	k.mu.Unlock()
	f()
}

// Final reports that no more lines will come.
func (k *Keys) Final() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.final
}

// Read adds the lines of r, name naming it in MalformedAt ("keys.log:3").
// Only an error reading r is returned; malformed lines are counted.
func (k *Keys) Read(r io.Reader, name string) error {
	_, _, err := k.read(r, name, 0, true)
	return err
}

// read adds the whole lines of r, numbering them from line+1, and returns
// how many bytes and lines they took; a last line without its newline is
// taken only if final (otherwise the writer may be writing it).
func (k *Keys) read(r io.Reader, name string, line int, final bool) (int64, int, error) {
	br := bufio.NewReaderSize(r, 4096)
	var used int64
	lines := 0
	for {
		b, err := br.ReadSlice('\n')
		// Longer than any key log line: skip to its end.
		n, long := int64(len(b)), err == bufio.ErrBufferFull
		for err == bufio.ErrBufferFull {
			b, err = br.ReadSlice('\n')
			n += int64(len(b))
		}
		switch {
		case err != nil && err != io.EOF:
			return used, lines, err
		case err == io.EOF && (n == 0 || !final):
			return used, lines, nil
		}
		lines++
		used += n
		if long {
			k.malformed(name, line+lines)
		} else {
			k.AddLine(b, name, line+lines)
		}
		if err == io.EOF {
			return used, lines, nil
		}
	}
}

func (k *Keys) malformed(name string, line int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.Malformed++
	if len(k.MalformedAt) < 8 {
		k.MalformedAt = append(k.MalformedAt, fmt.Sprintf("%s:%d", name, line))
	}
}

// AddLine adds one key log line (name and line place it if malformed):
// LABEL <64 hex digits of client random> <hex secret>. Comments and blank
// lines are skipped; labels of no use here (EXPORTER_SECRET, early data)
// are read and ignored. It reports whether the line gave a key.
func (k *Keys) AddLine(b []byte, name string, line int) bool {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] == '#' {
		return false
	}
	if len(b) > MaxLine {
		k.malformed(name, line)
		return false
	}
	f := bytes.Fields(b)
	if isRSA, ok := k.addSessionID(f, name, line); isRSA {
		return ok
	}
	if len(f) != 3 || len(f[1]) != 64 || len(f[2])%2 != 0 || len(f[2]) < 32 || len(f[2]) > 128 {
		k.malformed(name, line)
		return false
	}
	var cr [32]byte
	secret := make([]byte, len(f[2])/2)
	_, err1 := hex.Decode(cr[:], f[1])
	_, err2 := hex.Decode(secret, f[2])
	label := string(f[0])
	tls13 := label == labelCHTS || label == labelSHTS || label == labelCTS0 || label == labelSTS0
	switch {
	case err1 != nil || err2 != nil, label == labelClientRandom && len(secret) != 48, tls13 && len(secret) != 32 && len(secret) != 48:
		k.malformed(name, line)
		return false
	case label != labelClientRandom && !tls13:
		// CLIENT_EARLY_TRAFFIC_SECRET, EXPORTER_SECRET, ...: valid
		// lines kfsniff has no use for.
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.Lines++
	s := k.sessions[cr]
	if s == nil {
		if len(k.sessions) >= MaxSessions {
			k.Dropped++
			return false
		}
		s = &secrets{}
		k.sessions[cr] = s
	}
	switch label {
	case labelClientRandom:
		s.master = secret
	case labelCHTS:
		s.chts = secret
	case labelSHTS:
		s.shts = secret
	case labelCTS0:
		s.cts0 = secret
	case labelSTS0:
		s.sts0 = secret
	}
	return true
}

// Has reports whether the key log holds any secret of the session with
// client random cr.
func (k *Keys) Has(cr [32]byte) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sessions[cr] != nil
}

// lookup returns a copy of the session's secrets, marking them used.
func (k *Keys) lookup(cr [32]byte) (secrets, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.sessions[cr]
	if s == nil {
		return secrets{}, false
	}
	s.used = true
	return *s, true
}

// Sessions returns how many sessions the key log holds secrets for, and
// how many of them no connection used.
func (k *Keys) Sessions() (all, unused int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.sessions {
		if !s.used {
			unused++
		}
	}
	for _, s := range k.bySID {
		if !s.used {
			unused++
		}
	}
	return len(k.sessions) + len(k.bySID), unused
}

// Follower reads a key log file as it grows: Poll adds the lines appended
// since the last call (a client appends one per connection).
type Follower struct {
	mu   sync.Mutex // Poll may be called by a ticker and by Refresh
	Keys *Keys
	name string
	open func() (io.ReadSeekCloser, error)
	off  int64
	line int
}

// Follow returns a Follower of the file open opens, named name in
// messages.
func (k *Keys) Follow(name string, open func() (io.ReadSeekCloser, error)) *Follower {
	return &Follower{Keys: k, name: name, open: open}
}

// Poll reads the whole lines appended since the last Poll.
func (f *Follower) Poll() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.open()
	if err != nil {
		return err
	}
	defer r.Close()
	end, err := r.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if end < f.off {
		// Truncated or replaced: read it again from the start.
		f.off, f.line = 0, 0
	}
	if _, err := r.Seek(f.off, io.SeekStart); err != nil {
		return err
	}
	n, lines, err := f.Keys.read(io.LimitReader(r, end-f.off), f.name, f.line, false)
	f.off += n
	f.line += lines
	return err
}

// AppendNSS appends the key log's secrets as NSS key log lines, sessions
// in order of client random: what a pcapng Decryption Secrets Block
// carries (-w FILE.pcapng).
func (k *Keys) AppendNSS(dst []byte) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	crs := slices.SortedFunc(maps.Keys(k.sessions), func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	line := func(label string, cr [32]byte, secret []byte) {
		if secret == nil {
			return
		}
		dst = append(dst, label...)
		dst = append(dst, ' ')
		dst = hex.AppendEncode(dst, cr[:])
		dst = append(dst, ' ')
		dst = hex.AppendEncode(dst, secret)
		dst = append(dst, '\n')
	}
	for _, id := range slices.Sorted(maps.Keys(k.bySID)) {
		dst = append(dst, "RSA Session-ID:"...)
		dst = hex.AppendEncode(dst, []byte(id))
		dst = append(dst, " Master-Key:"...)
		dst = hex.AppendEncode(dst, k.bySID[id].master)
		dst = append(dst, '\n')
	}
	for _, cr := range crs {
		s := k.sessions[cr]
		line(labelClientRandom, cr, s.master)
		line(labelCHTS, cr, s.chts)
		line(labelSHTS, cr, s.shts)
		line(labelCTS0, cr, s.cts0)
		line(labelSTS0, cr, s.sts0)
	}
	return dst
}
