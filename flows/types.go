// Package flows owns state over time: TCP reassembly, Kafka framing per
// direction, the connection table, and pairing of responses to requests by
// correlation id. It turns packets into typed Kafka messages and exchanges
// and hands them to handlers.
package flows

import (
	"errors"
	"net/netip"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
)

// Message is one Kafka request or response frame. Like the Exchange that
// carries it, it is valid only during the handler calls that deliver it (a
// request is delivered alone, then in its exchange): flows reuses both
// once the exchange is delivered (msgpool.go). A handler copies what it
// keeps.
type Message struct {
	// Conn is the connection's identity; conn the connection itself,
	// whose counters flows goes on changing (handlers do not see it).
	Conn *ConnInfo
	conn *Conn
	// Response is true for a response frame.
	Response bool
	// File and Packet locate the packet that completed the frame;
	// FirstPacket the packet that carried its first byte.
	File        int
	Packet      uint64
	FirstPacket uint64
	Time        time.Time // time of the packet that completed the frame
	FirstTime   time.Time
	Size        int // frame size including the 4-byte size prefix

	Key         int16
	Version     int16
	Correlation int32
	// Client is the client id on the connection's client host. Role,
	// Fetcher and Group say what the request is for, the node it fetches
	// for and the consumer group it names; all four are set once where
	// the request is decoded, and on the responses paired with it.
	Client  cluster.Client
	Role    cluster.Role
	Fetcher cluster.Fetcher
	Group   string
	// Req or Resp is the decoded body (nil if it could not be decoded;
	// see Err). Record bytes inside them alias the frame and are only
	// valid during the handler call that delivers the message.
	Req  kmsg.Request
	Resp kmsg.Response
	Err  error
	// Batches are the record batches carried (Produce requests, Fetch
	// responses), in wire order. Batch.Raw is valid only during the
	// handler call.
	Batches []BatchRef
	// BatchErrors counts record sets that did not parse as batches.
	BatchErrors int
	// Partial marks a request whose frame was cut by lost segments: only
	// its header is known, kept so that the response can be decoded.
	Partial bool
	// Inferred marks a response whose request was not captured, decoded
	// as the API and version of the connection's requests that it decodes
	// exactly as (Key and Version say which).
	Inferred bool
	// ErrorCodes counts the non-zero error codes in a response.
	ErrorCodes []ErrorCount
	// Frame is the frame after the size prefix; valid only during the
	// handler call (copy it to keep it, e.g. for a hex view). For a
	// request whose frame a handler asked flows to keep (Keeper), the
	// part kept is here again while its exchange is delivered.
	Frame []byte
	// owned is Frame's buffer when a deferred analyzer copied a big frame;
	// release hands it back to the analyzer through spare.
	owned []byte
	spare chan []byte
	// kept is what handlers asked to keep until the exchange (Keeper).
	kept *kept
	// pre are fingerprints a worker made ahead for kept (Prefinger).
	pre *preprints
	// home is the pool of the analyzer that made the message, which
	// takes it back once its exchange is delivered (msgpool.go); nil for
	// a message not to be reused.
	home *msgPool
	// shared: Req or Resp is a body of the framer's memo (memo.go),
	// handed to other messages too; its record sets are not dropped
	// after delivery, as they alias the memo's copy and not the frame.
	shared bool
}

// ErrorCount is an error code and how often it appears in one response.
type ErrorCount struct {
	Code  int16
	Count int
}

// BatchRef is a record batch and the partition it belongs to.
type BatchRef struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
	decode.Batch
	// Shipped, on a correlator's rebuilt batch only, are the record
	// fingerprints its agent shipped (nil in a capture, whose batches
	// have their bytes).
	Shipped *Shipped
}

// TopicName shows a topic by name; for versions that name topics by id,
// the name learned from Metadata, "__cluster_metadata" for KRaft's log, or
// else the id in base64 as Kafka prints it.
func (m *Message) TopicName(name string, id [16]byte) string {
	if n, ok := m.knownTopic(name, id); ok {
		return n
	}
	if id == [16]byte{} {
		return "?"
	}
	return cluster.TopicID(id)
}

// knownTopic is a topic's name: as given, or the name its id is known by
// (KRaft's log, or learned from Metadata); false if neither.
func (m *Message) knownTopic(name string, id [16]byte) (string, bool) {
	switch {
	case name != "":
		return name, true
	case id == [16]byte{}:
		return "", false
	case id == cluster.ClusterMetadataTopicID:
		return cluster.ClusterMetadataTopic, true
	}
	if m.Conn != nil && m.Conn.nodes != nil {
		return m.Conn.nodes.TopicName(id)
	}
	return "", false
}

// PartitionKey is p as state is kept by it (cluster.Partition.Key), by
// the topic names the run knows.
func (m *Message) PartitionKey(p cluster.Partition) cluster.Partition { return p.Key(m.names()) }

// names is what the run knows of topics' names, for cluster.Partition.Key.
func (m *Message) names() cluster.Names {
	if m.Conn != nil && m.Conn.nodes != nil {
		return m.Conn.nodes
	}
	return nil
}

// Identify sets what a request is for, once, from its header, its body
// (Req, nil if it did not decode) and its connection: its client, its role,
// the node it fetches for and the group it names.
func (m *Message) Identify() {
	if m.Conn != nil {
		m.Client.Host = m.Conn.Client.Addr().Unmap()
	}
	m.Role = cluster.RoleOf(m.Key, m.Client.ID, m.Req)
	m.Fetcher = cluster.FetcherOf(m.Client.ID, m.Req)
	m.Group = cluster.GroupOf(m.Req)
}

// Answers makes m, a response, answer req: its connection, API, version,
// client, role, fetcher and group are the request's.
func (m *Message) Answers(req *Message) {
	m.Conn, m.conn = req.Conn, req.conn
	m.Key, m.Version = req.Key, req.Version
	m.Client, m.Role, m.Fetcher, m.Group = req.Client, req.Role, req.Fetcher, req.Group
}

// Name is the API name of the message.
func (m *Message) Name() string { return decode.Name(m.Key) }

// ErrPartial marks a request cut by lost segments.
var ErrPartial = errors.New("frame cut by lost segments; header only")

// Exchange is a request with its response, valid only during the handler
// call that delivers it (see Message). Either side may be missing: a
// response whose request was not captured (Req nil), a request still
// unanswered when the capture ended (Unanswered), a Produce with acks=0,
// which gets no response (NoResponse), or a request on a connection of
// which the capture holds no packet from the server (OneSided): whether it
// was answered cannot be known.
type Exchange struct {
	Conn       *Conn
	Req        *Message
	Resp       *Message
	Unanswered bool
	NoResponse bool
	OneSided   bool
	// AtEnd marks an Unanswered exchange whose request was still
	// waiting when the capture ended (not overtaken by the answer to a
	// later request, not dropped for a bound); Waited is then how long it
	// had waited: the capture's last packet's time minus Req.Time. (A
	// reader of shipped records needs both: where the agent's capture
	// ended is known to no one else.)
	AtEnd bool
	// Again marks an exchange handed over before with another of its
	// partitions: a reader of shipped records rebuilds an exchange split
	// by partition as one exchange per record, and all but the first are
	// Again, for a handler that counts exchanges rather than partitions.
	Again  bool
	Waited time.Duration
	// ConnGaps is how many holes the connection had when the exchange
	// was made (Conn.Gaps then): handlers may run while flows goes on with
	// the connection on another goroutine, and must not read its counters.
	ConnGaps int
}

// Latency is the time from the request's last packet to the response's
// last packet, or zero if either is missing.
func (x *Exchange) Latency() time.Duration {
	if x.Req == nil || x.Resp == nil {
		return 0
	}
	return x.Resp.Time.Sub(x.Req.Time)
}

// Key is the API key of the exchange.
func (x *Exchange) Key() int16 {
	if x.Req != nil {
		return x.Req.Key
	}
	return -1
}

// ConnEventKind says what happened to a connection.
type ConnEventKind int

// Connection events.
const (
	ConnOpened     ConnEventKind = iota // first packet of a Kafka connection
	ConnClosed                          // FIN or RST seen, or idle at the end
	ConnRefused                         // SYN answered by RST
	ConnUnanswered                      // SYN never answered
	ConnRecognised                      // an unknown-port connection proved to be Kafka
)

var connEventNames = [...]string{ConnOpened: "opened", ConnClosed: "closed", ConnRefused: "refused", ConnUnanswered: "syn-unanswered",
	ConnRecognised: "recognised"}

func (k ConnEventKind) String() string {
	if k >= 0 && int(k) < len(connEventNames) {
		return connEventNames[k]
	}
	return "?"
}

// ConnEvent is a connection-level event. Conn is nil for refused and
// unanswered connection attempts, which never carried data.
type ConnEvent struct {
	Kind   ConnEventKind
	Conn   *Conn
	Client netip.AddrPort
	Server netip.AddrPort
	File   int
	Packet uint64
	Time   time.Time
	// Attempts counts SYNs (with retransmissions) for refused and
	// unanswered attempts.
	Attempts int
}

// RequestHandler receives every request frame as it is decoded.
type RequestHandler interface {
	OnRequest(m *Message)
}

// ExchangeHandler receives every exchange when its response arrives, when
// no response is expected, or when the capture ends without one.
type ExchangeHandler interface {
	OnExchange(x *Exchange)
}

// ConnHandler receives connection events.
type ConnHandler interface {
	OnConnEvent(e *ConnEvent)
}

// Handler is any of RequestHandler, ExchangeHandler, ConnHandler; a handler
// implements only the events it needs (checked by type assertion).
type Handler any
