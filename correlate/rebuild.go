package correlate

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
)

// Rebuilder turns shipped records back into what flows hands its
// handlers: a connection per agent and connection number, messages with
// the kmsg bodies the record has the data for, batches, error codes, and
// connection events. Connections are numbered by the Rebuilder across
// every Delivery it feeds, so that one connection has one number in the
// report, --frames and the TUI whichever Kafka partition its records came
// through.
//
// What a record cannot carry is not invented: a body is rebuilt for the
// one partition a Produce, Fetch, ListOffsets or OffsetCommit record
// names; the other APIs get an empty body of their version (the error
// codes in ErrorCodes, and the only code of a response in its top-level
// ErrorCode when the API has one); a batch failing its CRC has no
// computed checksum (not shipped).
type Rebuilder struct {
	nodes *cluster.Nodes
	conns map[connKey]*flows.Conn
	list  []*flows.Conn
	keys  []connKey // list's keys
	// MaxConns bounds the connections listed (flows.DefaultConfig's, as
	// a file's analysis): past it the oldest, closed ones first, are
	// folded into evicted.
	MaxConns int
	evicted  flows.EvictedConns
	connScan int
	number   int // the last connection number given
	// Skew, if set, is the offset to take off an agent's clock (its
	// clock minus the reference's), false when not estimated.
	Skew func(agent string) (time.Duration, bool)
	// counted are the split exchanges whose request was counted, so
	// that an exchange split into several records counts once; a
	// bounded ring of keys.
	counted recent[exKey, struct{}]
	// ends are each agent's latest time its records show, on its own
	// clock: the capture's end it shipped (end_ns), a request, a
	// response, a connection event (at most maxEnds agents).
	ends map[string]int64
	// One connection seen by two agents (the client's host and the
	// broker's): tuples names the connection of a client and server
	// endpoint pair, by the key of the first agent's records; alias
	// maps another agent's key to it; views are the exchange records
	// rebuilt on a connection seen by several agents (a bounded ring),
	// so that the second view of each is dropped (Twice), after Stats
	// took both for the clock skew.
	tuples map[[2]netip.AddrPort]connKey
	alias  map[connKey]connKey
	views  recent[viewKey, struct{}]
	// Twice counts the records dropped as a second agent's view of an
	// exchange or connection event already rebuilt.
	Twice int64
	// PrintFn is the function of the record fingerprints taken
	// (decode.PrintFunc of the correlator's key: keyless by default);
	// a batch shipped without fingerprints, or with another function's,
	// is compared by CRC only (flows.ErrNotShipped). NoPrints, if set,
	// is told why, once per agent (maxEnds of them).
	PrintFn  string
	NoPrints func(agent, why string)
	noPrints map[string]bool
}

// viewKey names one record's share of an exchange on a connection: its
// correlation id, API, partition and first batch (a split exchange's
// records each their own), and the record's status class.
type viewKey struct {
	conn  connKey
	corr  int32
	api   int16
	part  cluster.Partition // Topic: the topic id or name as shipped; Num -1 for the whole exchange
	batch int
	resp  bool // unmatched: a response alone
}

// maxViews bounds the exchanges remembered on connections two agents saw.
const maxViews = 1 << 16

// connKey names a connection: its agent, the agent's run (a restarted
// agent numbers its connections from 1 again: without the run, its new
// connections would be taken for the old ones) and its number.
type connKey struct {
	agent, run string
	conn       int
}

type exKey struct {
	agent, run string
	conn       int
	corr       int32
	api        int16
}

// maxCounted bounds the split exchanges remembered.
const maxCounted = 1 << 16

// maxEnds bounds the agents whose end is followed (as Source's agents).
const maxEnds = 4096

// NewRebuilder returns a Rebuilder learning node identities into nodes.
func NewRebuilder(nodes *cluster.Nodes) *Rebuilder {
	return &Rebuilder{nodes: nodes, conns: map[connKey]*flows.Conn{}, counted: newRecent[exKey, struct{}](maxCounted), ends: map[string]int64{},
		MaxConns: flows.DefaultConfig().MaxConns, tuples: map[[2]netip.AddrPort]connKey{}, alias: map[connKey]connKey{},
		views: newRecent[viewKey, struct{}](maxViews), PrintFn: decode.PrintFunc(nil), noPrints: map[string]bool{}}
}

// Evicted sums the counters of the connections folded for MaxConns.
func (rb *Rebuilder) Evicted() flows.EvictedConns { return rb.evicted }

// fold folds the oldest connection (a closed one among the next 1024
// when there is one, as flows' table does) once the list is over
// MaxConns; its records that come later open it again.
func (rb *Rebuilder) fold() {
	if rb.MaxConns <= 0 || len(rb.list) <= rb.MaxConns {
		return
	}
	victim := -1
	for i := rb.connScan; i < len(rb.list) && i < rb.connScan+1024; i++ {
		if rb.list[i].Closed || rb.list[i].Reset {
			victim = i
			break
		}
	}
	if victim < 0 {
		victim = 0
	}
	rb.connScan = victim
	rb.evicted.Fold(rb.list[victim])
	delete(rb.conns, rb.keys[victim])
	v := rb.list[victim]
	if t := [2]netip.AddrPort{v.Client, v.Server}; rb.tuples[t] == rb.keys[victim] {
		delete(rb.tuples, t)
	}
	rb.list = append(rb.list[:victim], rb.list[victim+1:]...)
	rb.keys = append(rb.keys[:victim], rb.keys[victim+1:]...)
}

// End is where the capture of an agent's records rebuilt so far ended,
// corrected by its clock skew when estimated: the end the agent shipped
// with a request still waiting then (end_ns), else (an agent that had
// none, or of an older kfsniff) the latest time its records show.
func (rb *Rebuilder) End(agent string) (time.Time, bool) {
	ns, ok := rb.ends[agent]
	if !ok {
		return time.Time{}, false
	}
	return rb.at(agent, ns), true
}

// reached moves an agent's end to ns if later.
func (rb *Rebuilder) reached(agent string, ns int64) {
	if old, ok := rb.ends[agent]; ok || len(rb.ends) < maxEnds {
		rb.ends[agent] = max(old, ns)
	}
}

// Conns returns the connections rebuilt so far, by number.
func (rb *Rebuilder) Conns() []*flows.Conn { return rb.list }

// Events is what one record rebuilds to; each field may be nil.
type Events struct {
	// Opened is the opening of a connection seen for the first time
	// (from its "opened" record or from any record of it), for the
	// handlers that list connections.
	Opened *flows.Event
	// Req is the request, once per exchange (the first of its records).
	Req *flows.Event
	// X is the exchange.
	X *flows.Event
	// Conn is the connection event a "conn" record is.
	Conn *flows.Event
}

// Learn takes from a record what helps rebuild others, before any is
// rebuilt: a topic's name for its id (an agent that never saw a Metadata
// response naming the topic ships its id alone, in the topic's place).
//
// A Metadata answer's body (schema 2) teaches the names of every topic it
// lists with its id, as soon as it is read: the records of an agent that
// knew only the id, held by the merge's reorder window, are rebuilt with
// the name.
func (rb *Rebuilder) Learn(r *Record) {
	if r.API == int16(kmsg.Metadata) && len(r.RespBody) > 0 && r.Type == TypeExchange {
		if q, err := decode.DecodeResponse(r.API, r.Ver, r.RespBody); err == nil {
			if m, ok := q.(*kmsg.MetadataResponse); ok {
				for i := range m.Topics {
					if t := &m.Topics[i]; t.Topic != nil {
						rb.nodes.LearnTopic(t.TopicID, *t.Topic)
					}
				}
			}
		}
	}
	if r.TopicID == "" || r.Topic == "" || r.Topic == r.TopicID {
		return
	}
	if id, ok := topicID(r.TopicID); ok {
		rb.nodes.LearnTopic(id, r.Topic)
	}
}

func topicID(s string) ([16]byte, bool) {
	var id [16]byte
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, false
	}
	copy(id[:], b)
	return id, true
}

// topic is the topic of a partition record: its name, as the agent
// named it or as another agent's records taught; "" and the id when
// neither knows the name.
func (rb *Rebuilder) topic(r *Record) (string, [16]byte) {
	id, ok := topicID(r.TopicID)
	if !ok {
		return r.Topic, id
	}
	if r.Topic != r.TopicID {
		return r.Topic, id
	}
	if name, ok := rb.nodes.TopicName(id); ok {
		return name, id
	}
	return "", id
}

// Time is a record's capture time, corrected by the agent's clock skew
// when estimated.
func (rb *Rebuilder) Time(r *Record) time.Time { return rb.at(r.Agent, r.TS) }

// at is an agent's time ns (Unix nanoseconds on its clock), corrected by
// its clock skew when estimated.
func (rb *Rebuilder) at(agent string, ns int64) time.Time {
	t := time.Unix(0, ns).UTC()
	if rb.Skew != nil {
		if d, ok := rb.Skew(agent); ok {
			t = t.Add(-d)
		}
	}
	return t
}

// Rebuild turns one exchange or connection record into events; an error
// says why a record cannot be used (its endpoints do not parse, a type
// it does not know).
func (rb *Rebuilder) Rebuild(r *Record) (Events, error) {
	switch r.Type {
	case TypeExchange:
		return rb.exchange(r)
	case TypeConn:
		return rb.connEvent(r)
	}
	return Events{}, fmt.Errorf("record type %q is not an exchange or a connection event", r.Type)
}

func endpoints(r *Record) (client, server netip.AddrPort, err error) {
	if client, err = netip.ParseAddrPort(r.Client); err != nil {
		return client, server, fmt.Errorf("client %q: %v", r.Client, err)
	}
	if server, err = netip.ParseAddrPort(r.Server); err != nil {
		return client, server, fmt.Errorf("server %q: %v", r.Server, err)
	}
	return client, server, nil
}

// conn returns the connection of a record, and an opening event when it
// is seen for the first time.
func (rb *Rebuilder) conn(r *Record, client, server netip.AddrPort, at time.Time) (*flows.Conn, *flows.Event) {
	k := rb.key(r)
	if c := rb.conns[k]; c != nil {
		return c, nil
	}
	t := [2]netip.AddrPort{client, server}
	if other, ok := rb.tuples[t]; ok && other.agent != k.agent {
		if c := rb.conns[other]; c != nil && !c.Closed && !c.Reset {
			// Another agent's view of a connection already rebuilt
			// and still open (once closed, the endpoints used again
			// are a new connection).
			if len(rb.alias) < rb.MaxConns {
				rb.alias[k] = other
			}
			return c, nil
		}
	}
	rb.tuples[t] = k
	rb.number++
	c := flows.RemoteConn(r.Agent, rb.number, client, server, at, rb.nodes)
	c.File = r.File
	c.FirstPacket = uint64(max(r.ReqPkt, r.Pkt, 0))
	rb.conns[k] = c
	rb.list = append(rb.list, c)
	rb.keys = append(rb.keys, k)
	rb.fold()
	return c, &flows.Event{Conn: &flows.ConnEvent{Kind: flows.ConnOpened, Conn: c, Client: client, Server: server,
		File: r.File, Packet: c.FirstPacket, Time: at}}
}

// key is the connection a record is on: its own, or the connection of
// the agent that first showed it, when another agent captured it too.
func (rb *Rebuilder) key(r *Record) connKey {
	k := connKey{r.Agent, r.Run, r.Conn}
	if a, ok := rb.alias[k]; ok {
		return a
	}
	return k
}

// again reports whether a record is a second agent's view of an
// exchange (or exchange partition) already rebuilt on c, remembering it
// otherwise. Connections only one agent captured remember nothing.
func (rb *Rebuilder) again(r *Record, k connKey) bool {
	if len(rb.alias) == 0 {
		return false
	}
	v := viewKey{conn: k, corr: r.Corr, api: r.API, part: cluster.Partition{Topic: r.TopicID, Num: -1}, batch: r.BatchIndex.V, resp: r.Status == "unmatched"}
	if v.part.Topic == "" {
		v.part.Topic = r.Topic
	}
	if r.Parts > 0 {
		v.part.Num = r.Partition
	}
	return !rb.views.add(v, struct{}{})
}

func (rb *Rebuilder) connEvent(r *Record) (Events, error) {
	if r.Event == EventEnd {
		// The capture's end: no connection's event (Source.ended).
		rb.reached(r.Agent, r.TS)
		return Events{}, nil
	}
	client, server, err := endpoints(r)
	if err != nil {
		return Events{}, err
	}
	at := rb.Time(r)
	rb.reached(r.Agent, r.TS)
	e := &flows.ConnEvent{Client: client, Server: server, File: r.File, Packet: uint64(max(r.Pkt, 0)), Time: at, Attempts: r.Attempts}
	switch r.Event {
	case "refused":
		e.Kind = flows.ConnRefused
		return Events{Conn: &flows.Event{Conn: e}}, nil
	case "syn-unanswered":
		e.Kind = flows.ConnUnanswered
		return Events{Conn: &flows.Event{Conn: e}}, nil
	case "opened":
		e.Kind = flows.ConnOpened
	case "closed":
		e.Kind = flows.ConnClosed
	case "recognised":
		e.Kind = flows.ConnRecognised
	default:
		return Events{}, fmt.Errorf("connection event %q unknown", r.Event)
	}
	if r.Conn <= 0 {
		return Events{}, fmt.Errorf("connection event %q without its connection number", r.Event)
	}
	c, opened := rb.conn(r, client, server, at)
	if own := (connKey{r.Agent, r.Run, r.Conn}); rb.key(r) != own {
		// Another agent's view of the connection: its opening or
		// close was (or will be) told by the agent that showed it
		// first.
		rb.Twice++
		return Events{}, nil
	}
	e.Conn = c
	if e.Kind == flows.ConnOpened {
		c.Handshake = c.Handshake || r.Handshake
		c.MidStream = c.MidStream || r.MidStream
	}
	if r.ClientID.Set && r.ClientID.V != "" {
		c.CountClientID(r.ClientID.V)
	}
	seen := at
	if r.Last.Set && e.Kind == flows.ConnClosed {
		// The connection's last packet, before the close was told.
		seen = rb.at(r.Agent, min(r.Last.V, r.TS))
	}
	c.Seen(seen, e.Packet)
	if e.Kind == flows.ConnClosed {
		c.Closed = true
	}
	ev := Events{Opened: opened, Conn: &flows.Event{Conn: e}}
	if e.Kind == flows.ConnOpened && opened != nil {
		ev.Opened = ev.Conn // the record is the opening itself
	}
	return ev, nil
}

func (rb *Rebuilder) exchange(r *Record) (Events, error) {
	client, server, err := endpoints(r)
	if err != nil {
		return Events{}, err
	}
	if r.Conn <= 0 {
		return Events{}, fmt.Errorf("exchange without its connection number")
	}
	at := rb.Time(r)
	// The latest the record shows: its request, response, capture's end.
	rb.reached(r.Agent, max(r.TS, r.TS+opt(r.Latency, 0), opt(r.End, 0)))
	var ev Events
	c, opened := rb.conn(r, client, server, at)
	if rb.again(r, rb.key(r)) {
		rb.Twice++
		return Events{}, nil
	}
	ev.Opened = opened
	if r.Node.Set {
		rb.nodes.LearnServer(server, r.Node.V)
	}
	x := &flows.Exchange{Conn: c, ConnGaps: r.ConnGaps}
	// The first record read of an exchange (of its first batches, when
	// a partition's took several records) stands for it; the others are
	// its further partitions.
	first := r.BatchIndex.V == 0
	if first && r.Parts > 1 {
		k := rb.key(r)
		first = rb.firstPart(exKey{k.agent, k.run, k.conn, r.Corr, r.API})
	}
	x.Again = !first
	clientID := opt(r.ClientID, "")
	role := cluster.ParseRole(r.Role)
	topic, id := rb.topic(r)
	reqAt, respAt := at, at
	if lat, ok := r.Latency.V, r.Latency.Set; ok {
		respAt = at.Add(time.Duration(lat))
	}
	if r.Status != "unmatched" {
		m := &flows.Message{File: r.File, Packet: uint64(max(r.ReqPkt, 0)), Time: reqAt, FirstTime: reqAt,
			Key: r.API, Version: r.Ver, Correlation: r.Corr, Client: cluster.Client{ID: clientID}}
		m.FirstPacket = m.Packet
		c.Attach(m)
		m.Req = request(r, topic, id)
		m.Identify()
		m.Role = role // the record's: the request rebuilt is a part of the one sent
		if m.Req == nil && !decode.KnownVersion(r.API, r.Ver) {
			m.Err = fmt.Errorf("%s v%d corr %d: %w", decode.Name(r.API), r.Ver, r.Corr, decode.ErrUnknownVersion)
		}
		if r.API == int16(kmsg.Produce) {
			m.Batches = rb.batches(r, topic, id, true)
		}
		x.Req = m
		if first {
			c.CountRequest(m, reqAt, m.Packet)
			ev.Req = &flows.Event{Req: m}
		}
	}
	switch r.Status {
	case "answered", "unmatched":
		if r.Status == "unmatched" {
			respAt = at
		}
		m := &flows.Message{Response: true, File: r.File, Packet: uint64(max(r.RespPkt, 0)), Time: respAt, FirstTime: respAt,
			Key: r.API, Version: r.Ver, Correlation: r.Corr, Client: cluster.Client{ID: clientID}, Role: role}
		m.FirstPacket = m.Packet
		c.Attach(m)
		if x.Req != nil {
			m.Answers(x.Req)
		} else {
			m.Client.Host = m.Conn.Client.Addr().Unmap()
		}
		m.Resp = response(r, topic, id)
		if r.API == int16(kmsg.Fetch) {
			m.Batches = rb.batches(r, topic, id, false)
		}
		m.ErrorCodes = errorCodes(r)
		if r.Parts > 0 && m.Resp != nil {
			// A split record's: its partition's and those outside the
			// topics (a Fetch session's top-level error), as a
			// capture's analysis counts them.
			m.ErrorCodes = flows.ErrorCounts(m.Resp)
		}
		x.Resp = m
	case "unanswered":
		x.Unanswered = true
		if r.End.Set {
			x.AtEnd, x.Waited = true, time.Duration(r.End.V-r.TS)
		}
	case "no_response":
		x.NoResponse = true
	case "one_sided":
		x.OneSided = true
	default:
		return Events{}, fmt.Errorf("exchange status %q unknown", r.Status)
	}
	c.CountExchange(x)
	ev.X = &flows.Event{X: x}
	return ev, nil
}

// firstPart reports whether this is the first record seen of a split
// exchange.
func (rb *Rebuilder) firstPart(k exKey) bool { return rb.counted.add(k, struct{}{}) }

// recent is the last max keys added, each with a value (struct{} for a
// set), the oldest forgotten first.
type recent[K comparable, V any] struct {
	set  map[K]V
	ring []K
	next int
	max  int
}

func newRecent[K comparable, V any](max int) recent[K, V] {
	return recent[K, V]{set: map[K]V{}, max: max}
}

// add reports whether k is new, and remembers it with v.
func (r *recent[K, V]) add(k K, v V) bool {
	if _, ok := r.set[k]; ok {
		return false
	}
	if len(r.ring) < r.max {
		r.ring = append(r.ring, k)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = k
		r.next = (r.next + 1) % r.max
	}
	r.set[k] = v
	return true
}

// opt returns o's value, or def when absent.
func opt[T any](o Opt[T], def T) T {
	if o.Set {
		return o.V
	}
	return def
}

// request rebuilds a request body: the body shipped (schema 2), with the
// partition a split record names; without a body (older agents, a body
// over the exporter's bound), what the record's fields say: the partition
// of a split record, or an empty body of the API's version where an
// empty body says nothing false; nil for a key or version kmsg does not
// know.
func request(r *Record, topic string, id [16]byte) kmsg.Request {
	if !decode.KnownVersion(r.API, r.Ver) {
		return nil
	}
	var head kmsg.Request
	if len(r.ReqBody) > 0 {
		if q, err := decode.DecodeRequest(r.API, r.Ver, r.ReqBody); err == nil {
			head = q
		}
	}
	split := r.Parts > 0
	switch kmsg.Key(r.API) {
	case kmsg.Produce:
		q, ok := head.(*kmsg.ProduceRequest)
		if !ok {
			q = kmsg.NewPtrProduceRequest()
			q.Version, q.Acks = r.Ver, opt(r.Acks, -1)
			if r.TxnID.Set {
				id := r.TxnID.V
				q.TransactionID = &id
			}
		}
		if split {
			t := kmsg.NewProduceRequestTopic()
			t.Topic, t.TopicID = topic, id
			p := kmsg.NewProduceRequestTopicPartition()
			p.Partition = r.Partition
			t.Partitions = append(t.Partitions, p)
			q.Topics = append(q.Topics, t)
		}
		return q
	case kmsg.Fetch:
		q, ok := head.(*kmsg.FetchRequest)
		if !ok {
			q = kmsg.NewPtrFetchRequest()
			q.Version = r.Ver
			// MaxWaitMillis as shipped; the longest when the agent did
			// not ship it (older agents), so that no rule takes a long
			// poll for a slow or lost answer.
			q.MaxWaitMillis = opt(r.MaxWait, math.MaxInt32)
			rep := opt(r.Replica, -1)
			if r.Ver >= 15 {
				q.ReplicaID, q.ReplicaState.ID = -1, rep
			} else {
				q.ReplicaID = rep
			}
		}
		if split && r.FetchOffset.Set {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = topic, id
			p := kmsg.NewFetchRequestTopicPartition()
			p.Partition, p.FetchOffset = r.Partition, r.FetchOffset.V
			t.Partitions = append(t.Partitions, p)
			q.Topics = append(q.Topics, t)
		}
		return q
	case kmsg.ListOffsets:
		q, ok := head.(*kmsg.ListOffsetsRequest)
		if !ok {
			q = kmsg.NewPtrListOffsetsRequest()
			q.Version, q.ReplicaID = r.Ver, opt(r.Replica, -1)
		}
		if split {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = topic
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Partition, p.Timestamp = r.Partition, opt(r.Timestamp, -1)
			t.Partitions = append(t.Partitions, p)
			q.Topics = append(q.Topics, t)
		}
		return q
	case kmsg.OffsetCommit:
		q, ok := head.(*kmsg.OffsetCommitRequest)
		if !ok {
			q = kmsg.NewPtrOffsetCommitRequest()
			q.Version, q.Group = r.Ver, r.Group
		}
		if split {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic, t.TopicID = topic, id
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset = r.Partition, opt(r.CommittedOffset, -1)
			p.LeaderEpoch = opt(r.OffsetEpoch, -1)
			t.Partitions = append(t.Partitions, p)
			q.Topics = append(q.Topics, t)
		}
		return q
	}
	if head != nil {
		return head
	}
	if !emptyBody(r.API) {
		return nil
	}
	q := kmsg.RequestForKey(r.API)
	if q == nil {
		return nil
	}
	q.SetVersion(r.Ver)
	return q
}

// emptyBody reports the APIs whose body, not shipped, is rebuilt empty:
// those where an empty body says nothing false and its one error code
// is what the rules read (SASL). Any other API's body would mislead
// (an empty Metadata request asks for every topic, an empty
// InitProducerId response gives producer id 0, an empty JoinGroup names
// group ""): it is left out, as a body flows could not decode.
func emptyBody(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return true
	}
	return false
}

// response rebuilds a response body, as request does.
func response(r *Record, topic string, id [16]byte) kmsg.Response {
	if !decode.KnownVersion(r.API, r.Ver) {
		return nil
	}
	var head kmsg.Response
	if len(r.RespBody) > 0 {
		if q, err := decode.DecodeResponse(r.API, r.Ver, r.RespBody); err == nil {
			head = q
		}
	}
	split := r.Parts > 0 && r.Error.Set
	switch kmsg.Key(r.API) {
	case kmsg.Produce:
		q, ok := head.(*kmsg.ProduceResponse)
		if !ok {
			q = kmsg.NewPtrProduceResponse()
			q.Version, q.ThrottleMillis = r.Ver, opt(r.Throttle, 0)
		}
		if split {
			t := kmsg.NewProduceResponseTopic()
			t.Topic, t.TopicID = topic, id
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.ErrorCode = r.Partition, r.Error.V
			p.BaseOffset = opt(r.BaseOffset, -1)
			// A partition's later records (batch_index) start at their
			// own first batch's offset.
			if len(r.Batches) > 0 && r.Batches[0].Offset.Set && r.Batches[0].Offset.V >= 0 {
				p.BaseOffset = r.Batches[0].Offset.V
			}
			p.LogStartOffset = opt(r.LogStartOffset, -1)
			if r.Leader.Set {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = r.Leader.V, opt(r.LeaderEpoch, -1)
			}
			t.Partitions = append(t.Partitions, p)
			q.Topics = append(q.Topics, t)
		}
		return q
	case kmsg.Fetch:
		q, ok := head.(*kmsg.FetchResponse)
		if !ok {
			q = kmsg.NewPtrFetchResponse()
			q.Version, q.ThrottleMillis = r.Ver, opt(r.Throttle, 0)
		}
		if split {
			t := kmsg.NewFetchResponseTopic()
			t.Topic, t.TopicID = topic, id
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = r.Partition, r.Error.V
			p.HighWatermark = opt(r.HighWatermark, -1)
			p.LastStableOffset = opt(r.LastStableOffset, -1)
			p.LogStartOffset = opt(r.LogStartOffset, -1)
			if r.Leader.Set {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = r.Leader.V, opt(r.LeaderEpoch, -1)
			}
			t.Partitions = append(t.Partitions, p)
			q.Topics = append(q.Topics, t)
		}
		return q
	case kmsg.ListOffsets:
		q, ok := head.(*kmsg.ListOffsetsResponse)
		if !ok {
			q = kmsg.NewPtrListOffsetsResponse()
			q.Version, q.ThrottleMillis = r.Ver, opt(r.Throttle, 0)
		}
		if split {
			t := kmsg.NewListOffsetsResponseTopic()
			t.Topic = topic
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition, p.ErrorCode = r.Partition, r.Error.V
			p.Offset, p.LeaderEpoch = opt(r.Offset, -1), opt(r.OffsetEpoch, -1)
			if r.Ver == 0 && r.Offset.Set {
				p.OldStyleOffsets = []int64{r.Offset.V}
			}
			t.Partitions = append(t.Partitions, p)
			q.Topics = append(q.Topics, t)
		}
		return q
	case kmsg.OffsetCommit:
		q, ok := head.(*kmsg.OffsetCommitResponse)
		if !ok {
			q = kmsg.NewPtrOffsetCommitResponse()
			q.Version, q.ThrottleMillis = r.Ver, opt(r.Throttle, 0)
		}
		if split {
			t := kmsg.NewOffsetCommitResponseTopic()
			t.Topic, t.TopicID = topic, id
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = r.Partition, r.Error.V
			t.Partitions = append(t.Partitions, p)
			q.Topics = append(q.Topics, t)
		}
		return q
	}
	if head != nil {
		return head
	}
	if !emptyBody(r.API) {
		return throttleOnly(r)
	}
	q := kmsg.ResponseForKey(r.API)
	if q == nil {
		return nil
	}
	q.SetVersion(r.Ver)
	if len(r.Errors) == 1 && r.Errors[0].Count == 1 {
		// The response's one error code is its top-level ErrorCode.
		if f := reflect.ValueOf(q).Elem().FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 && f.CanSet() {
			f.SetInt(int64(r.Errors[0].Code))
		}
	}
	return q
}

// throttleOnly rebuilds the response of an API whose body is not shipped
// but whose throttle time is (throttle_time_ms, absent when 0): the rules
// reading a throttle time (throttled, slow-responses) read it as in the
// file, 0 included (a client no longer throttled); and it is no API's
// body type, so that the rules reading a body see none, as from a body
// flows could not decode (an empty Metadata response would say the
// cluster has no brokers). nil for an API without a throttle time.
func throttleOnly(r *Record) kmsg.Response {
	q := kmsg.ResponseForKey(r.API)
	if _, ok := q.(kmsg.ThrottleResponse); !ok {
		return nil
	}
	q.SetVersion(r.Ver)
	return &throttled{Response: q, ms: opt(r.Throttle, 0)}
}

// throttled is a response of which only the throttle time is known.
type throttled struct {
	kmsg.Response // an empty body of the API's version: its key, version and KIP-219 cut
	ms            int32
}

// Throttle implements kmsg.ThrottleResponse: the shipped time, and
// whether the broker throttles after sending, as the version says.
func (t *throttled) Throttle() (int32, bool) {
	_, after := t.Response.(kmsg.ThrottleResponse).Throttle()
	return t.ms, after
}

// MarshalJSON shows what is known of the body (--frames -v).
func (t *throttled) MarshalJSON() ([]byte, error) {
	return []byte(`{"Version":` + strconv.Itoa(int(t.GetVersion())) + `,"ThrottleMillis":` + strconv.Itoa(int(t.ms)) + `}`), nil
}

// errorCodes are a response's non-zero error codes: the partition's, or
// those of an exchange not split by partition.
func errorCodes(r *Record) []flows.ErrorCount {
	if r.Parts > 0 {
		if r.Error.Set && r.Error.V != 0 {
			return []flows.ErrorCount{{Code: r.Error.V, Count: 1}}
		}
		return nil
	}
	var out []flows.ErrorCount
	for _, e := range r.Errors {
		if e.Code != 0 && e.Count > 0 {
			out = append(out, flows.ErrorCount{Code: e.Code, Count: int(min(e.Count, 1<<31-1))})
		}
	}
	return out
}

// batches are a record's batch headers as decode gives them: a Produce
// request's with the base offset a producer sends (0; the broker's comes
// with the response), a Fetch response's at their own.
func (rb *Rebuilder) batches(r *Record, topic string, id [16]byte, produce bool) []flows.BatchRef {
	if len(r.Batches) == 0 {
		return nil
	}
	out := make([]flows.BatchRef, len(r.Batches))
	shipped := make([]flows.Shipped, len(r.Batches))
	for i := range r.Batches {
		b := &r.Batches[i]
		d := decode.Batch{
			Magic: b.Magic, Length: b.Bytes, PartitionLeaderEpoch: b.LeaderEpoch, CRC: b.CRC,
			CRCOK: !b.CRCBad, Attributes: b.Attributes, LastOffsetDelta: b.LastOffsetDelta,
			FirstTimestamp: b.FirstTS, MaxTimestamp: b.MaxTS, ProducerID: b.ProducerID,
			ProducerEpoch: b.ProducerEpoch, BaseSequence: b.BaseSequence, Records: b.Records,
		}
		d.ComputedCRC = b.CRC
		if b.CRCBad {
			d.ComputedCRC = b.ComputedCRC
		}
		if !produce {
			d.BaseOffset = opt(b.BaseOffset, opt(b.Offset, 0))
		}
		out[i] = flows.BatchRef{Topic: topic, TopicID: id, Partition: r.Partition, Batch: d}
		if d.Magic == 2 && !d.Control() && !d.Transactional() && d.CRCOK {
			// Records duplicate-batches compares: the agent's
			// fingerprints, if it shipped them made alike.
			s := &shipped[i]
			s.Prints, s.Err = b.Prints, printErr(b.PrintErr)
			if r.PrintFn != rb.PrintFn {
				s.Prints, s.Err = nil, flows.ErrNotShipped
				rb.unprinted(r)
			}
			out[i].Shipped = s
		}
	}
	return out
}

// errBadPrints: the agent could not fingerprint a batch's records (fp_err
// "bad": malformed records, or compression that does not decode).
var errBadPrints = errors.New("records malformed at the agent")

// printErr is the error an agent's fp_err stands for.
func printErr(s string) error {
	switch s {
	case "":
		return nil
	case "cap", "records":
		return decode.ErrOverCap
	case "budget":
		return decode.ErrOverBudget
	case "dropped":
		return flows.ErrNotKept
	}
	return errBadPrints
}

// unprinted tells, once per agent, why its batches are compared by CRC
// only.
func (rb *Rebuilder) unprinted(r *Record) {
	if rb.NoPrints == nil || rb.noPrints[r.Agent] || len(rb.noPrints) >= maxEnds {
		return
	}
	rb.noPrints[r.Agent] = true
	var why string
	switch {
	case r.V < 3:
		why = fmt.Sprintf("ships records of schema %d, without record fingerprints", r.V)
	case r.PrintFn == "":
		why = "ships no record fingerprints (--export-fingerprints=false)"
	default:
		why = fmt.Sprintf("fingerprints records with %s, this correlator takes %s (--fingerprint-key)", r.PrintFn, rb.PrintFn)
	}
	rb.NoPrints(r.Agent, why)
}
