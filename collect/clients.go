package collect

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// The inventory's bounds: clients, and per client the API versions,
// topics, connections, servers, software, ids listed.
const (
	maxClients       = report.MaxClients
	maxClientAPIs    = 64
	maxClientTopics  = 100
	maxClientConns   = 64
	maxClientServers = 16
	maxClientIDs     = 8
)

type clientAPIKey struct{ key, version int16 }

// clientAPI counts one API key and version of a client: a handful per
// client, searched in the order first used, cheaper than a map's hashing
// at every request.
type clientAPI struct {
	clientAPIKey
	n int64
}

type client struct {
	key         cluster.Client // the host as its socket showed it, not unmapped
	software    []report.Software
	swLast      []int // the last connection counted per software
	conns       []int
	moreConns   int
	lastConn    *flows.ConnInfo
	servers     []netip.AddrPort
	roles       cluster.RoleSet
	file        int
	firstPacket uint64
	first, last time.Time
	requests    int64
	apis        []clientAPI
	lastTopic   string   // the topic name last added, not looked up again
	lastTopicID [16]byte // the same for a topic named by id
	apisCut     int64
	topics      map[string]bool
	topicIDs    map[[16]byte]bool
	topicsCut   int64
	acks        map[int16]int64
	codecs      [8]int64
	producerIDs []int64
	txnIDs      []string
	txnBatches  bool
	initPID     int64
	txns        map[string]int64
}

// inventory gathers the clients, for the Collector.
type inventory struct {
	clients map[cluster.Client]*client
	// cut counts the requests of clients not listed: the table was full.
	cut int64
	// byConn is the client of a connection's last request, looked up by
	// client id and host only when the connection's client id changes or
	// another connection took its slot.
	byConn connCache[*client]
	// topic is addTopic bound once, for decode.RequestTopics.
	topic func(name string, id [16]byte)
	cur   *client
}

func newInventory() *inventory {
	inv := &inventory{clients: map[cluster.Client]*client{}}
	inv.topic = inv.addTopic
	return inv
}

func (inv *inventory) client(m *flows.Message) *client {
	id := m.Conn.ID
	slot := inv.byConn.slot(id)
	if c := slot.v; c != nil && slot.id == id && m.Client.ID == c.key.ID {
		return c
	}
	k := cluster.Client{Host: m.Conn.Client.Addr(), ID: m.Client.ID}
	c := inv.clients[k]
	if c == nil {
		if len(inv.clients) >= maxClients {
			return nil
		}
		c = &client{key: k, file: m.File, firstPacket: m.Packet, first: m.Time}
		inv.clients[k] = c
	}
	slot.id, slot.v = id, c
	return c
}

// request adds a request to its client.
func (inv *inventory) request(m *flows.Message) {
	if m.Conn == nil {
		return
	}
	c := inv.client(m)
	if c == nil {
		inv.cut++
		return
	}
	c.requests++
	c.last = m.Time
	c.roles[m.Role]++
	if m.Conn != c.lastConn {
		c.lastConn = m.Conn
		c.addConn(m.Conn)
	}
	c.countAPI(clientAPIKey{m.Key, m.Version})
	if m.Req == nil {
		return
	}
	inv.cur = c
	decode.RequestTopics(m.Req, inv.topic)
	switch r := m.Req.(type) {
	case *kmsg.ApiVersionsRequest:
		if r.Version >= 3 && (r.ClientSoftwareName != "" || r.ClientSoftwareVersion != "") {
			c.addSoftware(r.ClientSoftwareName, r.ClientSoftwareVersion, m.Conn.ID)
		}
	case *kmsg.ProduceRequest:
		if c.acks == nil {
			c.acks = map[int16]int64{}
		}
		c.acks[r.Acks]++
		if r.TransactionID != nil {
			c.addTxnID(*r.TransactionID)
		}
		for i := range m.Batches {
			b := &m.Batches[i]
			c.codecs[b.Codec()&7]++
			if b.ProducerID >= 0 && b.Magic >= 2 {
				c.addProducerID(b.ProducerID)
			}
			c.txnBatches = c.txnBatches || b.Transactional()
		}
	case *kmsg.InitProducerIDRequest:
		c.initPID++
		if r.TransactionalID != nil {
			c.addTxnID(*r.TransactionalID)
		}
	case *kmsg.AddPartitionsToTxnRequest:
		c.txn("AddPartitionsToTxn")
		c.addTxnID(r.TransactionalID)
		for i := range r.Transactions {
			c.addTxnID(r.Transactions[i].TransactionalID)
		}
	case *kmsg.AddOffsetsToTxnRequest:
		c.txn("AddOffsetsToTxn")
		c.addTxnID(r.TransactionalID)
	case *kmsg.TxnOffsetCommitRequest:
		c.txn("TxnOffsetCommit")
		c.addTxnID(r.TransactionalID)
	case *kmsg.EndTxnRequest:
		if r.Commit {
			c.txn("EndTxn commit")
		} else {
			c.txn("EndTxn abort")
		}
		c.addTxnID(r.TransactionalID)
	}
}

// exchange notes the producer id a broker gave (InitProducerId).
func (inv *inventory) exchange(x *flows.Exchange) {
	if x.Req == nil || x.Resp == nil || x.Req.Conn == nil {
		return
	}
	r, ok := x.Resp.Resp.(*kmsg.InitProducerIDResponse)
	if !ok || r.ErrorCode != 0 || r.ProducerID < 0 {
		return
	}
	if c := inv.clients[cluster.Client{Host: x.Req.Conn.Client.Addr(), ID: x.Req.Client.ID}]; c != nil {
		c.addProducerID(r.ProducerID)
	}
}

func (inv *inventory) addTopic(name string, id [16]byte) {
	c := inv.cur
	if name == "" && id != [16]byte{} {
		if id == c.lastTopicID || c.topicIDs[id] {
			c.lastTopicID = id
			return
		}
		if len(c.topics)+len(c.topicIDs) >= maxClientTopics {
			c.topicsCut++
			return
		}
		if c.topicIDs == nil {
			c.topicIDs = map[[16]byte]bool{}
		}
		c.topicIDs[id] = true
		return
	}
	if name == "" || name == c.lastTopic || c.topics[name] {
		c.lastTopic = name
		return
	}
	if len(c.topics)+len(c.topicIDs) >= maxClientTopics {
		c.topicsCut++
		return
	}
	if c.topics == nil {
		c.topics = map[string]bool{}
	}
	c.topics[name] = true
}

// countAPI counts a request of k, or as not listed beyond maxClientAPIs.
func (c *client) countAPI(k clientAPIKey) {
	for i := range c.apis {
		if c.apis[i].clientAPIKey == k {
			c.apis[i].n++
			return
		}
	}
	if len(c.apis) >= maxClientAPIs {
		c.apisCut++
		return
	}
	c.apis = append(c.apis, clientAPI{k, 1})
}

func (c *client) addConn(ci *flows.ConnInfo) {
	if slices.Contains(c.conns, ci.ID) {
		return
	}
	if len(c.conns) >= maxClientConns {
		c.moreConns++
	} else {
		c.conns = append(c.conns, ci.ID)
	}
	if len(c.servers) < maxClientServers && !slices.Contains(c.servers, ci.Server) {
		c.servers = append(c.servers, ci.Server)
	}
}

func (c *client) addSoftware(name, version string, conn int) {
	for i, s := range c.software {
		if s.Name == name && s.Version == version {
			if c.swLast[i] != conn {
				c.software[i].Connections++
				c.swLast[i] = conn
			}
			return
		}
	}
	if len(c.software) < maxClientIDs {
		c.software = append(c.software, report.Software{Name: name, Version: version, Connections: 1})
		c.swLast = append(c.swLast, conn)
	}
}

func (c *client) addProducerID(id int64) { c.producerIDs = addBounded(c.producerIDs, id) }

func (c *client) addTxnID(id string) {
	if id != "" {
		c.txnIDs = addBounded(c.txnIDs, id)
	}
}

// addBounded adds v to the set s, kept to maxClientIDs.
func addBounded[T comparable](s []T, v T) []T {
	if len(s) >= maxClientIDs || slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

func (c *client) txn(what string) {
	if c.txns == nil {
		c.txns = map[string]int64{}
	}
	c.txns[what]++
}

// build lists the clients by host, then client id, with topic ids named
// as the capture taught.
func (inv *inventory) build(nodes *cluster.Nodes) []report.ClientEntry {
	cs := make([]*client, 0, len(inv.clients))
	for _, c := range inv.clients {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].key.Less(cs[j].key) })
	out := make([]report.ClientEntry, len(cs))
	for i, c := range cs {
		out[i] = c.report(nodes)
	}
	return out
}

func (c *client) report(nodes *cluster.Nodes) report.ClientEntry {
	out := report.ClientEntry{
		Host: c.key.Host.String(), ClientID: c.key.ID, Software: append([]report.Software{}, c.software...),
		Connections: append([]int{}, c.conns...), ConnectionsNotListed: c.moreConns, Servers: []string{}, Roles: []string{},
		File: c.file, FirstPacket: c.firstPacket, First: c.first, Last: c.last, Requests: c.requests,
		APIsNotListed: c.apisCut, Kafka40Ready: true, Topics: []string{}, TopicsNotListed: c.topicsCut,
		ProducerIDs: append([]int64(nil), c.producerIDs...), TransactionalIDs: append([]string(nil), c.txnIDs...),
	}
	for _, s := range c.servers {
		out.Servers = append(out.Servers, s.String())
	}
	for _, r := range c.roles.List() {
		out.Roles = append(out.Roles, r.String())
	}
	for _, ca := range c.apis {
		k, n := ca.clientAPIKey, ca.n
		a := report.ClientAPI{Key: k.key, Name: decode.Name(k.key), Version: k.version, Requests: n}
		if r, ok := decode.RemovedIn40(k.key, k.version); ok {
			a.RemovedIn40, a.RestoredIn = true, r.RestoredIn
			out.Kafka40Ready = false
		}
		out.APIs = append(out.APIs, a)
	}
	slices.SortFunc(out.APIs, func(a, b report.ClientAPI) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Version, b.Version))
	})
	for name := range c.topics {
		out.Topics = append(out.Topics, name)
	}
	for id := range c.topicIDs {
		name := topicByID(nodes, id)
		if !c.topics[name] {
			out.Topics = append(out.Topics, name)
		}
	}
	sort.Strings(out.Topics)
	if len(c.acks) > 0 {
		out.Acks = map[string]int64{}
		for a, n := range c.acks {
			out.Acks[acksName(a)] += n
		}
	}
	for codec, n := range c.codecs {
		if n > 0 {
			if out.Compression == nil {
				out.Compression = map[string]int64{}
			}
			out.Compression[decode.Codec(codec).String()] += n
		}
	}
	if len(c.txns) > 0 {
		out.Transactions = maps.Clone(c.txns)
	}
	out.InitProducerID = c.initPID
	out.Idempotent = len(c.producerIDs) > 0 || c.initPID > 0
	out.Transactional = len(c.txnIDs) > 0 || c.txnBatches
	return out
}

// acksName shows Produce's acks as the producer setting names it.
func acksName(acks int16) string {
	if acks == -1 {
		return "all"
	}
	return strconv.Itoa(int(acks))
}

// topicByID names a topic known by id only: by the name Metadata gave it
// in the capture, else by the id in base64 as Kafka prints it.
func topicByID(nodes *cluster.Nodes, id [16]byte) string {
	if nodes != nil {
		if n, ok := nodes.TopicName(id); ok {
			return n
		}
	}
	return (&flows.Message{}).TopicName("", id)
}
