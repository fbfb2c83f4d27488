package legacy

// cpIndex holds state V per client, topic and partition, as a map keyed by
// nlKey would, found in two steps: the client's topic first, through a
// small cache (a connection names the same topics over and over) in front
// of a map, then the partition by number, in an array (partitions are
// numbered from 0). A Metadata response naming a few topics of many
// partitions so costs a few lookups by client and topic, not one per
// partition, each hashing the client id and the topic name. Entries are
// never removed.
type cpIndex[V any] struct {
	topics map[cpKey]*cpTopic[V]
	cache  *[1024]cpSlot[V]
	gen    uint64 // topics created: a cached absence is valid within one gen
}

// cpKey is a client and a topic, as nlKey names them.
type cpKey struct {
	c     nlClient
	topic string
	id    [16]byte
}

// cpTopic is one client's state for one topic's partitions: partitions
// 0 to len(dense)-1 in dense, others in sparse. dense grows only to cover
// a partition at most cpStep past its end, so that its length stays within
// twice the partitions held plus cpStep.
type cpTopic[V any] struct {
	dense  []cpPart[V]
	sparse map[int32]*V
}

type cpPart[V any] struct {
	v  V
	ok bool
}

const cpStep = 16

type cpSlot[V any] struct {
	key cpKey
	t   *cpTopic[V] // nil: absent at gen
	gen uint64
	ok  bool
}

// topic returns the client's topic seen on connection conn, or nil if it
// holds nothing; create adds it.
func (x *cpIndex[V]) topic(conn int, key *cpKey, create bool) *cpTopic[V] {
	if x.topics == nil {
		x.topics = make(map[cpKey]*cpTopic[V])
		x.cache = new([1024]cpSlot[V])
	}
	h := uint(conn) << 2
	if n := len(key.topic); n > 0 {
		h += uint(key.topic[0]) + uint(key.topic[n-1]) + uint(n)
	} else {
		h += uint(key.id[0])
	}
	s := &x.cache[h%uint(len(x.cache))]
	if s.ok && s.key == *key && (s.t != nil || (s.gen == x.gen && !create)) {
		return s.t
	}
	t := x.topics[*key]
	if t == nil && create {
		t = &cpTopic[V]{}
		x.topics[*key] = t
		x.gen++
	}
	*s = cpSlot[V]{key: *key, t: t, gen: x.gen, ok: true}
	return t
}

// part returns a partition's state, or nil. The pointer is valid until
// the next add.
func (t *cpTopic[V]) part(p int32) *V {
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

// add returns a partition's state, creating it zero. The pointer is valid
// until the next add.
func (t *cpTopic[V]) add(p int32) *V {
	if v := t.part(p); v != nil {
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
