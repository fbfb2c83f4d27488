package legacy

import (
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"iter"
	"math/bits"
	"net/netip"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
)

// This file holds what duplicate-batches and replica-divergence share:
// naming a batch's partition, giving produced batches the offsets the
// broker assigned, and a map that forgets its oldest entries.

// partKey names a topic-partition: by name when known, else by topic id.
type partKey struct {
	topic string
	id    [16]byte
	part  int32
}

func batchPart(b *flows.BatchRef) partKey {
	switch {
	case b.Topic != "":
		return partKey{topic: b.Topic, part: b.Partition}
	case b.TopicID == decode.ClusterMetadataTopicID:
		return partKey{topic: flows.ClusterMetadataTopic, part: b.Partition}
	}
	return partKey{id: b.TopicID, part: b.Partition}
}

// name returns the topic name, resolved through Metadata seen anywhere in
// the capture, or the topic id as Kafka prints it (base64).
func (k partKey) name(env *Env) string {
	if k.topic != "" {
		return k.topic
	}
	if env != nil && env.Nodes != nil {
		if n, ok := env.Nodes.TopicName(k.id); ok {
			return n
		}
	}
	return base64.RawURLEncoding.EncodeToString(k.id[:])
}

func (k partKey) less(o partKey) bool {
	if k.topic != o.topic {
		return k.topic < o.topic
	}
	if k.id != o.id {
		return string(k.id[:]) < string(o.id[:])
	}
	return k.part < o.part
}

func (k partKey) label(env *Env) string {
	return k.name(env) + "-" + strconv.Itoa(int(k.part))
}

// partCache is a direct-mapped cache in front of a detector's partition
// map: a batch's partition is found by comparing one key, not by hashing
// its topic name into the map.
type partCache[P any] [256]partSlot[P]

type partSlot[P any] struct {
	k partKey
	p *P
}

func (c *partCache[P]) slot(k *partKey) *partSlot[P] {
	h := uint32(k.part) ^ uint32(len(k.topic))<<8 ^ binary.LittleEndian.Uint32(k.id[:])
	if n := len(k.topic); n > 0 {
		h ^= uint32(k.topic[0])<<16 ^ uint32(k.topic[n-1])<<24 ^ uint32(k.topic[n/2])<<4
	}
	return &c[(h*0x9e3779b1)>>24]
}

// bitset is a set of small non-negative integers (copy source indices).
type bitset []uint64

// add puts i in the set and reports whether it was not there.
func (b *bitset) add(i uint32) bool {
	w := int(i >> 6)
	if w >= len(*b) {
		*b = append(*b, make([]uint64, w+1-len(*b))...)
	}
	m := uint64(1) << (i & 63)
	if (*b)[w]&m != 0 {
		return false
	}
	(*b)[w] |= m
	return true
}

// all yields the members in increasing order.
func (b bitset) all() iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		for w, x := range b {
			for x != 0 {
				i := uint32(w)<<6 | uint32(bits.TrailingZeros64(x))
				if !yield(i) {
					return
				}
				x &= x - 1
			}
		}
	}
}

// produceBatches calls fn for every batch of a Produce request whose
// partition the response answers, with the offset the broker gave it:
// the partition's baseOffset plus the offsets taken by the batches before
// it in the request. base is -1 when the partition was refused (code is
// the error) or the broker gave no offset. Batches of partitions missing
// from the response are not reported.
func produceBatches(x *flows.Exchange, fn func(i int, b *flows.BatchRef, base int64, code int16)) {
	if x.Req == nil || x.Resp == nil || len(x.Req.Batches) == 0 {
		return
	}
	resp, ok := x.Resp.Resp.(*kmsg.ProduceResponse)
	if !ok {
		return
	}
	var (
		cur     *kmsg.ProduceResponseTopicPartition
		curKey  partKey
		next    int64
		started bool
	)
	for i := range x.Req.Batches {
		b := &x.Req.Batches[i]
		k := partKey{topic: b.Topic, id: b.TopicID, part: b.Partition}
		if !started || k != curKey {
			started, curKey = true, k
			cur = findProduced(resp, b)
			if cur != nil {
				next = cur.BaseOffset
			}
		}
		if cur == nil {
			continue
		}
		if cur.ErrorCode != 0 || cur.BaseOffset < 0 {
			fn(i, b, -1, cur.ErrorCode)
			continue
		}
		fn(i, b, next, 0)
		next += int64(b.LastOffsetDelta) + 1
	}
}

func findProduced(resp *kmsg.ProduceResponse, b *flows.BatchRef) *kmsg.ProduceResponseTopicPartition {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		byName := t.Topic != "" && t.Topic == b.Topic
		byID := t.TopicID != [16]byte{} && t.TopicID == b.TopicID
		if !byName && !byID {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == b.Partition {
				return &t.Partitions[j]
			}
		}
	}
	return nil
}

// computedCRC is the checksum of a batch's bytes as they are: CRC-32C from
// the attributes on for magic 2, CRC-32 (IEEE) from the magic byte on for
// legacy messages. raw must be valid.
func computedCRC(magic int8, raw []byte) uint32 {
	if magic == 2 {
		if len(raw) < 21 {
			return 0
		}
		return crc32.Checksum(raw[21:], castagnoliTable)
	}
	if len(raw) < 16 {
		return 0
	}
	return crc32.ChecksumIEEE(raw[16:])
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// fifo is a map bounded to limit entries that forgets the oldest insertion
// first (calling onEvict). Entries deleted early leave their ring slot
// stale; a sequence number tells a stale slot from a live one, so a key
// put again is not evicted for its older slot.
type fifo[K comparable, V any] struct {
	m       map[K]fifoVal[V]
	ring    []fifoSlot[K]
	head    int
	seq     uint64
	limit   int
	evicted int64
	onEvict func(K, V)
}

type fifoVal[V any] struct {
	v   V
	seq uint64
}

type fifoSlot[K comparable] struct {
	k   K
	seq uint64
}

func newFifo[K comparable, V any](limit int, onEvict func(K, V)) *fifo[K, V] {
	return &fifo[K, V]{m: make(map[K]fifoVal[V]), limit: max(limit, 1), onEvict: onEvict}
}

func (f *fifo[K, V]) get(k K) (V, bool) {
	e, ok := f.m[k]
	return e.v, ok
}

func (f *fifo[K, V]) len() int { return len(f.m) }

// put inserts or replaces; a replaced value keeps its place in the order.
func (f *fifo[K, V]) put(k K, v V) {
	if e, ok := f.m[k]; ok {
		f.m[k] = fifoVal[V]{v, e.seq}
		return
	}
	f.seq++
	slot := fifoSlot[K]{k, f.seq}
	if len(f.ring) < f.limit {
		f.ring = append(f.ring, slot)
	} else {
		old := f.ring[f.head]
		if e, ok := f.m[old.k]; ok && e.seq == old.seq {
			delete(f.m, old.k)
			f.evicted++
			if f.onEvict != nil {
				f.onEvict(old.k, e.v)
			}
		}
		f.ring[f.head] = slot
		f.head = (f.head + 1) % f.limit
	}
	f.m[k] = fifoVal[V]{v, f.seq}
}

func (f *fifo[K, V]) del(k K) { delete(f.m, k) }

// each calls fn for the live entries, oldest first.
func (f *fifo[K, V]) each(fn func(K, V)) {
	n := len(f.ring)
	for i := range n {
		s := f.ring[(f.head+i)%n]
		if e, ok := f.m[s.k]; ok && e.seq == s.seq {
			fn(s.k, e.v)
		}
	}
}

// offsetRanges is a set of offsets kept as sorted, disjoint, non-adjacent
// ranges: the offsets of a partition whose batches have been seen. A log
// read in order is one range whatever its length.
type offsetRanges struct {
	r       []offsetRange
	dropped int64
}

type offsetRange struct{ lo, hi int64 }

// maxRanges bounds a partition's ranges; the lowest are forgotten first.
const maxRanges = 4096

func (s *offsetRanges) contains(x int64) bool {
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i].hi >= x })
	return i < len(s.r) && s.r[i].lo <= x
}

func (s *offsetRanges) add(lo, hi int64) {
	if hi < lo {
		hi = lo
	}
	// First range that ends at or after lo-1 (could merge with lo).
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i].hi >= lo-1 })
	j := i
	for j < len(s.r) && s.r[j].lo <= hi+1 {
		lo, hi = min(lo, s.r[j].lo), max(hi, s.r[j].hi)
		j++
	}
	if i == j {
		s.r = append(s.r, offsetRange{})
		copy(s.r[i+1:], s.r[i:])
		s.r[i] = offsetRange{lo, hi}
	} else {
		s.r[i] = offsetRange{lo, hi}
		s.r = append(s.r[:i+1], s.r[j:]...)
	}
	if len(s.r) > maxRanges {
		s.r = s.r[1:]
		s.dropped++
	}
}

// copyPath is how a copy of a batch travelled.
type copyPath uint8

const (
	pathProduce  copyPath = iota // a Produce request: the producer's bytes
	pathConsumer                 // a client's Fetch response
	pathReplica                  // a follower's Fetch response
	pathRaft                     // a KRaft voter's or observer's Fetch response
)

func (p copyPath) String() string {
	switch p {
	case pathProduce:
		return "produce"
	case pathConsumer:
		return "consumer-fetch"
	case pathReplica:
		return "replica-fetch"
	case pathRaft:
		return "raft-fetch"
	}
	return "?"
}

// fetchPath classifies a Fetch by its role.
func fetchPath(m *flows.Message) copyPath {
	switch m.Role {
	case flows.RoleReplication:
		return pathReplica
	case flows.RoleRaft:
		return pathRaft
	}
	return pathConsumer
}

// fetcherID is the node id a Fetch request declares (replicaState or
// replicaId), or the one in its client id, or -1.
func fetcherID(m *flows.Message) int32 {
	if r, ok := m.Req.(*kmsg.FetchRequest); ok {
		if r.Version >= 15 && r.ReplicaState.ID >= 0 {
			return r.ReplicaState.ID
		}
		if r.Version <= 14 && r.ReplicaID >= 0 {
			return r.ReplicaID
		}
	}
	if id, ok := flows.FetcherNode(m.ClientID); ok {
		return id
	}
	return -1
}

// copySource is one connection and path that carried copies of batches,
// with what is needed to name the nodes at each end once the capture has
// been read (env.Nodes learns as it goes).
type copySource struct {
	path     copyPath
	conn     int
	clientID string
	client   netip.AddrPort
	server   netip.AddrPort
	fetcher  int32 // declared fetcher node id, -1 if none
}

type copySourceKey struct {
	conn     int
	path     copyPath
	fetcher  int32
	clientID string
}

// serverNode is the node that served (or, for a produce, received) the copy.
func (s *copySource) serverNode(env *Env) int32 {
	if env == nil || env.Nodes == nil {
		return -1
	}
	return env.Nodes.Server(s.server)
}

// holderNode is the node that holds the copy once it has arrived: the
// fetching replica for replica and raft fetches, else the server.
func (s *copySource) holderNode(env *Env) int32 {
	if s.path != pathReplica && s.path != pathRaft {
		return s.serverNode(env)
	}
	if s.fetcher >= 0 {
		return s.fetcher
	}
	if env == nil || env.Nodes == nil {
		return -1
	}
	return env.Nodes.Host(s.client.Addr())
}

// serverLabel is "node 2 (172.31.2.2:9092)" or the address.
func (s *copySource) serverLabel(env *Env) string {
	if env == nil || env.Nodes == nil {
		return s.server.String()
	}
	return env.Nodes.Label(s.server, true)
}

// holderLabel names the holder of a copy for a person.
func (s *copySource) holderLabel(env *Env) string {
	switch s.path {
	case pathReplica, pathRaft:
		if id := s.holderNode(env); id >= 0 {
			return "node " + strconv.Itoa(int(id)) + " (" + s.clientID + ", " + s.client.Addr().String() + ")"
		}
		return s.clientID + " (" + s.client.Addr().String() + ")"
	case pathConsumer:
		return "consumer " + s.clientID + " (" + s.client.String() + ") reading from " + s.serverLabel(env)
	}
	return "producer " + s.clientID + " (" + s.client.String() + ") writing to " + s.serverLabel(env)
}

// copySources interns the sources of copies so that per-batch state holds
// a small index; beyond maxSources new sources share index 0's slot
// "unknown" (never the case in practice: a source is a connection).
type copySources struct {
	list []copySource
	idx  map[copySourceKey]uint32
	// cache holds recent lookups by connection and path: a connection
	// carries the copies of one source, over and over.
	cache *[1 << 14]srcSlot
}

type srcSlot struct {
	clientID string
	conn     int32
	fetcher  int32
	i        uint32
	path     copyPath
	ok       bool
}

const maxSources = 8192

func (cs *copySources) of(m *flows.Message, path copyPath) uint32 {
	if cs.idx == nil {
		cs.idx = make(map[copySourceKey]uint32)
		cs.cache = new([1 << 14]srcSlot)
		cs.list = append(cs.list, copySource{path: path, conn: 0, clientID: "?", fetcher: -1})
	}
	fetcher := int32(-1)
	if path == pathReplica || path == pathRaft {
		fetcher = fetcherID(m)
	}
	k := copySourceKey{conn: m.Conn.ID, path: path, fetcher: fetcher, clientID: m.ClientID}
	slot := &cs.cache[(uint(k.conn)<<2|uint(path))%uint(len(cs.cache))]
	if slot.ok && int(slot.conn) == k.conn && slot.path == path && slot.fetcher == fetcher && slot.clientID == k.clientID {
		return slot.i
	}
	i, ok := cs.idx[k]
	if !ok {
		if len(cs.list) >= maxSources {
			return 0 // not cached: the map is full for good
		}
		i = uint32(len(cs.list))
		cs.list = append(cs.list, copySource{path: path, conn: m.Conn.ID, clientID: m.ClientID,
			client: m.Conn.Client, server: m.Conn.Server, fetcher: fetcher})
		cs.idx[k] = i
	}
	if int(int32(k.conn)) == k.conn {
		*slot = srcSlot{clientID: k.clientID, conn: int32(k.conn), fetcher: fetcher, i: i, path: path, ok: true}
	}
	return i
}

func (cs *copySources) get(i uint32) *copySource { return &cs.list[i] }
