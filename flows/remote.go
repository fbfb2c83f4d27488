package flows

import (
	"errors"
	"net/netip"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
)

// What a correlator needs from flows to hand exchanges rebuilt from
// shipped records (docs/export.md) to the same handlers a capture feeds:
// connections it numbers itself, messages tied to them, the counts flows
// keeps per connection, and the node identities the records name.

// ErrorCounts are the non-zero error codes anywhere in resp, counted as
// the analyzer counts a response's (Message.ErrorCodes).
func ErrorCounts(resp kmsg.Response) []ErrorCount { return errorCounts(resp, nil) }

// NewRemoteDelivery returns a Delivery to handlers that learns into
// nodes and does not number connections: a correlator's connections are
// numbered by RemoteConn, across the Deliveries it feeds. It keeps
// nothing for the handlers (Keeper): the records carry no bytes.
func NewRemoteDelivery(nodes *cluster.Nodes, handlers ...Handler) *Delivery {
	d := newDelivery(handlers)
	if nodes != nil {
		d.nodes = nodes
	}
	// Nothing to keep: a rebuilt message has no frame or record bytes,
	// and one message goes through several Deliveries.
	d.keep = keeping{}
	return d
}

// RemoteConn returns a connection another host captured: agent names the
// host, id is the correlator's number for it, first the time of its first
// record. Its counters are kept by Count.
func RemoteConn(agent string, id int, client, server netip.AddrPort, first time.Time, nodes *cluster.Nodes) *Conn {
	c := MakeConn(client, server)
	c.ID, c.Agent, c.FirstSeen, c.LastSeen, c.nodes = id, agent, first, first, nodes
	c.Recognised = ByPort
	c.ClientBy = ClientByPairing
	return c
}

// Attach ties m to c, as flows does for the messages it frames.
func (c *Conn) Attach(m *Message) {
	m.Conn, m.conn = &c.ConnInfo, c
}

// Agent is the host that captured the message's connection, when it was
// rebuilt from shipped records; "" for a capture's own.
func (m *Message) Agent() string {
	if m.conn == nil {
		return ""
	}
	return m.conn.Agent
}

// CountRequest counts a rebuilt request on c as the framer counts one.
func (c *Conn) CountRequest(m *Message, at time.Time, packet uint64) {
	c.Roles[m.Role]++
	c.Requests++
	if decode.KnownKey(m.Key) {
		c.APIs.Add(m.Key)
	} else {
		c.APIs.Add(UnknownKey)
	}
	c.CountClientID(m.Client.ID)
	c.seen(at, packet)
}

// CountExchange counts what an exchange rebuilt from a record adds to c:
// a response, an unmatched one, one never answered or not captured; an
// exchange split into several records (Again) once.
//
// Packets are not shipped: c's mark (1) the directions its agent's
// records prove it captured, for what reads them (OneSided, a rule
// telling a one-sided connection): a request answered, or unanswered
// (flows says one_sided of a request on a connection without a packet
// from the server), proves both; one_sided the client's alone.
func (c *Conn) CountExchange(x *Exchange) {
	if !x.Again {
		switch {
		case x.Req == nil && x.Resp != nil:
			c.Unmatched++
		case x.NoResponse:
			c.NoResponse++
		case x.OneSided:
			c.NotCaptured++
		case x.Unanswered || x.Resp == nil:
			c.Unanswered++
		default:
			c.Responses++
			if len(x.Resp.ErrorCodes) > 0 {
				c.ErrorResponses++
			}
		}
	}
	switch {
	case x.Req == nil || x.NoResponse:
	case x.OneSided:
		c.Packets[ToServer] = max(c.Packets[ToServer], 1)
	case x.Unanswered || x.Resp != nil:
		c.Packets[ToServer] = max(c.Packets[ToServer], 1)
		c.Packets[ToClient] = max(c.Packets[ToClient], 1)
	}
	if x.Resp != nil {
		c.seen(x.Resp.Time, x.Resp.Packet)
	}
}

// Seen moves c's last activity to at (a connection event's).
func (c *Conn) Seen(at time.Time, packet uint64) { c.seen(at, packet) }

func (c *Conn) seen(at time.Time, packet uint64) {
	if at.After(c.LastSeen) {
		c.LastSeen, c.LastPacket = at, packet
	}
	if c.FirstSeen.IsZero() || at.Before(c.FirstSeen) {
		c.FirstSeen = at
	}
}

// CountClientID adds a client id to the connection's (a connection record names it).
func (c *Conn) CountClientID(id string) {
	if id != "" && !slices.Contains(c.ClientIDs, id) && len(c.ClientIDs) < maxClientIDs {
		c.ClientIDs = append(c.ClientIDs, id)
	}
}

// Shipped are the record fingerprints an agent shipped for a batch
// (export schema 3): fixed ones (decode.NewRecordPrinter), the same on
// every host, for a rule to Seal into its own. Err says why there are
// none: decode.ErrOverCap, decode.ErrOverBudget or a malformed record (as
// the agent's printer said), ErrNotKept (dropped at the agent for its
// bounds), or ErrNotShipped.
type Shipped struct {
	Prints []decode.RecordHash
	Err    error
}

// ErrNotShipped says that an agent shipped no record fingerprints for a
// batch that has records to compare: a schema 1 or 2 agent, one with
// fingerprints turned off, or one with another key than the correlator's.
var ErrNotShipped = errors.New("record fingerprints not shipped")
