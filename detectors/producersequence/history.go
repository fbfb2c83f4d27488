package producersequence

import (
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
)

// The last batches each idempotent producer sent to each partition, so
// that records sent again under a new producer id or epoch can be matched
// with their first copy and what became of it. Kept for every idempotent
// producer, since the copy that matters was sent before the error.

// keep is how many batches of one producer and partition are remembered:
// more than the five a producer may have in flight.
const keep = 8

// histKey is a producer (client id and host) and a partition.
type histKey struct {
	cluster.Client
	cluster.Partition
}

// identity is a producer id and epoch.
type identity struct {
	pid   int64
	epoch int16
}

// outcome is what became of a batch, as far as the wire tells.
type outcome uint8

const (
	pending outcome = iota // not answered yet
	written                // answered with an offset (or DUPLICATE_SEQUENCE_NUMBER)
	refused                // answered with an error that means not written
	unsure                 // timed out, written to too few replicas, or never answered: may be written
)

// sent is one batch sent.
type sent struct {
	identity
	seq    int32
	count  int32
	sum    uint64
	at     mark
	state  outcome
	code   int16
	offset int64
	// answeredAt is where the answer was seen.
	answeredAt mark
	// prevID and prevSeq name the earlier copy of the same records under
	// another identity, until the answer tells what became of both
	// (prevSeq -1: none).
	prevID  identity
	prevSeq int32
}

// mark is where something was seen.
type mark struct {
	file   int
	packet uint64
	conn   int
	time   time.Time
}

func (m mark) evidence(what string) detectors.Evidence {
	return detectors.Evidence{File: m.file, Packet: m.packet, Conn: m.conn, What: what}
}

// history is one producer's last batches to one partition, a ring.
type history struct {
	ring [keep]sent
	n    int // batches ever added
}

func (h *history) add(s sent) {
	h.ring[h.n%keep] = s
	h.n++
}

// find returns the remembered batch of id with base sequence seq, nil if
// none.
func (h *history) find(id identity, seq int32) *sent {
	for i := range min(h.n, keep) {
		if s := &h.ring[i]; s.identity == id && s.seq == seq {
			return s
		}
	}
	return nil
}

// copyOf returns the most recent earlier batch with the same records under
// another identity than id, nil if none.
func (h *history) copyOf(id identity, sum uint64) *sent {
	var best *sent
	for i := range min(h.n, keep) {
		if s := &h.ring[i]; s.sum == sum && s.identity != id && (best == nil || s.at.packet > best.at.packet) {
			best = s
		}
	}
	return best
}

// histories is the bounded table of histories: when full, the partition
// added longest ago is forgotten.
type histories struct {
	max       int
	m         map[histKey]*history
	order     []histKey // insertion order, a ring once full
	next      int
	forgotten int64
}

func (t *histories) get(k histKey) *history {
	if h := t.m[k]; h != nil {
		return h
	}
	if t.m == nil {
		t.m = make(map[histKey]*history)
	}
	var h *history
	if len(t.order) < t.max {
		t.order = append(t.order, k)
		h = &history{}
	} else {
		old := t.order[t.next]
		h = t.m[old]
		delete(t.m, old)
		*h = history{}
		t.order[t.next] = k
		t.next = (t.next + 1) % len(t.order)
		t.forgotten++
	}
	t.m[k] = h
	return h
}
