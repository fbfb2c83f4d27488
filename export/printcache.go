package export

import (
	"net/netip"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
)

// One batch travels many times: produced, fetched by each follower,
// fetched by each consumer group. Its record fingerprints are a function
// of its bytes from the attributes to the end (the timestamps, keys,
// values and headers, all under its CRC-32C), so the agent makes them
// once and ships the same ones for every copy it sees again: a copy is
// the same batch when it comes from the same broker (server address),
// topic, partition and base offset with the same length and CRC-32C.
//
// What that trusts: a broker's log holds one batch at a base offset of a
// partition, and serves it as written (followers copy it byte for byte),
// so a different batch there needs the log truncated and rewritten at
// that very offset (a leader elected without the batch, a topic deleted
// and made again under the name while the cache still holds it) and the
// new batch of the same length and CRC-32C: by chance once in 2^32 such
// rewrites; on purpose only by someone who both crafts the CRC (CRC-32C
// is linear) and has the broker write the batch at the truncated offset.
// Such a batch would ship the fingerprints of the one it replaced, within
// printCacheBatches batches of it. Nothing is trusted across brokers or
// between a batch's and another's bytes: the fingerprints themselves stay
// SHA-256 (or HMAC-SHA256) of each record.

// The cache's bounds: the fingerprints of the newest printCachePrints
// records (24 bytes each: 6 MiB) in at most printCacheBatches batches.
// Copies further apart than that (a consumer group reading far behind)
// are fingerprinted again.
const (
	printCachePrints  = 1 << 18
	printCacheBatches = 1 << 14
)

// printKey is a batch's place and checksum (see above).
type printKey struct {
	server netip.AddrPort
	part   cluster.Partition // by its topic's id when its name is not known
	length int32
	base   int64
	crc    uint32
}

// keyOf is the key of batch b at base offset base served by server.
func keyOf(server netip.AddrPort, b *flows.BatchRef, base int64) printKey {
	k := printKey{server: server, part: cluster.Partition{Topic: b.Topic, Num: b.Partition}, length: b.Length, base: base, crc: b.CRC}
	if b.Topic == "" {
		k.part.TopicID = b.TopicID
	}
	return k
}

// printCache holds the newest batches' fingerprints in a ring: a batch's
// are ring[at%len : at%len+n] while at+printCachePrints >= head.
type printCache struct {
	index map[printKey]cachedPrints
	ring  []decode.RecordHash // grows to printCachePrints
	head  int64               // fingerprints written so far, gaps included
	order []cachedAt          // a ring of printCacheBatches: size of them from first, oldest first
	first int
	size  int
}

type cachedPrints struct {
	at int64
	n  int32
}

type cachedAt struct {
	k  printKey
	at int64
}

// get returns the fingerprints kept for k (valid until the next put).
func (c *printCache) get(k printKey) ([]decode.RecordHash, bool) {
	p, ok := c.index[k]
	if !ok || p.at+printCachePrints < c.head {
		return nil, false
	}
	i := int(p.at % printCachePrints)
	return c.ring[i : i+int(p.n)], true
}

// put keeps hs as k's, evicting the oldest batches to make room.
func (c *printCache) put(k printKey, hs []decode.RecordHash) {
	n := len(hs)
	if n == 0 || n > MaxPrints {
		return
	}
	if c.index == nil {
		c.index = make(map[printKey]cachedPrints)
		c.order = make([]cachedAt, printCacheBatches)
	}
	i := int(c.head % printCachePrints)
	if i+n > printCachePrints { // never split a batch's prints
		c.head += int64(printCachePrints - i)
		i = 0
	}
	if len(c.ring) < i+n {
		if cap(c.ring) < i+n {
			grown := make([]decode.RecordHash, i+n, min(printCachePrints, max(2*cap(c.ring), i+n, 4096)))
			copy(grown, c.ring)
			c.ring = grown
		}
		c.ring = c.ring[:i+n]
	}
	copy(c.ring[i:], hs)
	at := c.head
	c.head += int64(n)
	if c.size == len(c.order) {
		c.pop()
	}
	c.order[(c.first+c.size)%len(c.order)] = cachedAt{k, at}
	c.size++
	c.index[k] = cachedPrints{at: at, n: int32(n)}
	// Batches whose fingerprints were overwritten leave the index.
	for c.size > 0 && c.order[c.first].at+printCachePrints < c.head {
		c.pop()
	}
}

// pop forgets the oldest batch, unless its key was put again since.
func (c *printCache) pop() {
	o := &c.order[c.first]
	if p, ok := c.index[o.k]; ok && p.at == o.at {
		delete(c.index, o.k)
	}
	*o = cachedAt{}
	c.first = (c.first + 1) % len(c.order)
	c.size--
}
