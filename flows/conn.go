package flows

import (
	"net/netip"
	"time"
)

// Recognition says how a connection was recognised as Kafka.
type Recognition string

// How connections are recognised.
const (
	ByPort    Recognition = "port"    // one end's port is in --ports
	ByContent Recognition = "content" // a direction began with a plausible request header
)

// ClientSide says how kfsniff decided which end is the client.
type ClientSide string

// How the client end is chosen.
const (
	ClientByHandshake ClientSide = "handshake" // sender of the SYN
	ClientByRequests  ClientSide = "requests"  // the direction that parses as requests
	ClientByPort      ClientSide = "port"      // the other end's port is a Kafka port
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
)

// Conn is one TCP connection carrying Kafka.
type Conn struct {
	// ID numbers connections in order of their first packet, from 1.
	ID         int
	Client     netip.AddrPort
	Server     netip.AddrPort
	Recognised Recognition
	ClientBy   ClientSide
	// Handshake is true if the SYN was captured; MidStream if the
	// capture began after the connection opened.
	Handshake bool
	MidStream bool
	TLS       bool

	File        int
	FirstPacket uint64
	LastPacket  uint64
	FirstSeen   time.Time
	LastSeen    time.Time

	// ClientIDs in order of first use (at most maxClientIDs kept).
	ClientIDs []string
	// Requests counts request frames by API key.
	APIs map[int16]int
	// Roles counts requests by role.
	Roles RoleSet

	Requests       int
	Responses      int // matched responses
	ErrorResponses int // responses carrying at least one error code
	Unmatched      int // responses whose request was not captured
	Unanswered     int // requests with no response by the end
	NoResponse     int // acks=0 produce requests
	Evicted        int // pending requests dropped for --max-pending
	Bytes          [2]int64
	Packets        [2]int64

	Gaps          int
	FramingErrors int
	DecodeErrors  int
	UnknownAPIs   int
	// Skipped counts bytes not decoded, by reason.
	Skipped map[string]int64
	// Problems lists the first few framing and decoding problems with
	// their packet numbers.
	Problems []Problem

	// Broken marks a connection abandoned after an internal error
	// (a recovered panic) at BrokenPacket.
	Broken       bool
	BrokenFile   int
	BrokenPacket uint64
	BrokenWhy    string

	Closed bool // FIN seen both ways
	Reset  bool // RST seen

	nodes    *Nodes
	pending  []*Message
	pendHead int
	// lastID is the client id of the last request (one of ClientIDs).
	lastID string
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

// Nodes returns the node identities learned so far in this analysis.
func (c *Conn) Nodes() *Nodes { return c.nodes }

// Pending is the number of requests waiting for a response.
func (c *Conn) Pending() int { return len(c.pending) - c.pendHead }

func (c *Conn) push(m *Message, max int) (evicted *Message) {
	if c.pendHead > 0 && c.pendHead >= len(c.pending)/2 {
		n := copy(c.pending, c.pending[c.pendHead:])
		clear(c.pending[n:])
		c.pending = c.pending[:n]
		c.pendHead = 0
	}
	if max > 0 && c.Pending() >= max {
		evicted = c.pending[c.pendHead]
		c.pending[c.pendHead] = nil
		c.pendHead++
	}
	c.pending = append(c.pending, m)
	return evicted
}

// match finds the pending request with correlation id corr. Kafka answers
// requests on a connection in order, so it is normally the oldest; requests
// older than the match can no longer be answered and are returned in
// skipped.
func (c *Conn) match(corr int32, skipped func(*Message)) *Message {
	for i := c.pendHead; i < len(c.pending); i++ {
		if c.pending[i].Correlation != corr {
			continue
		}
		m := c.pending[i]
		for j := c.pendHead; j < i; j++ {
			skipped(c.pending[j])
			c.pending[j] = nil
		}
		// Remove m, keeping the order of the rest.
		c.pending[i] = nil
		if i == c.pendHead {
			c.pendHead++
		} else {
			c.pendHead = i + 1
		}
		if c.pendHead == len(c.pending) {
			c.pending = c.pending[:0]
			c.pendHead = 0
		}
		return m
	}
	return nil
}

// hasPending reports whether a request with correlation id corr waits.
func (c *Conn) hasPending(corr int32) bool {
	for i := c.pendHead; i < len(c.pending); i++ {
		if c.pending[i].Correlation == corr {
			return true
		}
	}
	return false
}

// hasPendingAt reports whether b (a response frame with its size prefix)
// carries the correlation id of a waiting request.
func (c *Conn) hasPendingAt(b []byte) bool {
	if len(b) < 8 {
		return false
	}
	return c.hasPending(int32(uint32(b[4])<<24 | uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7])))
}

// drain removes and returns all pending requests.
func (c *Conn) drain() []*Message {
	out := c.pending[c.pendHead:]
	c.pending, c.pendHead = nil, 0
	return out
}

// Label is "client -> server" for messages.
func (c *Conn) Label() string {
	return c.Client.String() + " -> " + c.Server.String()
}
