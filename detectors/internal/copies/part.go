// Package copies follows the copies of record batches a capture shows: a
// batch as its producer sent it and as brokers served it to consumers,
// followers and KRaft voters. It names the partition each copy belongs to,
// the offsets seen of each partition, and who held each copy: what
// duplicate-batches and replica-divergence compare.
package copies

import (
	"encoding/binary"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/flows"
)

// PartOf is the partition of a batch, as cluster.Partition.Key keys it
// (flows named the batch's topic by its id already, when Metadata had).
func PartOf(b *flows.BatchRef) cluster.Partition {
	return cluster.Partition{Topic: b.Topic, TopicID: b.TopicID, Num: b.Partition}.Key(nil)
}

// Parts is a rule's state per partition, P, for at most Max partitions:
// each is numbered in the order first seen. A direct-mapped cache sits in
// front of the map, so that a batch's partition is found by comparing one
// key, not by hashing its topic name.
type Parts[P any] struct {
	max   int
	make  func(k cluster.Partition, idx uint32) *P
	m     map[cluster.Partition]*P
	list  []*P
	cache *[256]partSlot[P]
	// Dropped counts the batches of partitions past the bound.
	Dropped int64
}

type partSlot[P any] struct {
	k cluster.Partition
	p *P
}

// NewParts returns the table of at most limit partitions; make makes a
// partition's state the first time it is seen, idx being its number.
func NewParts[P any](limit int, make func(k cluster.Partition, idx uint32) *P) *Parts[P] {
	return &Parts[P]{max: max(limit, 1), make: make, m: map[cluster.Partition]*P{}, cache: new([256]partSlot[P])}
}

// Of returns the state of b's partition, nil (counted in Dropped) if it
// is not followed.
func (ps *Parts[P]) Of(b *flows.BatchRef) *P {
	k := PartOf(b)
	slot := ps.slot(&k)
	if slot.p != nil && slot.k == k {
		return slot.p
	}
	if p, ok := ps.m[k]; ok {
		slot.k, slot.p = k, p
		return p
	}
	if len(ps.list) >= ps.max {
		ps.Dropped++
		return nil
	}
	p := ps.make(k, uint32(len(ps.list)))
	ps.m[k] = p
	ps.list = append(ps.list, p)
	slot.k, slot.p = k, p
	return p
}

// List returns the partitions' states in the order first seen (idx).
func (ps *Parts[P]) List() []*P { return ps.list }

func (ps *Parts[P]) slot(k *cluster.Partition) *partSlot[P] {
	h := uint32(k.Num) ^ uint32(len(k.Topic))<<8 ^ binary.LittleEndian.Uint32(k.TopicID[:])
	if n := len(k.Topic); n > 0 {
		h ^= uint32(k.Topic[0])<<16 ^ uint32(k.Topic[n-1])<<24 ^ uint32(k.Topic[n/2])<<4
	}
	return &ps.cache[(h*0x9e3779b1)>>24]
}
