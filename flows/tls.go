package flows

import (
	"github.com/kfsniff/kfsniff/tlsdec"
)

// TLSStats are the capture-wide counts of TLS sessions (Stats.TLS).
type TLSStats struct {
	// Conns counts TCP connections that began with a ClientHello while
	// a key log was given; Decrypted those with records decrypted;
	// NoKeys those the key log has no secret for; MidStream the
	// connections whose first bytes were TLS records but no ClientHello
	// (joined mid-connection: their keys cannot be found).
	Conns, Decrypted, NoKeys, MidStream int64
	// AuthFailures counts records that did not authenticate (wrong
	// keys, or corrupted), FirstAuthFailure places the first.
	AuthFailures     int64
	FirstAuthFailure Problem
}

func (t *TLSStats) add(o *TLSStats) {
	t.Conns += o.Conns
	t.Decrypted += o.Decrypted
	t.NoKeys += o.NoKeys
	t.MidStream += o.MidStream
	t.AuthFailures += o.AuthFailures
	t.FirstAuthFailure.keepFirst(o.FirstAuthFailure)
}

// tlsState is a stream's TLS decryption (Config.TLSKeys): the session,
// the reassembly direction its client speaks in, what was counted.
type tlsState struct {
	s         *tlsdec.Session
	client    int
	decrypted bool
	noKeys    bool
	auth      int
	skipped   int64
	held      int64 // bytes counted in Analyzer.tlsHeld
	// pending: problems met before the connection was made, recorded
	// on it when it is.
	pending []Problem
}

// tlsDir is the session's direction of reassembly direction d.
func (t *tlsState) tlsDir(d int) tlsdec.Dir {
	if d == t.client {
		return tlsdec.Client
	}
	return tlsdec.Server
}

// startTLS makes the stream decrypt if its first bytes, in direction d,
// are a ClientHello and a key log was given.
func (s *stream) startTLS(d int, data []byte) {
	keys := s.a.cfg.TLSKeys
	if keys == nil {
		return
	}
	if !tlsdec.IsClientHello(data) {
		return
	}
	t := &tlsState{client: d}
	t.s = tlsdec.NewSession(keys, func(text string) {
		at := s.a.at
		p := Problem{File: at.File, Packet: at.Packet, What: text}
		if s.conn != nil {
			s.conn.problem(p.File, p.Packet, p.What)
		} else if len(t.pending) < maxProblems {
			t.pending = append(t.pending, p)
		}
	})
	s.tls = t
	s.a.stats.TLS.Conns++
}

// tlsFeed runs data of direction d (a hole of skip bytes before it)
// through the stream's TLS session and delivers what comes out: the
// application data, or, once the session has no keys, the raw bytes it
// held and from then on every byte as it comes.
func (s *stream) tlsFeed(d int, data []byte, skip int, holeAt uint32) {
	t := s.tls
	ses := t.s
	if ses.Passthrough() {
		s.deliver(d, data, skip, holeAt)
		return
	}
	if ses.Waiting() {
		s.tlsRetry()
		if ses.Passthrough() {
			s.deliver(d, data, skip, holeAt)
			return
		}
	}
	if skip > 0 {
		ses.Gap(t.tlsDir(d), skip)
	}
	var out []byte
	if len(data) > 0 {
		out = ses.Feed(t.tlsDir(d), data)
	}
	s.tlsHeld()
	if ses.HeldBytes() > 0 && s.a.cfg.BufferBudget > 0 && s.a.tlsHeld > int64(s.a.cfg.BufferBudget) {
		ses.Abandon("the records held until one decrypts passed the buffer budget (--buffer-budget)")
	}
	s.tlsCount()
	if ses.Passthrough() {
		s.tlsPassthrough()
		return
	}
	if h := ses.Hole(t.tlsDir(d)); h > 0 && !s.ignore {
		// Decryption resumed after a hole: the plaintext it took is a
		// gap in the connection's bytes.
		s.deliver(d, nil, int(h), 0)
	}
	s.deliverPlain(d, out)
}

// tlsHeld brings the analyzer's count of bytes held for their keys up to
// the session's.
func (s *stream) tlsHeld() {
	n := int64(s.tls.s.HeldBytes())
	s.a.tlsHeld += n - s.tls.held
	s.tls.held = n
}

// tlsPassthrough delivers the raw bytes a session without keys held.
func (s *stream) tlsPassthrough() {
	dirs, held := s.tls.s.Held()
	s.tlsHeld()
	for i, hd := range dirs {
		s.deliver(s.reassemblyDir(hd), held[i], 0, 0)
	}
}

// tlsRetry decrypts what a session held for its keys once the key log
// has them (live: read again as it grows).
func (s *stream) tlsRetry() {
	dirs, plain := s.tls.s.Retry()
	s.tlsHeld()
	s.tlsCount()
	if s.tls.s.Passthrough() {
		s.tlsPassthrough()
		return
	}
	for i, pd := range dirs {
		s.deliverPlain(s.reassemblyDir(pd), plain[i])
	}
}

// tlsEnd settles a session still waiting for its keys when its
// connection ends: decrypted if they came, passed through otherwise.
func (s *stream) tlsEnd() {
	if s.tls == nil || !s.tls.s.Waiting() {
		return
	}
	s.tlsRetry()
	if s.tls.s.Waiting() {
		s.tls.s.Abandon("the key log did not give this connection's keys before it ended")
		s.tlsCount()
		s.tlsPassthrough()
	}
}

func (s *stream) reassemblyDir(d tlsdec.Dir) int {
	if d == tlsdec.Client {
		return s.tls.client
	}
	return 1 - s.tls.client
}

// deliverPlain hands decrypted bytes on as a connection's bytes.
func (s *stream) deliverPlain(d int, plain []byte) {
	if len(plain) > 0 && !s.ignore {
		s.deliver(d, plain, 0, 0)
	}
}

// tlsCount brings the capture's counts and the connection's up to the
// session's.
func (s *stream) tlsCount() {
	t := s.tls
	info := &t.s.Info
	st := &s.a.stats.TLS
	if info.Decrypted && !t.decrypted {
		t.decrypted = true
		st.Decrypted++
	}
	if info.NoKeys && !t.noKeys {
		t.noKeys = true
		st.NoKeys++
	}
	if info.AuthFailures > t.auth {
		st.AuthFailures += int64(info.AuthFailures - t.auth)
		t.auth = info.AuthFailures
		at := s.a.at
		st.FirstAuthFailure.keepFirst(Problem{File: at.File, Packet: at.Packet, What: "TLS record authentication failed"})
	}
	if s.conn != nil && info.Undecrypted > t.skipped {
		s.conn.skip(SkipTLS, int(info.Undecrypted-t.skipped))
		t.skipped = info.Undecrypted
	}
}

// tlsStarted gives a connection made of a TLS stream its session's
// description and the problems met before it was made.
func (s *stream) tlsStarted(c *Conn) {
	t := s.tls
	if t == nil {
		return
	}
	c.TLS = true
	c.TLSInfo = &t.s.Info
	for _, p := range t.pending {
		c.problem(p.File, p.Packet, p.What)
	}
	t.pending = nil
}
