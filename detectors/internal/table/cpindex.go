// Package table holds bounded tables that the rules keep state in on the
// hot path, allocated once and found again without allocating.
package table

import "net/netip"

// CPIndex holds state V per client, topic and partition, as a map keyed by
// all three would, found in two steps: the client's topic first, through a
// small cache (a connection names the same topics over and over) in front
// of a map, then the partition by number, in an array (partitions are
// numbered from 0). A Metadata response naming a few topics of many
// partitions so costs a few lookups by client and topic, not one per
// partition, each hashing the client id and the topic name. Entries are
// never removed: the caller bounds what it adds.
type CPIndex[V any] struct {
	topics map[CPKey]*CPTopic[V]
	cache  *[1024]cpSlot[V]
	gen    uint64 // topics created: a cached absence is valid within one gen
}

// CPKey is a client (its host and client id) and a topic, by name or, for
// a topic named only by id, by id.
type CPKey struct {
	Host     netip.Addr
	ClientID string
	Topic    string
	TopicID  [16]byte
}

// CPTopic is one client's state for one topic's partitions: partitions
// 0 to len(dense)-1 in dense, others in sparse. dense grows only to cover
// a partition at most cpStep past its end, so that its length stays within
// twice the partitions held plus cpStep.
type CPTopic[V any] struct {
	dense  []cpPart[V]
	sparse map[int32]*V
}

type cpPart[V any] struct {
	v  V
	ok bool
}

const cpStep = 16

type cpSlot[V any] struct {
	key CPKey
	t   *CPTopic[V] // nil: absent at gen
	gen uint64
	ok  bool
}

// Topic returns the client's topic seen on connection conn (which only
// picks the cache slot), or nil if it holds nothing; create adds it.
func (x *CPIndex[V]) Topic(conn int, key *CPKey, create bool) *CPTopic[V] {
	if x.topics == nil {
		x.topics = make(map[CPKey]*CPTopic[V])
		x.cache = new([1024]cpSlot[V])
	}
	h := uint(conn) << 2
	if n := len(key.Topic); n > 0 {
		h += uint(key.Topic[0]) + uint(key.Topic[n-1]) + uint(n)
	} else {
		h += uint(key.TopicID[0])
	}
	s := &x.cache[h%uint(len(x.cache))]
	if s.ok && s.key == *key && (s.t != nil || (s.gen == x.gen && !create)) {
		return s.t
	}
	t := x.topics[*key]
	if t == nil && create {
		t = &CPTopic[V]{}
		x.topics[*key] = t
		x.gen++
	}
	*s = cpSlot[V]{key: *key, t: t, gen: x.gen, ok: true}
	return t
}

// Part returns a partition's state, or nil (also on a nil topic). The
// pointer is valid until the next Add.
func (t *CPTopic[V]) Part(p int32) *V {
	if t == nil {
		return nil
	}
	if p >= 0 && int(p) < len(t.dense) {
		if e := &t.dense[p]; e.ok {
			return &e.v
		}
		return nil
	}
	return t.sparse[p]
}

// Add returns a partition's state, creating it zero. The pointer is valid
// until the next Add.
func (t *CPTopic[V]) Add(p int32) *V {
	if v := t.Part(p); v != nil {
		return v
	}
	if p >= 0 && int(p) < len(t.dense)+cpStep {
		for i := int32(len(t.dense)); i <= p; i++ {
			t.dense = append(t.dense, cpPart[V]{})
			if v, ok := t.sparse[i]; ok { // moves in
				t.dense[i] = cpPart[V]{v: *v, ok: true}
				delete(t.sparse, i)
			}
		}
		e := &t.dense[p]
		e.ok = true
		return &e.v
	}
	if t.sparse == nil {
		t.sparse = make(map[int32]*V)
	}
	v := new(V)
	t.sparse[p] = v
	return v
}
