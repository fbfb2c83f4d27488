package legacy

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

func duplicateBatchesSpec() Spec {
	return Spec{
		ID:       "duplicate-batches",
		Severity: Error,
		Summary: "The same data written twice into one partition (the MirrorMaker 2 replay): a batch whose CRC, " +
			"record count and size equal those of a batch at another offset, or, for batches rebuilt or " +
			"recompressed on the way, whose decoded records (timestamp, key, value, headers) all equal records " +
			"at one other offset. Offsets of produced batches come from the Produce responses; the same batch " +
			"seen again at the same offset (by a consumer, a follower, a retry the broker recognised) is not a " +
			"duplicate. Control and transactional batches are not compared by records (an aborted transaction " +
			"sent again repeats its records legitimately), and records match only between copies naming the same " +
			"topic id.",
		Params: []Param{
			{Name: "min-batches", Default: 1, Meaning: "duplicated batches in one partition before it is reported"},
			{Name: "compare-records", Default: 1, Meaning: "1: also compare decoded records to catch copies whose " +
				"CRC differs (re-batched, recompressed, another producer id); 0: compare CRCs only"},
			{Name: "max-decompressed-mib", Default: 16, Meaning: "largest decompressed records section of " +
				"one batch, in MiB, that is compared by records; larger batches are compared by CRC only and counted as " +
				"batches_over_cap"},
			{Name: "max-batches", Default: 200000, Meaning: "batch fingerprints (CRC, record count, size) remembered " +
				"over all partitions; the oldest are forgotten first (counted as forgotten_batches)"},
			{Name: "max-records", Default: 250000, Meaning: "record fingerprints remembered over all partitions for " +
				"the comparison by records (about 50 bytes each); the oldest are forgotten first"},
			{Name: "max-partitions", Default: 10000, Meaning: "partitions followed; batches of further partitions " +
				"are not checked"},
		},
		New: func(p Params) Detector { return newDuplicateBatches(p) },
	}
}

// duplicateBatches keeps, per partition, the offset ranges already seen
// and, over all partitions, a bounded map from a batch's fingerprint (CRC,
// record count, size) to the first offset it was seen at, and one from a
// record's fingerprint to its offset. A batch at an offset not seen before
// whose fingerprint points at another offset is a repeat.
type duplicateBatches struct {
	minBatches int
	hasher     *recordHasher // nil when records are not compared
	maxParts   int

	parts        map[partKey]*dupPart
	partCache    partCache[dupPart]
	partList     []*dupPart
	partsDropped int64

	crcs    *fifoTable[dupCRCKey, dupOrigin]
	recs    *fifoTable[dupRecKey, int64]
	pending *fifo[*flows.Message, *dupPending]
	pendN   int           // record fingerprints held by pending Produce requests
	free    []*dupPending // for reuse
	srcs    copySources
	scratch []recordHash
	found   []int64
	warm    uint64 // see fifoTable.warm
}

// maxPendingProduces and maxPendingHashes bound what is held for Produce
// requests waiting for their response (the offsets).
const (
	maxPendingProduces = 4096
	maxPendingHashes   = 1 << 18
	maxShifts          = 16
)

type dupCRCKey struct {
	part    uint32
	crc     uint32
	records int32
	length  int32
}

func (k dupCRCKey) hash(seed uint64) uint64 {
	return mix64(uint64(k.crc)<<32|uint64(uint32(k.length))^seed, uint64(k.part)<<32|uint64(uint32(k.records)))
}

type dupOrigin struct {
	offset int64
	file   int32
	conn   int32
	packet uint64
	at     int64 // unix ns
}

type dupRecKey struct {
	h    uint64
	part uint32
}

func (k dupRecKey) hash(seed uint64) uint64 { return mix64(k.h^seed, uint64(k.part)) }

// dupPending holds the record fingerprints of a Produce request's batches
// until its response gives their offsets: batch i's are
// hashes[spans[i].from:spans[i].to]. They are reused from request to
// request.
type dupPending struct {
	hashes []recordHash
	spans  []dupSpan
	n      int
}

type dupSpan struct {
	from, to int
	err      error
	hashed   bool // false: not comparable, never hashed
}

// maxPooledHashes bounds the fingerprints a pooled dupPending keeps room
// for, and maxPooled the pool.
const (
	maxPooledHashes = 1 << 14
	maxPooled       = 64
)

func (d *duplicateBatches) newPending(batches int) *dupPending {
	var pp *dupPending
	if n := len(d.free); n > 0 {
		pp = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		pp = &dupPending{}
	}
	pp.hashes, pp.n = pp.hashes[:0], 0
	pp.spans = slices.Grow(pp.spans[:0], batches)[:batches]
	return pp
}

func (d *duplicateBatches) release(pp *dupPending) {
	if len(d.free) < maxPooled && cap(pp.hashes) <= maxPooledHashes {
		clear(pp.spans) // drop the errors
		d.free = append(d.free, pp)
	}
}

type dupPart struct {
	key      partKey
	idx      uint32
	seen     offsetRanges
	batches  int64
	records  int64
	overCap  int64
	badRecs  int64
	runs     map[int64]*dupRun
	dropRuns int64 // repeats at further shifts than maxShifts, not detailed
}

// dupRun is the repeats at one offset shift in one partition.
type dupRun struct {
	shift                int64
	batches, records     int64
	span                 int64 // offsets covered by the repeats
	byRecords            int64
	origFirst, origLast  int64
	repFirst, repLast    int64
	producerID           int64
	idempotent           int64 // repeats with a producer id
	producerSrc, seenSrc int64 // copy source index of the repeat: produce / any; -1 none
	first, last          time.Time
	orig                 dupOrigin
	hasOrig              bool
	conns                idSet
	ev                   sampler[Evidence]
	md5                  hash.Hash
	ordered              bool
	lastRep              int64
}

func newDuplicateBatches(p Params) *duplicateBatches {
	d := &duplicateBatches{
		minBatches: max(p.Int("min-batches"), 1),
		maxParts:   max(p.Int("max-partitions"), 1),
		parts:      make(map[partKey]*dupPart),
		crcs:       newFifoTable[dupCRCKey, dupOrigin](p.Int("max-batches"), nil),
		recs:       newFifoTable[dupRecKey, int64](p.Int("max-records"), nil),
	}
	d.pending = newFifo(maxPendingProduces, func(_ *flows.Message, pp *dupPending) {
		d.pendN -= pp.n
		d.release(pp)
	})
	if p.Int("compare-records") != 0 {
		d.hasher = newRecordHasher(max(int(p.Float("max-decompressed-mib")*(1<<20)), 1))
	}
	return d
}

// OnRequest fingerprints the records of produced batches while their bytes
// are there; their offsets come with the response.
func (d *duplicateBatches) OnRequest(m *flows.Message) {
	if d.hasher == nil || m.Key != int16(kmsg.Produce) || len(m.Batches) == 0 || d.pendN >= maxPendingHashes {
		return
	}
	pp := d.newPending(len(m.Batches))
	for i := range m.Batches {
		b := &m.Batches[i]
		if !recordsComparable(b) {
			continue
		}
		from := len(pp.hashes)
		var err error
		pp.hashes, err = d.hasher.hashes(&b.Batch, pp.hashes)
		pp.spans[i] = dupSpan{from: from, to: len(pp.hashes), err: err, hashed: true}
		pp.n += len(pp.hashes) - from
	}
	d.pendN += pp.n
	d.pending.put(m, pp)
}

// OnExchange places produced batches at the offsets of the response and
// fetched batches at their own.
func (d *duplicateBatches) OnExchange(x *flows.Exchange) {
	if x.Req == nil {
		return
	}
	switch kmsg.Key(x.Req.Key) {
	case kmsg.Produce:
		pp, _ := d.pending.get(x.Req)
		if pp != nil {
			d.pending.del(x.Req)
			d.pendN -= pp.n
			defer d.release(pp)
		}
		if x.Resp == nil {
			return
		}
		src := int64(d.srcs.of(x.Req, pathProduce))
		produceBatches(x, func(i int, b *flows.BatchRef, base int64, _ int16) {
			if base < 0 {
				return
			}
			c := dupCopy{b: b, base: base, msg: x.Req, src: src, produce: true, hashErr: errNotHashable}
			if pp != nil {
				sp := &pp.spans[i]
				c.hashes, c.hashErr = pp.hashes[sp.from:sp.to], sp.err
				if !sp.hashed || (sp.from == sp.to && sp.err == nil) {
					// Not comparable, or no record: as the
					// fingerprints of a batch never hashed.
					c.hashes, c.hashErr = nil, errNotHashable
				}
			}
			d.batch(&c)
		})
	case kmsg.Fetch:
		if x.Resp == nil || len(x.Resp.Batches) == 0 {
			return
		}
		src := int64(d.srcs.of(x.Req, fetchPath(x.Req)))
		for i := range x.Resp.Batches {
			b := &x.Resp.Batches[i]
			c := dupCopy{b: b, base: b.BaseOffset, msg: x.Resp, src: src, raw: true}
			d.batch(&c)
		}
	}
}

// dupCopy is one batch seen at a known offset.
type dupCopy struct {
	b       *flows.BatchRef
	base    int64
	msg     *flows.Message
	src     int64
	produce bool
	raw     bool // b.Raw is valid: fingerprint the records on demand
	hashes  []recordHash
	hashErr error
}

func (d *duplicateBatches) part(b *flows.BatchRef) *dupPart {
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
	p := &dupPart{key: k, idx: uint32(len(d.partList)), runs: make(map[int64]*dupRun)}
	d.parts[k] = p
	d.partList = append(d.partList, p)
	slot.k, slot.p = k, p
	return p
}

func (d *duplicateBatches) batch(c *dupCopy) {
	b := c.b
	if b.Magic != 2 || c.base < 0 {
		return
	}
	p := d.part(b)
	if p == nil {
		return
	}
	last := c.base + int64(b.LastOffsetDelta)
	if p.seen.contains(c.base) {
		// The same batch again at its own offset: a consumer, a
		// follower, a retry answered with the first offset. If it is
		// the produce of a repeat first seen by a reader, name the
		// producer.
		if c.produce {
			for _, r := range p.runs {
				if r.producerSrc < 0 && c.base >= r.repFirst && c.base <= r.repLast {
					r.producerSrc = c.src
				}
			}
		}
		return
	}
	p.seen.add(c.base, last)
	p.batches++
	p.records += int64(b.Records)
	if b.Control() || !b.CRCOK {
		return
	}
	ck := dupCRCKey{part: p.idx, crc: b.CRC, records: b.Records, length: b.Length}
	// The records' fingerprints, if they are compared, are taken first
	// (they change nothing) so that the index slots of the batch's and
	// of the records' fingerprints can be touched together: their cache
	// misses overlap.
	var hs []recordHash
	var err error
	var mix uint64
	comparable := d.hasher != nil && recordsComparable(b)
	if comparable {
		hs, err = c.hashes, c.hashErr
		if c.raw {
			d.scratch, err = d.hasher.hashes(&b.Batch, d.scratch[:0])
			hs = d.scratch
		}
		// Records are matched within one topic incarnation: copies
		// that name the topic by id (Fetch v13+, Produce v13+) only
		// match copies with that id, so the same topic name on two
		// clusters (MirrorMaker 2 with the identity policy, both sides
		// captured) or a recreated topic do not look like a replay.
		mix = d.hasher.idMix(b.TopicID)
		if err == nil {
			warm := d.crcs.warm(ck)
			for _, h := range hs {
				warm += d.recs.warm(dupRecKey{h: h.h ^ mix, part: p.idx})
			}
			d.warm = warm
		}
	}
	if o, ok := d.crcs.ref(ck); ok {
		if o.offset != c.base {
			orig := *o
			d.repeat(p, c, c.base-o.offset, false, &orig)
			return
		}
	} else {
		*o = dupOrigin{offset: c.base, file: int32(c.msg.File), conn: int32(c.msg.Conn.ID), packet: c.msg.Packet, at: c.msg.Time.UnixNano()}
	}
	if !comparable {
		return
	}
	switch {
	case errors.Is(err, errOverCap):
		p.overCap++
		return
	case errors.Is(err, errNotHashable):
		return
	case err != nil:
		p.badRecs++
		return
	case len(hs) == 0:
		return
	}
	// Every record must be at one other offset, all by the same shift:
	// identical records within a batch (the same payload sent over and
	// over) point at one offset and so at several shifts.
	d.found = d.found[:0]
	shift, all := int64(0), true
	for i, h := range hs {
		o := d.recs.get(dupRecKey{h: h.h ^ mix, part: p.idx})
		if o == nil {
			d.found = append(d.found, -1)
			all = false
			continue
		}
		off := *o
		d.found = append(d.found, off)
		if s := c.base + int64(h.delta) - off; i == 0 {
			shift = s
		} else if s != shift {
			all = false
		}
	}
	if all && shift != 0 {
		d.repeat(p, c, shift, true, nil)
		return
	}
	for i, h := range hs {
		if d.found[i] < 0 {
			d.recs.put(dupRecKey{h: h.h ^ mix, part: p.idx}, c.base+int64(h.delta))
		}
	}
}

// repeat records a batch at c.base that repeats data at c.base-shift. A
// negative shift is the same pair seen the other way round (the copy at the
// higher offset was seen first, as when the capture lost the original's
// Produce and a later Fetch shows it): it is recorded as the copy at the
// higher offset repeating this one.
func (d *duplicateBatches) repeat(p *dupPart, c *dupCopy, shift int64, byRecords bool, o *dupOrigin) {
	b := c.b
	base, reversed := c.base, shift < 0
	if reversed {
		shift = -shift
		base += shift
	}
	r := p.runs[shift]
	if r == nil {
		if len(p.runs) >= maxShifts {
			p.dropRuns++
			return
		}
		last := base + int64(b.LastOffsetDelta)
		r = &dupRun{shift: shift, producerSrc: -1, seenSrc: -1, conns: idSet{}, md5: md5.New(), ordered: true,
			origFirst: base - shift, origLast: last - shift, repFirst: base, repLast: last,
			producerID: b.ProducerID, lastRep: base - 1}
		p.runs[shift] = r
	}
	last := base + int64(b.LastOffsetDelta)
	r.batches++
	r.records += int64(b.Records)
	r.span += int64(b.LastOffsetDelta) + 1
	if byRecords {
		r.byRecords++
	}
	r.origFirst, r.origLast = min(r.origFirst, base-shift), max(r.origLast, last-shift)
	r.repFirst, r.repLast = min(r.repFirst, base), max(r.repLast, last)
	if b.ProducerID >= 0 {
		r.idempotent++
	}
	if c.produce && r.producerSrc < 0 {
		r.producerSrc = c.src
	}
	if r.seenSrc < 0 {
		r.seenSrc = c.src
	}
	if base <= r.lastRep || reversed {
		r.ordered = false
	}
	r.lastRep = base
	fmt.Fprintf(r.md5, "%d\n", b.CRC)
	if r.first.IsZero() {
		r.first = c.msg.Time
	}
	r.last = c.msg.Time
	r.conns.add(int32(c.msg.Conn.ID))
	if o != nil {
		r.conns.add(o.conn)
		if !r.hasOrig {
			r.orig, r.hasOrig = *o, true
		}
	}
	what := fmt.Sprintf("%s: batch at %d (crc %d, %d records) repeats offset %d", c.msg.Name(), base, b.CRC, b.Records, base-shift)
	if byRecords {
		what = fmt.Sprintf("%s: batch at %d (crc %d, %d records) holds the records of offsets %d-%d", c.msg.Name(), base, b.CRC, b.Records, base-shift, last-shift)
	}
	if reversed {
		what = fmt.Sprintf("%s: batch at %d (crc %d, %d records), seen after its copy at %d", c.msg.Name(), c.base, b.CRC, b.Records, base)
	}
	r.ev.add(evidence(c.msg, what))
}

// Findings reports each partition with repeats.
func (d *duplicateBatches) Findings(env *Env) []Finding {
	var out []Finding
	parts := append([]*dupPart(nil), d.partList...)
	sort.Slice(parts, func(i, j int) bool { return parts[i].key.less(parts[j].key) })
	for _, p := range parts {
		if f, ok := d.finding(env, p); ok {
			out = append(out, f)
		}
	}
	return out
}

func (d *duplicateBatches) finding(env *Env, p *dupPart) (Finding, bool) {
	var runs []*dupRun
	var dupBatches, dupRecords, byRecords, idem int64
	for _, r := range p.runs {
		runs = append(runs, r)
		dupBatches += r.batches
		dupRecords += r.records
		byRecords += r.byRecords
		idem += r.idempotent
	}
	if dupBatches < int64(d.minBatches) || len(runs) == 0 {
		return Finding{}, false
	}
	// The main run holds the most repeated records.
	sort.Slice(runs, func(i, j int) bool {
		if runs[i].records != runs[j].records {
			return runs[i].records > runs[j].records
		}
		return runs[i].shift < runs[j].shift
	})
	main := runs[0]
	shifts := make([]int64, len(runs))
	for i, r := range runs {
		shifts[i] = r.shift
	}
	sort.Slice(shifts, func(i, j int) bool { return shifts[i] < shifts[j] })
	contiguous := main.span == main.repLast-main.repFirst+1

	src := d.srcs.get(uint32(max(main.seenSrc, 0)))
	if main.producerSrc >= 0 {
		src = d.srcs.get(uint32(main.producerSrc))
	}
	topic := p.key.name(env)
	label := p.key.label(env)

	nodes := idSet{}
	nodes.add(src.serverNode(env))
	conns := idSet{}
	first, last := main.first, main.last
	var ev []Evidence
	for _, r := range runs {
		for id := range r.conns {
			conns.add(id)
		}
		first, last = earliest(first, r.first), latest(last, r.last)
		if r.hasOrig {
			first = earliest(first, time.Unix(0, r.orig.at).UTC())
		}
	}
	if main.hasOrig {
		ev = append(ev, Evidence{File: int(main.orig.file), Packet: main.orig.packet, Conn: int(main.orig.conn),
			What: fmt.Sprintf("first copy: batch at offset %d", main.orig.offset)})
	}
	ev = append(ev, main.ev.list()...)

	counts := map[string]int64{
		"batches":           p.batches,
		"records":           p.records,
		"duplicate_batches": dupBatches,
		"duplicate_records": dupRecords,
	}
	if byRecords > 0 {
		counts["duplicate_batches_by_records"] = byRecords
	}
	if p.overCap > 0 {
		counts["batches_over_cap"] = p.overCap
	}
	if p.badRecs > 0 {
		counts["undecodable_batches"] = p.badRecs
	}
	if p.dropRuns > 0 {
		counts["repeats_at_other_shifts"] = p.dropRuns
	}
	if n := d.crcs.evicted; n > 0 {
		counts["forgotten_batches"] = n
	}
	if d.partsDropped > 0 {
		counts["batches_of_partitions_not_followed"] = d.partsDropped
	}
	fields := map[string]any{
		"topic":               topic,
		"partition":           p.key.part,
		"offset_shift":        main.shift,
		"shifts":              shifts,
		"contiguous":          contiguous,
		"first_offset":        main.origFirst,
		"last_offset":         main.origLast,
		"repeat_first_offset": main.repFirst,
		"repeat_last_offset":  main.repLast,
		"producer_id":         main.producerID,
		"client_id":           src.clientID,
		"compared":            comparedBy(main),
	}
	if contiguous && main.ordered && main.byRecords == 0 {
		// Both halves have this CRC sequence: the repeats are equal
		// batch for batch to the original run.
		fields["crc_sequence_md5"] = hex.EncodeToString(main.md5.Sum(nil))
	}

	shape := fmt.Sprintf("offsets %d-%d again at %d-%d", main.origFirst, main.origLast, main.repFirst, main.repLast)
	summary := fmt.Sprintf("%s: %d batches (%d records) written twice, %s (shift %+d), producerId %d",
		label, dupBatches, dupRecords, shape, main.shift, main.producerID)

	var ex strings.Builder
	how := "byte for byte (same CRC, record count and size)"
	if main.byRecords == main.batches {
		how = "record for record (same timestamps, keys, values and headers, in batches whose CRCs differ: re-batched or recompressed)"
	} else if main.byRecords > 0 {
		how = fmt.Sprintf("byte for byte or, for %d of them, record for record", main.byRecords)
	}
	fmt.Fprintf(&ex, "%d of the %d batches seen in %s repeat, %s, data already at %d offsets lower: ", dupBatches, p.batches, label, how, main.shift)
	if contiguous {
		fmt.Fprintf(&ex, "the %d batches at offsets %d-%d appear again as one contiguous run at %d-%d", main.batches, main.origFirst, main.origLast, main.repFirst, main.repLast)
		if _, ok := fields["crc_sequence_md5"]; ok {
			ex.WriteString(", with the same CRC sequence")
		}
		ex.WriteString(". ")
	} else {
		fmt.Fprintf(&ex, "%d batches between offsets %d and %d repeat at %d-%d, not as one unbroken run. ", main.batches, main.origFirst, main.origLast, main.repFirst, main.repLast)
	}
	if len(shifts) > 1 {
		fmt.Fprintf(&ex, "Repeats were found at %d different shifts (%s). ", len(shifts), text.IDs(shifts, 0))
	}
	fmt.Fprintf(&ex, "The log now holds %d records twice; consumers read them twice. ", dupRecords)
	who := src.clientID
	if main.producerSrc >= 0 {
		fmt.Fprintf(&ex, "The repeat was produced by %s to %s", who, src.serverLabel(env))
	} else {
		fmt.Fprintf(&ex, "The repeat was seen by %s (its Produce was not captured)", who)
	}
	if idem == 0 {
		fmt.Fprintf(&ex, " with producerId -1: idempotence was off, so the broker had no producer id and sequence to recognise the resend and appended it as new data. ")
	} else {
		fmt.Fprintf(&ex, " with producerId %d: the broker deduplicates only retries of the same producer id and epoch (its last 5 batches), so this data came back as new batches (a new producer id after a restart, or records re-sent in new batches). ", main.producerID)
	}
	ex.WriteString("This is the pattern of a producer that re-reads its source after a crash, as a MirrorMaker 2 task killed before its source offsets were committed replays from the last committed position.")

	next := "Check the producer's restarts around the repeat (the connections and times in the evidence) and, for MirrorMaker 2 or Kafka Connect, " +
		"whether source offsets were committed before the stop (offset.flush.interval.ms, the mm2-offsets/connect-offsets topic). " +
		"Turn on exactly-once delivery (exactly.once.source.support=enabled on the Connect cluster, or enable.idempotence=true " +
		"with transactions for a custom pipeline). Confirm on the broker: kafka-dump-log.sh --files <segment>.log | grep -E 'baseOffset|crc' " +
		"around both ranges; downstream consumers must tolerate or remove the duplicated records."
	return Finding{
		Detector:    "duplicate-batches",
		Severity:    Error,
		Summary:     summary,
		First:       first,
		Last:        last,
		Conns:       conns.ints(),
		Nodes:       nodes.sorted(),
		Counts:      counts,
		Fields:      fields,
		Evidence:    ev,
		Explanation: ex.String(),
		Next:        next,
	}, true
}

func comparedBy(r *dupRun) string {
	switch {
	case r.byRecords == 0:
		return "crc"
	case r.byRecords == r.batches:
		return "records"
	}
	return "crc+records"
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// recordsComparable reports a batch whose records may be compared with
// others': not a control batch, not transactional (a transaction aborted
// and sent again repeats its records legitimately; read_committed
// consumers never see the aborted copy), with a valid CRC.
func recordsComparable(b *flows.BatchRef) bool {
	return b.Magic == 2 && !b.Control() && !b.Transactional() && b.CRCOK
}
