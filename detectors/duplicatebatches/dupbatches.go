// Package duplicatebatches finds the same data written twice into one partition,
// the MirrorMaker 2 replay: a batch whose CRC, record count and size equal
// those of a batch at another offset, or, for batches rebuilt or
// recompressed on the way, whose records all equal records at one other
// offset.
//
// Every copy of a batch the capture shows is placed at its offset: a
// fetched batch at its own, a produced one at the offset its Produce
// response gave (flows.ProducedBatches). Per partition the offsets seen
// are kept as ranges; over all partitions a bounded table maps a batch's
// fingerprint (CRC, record count, size) to the first offset it was seen
// at, and another a record's fingerprint (decode.RecordHasher, made by
// flows while a Produce request's bytes are there: see Keep) to its
// offset. A batch at an offset not seen before whose fingerprint points at
// another offset is a repeat; the repeats of a partition are grouped by
// their shift.
package duplicatebatches

import (
	"crypto/md5"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/copies"
	"github.com/kfsniff/kfsniff/detectors/internal/table"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "duplicate-batches",
	Severity: detectors.Error,
	Doc: "The same data written twice into one partition (the MirrorMaker 2 replay): a batch whose CRC, " +
		"record count and size equal those of a batch at another offset, or, for batches rebuilt or " +
		"recompressed on the way, whose decoded records (timestamp, key, value, headers) all equal records " +
		"at one other offset. Offsets of produced batches come from the Produce responses; the same batch " +
		"seen again at the same offset (by a consumer, a follower, a retry the broker recognised) is not a " +
		"duplicate. Control and transactional batches are not compared by records (an aborted transaction " +
		"sent again repeats its records legitimately), and records match only between copies naming the same " +
		"topic id. Data equal to data the same sender wrote less than same-producer-window before (one connection, " +
		"whose acknowledgement of the first copy it had, or one idempotent producer session under other sequence numbers) " +
		"is that application's own repeat (one value sent twice within a millisecond), not a replay. Severity: duplicates never heal (the log keeps both copies until retention, and every " +
		"consumer reads the records twice), so they are graded by how much was written twice and how: an " +
		"error for an MM2-style replay, replay-batches or more batches appended again at one offset shift " +
		"(a consumer-producer pipeline that re-read its source from an earlier position: MirrorMaker 2 or " +
		"Connect killed before its offsets were committed), or replay-records or more records written twice " +
		"in the partition whatever the pattern; a warning below both (a producer without idempotence " +
		"resending the batches it had in flight, at most max.in.flight.requests.per.connection (5) per " +
		"partition, after a lost acknowledgement: a misconfiguration that bit). Never info: the records are " +
		"in the log twice however short the failure that caused it.",
	Recorded: []string{"fixtures/pcaps/kafka/mm2-replay.pcap.gz", "fixtures/pcaps/kafka/mm2-replay-idempotent.pcap.gz", "fixtures/pcaps/clients/mm2-replay-kgo.pcap", "fixtures/pcaps/clients/mm2-replay-sarama.pcap"},
}, Params{MinBatches: 1, ReplayBatches: 6, ReplayRecords: 1000, CompareRecords: true, MaxDecompressed: 16 * detectors.MiB,
	MaxFrameDecompressed: 64 * detectors.MiB, MaxRunDecompressed: 256 * detectors.MiB, MaxInflation: 64, MaxBatches: 200000,
	MaxRecords: 250000, MaxPartitions: 10000, SameProducerWindow: time.Second}, New)

// Params are the rule's thresholds and bounds.
type Params struct {
	MinBatches           int             `param:"min-batches" doc:"duplicated batches in one partition before it is reported"`
	ReplayBatches        int             `param:"replay-batches" doc:"batches appended again at one offset shift that make an MM2-style replay, an error; fewer are a warning (a producer resending its in-flight batches, at most 5 by default, after a lost acknowledgement)"`
	ReplayRecords        int             `param:"replay-records" doc:"records written twice in one partition that make an error whatever the pattern; fewer, in fewer than replay-batches batches at one shift, are a warning"`
	CompareRecords       bool            `param:"compare-records" doc:"also compare decoded records to catch copies whose CRC differs (re-batched, recompressed, another producer id); false: compare CRCs only"`
	MaxDecompressed      detectors.Bytes `param:"max-decompressed" unit:"MiB" alias:"max-decompressed-mib" doc:"largest decompressed records section of one batch that is compared by records; larger batches are compared by CRC only and counted as batches_over_cap"`
	MaxFrameDecompressed detectors.Bytes `param:"max-decompressed-frame" unit:"MiB" doc:"decompressed bytes of the batches of one frame (a Produce request, a Fetch response) compared by records; the frame's further batches are compared by CRC only and counted as batches_over_budget (bounds_reached: duplicate-batches.batches_over_frame_budget)"`
	MaxRunDecompressed   detectors.Bytes `param:"max-decompressed-run" unit:"MiB" doc:"decompressed bytes over the whole run compared by records, beyond max-inflation times the compressed bytes read; further batches are compared by CRC only and counted as batches_over_budget (bounds_reached: duplicate-batches.batches_over_run_budget)"`
	MaxInflation         int             `param:"max-inflation" doc:"how many decompressed bytes each compressed byte read adds to the run's budget (max-decompressed-run), so that decompression time stays linear in the capture's size; real record batches compress 2 to 10 times"`
	MaxBatches           int             `param:"max-batches" doc:"batch fingerprints (CRC, record count, size) remembered over all partitions; the oldest are forgotten first (counted as forgotten_batches)"`
	MaxRecords           int             `param:"max-records" doc:"record fingerprints remembered over all partitions for the comparison by records (about 70 bytes each); the oldest are forgotten first"`
	MaxPartitions        int             `param:"max-partitions" doc:"partitions followed; batches of further partitions are not checked"`
	SameProducerWindow   time.Duration   `param:"same-producer-window" unit:"s" doc:"a batch or records equal to ones the same sender produced less than this before (the same connection, which carried the acknowledgement of the first copy, or the same idempotent producer session under other sequence numbers) are that application's own repeat (one value sent twice within a millisecond), not a replay or a resend: a resend follows a failed or lost acknowledgement, a replay a restart or a rebalance; 0 compares every copy"`
}

// Cut implements detectors.Bounded: batches not decompressed for the
// per-batch cap or the budgets, over all partitions (a finding counts
// those of its partition only, and there may be none), and a
// correlator's batches shipped without record fingerprints.
func (r *rule) Cut() map[string]int64 {
	if r.hasher == nil {
		return nil
	}
	c := r.hasher.Counts()
	return map[string]int64{"batches_over_cap": c.OverCap, "batches_over_frame_budget": c.OverFrame,
		"batches_over_run_budget": c.OverRun, "batches_without_fingerprints": r.unshipped}
}

// maxShifts bounds the shifts detailed per partition.
const maxShifts = 16

// New makes the rule.
func New(p Params) detectors.Rule {
	r := &rule{
		minBatches: max(p.MinBatches, 1),
		replay:     int64(max(p.ReplayBatches, 1)),
		replayRecs: int64(max(p.ReplayRecords, 1)),
		crcs:       table.NewFifo[crcKey, origin](p.MaxBatches, nil),
		recs:       table.NewFifo[recKey, recAt](p.MaxRecords, nil),
		sameWindow: int64(p.SameProducerWindow),
	}
	r.parts = copies.NewParts(p.MaxPartitions, func(k cluster.Partition, idx uint32) *part {
		return &part{key: k, idx: idx, runs: make(map[int64]*run)}
	})
	if p.CompareRecords {
		r.hasher = decode.NewRecordHasher(int(max(p.MaxDecompressed, 1)))
		r.hasher.SetBudget(decode.Budget{Frame: int64(p.MaxFrameDecompressed), Run: int64(p.MaxRunDecompressed),
			Ratio: int64(max(p.MaxInflation, 0))})
	}
	return r
}

// rule keeps, per partition, the offset ranges already seen and, over all
// partitions, bounded tables from a batch's fingerprint to the first
// offset it was seen at and from a record's fingerprint to its offset.
type rule struct {
	minBatches int
	replay     int64                // batches at one shift that make a replay
	replayRecs int64                // records written twice that make an error
	hasher     *decode.RecordHasher // nil when records are not compared
	parts      *copies.Parts[part]
	crcs       *table.Fifo[crcKey, origin]
	recs       *table.Fifo[recKey, recAt]
	sameWindow int64 // ns, Params.SameProducerWindow
	srcs       copies.Sources
	scratch    []decode.RecordHash
	// unshipped counts a correlator's batches whose agent shipped no
	// record fingerprints (flows.ErrNotShipped): compared by CRC only.
	unshipped int64
	found     []int64
	crcLine   []byte // a CRC written for a run's md5
	warm      uint64 // see table.Fifo.Warm
}

type crcKey struct {
	part    uint32
	crc     uint32
	records int32
	length  int32
}

func (k crcKey) Hash(seed uint64) uint64 {
	return table.Mix64(uint64(k.crc)<<32|uint64(uint32(k.length))^seed, uint64(k.part)<<32|uint64(uint32(k.records)))
}

// origin is where a batch was first seen.
type origin struct {
	offset int64
	file   int32
	conn   int32
	packet uint64
	at     int64 // unix ns
	// session and produced: see sender.
	session  uint64
	produced bool
}

func (o *origin) sender() sender {
	if !o.produced {
		return sender{}
	}
	return sender{at: o.at, session: o.session, file: o.file, conn: o.conn}
}

type recKey struct {
	h    uint64
	part uint32
}

func (k recKey) Hash(seed uint64) uint64 { return table.Mix64(k.h^seed, uint64(k.part)) }

// recAt is where a record was first seen and who sent it.
type recAt struct {
	offset int64
	sender
}

// sender is who produced a copy, and when: what tells an application's
// own repeat from a replay or a resend.
type sender struct {
	at         int64  // the Produce's capture time, unix ns; 0 for a Fetch's copy
	session    uint64 // the idempotent producer session (session())
	file, conn int32
}

func senderOf(c *copies.Copy) sender {
	if c.Path.Stored() {
		// A Fetch shows the data, not who sent it when.
		return sender{}
	}
	return sender{at: c.Msg.Time.UnixNano(), session: session(c.B), file: int32(c.Msg.File), conn: int32(c.Msg.Conn.ID)}
}

// own reports data equal to what the same sender produced moments
// before: the same connection (a produced copy is placed at its offset
// from its answer, so the connection carried that acknowledgement, and
// a producer resends only what it has no acknowledgement for) or the
// same idempotent session (its batches under other sequence numbers are
// sends the broker took as distinct).
func (r *rule) own(first, again sender) bool {
	if first.at == 0 || again.at == 0 || again.at-first.at >= r.sameWindow {
		return false
	}
	return (first.session != 0 && first.session == again.session) || (first.file == again.file && first.conn == again.conn)
}

// session is an idempotent producer's id and epoch, 0 for a producer
// without idempotence. A session numbers every batch it sends, so two of
// its batches under other sequence numbers are two sends the broker took
// as distinct.
func session(b *flows.BatchRef) uint64 {
	if b.ProducerID < 0 {
		return 0
	}
	return table.Mix64(uint64(b.ProducerID), uint64(uint16(b.ProducerEpoch))) | 1
}

type part struct {
	key     cluster.Partition
	idx     uint32
	seen    copies.Ranges
	batches int64
	records int64
	overCap int64
	// overBudget counts batches not decompressed for the frame's or the
	// run's budget (decode.Budget), compared by CRC only.
	overBudget int64
	badRecs    int64
	runs       map[int64]*run
	dropRuns   int64 // repeats at further shifts than maxShifts, not detailed
}

// run is the repeats at one offset shift in one partition.
type run struct {
	shift                int64
	batches, records     int64
	span                 int64 // offsets covered by the repeats
	byRecords            int64
	origFirst, origLast  int64
	repFirst, repLast    int64
	producerID           int64
	idempotent           int64 // repeats with a producer id
	producerSrc, seenSrc int64 // copy source index of the repeat: produce / any; -1 none
	when                 copies.Span
	orig                 origin
	hasOrig              bool
	conns                tally.IDs
	ev                   detectors.Sampler[repeatEv]
	md5                  hash.Hash
	ordered              bool
	lastRep              int64
}

// Keep implements detectors.KeepHook: the fingerprints of the records of
// produced batches, made while their bytes are there; their offsets come
// with the response.
func (r *rule) Keep() flows.Keep {
	if r.hasher == nil {
		return flows.Keep{}
	}
	return flows.Keep{Records: r.hasher, Batches: recordsComparable}
}

// Exchange implements detectors.ExchangeHook: produced batches are placed
// at the offsets of the response, fetched ones at their own.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Resp == nil {
		return
	}
	if r.hasher != nil {
		r.hasher.StartFrame() // a Fetch response's batches are fingerprinted here
	}
	r.srcs.Copies(x, r.copyOf)
}

func (r *rule) copyOf(c *copies.Copy) {
	if c.Base < 0 {
		return
	}
	if c.Path.Stored() {
		// A Fetch's copy, its bytes there: the records are
		// fingerprinted on demand.
		r.batch(c, nil, nil)
		return
	}
	hs, err := []decode.RecordHash(nil), error(decode.ErrNotHashable)
	if r.hasher != nil && c.B.Shipped == nil {
		hs, err = c.Msg.RecordHashes(r.hasher, c.I)
		if errors.Is(err, flows.ErrNotKept) || (len(hs) == 0 && err == nil) {
			// Not comparable, not kept, or no record: as the
			// fingerprints of a batch never made.
			hs, err = nil, decode.ErrNotHashable
		}
	}
	r.batch(c, hs, err)
}

// batch places one copy at its offset; hs and hashErr are a produced
// copy's record fingerprints.
func (r *rule) batch(c *copies.Copy, hs []decode.RecordHash, hashErr error) {
	b := c.B
	if b.Magic != 2 || c.Base < 0 {
		return
	}
	p := r.parts.Of(b)
	if p == nil {
		return
	}
	last := c.Base + int64(b.LastOffsetDelta)
	if p.seen.Contains(c.Base) {
		// The same batch again at its own offset: a consumer, a
		// follower, a retry answered with the first offset. If it is
		// the produce of a repeat first seen by a reader, name the
		// producer.
		if !c.Path.Stored() {
			for _, rn := range p.runs {
				if rn.producerSrc < 0 && c.Base >= rn.repFirst && c.Base <= rn.repLast {
					rn.producerSrc = int64(c.Src)
				}
			}
		}
		return
	}
	p.seen.Add(c.Base, last)
	p.batches++
	p.records += int64(b.Records)
	if b.Control() || !b.CRCOK {
		return
	}
	ck := crcKey{part: p.idx, crc: b.CRC, records: b.Records, length: b.Length}
	// The records' fingerprints, if they are compared, are taken first
	// (they change nothing) so that the index slots of the batch's and
	// of the records' fingerprints can be touched together: their cache
	// misses overlap.
	err := hashErr
	var mix uint64
	byRecords := r.hasher != nil && recordsComparable(b)
	if byRecords {
		switch {
		case b.Shipped != nil:
			// A correlator's batch: the fingerprints its agent shipped.
			hs, err = r.shipped(b.Shipped)
		case c.Path.Stored():
			r.scratch, err = r.hasher.Hashes(&b.Batch, r.scratch[:0])
			hs = r.scratch
		}
		// Records are matched within one topic incarnation: copies
		// that name the topic by id (Fetch v13+, Produce v13+) only
		// match copies with that id, so the same topic name on two
		// clusters (MirrorMaker 2 with the identity policy, both sides
		// captured) or a recreated topic do not look like a replay.
		mix = r.hasher.TopicMix(b.TopicID)
		if err == nil {
			warm := r.crcs.Warm(ck)
			for _, h := range hs {
				warm += r.recs.Warm(recKey{h: h.Sum ^ mix, part: p.idx})
			}
			r.warm = warm
		}
	}
	if o, ok := r.crcs.Ref(ck); ok {
		if o.offset != c.Base {
			if r.own(o.sender(), senderOf(c)) {
				return
			}
			orig := *o
			r.repeat(p, c, c.Base-o.offset, false, &orig)
			return
		}
	} else {
		*o = origin{offset: c.Base, file: int32(c.Msg.File), conn: int32(c.Msg.Conn.ID), packet: c.Msg.Packet, at: c.Msg.Time.UnixNano(),
			session: session(b), produced: !c.Path.Stored()}
	}
	if !byRecords {
		return
	}
	switch {
	case errors.Is(err, decode.ErrOverCap):
		p.overCap++
		return
	case errors.Is(err, decode.ErrOverBudget):
		p.overBudget++
		return
	case errors.Is(err, decode.ErrNotHashable):
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
	r.found = r.found[:0]
	shift, all := int64(0), true
	// When both were sent in a Produce the capture shows; a Fetch shows
	// the records, not when they were sent.
	by := senderOf(c)
	for i, h := range hs {
		o := r.recs.Get(recKey{h: h.Sum ^ mix, part: p.idx})
		if o == nil {
			r.found = append(r.found, -1)
			all = false
			continue
		}
		off := o.offset
		if r.own(o.sender, by) {
			r.found = append(r.found, off)
			all = false
			continue
		}
		r.found = append(r.found, off)
		if s := c.Base + int64(h.Delta) - off; i == 0 {
			shift = s
		} else if s != shift {
			all = false
		}
	}
	if all && shift != 0 {
		r.repeat(p, c, shift, true, nil)
		return
	}
	for i, h := range hs {
		if r.found[i] < 0 {
			r.recs.Put(recKey{h: h.Sum ^ mix, part: p.idx}, recAt{offset: c.Base + int64(h.Delta), sender: by})
		}
	}
}

// repeat records a batch at c.Base that repeats data at c.Base-shift. A
// negative shift is the same pair seen the other way round (the copy at the
// higher offset was seen first, as when the capture lost the original's
// Produce and a later Fetch shows it): it is recorded as the copy at the
// higher offset repeating this one.
func (r *rule) repeat(p *part, c *copies.Copy, shift int64, byRecords bool, o *origin) {
	b := c.B
	base, reversed := c.Base, shift < 0
	if reversed {
		shift = -shift
		base += shift
	}
	last := base + int64(b.LastOffsetDelta)
	rn := p.runs[shift]
	if rn == nil {
		if len(p.runs) >= maxShifts {
			p.dropRuns++
			return
		}
		rn = &run{shift: shift, producerSrc: -1, seenSrc: -1, conns: tally.IDs{}, md5: md5.New(), ordered: true,
			origFirst: base - shift, origLast: last - shift, repFirst: base, repLast: last,
			producerID: b.ProducerID, lastRep: base - 1}
		p.runs[shift] = rn
	}
	rn.batches++
	rn.records += int64(b.Records)
	rn.span += int64(b.LastOffsetDelta) + 1
	if byRecords {
		rn.byRecords++
	}
	rn.origFirst, rn.origLast = min(rn.origFirst, base-shift), max(rn.origLast, last-shift)
	rn.repFirst, rn.repLast = min(rn.repFirst, base), max(rn.repLast, last)
	if b.ProducerID >= 0 {
		rn.idempotent++
	}
	if !c.Path.Stored() && rn.producerSrc < 0 {
		rn.producerSrc = int64(c.Src)
	}
	if rn.seenSrc < 0 {
		rn.seenSrc = int64(c.Src)
	}
	if base <= rn.lastRep || reversed {
		rn.ordered = false
	}
	rn.lastRep = base
	r.crcLine = append(strconv.AppendUint(r.crcLine[:0], uint64(b.CRC), 10), '\n')
	rn.md5.Write(r.crcLine)
	rn.when.Seen(c.Msg.Time)
	rn.conns.Add(int32(c.Msg.Conn.ID))
	if o != nil {
		rn.conns.Add(o.conn)
		if !rn.hasOrig {
			rn.orig, rn.hasOrig = *o, true
		}
	}
	rn.ev.Add(repeatEv{file: c.Msg.File, packet: c.Msg.Packet, conn: c.Msg.Conn.ID, key: c.Msg.Key, at: c.Base, base: base, shift: shift,
		last: last, crc: b.CRC, records: b.Records, byRecords: byRecords, reversed: reversed})
}

// repeatEv is what the evidence of a repeat is made of, written only for
// the few a finding lists.
type repeatEv struct {
	file                  int
	packet                uint64
	conn                  int
	key                   int16
	at, base, shift, last int64 // the copy's offset; the repeat's first and last offsets and its shift
	crc                   uint32
	records               int32
	byRecords, reversed   bool
}

func (e repeatEv) Evidence() detectors.Evidence {
	name := decode.Name(e.key)
	var what string
	switch {
	case e.reversed:
		what = fmt.Sprintf("%s: batch at %d (crc %d, %d records), seen after its copy at %d", name, e.at, e.crc, e.records, e.base)
	case e.byRecords:
		what = fmt.Sprintf("%s: batch at %d (crc %d, %d records) holds the records of offsets %d-%d", name, e.base, e.crc, e.records, e.base-e.shift, e.last-e.shift)
	default:
		what = fmt.Sprintf("%s: batch at %d (crc %d, %d records) repeats offset %d", name, e.base, e.crc, e.records, e.base-e.shift)
	}
	return detectors.Evidence{File: e.file, Packet: e.packet, Conn: e.conn, What: what}
}

// shipped gives the fingerprints an agent shipped for a batch, sealed
// by the rule's hasher (fixed ones compare only with each other: a
// correlator's batches all carry them), or why there are none: a batch
// shipped without them is compared by CRC only, and counted.
func (r *rule) shipped(s *flows.Shipped) ([]decode.RecordHash, error) {
	switch {
	case errors.Is(s.Err, flows.ErrNotShipped):
		r.unshipped++
		return nil, decode.ErrNotHashable
	case errors.Is(s.Err, flows.ErrNotKept):
		return nil, decode.ErrNotHashable
	case s.Err != nil:
		return nil, s.Err
	}
	r.scratch = r.hasher.Seal(s.Prints, r.scratch[:0])
	return r.scratch, nil
}

// recordsComparable reports a batch whose records may be compared with
// others': not a control batch, not transactional (a transaction aborted
// and sent again repeats its records legitimately; read_committed
// consumers never see the aborted copy), with a valid CRC.
func recordsComparable(b *flows.BatchRef) bool {
	return b.Magic == 2 && !b.Control() && !b.Transactional() && b.CRCOK
}
