package legacy

import (
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

func replicaDivergenceSpec() Spec {
	return Spec{
		ID:       "replica-divergence",
		Severity: Error,
		Summary: "Copies of one batch that differ: the same topic, partition and base offset seen with different " +
			"CRCs on different connections (produce, replica fetch, raft fetch, consumer fetch), and batches " +
			"whose CRC does not verify. When the copies agree, says as info how many batches were verified " +
			"byte-identical across how many replicas. A produced batch the broker rewrote (recompression, " +
			"LogAppendTime: other attributes) is not a divergence, nor are copies naming different topic ids " +
			"(one name on two clusters, a recreated topic). Offsets of produced batches come from the Produce " +
			"responses; a copy differing only in partitionLeaderEpoch after a leader change is a warning.",
		Params: []Param{
			{Name: "max-batches", Default: 100000, Meaning: "batches (partition and offset) held for comparison; " +
				"the oldest are compared and forgotten first, so copies further apart in the capture than this " +
				"many batches are not compared"},
			{Name: "max-info", Default: 16, Meaning: "partitions given their own info finding when copies agree; " +
				"with more, one finding sums them up"},
			{Name: "info-min-replicas", Default: 2, Meaning: "replicas (distinct nodes holding copies) a partition's " +
				"agreeing copies must span for the info finding; a producer and a consumer of one broker alone " +
				"prove little. Differences are reported whatever the number"},
			{Name: "max-partitions", Default: 10000, Meaning: "partitions followed; batches of further partitions " +
				"are not compared"},
		},
		New: func(p Params) Detector { return newReplicaDivergence(p) },
	}
}

// replicaDivergence holds, per (partition, base offset, magic), the
// distinct CRCs its copies carried, in a map bounded in batches. Entries
// are compared when they are forgotten and at the end.
type replicaDivergence struct {
	entries  *fifoTable[rdKey, rdEntry]
	more     [][maxGroups - 1]rdGroup // groups past an entry's first
	moreFree []int32
	maxInfo  int
	minRepl  int
	maxParts int

	parts        map[partKey]*rdPart
	partCache    partCache[rdPart]
	partList     []*rdPart
	partsDropped int64
	srcs         copySources
	// pending holds the computed CRCs of a Produce request's batches
	// that fail their check (by batch index) until the response.
	pending *fifo[*flows.Message, map[int]uint32]

	mism     map[rdGroupKey]*rdMismatch
	mismList []*rdMismatch
	bad      map[rdGroupKey]*rdBad
	badList  []*rdBad
	dropped  int64 // problems past maxProblemGroups
	done     bool
}

const (
	maxGroups        = 4    // distinct (crc, valid) per batch
	maxHolders       = 256  // copy sources per partition for the replica count
	maxProblemGroups = 1024 // mismatch and bad-CRC findings
)

type rdKey struct {
	base  int64
	part  uint32
	magic int8
}

func (k rdKey) hash(seed uint64) uint64 {
	return mix64(uint64(k.base)^seed, uint64(k.part)<<8|uint64(uint8(k.magic)))
}

// rdEntry is one batch's copies, held in the table: the first group
// inline, the others (rare: copies that differ) in replicaDivergence.more,
// so that the table holds no pointer.
type rdEntry struct {
	copies int32
	extra  int32 // copies with yet another CRC past maxGroups
	more   int32 // index+1 in replicaDivergence.more, 0 if none
	n      uint8 // groups
	first  rdGroup
}

// rdGroup is the copies of one batch with one CRC (and CRC validity).
type rdGroup struct {
	packet  uint64
	at      int64
	topicID [16]byte // as the first copy named the topic; zero if by name
	crc     uint32
	epoch   int32 // partitionLeaderEpoch of the first fetched copy, -1 if none
	copies  int32
	src     uint32
	file    int32
	attrs   int16
	valid   bool
	produce bool
	stored  bool  // seen in a Fetch response: what a broker holds
	paths   uint8 // bit per copyPath the copies travelled
}

// group returns the i-th group of e.
func (d *replicaDivergence) group(e *rdEntry, i int) *rdGroup {
	if i == 0 {
		return &e.first
	}
	return &d.more[e.more-1][i-1]
}

// addGroup appends a group to e, which has fewer than maxGroups.
func (d *replicaDivergence) addGroup(e *rdEntry, g rdGroup) {
	if e.n > 0 && e.more == 0 {
		if n := len(d.moreFree); n > 0 {
			e.more = d.moreFree[n-1]
			d.moreFree = d.moreFree[:n-1]
		} else {
			d.more = append(d.more, [maxGroups - 1]rdGroup{})
			e.more = int32(len(d.more))
		}
	}
	*d.group(e, int(e.n)) = g
	e.n++
}

// evict compares a batch's copies as it is forgotten.
func (d *replicaDivergence) evict(k rdKey, e *rdEntry) {
	d.compare(k, e)
	if e.more != 0 {
		d.more[e.more-1] = [maxGroups - 1]rdGroup{}
		d.moreFree = append(d.moreFree, e.more)
	}
}

type rdPart struct {
	key        partKey
	idx        uint32
	batches    int64 // batches with two copies or more
	copies     int64 // their copies
	single     int64 // batches seen once
	mismatches int64
	tainted    int64 // batches with differing copies or a copy failing its CRC
	badCRCs    int64
	rewritten  int64
	// otherTopicID counts copies at a compared offset that name another
	// topic id: not compared.
	otherTopicID int64
	holders      bitset // copy sources, the first maxHolders
	nholders     int
	srcsSeen     bitset // copy sources whose connection is in conns
	producerID   int64
	producers    int
	first        time.Time
	last         time.Time
	firstOff     int64
	lastOff      int64
	conns        idSet
	ev           sampler[rdCopyEv]
}

// rdCopyEv is the evidence of one copy, formatted if it is listed.
type rdCopyEv struct {
	packet uint64
	base   int64
	file   int32
	conn   int32
	crc    uint32
	path   copyPath
}

func (e rdCopyEv) evidence() Evidence {
	return Evidence{File: int(e.file), Packet: e.packet, Conn: int(e.conn),
		What: fmt.Sprintf("%s copy of offset %d, crc %d", e.path, e.base, e.crc)}
}

// rdBadEv is the evidence of a copy failing its CRC.
type rdBadEv struct {
	packet        uint64
	base          int64
	file          int32
	conn          int32
	crc, computed uint32
	key           int16
}

func (e rdBadEv) evidence() Evidence {
	return Evidence{File: int(e.file), Packet: e.packet, Conn: int(e.conn),
		What: fmt.Sprintf("%s: batch at %d has crc %d, its bytes give %d", decode.Name(e.key), e.base, e.crc, e.computed)}
}

type rdGroupKey struct {
	part uint32
	conn int
}

// rdMismatch is the batches of one partition whose copies on one
// connection differ from the leader's.
type rdMismatch struct {
	part        *rdPart
	src, ref    uint32
	base        int64
	crcLeader   uint32
	crcReplica  uint32
	crcs        int
	batches     int64
	refPaths    uint8 // how the leader's copies travelled
	refCopies   int64
	epochChange int64 // of them, copies with different leader epochs
	epochLeader int32
	epochRepl   int32
	first, last time.Time
	conns       idSet
	ev          sampler[Evidence]
}

// rdBad is the copies on one connection whose CRC does not verify.
type rdBad struct {
	part        *rdPart
	src         uint32
	path        copyPath
	base        int64
	crc         uint32
	computed    uint32
	code        int16
	copies      int64
	first, last time.Time
	ev          sampler[rdBadEv]
}

func newReplicaDivergence(p Params) *replicaDivergence {
	d := &replicaDivergence{
		maxInfo:  max(p.Int("max-info"), 1),
		minRepl:  max(p.Int("info-min-replicas"), 1),
		maxParts: max(p.Int("max-partitions"), 1),
		parts:    make(map[partKey]*rdPart),
		pending:  newFifo[*flows.Message, map[int]uint32](maxPendingProduces, nil),
		mism:     make(map[rdGroupKey]*rdMismatch),
		bad:      make(map[rdGroupKey]*rdBad),
	}
	d.entries = newFifoTable(p.Int("max-batches"), d.evict)
	return d
}

// OnRequest computes the CRC of produced batches that fail their check,
// while their bytes are there.
func (d *replicaDivergence) OnRequest(m *flows.Message) {
	if m.Key != int16(kmsg.Produce) {
		return
	}
	var bad map[int]uint32
	for i := range m.Batches {
		b := &m.Batches[i]
		if b.CRCOK {
			continue
		}
		if bad == nil {
			bad = make(map[int]uint32)
		}
		bad[i] = computedCRC(b.Magic, b.Raw)
	}
	if bad != nil {
		d.pending.put(m, bad)
	}
}

// OnExchange records each copy: produced batches at the offsets of the
// response, fetched ones at their own.
func (d *replicaDivergence) OnExchange(x *flows.Exchange) {
	if x.Req == nil || d.done {
		return
	}
	switch kmsg.Key(x.Req.Key) {
	case kmsg.Produce:
		bad, _ := d.pending.get(x.Req)
		if bad != nil {
			d.pending.del(x.Req)
		}
		src := d.srcs.of(x.Req, pathProduce)
		if x.Resp == nil {
			// acks=0 or unanswered: no offset, but a bad CRC is still one.
			for i, c := range bad {
				d.copy(&x.Req.Batches[i], -1, src, x.Req, c, 0)
			}
			return
		}
		produceBatches(x, func(i int, b *flows.BatchRef, base int64, code int16) {
			computed := b.CRC
			if c, ok := bad[i]; ok {
				computed = c
			}
			d.copy(b, base, src, x.Req, computed, code)
		})
	case kmsg.Fetch:
		if x.Resp == nil || len(x.Resp.Batches) == 0 {
			return
		}
		src := d.srcs.of(x.Req, fetchPath(x.Req))
		for i := range x.Resp.Batches {
			b := &x.Resp.Batches[i]
			computed := b.CRC
			if !b.CRCOK {
				computed = computedCRC(b.Magic, b.Raw)
			}
			d.copy(b, b.BaseOffset, src, x.Resp, computed, 0)
		}
	}
}

func (d *replicaDivergence) part(b *flows.BatchRef) *rdPart {
	k := batchPart(b)
	slot := d.partCache.slot(&k)
	if slot.p != nil && slot.k == k {
		return slot.p
	}
	if p, ok := d.parts[k]; ok {
		slot.k, slot.p = k, p
		return p
	}
	if len(d.partList) >= d.maxParts {
		d.partsDropped++
		return nil
	}
	p := &rdPart{key: k, idx: uint32(len(d.partList)), conns: idSet{},
		producerID: -1, firstOff: -1, lastOff: -1}
	d.parts[k] = p
	d.partList = append(d.partList, p)
	slot.k, slot.p = k, p
	return p
}

// copy records one copy of a batch at base (-1: no offset, a refused or
// unanswered produce). m is the message that carried it.
func (d *replicaDivergence) copy(b *flows.BatchRef, base int64, src uint32, m *flows.Message, computed uint32, code int16) {
	p := d.part(b)
	if p == nil {
		return
	}
	s := d.srcs.get(src)
	if !b.CRCOK {
		p.badCRCs++
		d.badCopy(p, src, s.path, b, base, computed, code, m)
	}
	if base < 0 {
		return
	}
	k := rdKey{part: p.idx, base: base, magic: b.Magic}
	e, _ := d.entries.ref(k)
	e.copies++
	stored := s.path != pathProduce
	epoch := int32(-1)
	if stored && b.Magic == 2 {
		epoch = b.PartitionLeaderEpoch
	}
	found := false
	for i := range int(e.n) {
		g := d.group(e, i)
		if g.crc == b.CRC && g.valid == b.CRCOK {
			g.copies++
			g.produce = g.produce || !stored
			g.paths |= 1 << s.path
			if stored && !g.stored {
				g.stored, g.epoch = true, epoch
			}
			if g.topicID == ([16]byte{}) {
				g.topicID = b.TopicID
			}
			found = true
			break
		}
	}
	if !found {
		if e.n < maxGroups {
			d.addGroup(e, rdGroup{crc: b.CRC, valid: b.CRCOK, attrs: b.Attributes, epoch: epoch,
				copies: 1, produce: !stored, stored: stored, paths: 1 << s.path, src: src, file: int32(m.File), packet: m.Packet,
				at: m.Time.UnixNano(), topicID: b.TopicID})
		} else {
			e.extra++
		}
	}

	if p.nholders < maxHolders && p.holders.add(src) {
		p.nholders++
	}
	// A source is one connection: its id is in conns once the source
	// has been seen (index 0 stands for the sources past maxSources).
	if src == 0 || p.srcsSeen.add(src) {
		p.conns.add(int32(m.Conn.ID))
	}
	if p.first.IsZero() {
		p.first = m.Time
	}
	p.last = m.Time
	if p.firstOff < 0 || base < p.firstOff {
		p.firstOff = base
	}
	p.lastOff = max(p.lastOff, base+int64(b.LastOffsetDelta))
	if b.Magic == 2 && b.ProducerID >= 0 && b.ProducerID != p.producerID {
		if p.producerID < 0 {
			p.producerID = b.ProducerID
		}
		p.producers++
	}
	p.ev.add(rdCopyEv{file: int32(m.File), packet: m.Packet, conn: int32(m.Conn.ID), path: s.path, base: base, crc: b.CRC})
}

func (d *replicaDivergence) badCopy(p *rdPart, src uint32, path copyPath, b *flows.BatchRef, base int64, computed uint32, code int16, m *flows.Message) {
	k := rdGroupKey{part: p.idx, conn: m.Conn.ID}
	g := d.bad[k]
	if g == nil {
		if len(d.bad)+len(d.mism) >= maxProblemGroups {
			d.dropped++
			return
		}
		g = &rdBad{part: p, src: src, path: path, base: base, crc: b.CRC, computed: computed, code: code, first: m.Time}
		d.bad[k] = g
		d.badList = append(d.badList, g)
	}
	g.copies++
	g.last = m.Time
	g.ev.add(rdBadEv{file: int32(m.File), packet: m.Packet, conn: int32(m.Conn.ID), key: m.Key, base: base, crc: b.CRC, computed: computed})
}

// compare judges one batch's copies (when it is forgotten or at the end).
func (d *replicaDivergence) compare(k rdKey, e *rdEntry) {
	p := d.partList[k.part]
	var all [maxGroups]*rdGroup
	for i := range int(e.n) {
		all[i] = d.group(e, i)
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
	var keep [maxGroups]*rdGroup
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
	var storedArr [maxGroups]*rdGroup
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
	var candArr [maxGroups]*rdGroup
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
			d.mismatch(p, k, ref, g, len(cand))
		}
	}
}

// rewritten reports a produced copy whose attributes (codec, timestamp
// type) differ from every stored copy's.
func rewritten(g *rdGroup, stored []*rdGroup) bool {
	for _, s := range stored {
		if s.attrs&0x0f == g.attrs&0x0f {
			return false
		}
	}
	return true
}

func (d *replicaDivergence) mismatch(p *rdPart, k rdKey, ref, g *rdGroup, crcs int) {
	s := d.srcs.get(g.src)
	key := rdGroupKey{part: p.idx, conn: s.conn}
	m := d.mism[key]
	if m == nil {
		if len(d.bad)+len(d.mism) >= maxProblemGroups {
			d.dropped++
			return
		}
		m = &rdMismatch{part: p, src: g.src, ref: ref.src, base: k.base, crcLeader: ref.crc, crcReplica: g.crc,
			crcs: crcs, epochLeader: ref.epoch, epochRepl: g.epoch, conns: idSet{}}
		d.mism[key] = m
		d.mismList = append(d.mismList, m)
	}
	m.batches++
	if ref.stored && g.stored && ref.epoch >= 0 && g.epoch >= 0 && ref.epoch != g.epoch {
		m.epochChange++
	}
	m.crcs = max(m.crcs, crcs)
	m.refPaths |= ref.paths
	m.refCopies += int64(ref.copies)
	for _, x := range []*rdGroup{ref, g} {
		t := time.Unix(0, x.at).UTC()
		m.first, m.last = earliest(m.first, t), latest(m.last, t)
		m.conns.add(int32(d.srcs.get(x.src).conn))
	}
	if m.batches <= 2 {
		m.ev.add(Evidence{File: int(ref.file), Packet: ref.packet, Conn: d.srcs.get(ref.src).conn,
			What: fmt.Sprintf("offset %d: leader's copy, crc %d", k.base, ref.crc)})
	}
	m.ev.add(Evidence{File: int(g.file), Packet: g.packet, Conn: s.conn,
		What: fmt.Sprintf("offset %d: %s copy, crc %d", k.base, s.path, g.crc)})
}

// Findings compares what is still held and reports.
func (d *replicaDivergence) Findings(env *Env) []Finding {
	if !d.done {
		d.done = true
		d.entries.each(d.compare)
	}
	var out []Finding
	for _, m := range d.mismList {
		out = append(out, d.mismatchFinding(env, m))
	}
	for _, b := range d.badList {
		out = append(out, d.badFinding(env, b))
	}
	out = append(out, d.infoFindings(env)...)
	return out
}

// Snapshot implements snapshotter: Findings compares the batches still
// held and stops recording, so here the comparison is made on copies of
// what it changes (the partitions' counters and the mismatches), and the
// originals go on recording.
func (d *replicaDivergence) Snapshot(env *Env) []Finding {
	if d.done {
		return d.Findings(env)
	}
	c := *d
	parts := make(map[*rdPart]*rdPart, len(d.partList))
	c.partList = make([]*rdPart, len(d.partList))
	for i, p := range d.partList {
		cp := *p // compare changes only its counters
		c.partList[i] = &cp
		parts[p] = &cp
	}
	c.parts = nil // only for recording
	c.mism = make(map[rdGroupKey]*rdMismatch, len(d.mism))
	c.mismList = make([]*rdMismatch, 0, len(d.mismList))
	mism := make(map[*rdMismatch]*rdMismatch, len(d.mismList))
	for _, m := range d.mismList {
		cm := *m
		cm.part = parts[m.part]
		cm.conns = maps.Clone(m.conns)
		c.mismList = append(c.mismList, &cm)
		mism[m] = &cm
	}
	for k, m := range d.mism {
		c.mism[k] = mism[m]
	}
	c.done = true
	d.entries.each(c.compare)
	return c.Findings(env)
}

func (d *replicaDivergence) mismatchFinding(env *Env, m *rdMismatch) Finding {
	src, ref := d.srcs.get(m.src), d.srcs.get(m.ref)
	label := m.part.key.label(env)
	leader := ref.serverNode(env)
	nodes := idSet{}
	nodes.add(leader)
	nodes.add(src.serverNode(env))
	nodes.add(src.holderNode(env))
	sev := Error
	if m.epochChange == m.batches {
		sev = Warning
	}
	counts := map[string]int64{"crcs": int64(m.crcs), "batches": m.batches}
	fields := map[string]any{
		"topic":       m.part.key.name(env),
		"partition":   m.part.key.part,
		"base_offset": m.base,
		"client_id":   src.clientID,
		"crc_leader":  int64(m.crcLeader),
		"crc_replica": int64(m.crcReplica),
		"path":        src.path.String(),
	}
	if leader >= 0 {
		fields["leader_id"] = leader
	}
	if h := src.holderNode(env); h >= 0 && h != leader {
		fields["replica_id"] = h
	}
	if m.epochLeader >= 0 && m.epochRepl >= 0 {
		fields["leader_epoch_leader"] = m.epochLeader
		fields["leader_epoch_replica"] = m.epochRepl
	}
	who := src.holderLabel(env)
	summary := fmt.Sprintf("%s offset %d: %s's copy has crc %d, the leader's %d", label, m.base, src.clientID, m.crcReplica, m.crcLeader)
	if h := src.holderNode(env); h >= 0 && (src.path == pathReplica || src.path == pathRaft) {
		summary = fmt.Sprintf("%s offset %d: node %d's copy (%s) has crc %d, the leader's %d", label, m.base, h, src.clientID, m.crcReplica, m.crcLeader)
	}
	var ex strings.Builder
	other := fmt.Sprintf("the copy %s sent to %s by %s", src.serverLabel(env), who, src.path)
	if src.path == pathProduce {
		other = fmt.Sprintf("the copy producer %s (%s) wrote to %s", src.clientID, src.client, src.serverLabel(env))
	}
	fmt.Fprintf(&ex, "At offset %d of %s, %d different batches were seen. The leader, %s, has CRC %d in %s (%s); %s has CRC %d. ",
		m.base, label, m.crcs, ref.serverLabel(env), m.crcLeader, text.Plural(m.refCopies, "copy", "copies"), pathNames(m.refPaths), other, m.crcReplica)
	ex.WriteString("Both CRCs verify, so each copy is intact as it was sent: the replicas hold different data at one offset, and a consumer sees different records depending on the replica it reads.")
	if m.batches > 1 {
		fmt.Fprintf(&ex, " %d batches of this partition differ this way on this connection, the first at offset %d.", m.batches, m.base)
	}
	if m.epochChange > 0 {
		fmt.Fprintf(&ex, " The copies carry different partition leader epochs (%d and %d): the log at this offset was rewritten after a leader change, which is how uncommitted data is truncated and replaced; with acks=1 producers the replaced copy had been acknowledged and is lost.", m.epochLeader, m.epochRepl)
	}
	next := fmt.Sprintf("Compare the segment on both brokers: kafka-dump-log.sh --files <segment>.log --print-data-log | grep -A2 'baseOffset: %d' on %s and on %s. "+
		"Check unclean.leader.election.enable and the controller log for unclean elections, the partition's leader epochs "+
		"(kafka-topics.sh --describe, the leader-epoch-checkpoint files), and disk or memory errors on both hosts (dmesg, SMART).",
		m.base, ref.serverLabel(env), who)
	ev := m.ev.list()
	return Finding{
		Detector: "replica-divergence", Severity: sev, Summary: summary, First: m.first, Last: m.last,
		Conns: m.conns.ints(), Nodes: nodes.sorted(), Counts: counts, Fields: fields, Evidence: ev,
		Explanation: ex.String(), Next: next,
	}
}

func (d *replicaDivergence) badFinding(env *Env, b *rdBad) Finding {
	src := d.srcs.get(b.src)
	label := b.part.key.label(env)
	nodes := idSet{}
	nodes.add(src.serverNode(env))
	nodes.add(src.holderNode(env))
	fields := map[string]any{
		"topic":        b.part.key.name(env),
		"partition":    b.part.key.part,
		"base_offset":  b.base,
		"client_id":    src.clientID,
		"crc":          int64(b.crc),
		"crc_computed": int64(b.computed),
		"crc_valid":    false,
		"path":         src.path.String(),
	}
	if b.code != 0 {
		fields["error"] = decode.ErrorName(b.code)
	}
	at := "at offset " + strconv.FormatInt(b.base, 10)
	switch {
	case b.base < 0 && b.code != 0:
		at = "(no offset: refused)"
	case b.base < 0:
		at = "(offset unknown: no response)"
	}
	var summary string
	var ex strings.Builder
	switch b.path {
	case pathProduce:
		summary = fmt.Sprintf("%s: producer %s sent a batch whose CRC does not verify (crc %d, computed %d)", label, src.clientID, b.crc, b.computed)
		fmt.Fprintf(&ex, "A batch for %s from %s carries CRC %d in its header, but its bytes (attributes to the end) checksum to %d: it was damaged before it reached the broker %s. ",
			label, src.holderLabel(env), b.crc, b.computed, src.serverLabel(env))
		if b.code != 0 {
			fmt.Fprintf(&ex, "The broker refused it with %s. ", decode.ErrorName(b.code))
		} else if b.base >= 0 {
			fmt.Fprintf(&ex, "The broker still appended it %s. ", at)
		}
	default:
		summary = fmt.Sprintf("%s %s: the batch %s sent to %s fails its CRC (crc %d, computed %d)", label, at, src.serverLabel(env), src.clientID, b.crc, b.computed)
		fmt.Fprintf(&ex, "The batch %s of %s that %s sent to %s by %s carries CRC %d in its header, but its bytes (attributes to the end) checksum to %d: this copy is corrupt. ",
			at, label, src.serverLabel(env), src.holderLabel(env), src.path, b.crc, b.computed)
		ex.WriteString("A follower or consumer that receives it rejects it (CorruptRecordException) and fetches it again, so it stalls at that offset as long as the broker serves these bytes. ")
	}
	if b.copies > 1 {
		fmt.Fprintf(&ex, "%d copies on this connection failed the check.", b.copies)
	}
	next := "Run kafka-dump-log.sh --deep-iteration --files <segment>.log on " + src.serverLabel(env) +
		" around the offset: a stored batch that fails there is corrupt on disk (check dmesg, SMART, the page cache's host); " +
		"one that verifies was damaged in transit (NIC offload, memory, a proxy in the path). Check the receiver's log for " +
		"CorruptRecordException, and rule out the capture itself (a rewriting or TLS-terminating proxy at the capture point)."
	return Finding{
		Detector: "replica-divergence", Severity: Error, Summary: summary, First: b.first, Last: b.last,
		Conns: []int{src.conn}, Nodes: nodes.sorted(), Counts: map[string]int64{"bad_crcs": b.copies}, Fields: fields,
		Evidence: b.ev.list(), Explanation: strings.TrimSpace(ex.String()), Next: next,
	}
}

// holders resolves the copies' sources to replicas: node ids where known,
// else addresses.
func (d *replicaDivergence) holders(env *Env, p *rdPart, nodes idSet, names map[string]bool) {
	for i := range p.holders.all() {
		s := d.srcs.get(i)
		if id := s.serverNode(env); id >= 0 {
			nodes.add(id)
			names["node "+strconv.Itoa(int(id))] = true
		} else {
			names[s.server.String()] = true
		}
		if s.path == pathReplica || s.path == pathRaft {
			if id := s.holderNode(env); id >= 0 {
				nodes.add(id)
				names["node "+strconv.Itoa(int(id))] = true
			} else {
				names[s.client.Addr().String()] = true
			}
		}
	}
}

func (d *replicaDivergence) infoFindings(env *Env) []Finding {
	var parts []*rdPart
	for _, p := range d.partList {
		if p.batches == 0 {
			continue
		}
		names := map[string]bool{}
		d.holders(env, p, idSet{}, names)
		if len(names) >= d.minRepl || p.tainted > 0 {
			parts = append(parts, p)
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].key.less(parts[j].key) })
	if len(parts) == 0 {
		return nil
	}
	if len(parts) <= d.maxInfo {
		out := make([]Finding, 0, len(parts))
		for _, p := range parts {
			out = append(out, d.info(env, []*rdPart{p}))
		}
		return out
	}
	return []Finding{d.info(env, parts)}
}

// info sums up the comparison of one partition or, beyond max-info, of all.
func (d *replicaDivergence) info(env *Env, parts []*rdPart) Finding {
	nodes := idSet{}
	names := map[string]bool{}
	conns := idSet{}
	var batches, copies, single, mism, bad, rew, tainted, other int64
	var first, last time.Time
	var ev sampler[Evidence]
	for _, p := range parts {
		d.holders(env, p, nodes, names)
		batches += p.batches
		copies += p.copies
		single += p.single
		mism += p.mismatches
		tainted += p.tainted
		bad += p.badCRCs
		rew += p.rewritten
		other += p.otherTopicID
		first, last = earliest(first, p.first), latest(last, p.last)
		for id := range p.conns {
			conns.add(id)
		}
		for _, e := range p.ev.list() {
			ev.add(e)
		}
	}
	counts := map[string]int64{
		"batches":    batches,
		"copies":     copies,
		"replicas":   int64(len(names)),
		"mismatches": mism,
		"bad_crcs":   bad,
	}
	if single > 0 {
		counts["single_copy_batches"] = single
	}
	if rew > 0 {
		counts["rewritten_by_broker"] = rew
	}
	if other > 0 {
		counts["other_topic_id_copies"] = other
	}
	if n := d.entries.evicted; n > 0 {
		counts["compared_early"] = n
	}
	if d.partsDropped > 0 {
		counts["batches_of_partitions_not_followed"] = d.partsDropped
	}
	if d.dropped > 0 {
		counts["problems_not_detailed"] = d.dropped
	}
	fields := map[string]any{}
	var what string
	if len(parts) == 1 {
		p := parts[0]
		fields["topic"] = p.key.name(env)
		fields["partition"] = p.key.part
		fields["producer_id"] = p.producerID
		fields["first_offset"] = p.firstOff
		fields["last_offset"] = p.lastOff
		what = p.key.label(env)
	} else {
		counts["partitions"] = int64(len(parts))
		what = fmt.Sprintf("%d partitions", len(parts))
	}
	names2 := make([]string, 0, len(names))
	for n := range names {
		names2 = append(names2, n)
	}
	sort.Strings(names2)
	ok := batches - tainted
	var summary string
	if mism == 0 && bad == 0 {
		summary = fmt.Sprintf("%s: %s verified byte-identical across %s (%d copies compared)", what, text.Plural(batches, "batch", "batches"), text.Plural(int64(len(names)), "replica", "replicas"), copies)
	} else {
		var probs []string
		if mism > 0 {
			probs = append(probs, text.Plural(mism, "batch differs", "batches differ"))
		}
		if bad > 0 {
			probs = append(probs, text.Plural(bad, "copy fails its CRC", "copies fail their CRC"))
		}
		summary = fmt.Sprintf("%s: %d of %d batches identical across %s; %s (see the errors)", what, ok, batches,
			text.Plural(int64(len(names)), "replica", "replicas"), strings.Join(probs, ", "))
	}
	var ex strings.Builder
	fmt.Fprintf(&ex, "%s seen in two copies or more (%d copies in all, as produced and as fetched) held by %s. ",
		text.Plural(batches, "batch of "+what+" was", "batches of "+what+" were"), copies, strings.Join(names2, ", "))
	if mism == 0 {
		ex.WriteString("Every copy of a batch carries the same CRC-32C, which covers the attributes, producer id, epoch, sequence and every record: the replicas are byte-identical where the capture could see them (the base offset and partition leader epoch are not covered and may be set by the leader). ")
	} else {
		fmt.Fprintf(&ex, "%s copies with different CRCs. ", text.Plural(mism, "batch has", "batches have"))
	}
	if bad > 0 {
		fmt.Fprintf(&ex, "%s a CRC its bytes do not match. ", text.Plural(bad, "copy carries", "copies carry"))
	}
	if rew > 0 {
		fmt.Fprintf(&ex, "%s rewritten by the broker (other compression or timestamp type), as the topic's configuration asks; their stored copies were compared with each other. ", text.Plural(rew, "produced batch was", "produced batches were"))
	}
	if single > 0 {
		fmt.Fprintf(&ex, "%s seen only once and could not be compared.", text.Plural(single, "batch was", "batches were"))
	}
	if other > 0 {
		fmt.Fprintf(&ex, " %s another topic id (the same name on another cluster, or a recreated topic): not compared.",
			text.Plural(other, "copy at these offsets names", "copies at these offsets name"))
	}
	next := "Nothing to do for identical copies. To compare more of the log, capture the producer, the followers' replica fetches and a consumer over the same period."
	if tainted > 0 {
		next = "See the replica-divergence errors for the copies that differ or fail their CRC."
	}
	return Finding{
		Detector: "replica-divergence", Severity: Info, Summary: summary, First: first, Last: last,
		Conns: conns.ints(), Nodes: nodes.sorted(), Counts: counts, Fields: fields, Evidence: ev.list(),
		Explanation: strings.TrimSpace(ex.String()), Next: next,
	}
}

// pathNames lists the paths in a copyPath bit set.
func pathNames(bits uint8) string {
	var out []string
	for p := pathProduce; p <= pathRaft; p++ {
		if bits&(1<<p) != 0 {
			out = append(out, p.String())
		}
	}
	return strings.Join(out, ", ")
}
