package replicadivergence

import (
	"fmt"
	"maps"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/copies"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// mismatch is the batches of one partition whose copies on one
// connection differ from the leader's.
type mismatch struct {
	part        *part
	src, ref    uint32
	base        int64
	crcLeader   uint32
	crcReplica  uint32
	crcs        int
	batches     int64
	refPaths    uint8 // how the leader's copies travelled
	refCopies   int64
	epochChange int64 // of them, copies with different leader epochs
	// consumedLost counts, of those, batches whose older copy (the one
	// the leader change replaced) a consumer had read: committed data,
	// below the high watermark, replaced (an unclean leader election).
	consumedLost int64
	epochLeader  int32
	epochRepl    int32
	when         copies.Span
	conns        tally.IDs
	ev           detectors.Sampler[detectors.Evidence]
}

// copyEv is the evidence of one copy, formatted if it is listed.
type copyEv struct {
	packet uint64
	base   int64
	file   int32
	conn   int32
	crc    uint32
	path   copies.Path
}

func (e copyEv) Evidence() detectors.Evidence {
	return detectors.Evidence{File: int(e.file), Packet: e.packet, Conn: int(e.conn),
		What: fmt.Sprintf("%s copy of offset %d, crc %d", e.path, e.base, e.crc)}
}

// badEv is the evidence of a copy failing its CRC.
type badEv struct {
	packet        uint64
	base          int64
	file          int32
	conn          int32
	crc, computed uint32
	key           int16
}

func (e badEv) Evidence() detectors.Evidence {
	return detectors.Evidence{File: int(e.file), Packet: e.packet, Conn: int(e.conn),
		What: fmt.Sprintf("%s: batch at %d has crc %d, its bytes give %d", decode.Name(e.key), e.base, e.crc, e.computed)}
}

// evict compares a batch's copies as the table forgets it.
func (r *rule) evict(k key, e *entry) {
	r.compare(k, e)
	if e.more != 0 {
		r.more[e.more-1] = [maxGroups - 1]group{}
		r.moreFree = append(r.moreFree, e.more)
	}
}

// partList is the partitions, by number: the rule's, or in a Snapshot's
// copy, copies of them.
func (r *rule) partList() []*part {
	if r.snapParts != nil {
		return r.snapParts
	}
	return r.parts.List()
}

// compare judges one batch's copies (when it is forgotten or at the end).
func (r *rule) compare(k key, e *entry) {
	p := r.partList()[k.part]
	var all [maxGroups]*group
	for i := range int(e.n) {
		all[i] = r.group(e, i)
	}
	// Copies naming another topic id than most copies do are of another
	// topic that shares the name (another cluster, a recreated topic):
	// not replicas of this one.
	var id [16]byte
	var idCopies int32
	for _, g := range all[:e.n] {
		if g.topicID != ([16]byte{}) && g.copies > idCopies && g.topicID != id {
			n := int32(0)
			for _, h := range all[:e.n] {
				if h.topicID == g.topicID {
					n += h.copies
				}
			}
			if n > idCopies {
				id, idCopies = g.topicID, n
			}
		}
	}
	copies := e.copies
	var keep [maxGroups]*group
	groups := keep[:0]
	for _, g := range all[:e.n] {
		if g.topicID != ([16]byte{}) && g.topicID != id {
			copies -= g.copies
			p.otherTopicID += int64(g.copies)
			continue
		}
		groups = append(groups, g)
	}
	if copies < 2 {
		p.single++
		return
	}
	p.batches++
	p.copies += int64(copies)
	var storedArr [maxGroups]*group
	stored := storedArr[:0]
	invalid := false
	for _, g := range groups {
		if g.valid && g.stored {
			stored = append(stored, g)
		}
		invalid = invalid || !g.valid
	}
	if invalid {
		p.tainted++
	}
	var candArr [maxGroups]*group
	cand := candArr[:0]
	for _, g := range groups {
		if !g.valid {
			continue // reported as a bad CRC
		}
		if g.produce && !g.stored && len(stored) > 0 && rewritten(g, stored) {
			// The broker rewrote what the producer sent
			// (recompressed, or set LogAppendTime): not a replica's fault.
			p.rewritten++
			continue
		}
		cand = append(cand, g)
	}
	if len(cand) < 2 {
		return
	}
	// The leader's copy: what the producer sent if it was captured, else
	// the copy most seen, else the first.
	ref := cand[0]
	for _, g := range cand[1:] {
		switch {
		case g.produce && !ref.produce:
			ref = g
		case g.produce == ref.produce && g.copies > ref.copies:
			ref = g
		}
	}
	p.mismatches++
	if !invalid {
		p.tainted++
	}
	for _, g := range cand {
		if g != ref {
			r.mismatch(p, k, ref, g, len(cand))
		}
	}
}

// rewritten reports a produced copy whose attributes (codec, timestamp
// type) differ from every stored copy's.
func rewritten(g *group, stored []*group) bool {
	for _, s := range stored {
		if s.attrs&0x0f == g.attrs&0x0f {
			return false
		}
	}
	return true
}

func (r *rule) mismatch(p *part, k key, ref, g *group, crcs int) {
	s := r.srcs.Get(g.src)
	pk := problemKey{part: p.idx, conn: s.Conn}
	m := r.mism[pk]
	if m == nil {
		if len(r.bad)+len(r.mism) >= maxProblemGroups {
			r.dropped++
			return
		}
		m = &mismatch{part: p, src: g.src, ref: ref.src, base: k.base, crcLeader: ref.crc, crcReplica: g.crc,
			crcs: crcs, epochLeader: ref.epoch, epochRepl: g.epoch, conns: tally.IDs{}}
		r.mism[pk] = m
		r.mismList = append(r.mismList, m)
	}
	m.batches++
	if ref.stored && g.stored && ref.epoch >= 0 && g.epoch >= 0 && ref.epoch != g.epoch {
		m.epochChange++
		old := ref
		if g.epoch < ref.epoch {
			old = g
		}
		if old.paths&(1<<copies.ConsumerFetch) != 0 {
			m.consumedLost++
		}
	}
	m.crcs = max(m.crcs, crcs)
	m.refPaths |= ref.paths
	m.refCopies += int64(ref.copies)
	for _, x := range []*group{ref, g} {
		m.when.Add(at(x.at))
		m.conns.Add(int32(r.srcs.Get(x.src).Conn))
	}
	if m.batches <= 2 {
		m.ev.Add(detectors.Evidence{File: int(ref.file), Packet: ref.packet, Conn: r.srcs.Get(ref.src).Conn,
			What: fmt.Sprintf("offset %d: leader's copy, crc %d", k.base, ref.crc)})
	}
	m.ev.Add(detectors.Evidence{File: int(g.file), Packet: g.packet, Conn: s.Conn,
		What: fmt.Sprintf("offset %d: %s copy, crc %d", k.base, s.Path, g.crc)})
}

// Findings implements detectors.Rule: it compares what is still held,
// stops recording, and reports.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	if !r.done {
		r.done = true
		r.entries.Each(r.compare)
	}
	var out []detectors.Finding
	for _, m := range r.mismList {
		out = append(out, r.mismatchFinding(p, m))
	}
	for _, b := range r.badList {
		out = append(out, r.badFinding(p, b))
	}
	return append(out, r.agreements(p)...)
}

// Snapshot implements detectors.Snapshotter: Findings compares the
// batches still held and stops recording, so here the comparison is made
// on copies of what it changes (the partitions' counters and the
// mismatches), and the originals go on recording.
func (r *rule) Snapshot(p *detectors.Pass) []detectors.Finding {
	if r.done {
		return r.Findings(p)
	}
	c := *r
	parts := make(map[*part]*part, len(r.parts.List()))
	c.snapParts = make([]*part, len(r.parts.List()))
	for i, pt := range r.parts.List() {
		cp := *pt // compare changes only its counters
		c.snapParts[i] = &cp
		parts[pt] = &cp
	}
	c.mism = make(map[problemKey]*mismatch, len(r.mism))
	c.mismList = make([]*mismatch, 0, len(r.mismList))
	mism := make(map[*mismatch]*mismatch, len(r.mismList))
	for _, m := range r.mismList {
		cm := *m
		cm.part = parts[m.part]
		cm.conns = maps.Clone(m.conns)
		c.mismList = append(c.mismList, &cm)
		mism[m] = &cm
	}
	for k, m := range r.mism {
		c.mism[k] = mism[m]
	}
	c.done = true
	r.entries.Each(c.compare)
	return c.Findings(p)
}
