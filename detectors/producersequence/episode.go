package producersequence

import (
	"slices"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/spell"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
)

// Bounds of what one producer's episode lists.
const (
	maxIDs    = 16 // identities after the first error
	maxParts  = 64 // partitions with errors, or restarted
	maxCopies = 4  // duplicated batches listed
)

// Episode is one producer's sequence errors and what followed them.
type Episode struct {
	cluster.Client
	First, Last time.Time
	N           int64
	codes       tally.Codes
	from        identity // of the first error
	fromSeq     int32
	FromPart    cluster.Partition
	// after is the error the partition answered just before the first
	// sequence error (NOT_LEADER_OR_FOLLOWER...), 0 if none.
	after   int16
	afterAt mark

	parts     map[cluster.Partition]*spell.Spell
	partOrder []cluster.Partition
	IDs       []IDSeen
	MoreIDs   int64
	resets    map[cluster.Partition]bool
	resetList []cluster.Partition

	Resent, Maybe, Dups int64
	copies              []copied

	txn   bool
	conns tally.Conns
	ev    detectors.Sampler[seen]
	Nodes *cluster.Nodes
}

// IDSeen is an identity the producer used after the first error.
type IDSeen struct {
	identity
	at   mark
	init bool // given by InitProducerId, not first seen in a batch
}

// copied is a batch sent again under a new identity and written.
type copied struct {
	part         cluster.Partition
	first, again sent
	firstAt      mark
	againAt      mark
	certain      bool // the first copy was written too
}

// seen is a sequence error, formatted only if listed.
type seen struct {
	at   mark
	part string
	id   identity
	seq  int32
	code int16
}

func (s seen) Evidence() detectors.Evidence {
	return s.at.evidence("Produce answer: " + s.part + " " + decode.ErrorName(s.code) + " for producer id " +
		itoa64(s.id.pid) + " epoch " + itoa64(int64(s.id.epoch)) + " base sequence " + itoa64(int64(s.seq)))
}

// newEpisode opens the episode of c at its first sequence error, for the
// batch s (as it was before this answer) of the partition h.
func newEpisode(c cluster.Client, s *sent, h *history, nodes *cluster.Nodes) *Episode {
	e := &Episode{Client: c, from: s.identity, fromSeq: s.seq, parts: map[cluster.Partition]*spell.Spell{}, resets: map[cluster.Partition]bool{}, Nodes: nodes}
	// What the partition answered last before: this very batch's earlier
	// answer if it was retried, else the batch sent before it.
	prev := s
	if s.code == 0 {
		prev = nil
		for i := range min(h.n, keep) {
			if b := &h.ring[i]; b.at.packet < s.at.packet && (prev == nil || b.at.packet > prev.at.packet) {
				prev = b
			}
		}
	}
	if prev != nil && prev.code != 0 && !seqError(prev.code) {
		e.after, e.afterAt = prev.code, prev.answeredAt
	}
	return e
}

// failed counts a sequence error for part.
func (e *Episode) failed(part cluster.Partition, s *sent, code int16, at mark, conn *flows.ConnInfo, txn bool) {
	if e.N == 0 {
		e.First, e.FromPart = at.time, part
	}
	e.N++
	e.Last = at.time
	e.codes.Add(code)
	e.txn = e.txn || txn
	e.conns.Add(conn)
	e.ev.Add(seen{at: at, part: part.Label(e.Nodes), id: s.identity, seq: s.seq, code: code})
	sp := e.parts[part]
	if sp == nil {
		if len(e.parts) >= maxParts {
			return
		}
		sp = &spell.Spell{}
		e.parts[part] = sp
		e.partOrder = append(e.partOrder, part)
	}
	sp.Fail(at.time)
}

// sentAfter looks at a batch the producer sent after its first error: a
// new identity, a sequence restarted on another partition, records sent
// before under another identity.
func (e *Episode) sentAfter(h *history, s *sent, part cluster.Partition, txn bool) {
	if s.identity != e.from {
		e.identity(s.identity, s.at, false)
		if s.seq == 0 && h.n > 0 && e.parts[part] == nil && !e.resets[part] && len(e.resets) < maxParts {
			e.resets[part] = true
			e.resetList = append(e.resetList, part)
		}
	}
	if old := h.copyOf(s.identity, s.sum); old != nil && s.sum != 0 {
		s.prevID, s.prevSeq = old.identity, old.seq
		e.Resent++
	}
	e.txn = e.txn || txn
}

// initialised notes an identity InitProducerId gave the producer.
func (e *Episode) initialised(id identity, at mark) { e.identity(id, at, true) }

func (e *Episode) identity(id identity, at mark, init bool) {
	if id == e.from || slices.ContainsFunc(e.IDs, func(x IDSeen) bool { return x.identity == id }) {
		return
	}
	if len(e.IDs) >= maxIDs {
		e.MoreIDs++
		return
	}
	e.IDs = append(e.IDs, IDSeen{id, at, init})
}

// answered looks at a batch answered without a sequence error: a write
// ends the partition's spell; a copy written is a duplicate if its first
// copy was written, a possible one if its first copy's fate is unknown.
func (e *Episode) answered(h *history, part cluster.Partition, s *sent, at mark) {
	if s.state != written {
		return
	}
	if sp := e.parts[part]; sp != nil {
		sp.Heal(at.time)
	}
	if s.prevSeq < 0 {
		return
	}
	old := h.find(s.prevID, s.prevSeq)
	s.prevSeq = -1
	switch {
	case old != nil && old.state == refused:
		return // the first copy was not written: a safe resend
	case old != nil && old.state == written:
		e.Dups++
	default:
		e.Maybe++
	}
	if len(e.copies) < maxCopies {
		c := copied{part: part, again: *s, againAt: at, certain: old != nil && old.state == written}
		if old != nil {
			c.first, c.firstAt = *old, old.answeredAt
		}
		e.copies = append(e.copies, c)
	}
}

// held is the longest a partition went without a write from a sequence
// error, and whether one was still waiting at end.
func (e *Episode) held(end time.Time) (time.Duration, bool) {
	var d time.Duration
	ongoing := false
	for _, sp := range e.parts {
		d2, on2 := sp.Held(end)
		d, ongoing = spell.Worst(d, ongoing, d2, on2)
	}
	return d, ongoing
}

// evidence lists the errors sampled, the new identities and the copies.
func (e *Episode) evidence() []detectors.Evidence {
	ev := e.ev.List()
	if e.after != 0 {
		ev = append(ev, e.afterAt.evidence("Produce answer: "+e.FromPart.Label(e.Nodes)+
			" "+decode.ErrorName(e.after)+", just before the first sequence error"))
	}
	for i, id := range e.IDs {
		if i == 3 {
			break
		}
		how := "Produce batch under"
		if id.init {
			how = "InitProducerId answer:"
		}
		ev = append(ev, id.at.evidence(how+" producer id "+itoa64(id.pid)+" epoch "+itoa64(int64(id.epoch))))
	}
	for _, c := range e.copies {
		p := c.part.Label(e.Nodes)
		if c.first.at.packet != 0 {
			ev = append(ev, c.first.at.evidence("Produce: "+p+" records first sent as producer id "+itoa64(c.first.pid)+
				" epoch "+itoa64(int64(c.first.epoch))+" base sequence "+itoa64(int64(c.first.seq))))
		}
		ev = append(ev, c.againAt.evidence("Produce answer: "+p+" the same records, sent again as producer id "+itoa64(c.again.pid)+
			" epoch "+itoa64(int64(c.again.epoch))+" base sequence "+itoa64(int64(c.again.seq))+", written at offset "+itoa64(c.again.offset)))
	}
	detectors.SortEvidence(ev)
	return ev
}
