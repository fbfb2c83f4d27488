package flows

import (
	"net/netip"
	"slices"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/tlsdec"
)

// Recognition says how a connection was recognised as Kafka.
type Recognition string

// How connections are recognised.
const (
	ByPort    Recognition = "port"    // one end's port is in --ports
	ByContent Recognition = "content" // a direction began with a plausible request header
)

// Skip reasons, for bytes of a Kafka connection that were not decoded.
const (
	SkipGap       = "gap"        // lost segments: the partial frame around the hole
	SkipResync    = "resync"     // scanned past while looking for a frame boundary
	SkipTLS       = "tls"        // TLS records on a Kafka port
	SkipNotKafka  = "not-kafka"  // a direction that never framed as Kafka
	SkipTooLarge  = "frame-size" // size prefix over --max-frame or below the minimum
	SkipUnmatched = "unmatched"  // response frames with no captured request
	SkipEnd       = "end"        // a frame still incomplete when the connection closed or the capture ended
	SkipSnaplen   = "snaplen"    // bytes cut by the capture's snapshot length, and the rest of the frames they cut
	SkipBudget    = "budget"     // partial frames dropped when buffering passed Config.BufferBudget
	SkipMidstream = "midstream"  // a direction joined mid-way: the rest of the frame under way when the capture began
)

// ConnInfo is a connection's identity: fixed once the connection is made
// (its ID once its opening is delivered), so that handlers may read it at
// any time, from any goroutine, unlike the counters of Conn.
type ConnInfo struct {
	// ID numbers connections in order of their first packet, from 1.
	ID         int
	Client     netip.AddrPort
	Server     netip.AddrPort
	Recognised Recognition
	// Handshake is true if the SYN (or SYN-ACK) was captured; MidStream
	// if the capture began after the connection opened.
	Handshake   bool
	MidStream   bool
	File        int
	FirstPacket uint64
	FirstSeen   time.Time
	nodes       *cluster.Nodes
}

// Nodes returns the node identities learned in this analysis.
func (c *ConnInfo) Nodes() *cluster.Nodes { return c.nodes }

// Label is "client -> server".
func (c *ConnInfo) Label() string {
	return c.Client.String() + " -> " + c.Server.String()
}

// MakeConn returns a connection made outside an Analyzer (tests, tools):
// its ID and node table come when its ConnOpened event is delivered
// (Delivery).
func MakeConn(client, server netip.AddrPort) *Conn {
	return &Conn{ConnInfo: ConnInfo{Client: client, Server: server}}
}

// Conn is one TCP connection carrying Kafka: its identity and what the
// analyzer counts on it as it goes.
type Conn struct {
	ConnInfo
	// ClientBy is the evidence that decided the client end; one decided
	// on weaker evidence becomes ClientByPairing when a request is
	// answered.
	ClientBy ClientSide
	TLS      bool
	// Broken marks a connection abandoned after an internal error
	// (a recovered panic) at BrokenPacket. (The small fields are
	// together: padding between them cost every connection a size
	// class.)
	Broken bool
	// dropped: folded into Stats.Evicted (MaxConns), or to be when its
	// stream ends (foldLate).
	dropped, foldLate bool
	Closed            bool  // FIN seen both ways
	Reset             bool  // RST seen
	noted             uint8 // problems already recorded once (noteMaxPending, ...)
	// napis counts the hints in apis (here, where it takes no room).
	napis uint8
	// TLSInfo describes the TLS session of a connection decrypted with
	// a key log, or that could not be (nil without a key log).
	TLSInfo *tlsdec.Info
	// Agent is the host that captured the connection, for a connection
	// rebuilt from shipped records (remote.go); "" for a capture's own.
	// (Here, not in ConnInfo, which handlers copy: a field more there
	// cost every connection of a capture a size class.)
	Agent string

	LastPacket uint64
	LastSeen   time.Time

	// ClientIDs in order of first use (at most maxClientIDs kept).
	ClientIDs []string
	// APIs counts request frames by API key; those of keys kmsg does
	// not know under UnknownKey (a key from the wire would otherwise be
	// an entry each).
	APIs APICounts
	// Roles counts requests by role.
	Roles cluster.RoleSet

	Requests       int
	Responses      int // matched responses
	ErrorResponses int // responses carrying at least one error code
	Unmatched      int // responses whose request was not captured
	Unanswered     int // requests with no response by the end
	NoResponse     int // acks=0 produce requests
	NotCaptured    int // requests whose response direction has no packet in the capture (one-sided)
	Evicted        int // waiting requests dropped for MaxPending or MaxPendingTotal
	Bytes          [2]int64
	Packets        [2]int64

	Gaps int
	// Lost counts the bytes missing from the capture in holes, by
	// direction, and Cut those cut from packets by the snaplen; FirstGap
	// and LastGap place the first and last hole.
	Lost, Cut         [2]int64
	FirstGap, LastGap Place
	// FragLost counts the IP datagrams of this connection that could not
	// be reassembled from their fragments, FragLostBytes the bytes of
	// their fragments (see packet/defrag.go).
	FragLost      int
	FragLostBytes int64
	FramingErrors int
	DecodeErrors  int
	UnknownAPIs   int
	// Skipped counts bytes not decoded, by reason.
	Skipped map[string]int64
	// Problems lists the first few framing and decoding problems with
	// their packet numbers.
	Problems []Problem

	// BrokenFile, BrokenPacket and BrokenWhy place and explain Broken.
	BrokenFile   int
	BrokenPacket uint64
	BrokenWhy    string

	// pending holds the requests waiting for a response, oldest first,
	// from pendHead on. Requests only ever leave from the front (a match
	// also drops the older ones), so pendBase, the number of requests
	// that have left, places every request pushed: the one pushed n-th
	// (from 0) is still waiting iff n >= pendBase. partials counts the
	// waiting requests known only by their header (Message.Partial).
	pending  []*Message
	pendHead int32
	partials int32
	pendBase int64
	// waits is the analyzer's count of waiting requests across
	// connections (nil for a Conn made outside an Analyzer).
	waits *waits
	// lastID is the client id of the last request (one of ClientIDs).
	lastID string
	// apis are the API keys and versions of the requests seen on the
	// connection (or in its bytes held before it was decided), most
	// recent first: what a response whose request was not captured may
	// be decoded as.
	apis [maxAPIHints]keyVersion
}

const maxAPIHints = 8

// hint records that the connection's requests use key at version: the
// most recent first, the least recent forgotten beyond maxAPIHints.
func (c *Conn) hint(kv keyVersion) {
	i := slices.Index(c.apis[:c.napis], kv)
	if i == 0 {
		return
	}
	if i < 0 {
		c.napis = min(c.napis+1, maxAPIHints)
		i = int(c.napis) - 1
	}
	copy(c.apis[1:i+1], c.apis[:i])
	c.apis[0] = kv
}

// Place is a packet's position and time.
type Place struct {
	File   int
	Packet uint64
	Time   time.Time
}

// Problem is one framing or decoding problem on a connection.
type Problem struct {
	File   int
	Packet uint64
	What   string
}

const (
	maxClientIDs = 16
	maxProblems  = 20
)

// Dir is a direction within a connection.
type Dir int

// Directions.
const (
	ToServer Dir = 0
	ToClient Dir = 1
)

func (c *Conn) skip(reason string, n int) {
	if n <= 0 {
		return
	}
	if c.Skipped == nil {
		c.Skipped = make(map[string]int64)
	}
	c.Skipped[reason] += int64(n)
}

func (c *Conn) problem(file int, pkt uint64, what string) {
	if len(c.Problems) < maxProblems {
		c.Problems = append(c.Problems, Problem{File: file, Packet: pkt, What: what})
	}
}

// clientID returns the client id as a string, reusing the one of the
// previous request if the bytes are the same (they almost always are on
// one connection), so that no string is allocated per request.
func (c *Conn) clientID(raw []byte, null bool) string {
	if null {
		return ""
	}
	if len(c.ClientIDs) > 0 && string(raw) == c.lastID {
		return c.lastID
	}
	for _, id := range c.ClientIDs {
		if id == string(raw) {
			c.lastID = id
			return id
		}
	}
	id := string(raw)
	if len(c.ClientIDs) < maxClientIDs {
		c.ClientIDs = append(c.ClientIDs, id)
		c.lastID = id
	}
	return id
}

// Pending is the number of requests waiting for a response. Requests
// whose frame was cut (Message.Partial) are not counted: they were never
// counted as requests either, and are kept only to decode a response.
func (c *Conn) Pending() int { return c.waiting() - int(c.partials) }

// waiting is the number of requests in pending, partial ones included.
func (c *Conn) waiting() int { return len(c.pending) - int(c.pendHead) }

// push adds a waiting request. If max (> 0) requests already wait, the
// oldest is removed and returned.
func (c *Conn) push(m *Message, max int) (evicted *Message) {
	if c.pendHead > 0 && int(c.pendHead) >= len(c.pending)/2 {
		n := copy(c.pending, c.pending[c.pendHead:])
		clear(c.pending[n:])
		c.pending = c.pending[:n]
		c.pendHead = 0
	}
	if max > 0 && c.waiting() >= max {
		evicted = c.popHead()
	}
	c.pending = append(c.pending, m)
	if m.Partial {
		c.partials++
	}
	if c.waits != nil {
		c.waits.total++
	}
	return evicted
}

// lastSeq is the sequence number (see pendBase) of the request pushed last.
func (c *Conn) lastSeq() int64 { return c.pendBase + int64(c.waiting()) - 1 }

// popHead removes and returns the oldest waiting request, or nil.
func (c *Conn) popHead() *Message {
	if c.waiting() == 0 {
		return nil
	}
	m := c.pending[c.pendHead]
	c.pending[c.pendHead] = nil
	c.pendHead++
	c.left(m)
	if int(c.pendHead) == len(c.pending) {
		c.pending, c.pendHead = c.pending[:0], 0
	}
	return m
}

// left accounts for a request leaving pending.
func (c *Conn) left(m *Message) {
	c.pendBase++
	if m.Partial {
		c.partials--
	}
	if c.waits != nil {
		c.waits.total--
	}
}

// match finds the pending request with correlation id corr. Kafka answers
// requests on a connection in order, so it is normally the oldest; requests
// older than the match can no longer be answered and are passed to
// skipped (partial ones too: see Message.Partial).
func (c *Conn) match(corr int32, skipped func(*Message)) *Message {
	for i := int(c.pendHead); i < len(c.pending); i++ {
		if c.pending[i].Correlation != corr {
			continue
		}
		for int(c.pendHead) < i {
			skipped(c.popHead())
		}
		return c.popHead()
	}
	return nil
}

// waitingWith returns the oldest waiting request with correlation id
// corr, or nil.
func (c *Conn) waitingWith(corr int32) *Message {
	for i := int(c.pendHead); i < len(c.pending); i++ {
		if c.pending[i].Correlation == corr {
			return c.pending[i]
		}
	}
	return nil
}

// hasPendingAt reports whether b (a response frame with its size prefix)
// carries the correlation id of a waiting request.
func (c *Conn) hasPendingAt(b []byte) bool {
	corr, ok := decode.Correlation(b[min(len(b), decode.SizeLen):])
	return ok && c.waitingWith(corr) != nil
}

// drain removes all pending requests and returns those counted as
// requests (partial ones are left out: they were never counted, and their
// bytes are counted as skipped).
func (c *Conn) drain() []*Message {
	out := c.pending[c.pendHead:c.pendHead]
	for _, m := range c.pending[c.pendHead:] {
		c.left(m)
		if !m.Partial {
			out = append(out, m)
		}
	}
	c.pending, c.pendHead = nil, 0
	return out
}

// OneSided reports whether the capture holds packets of one direction of
// the connection only, and which (ToServer: requests only).
func (c *Conn) OneSided() (present Dir, ok bool) {
	switch {
	case c.Packets[ToServer] > 0 && c.Packets[ToClient] == 0:
		return ToServer, true
	case c.Packets[ToClient] > 0 && c.Packets[ToServer] == 0:
		return ToClient, true
	}
	return 0, false
}
