// Package replicadivergence finds copies of one batch that differ: the same topic,
// partition and base offset seen with different CRCs on different
// connections (produce, replica fetch, raft fetch, consumer fetch), and
// copies whose CRC does not verify. When the copies agree, it says (info)
// how many batches were verified byte-identical across how many replicas.
//
// Each copy is placed at its offset: a fetched batch at its own, a
// produced one at the offset its Produce response gave
// (flows.ProducedBatches). A bounded table holds, per partition, offset
// and magic, the distinct CRCs the copies carried; a batch's copies are
// compared when the table forgets it and at the end. A copy failing its
// CRC is reported with the checksum of its bytes, which decode computed
// (decode.Batch.ComputedCRC).
package replicadivergence

import (
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/copies"
	"github.com/kfsniff/kfsniff/detectors/internal/table"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "replica-divergence",
	Recorded: []string{"fixtures/pcaps/kafka/kraft-unclean-divergence.pcap.gz"},
	Severity: detectors.Error,
	Doc: "Copies of one batch that differ: the same topic, partition and base offset seen with different " +
		"CRCs on different connections (produce, replica fetch, raft fetch, consumer fetch), and batches " +
		"whose CRC does not verify. When the copies agree, says as info how many batches were verified " +
		"byte-identical across how many replicas. A produced batch the broker rewrote " +
		"(recompression, LogAppendTime: other attributes) is not a divergence, nor are copies naming different topic ids " +
		"(one name on two clusters, a recreated topic). Offsets of produced batches come from the Produce " +
		"responses. Severity: an error however short the capture, since neither heals by itself: replicas " +
		"holding different data at one offset (both CRCs verify) serve consumers different records depending " +
		"on the replica they read, and a copy failing its CRC stops every follower or consumer that fetches " +
		"it (CorruptRecordException) for as long as the broker serves those bytes. A warning when every " +
		"differing copy differs in partitionLeaderEpoch too, the older copy read by no consumer: the log " +
		"truncated after a leader change what was not yet committed (lost if acks=1 producers were told it " +
		"was written); an error again if a consumer had read the replaced copy (committed data replaced: an " +
		"unclean leader election).",
}, Params{MaxBatches: 100000, MaxInfo: 16, InfoMinReplicas: 2, MaxPartitions: 10000}, New)

// Params are the rule's bounds and thresholds.
type Params struct {
	MaxBatches      int `param:"max-batches" doc:"batches (partition and offset) held for comparison; the oldest are compared and forgotten first, so copies further apart in the capture than this many batches are not compared"`
	MaxInfo         int `param:"max-info" doc:"partitions given their own info finding when copies agree; with more, one finding sums them up"`
	InfoMinReplicas int `param:"info-min-replicas" doc:"replicas (distinct nodes holding copies) a partition's agreeing copies must span for the info finding; a producer and a consumer of one broker alone prove little. Differences are reported whatever the number"`
	MaxPartitions   int `param:"max-partitions" doc:"partitions followed; batches of further partitions are not compared"`
}

const (
	maxGroups        = 4    // distinct (crc, valid) per batch
	maxHolders       = 256  // copy sources per partition for the replica count
	maxProblemGroups = 1024 // mismatch and bad-CRC findings
)

// New makes the rule.
func New(p Params) detectors.Rule {
	r := &rule{
		maxInfo: max(p.MaxInfo, 1),
		minRepl: max(p.InfoMinReplicas, 1),
		mism:    make(map[problemKey]*mismatch),
		bad:     make(map[problemKey]*badCopies),
	}
	r.parts = copies.NewParts(p.MaxPartitions, func(k cluster.Partition, idx uint32) *part {
		return &part{key: k, idx: idx, conns: tally.IDs{}, producerID: -1, firstOff: -1, lastOff: -1}
	})
	r.entries = table.NewFifo(p.MaxBatches, r.evict)
	return r
}

// rule holds, per (partition, base offset, magic), the distinct CRCs its
// copies carried, in a table bounded in batches. Entries are compared
// when they are forgotten and at the end.
type rule struct {
	entries  *table.Fifo[key, entry]
	more     [][maxGroups - 1]group // groups past an entry's first
	moreFree []int32
	maxInfo  int
	minRepl  int
	parts    *copies.Parts[part]
	// snapParts, set in a Snapshot's copy, are the partitions it
	// compares (copies of the rule's).
	snapParts []*part
	srcs      copies.Sources

	mism     map[problemKey]*mismatch
	mismList []*mismatch
	bad      map[problemKey]*badCopies
	badList  []*badCopies
	dropped  int64 // problems past maxProblemGroups
	done     bool
}

type key struct {
	base  int64
	part  uint32
	magic int8
}

// Hash keeps a partition's offsets in groups of 8: the table's index
// finds a key from the bits above 33 (table.Fifo.tag), whose lowest three
// are here the offset's, the others the group's hash, so that the batches
// of a partition written one after the other, and their copies fetched
// later, are found in one cache line of the index rather than one each.
func (k key) Hash(seed uint64) uint64 {
	h := table.Mix64(uint64(k.base>>3)^seed, uint64(k.part)<<8|uint64(uint8(k.magic)))
	return h&^(7<<33) | uint64(k.base&7)<<33
}

// entry is one batch's copies, held in the table: the first group inline,
// the others (rare: copies that differ) in rule.more, so that the table
// holds no pointer.
type entry struct {
	copies int32
	extra  int32 // copies with yet another CRC past maxGroups
	more   int32 // index+1 in rule.more, 0 if none
	n      uint8 // groups
	first  group
}

// group is the copies of one batch with one CRC (and CRC validity).
type group struct {
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
	paths   uint8 // bit per copies.Path the copies travelled
}

type part struct {
	key        cluster.Partition
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
	holders      copies.Bitset // copy sources, the first maxHolders
	nholders     int
	srcsSeen     copies.Bitset // copy sources whose connection is in conns
	producerID   int64
	producers    int
	when         copies.Span
	firstOff     int64
	lastOff      int64
	conns        tally.IDs
	ev           detectors.Sampler[copyEv]
}

// Exchange implements detectors.ExchangeHook: each copy is recorded,
// produced batches at the offsets of the response, fetched ones at their
// own.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if !r.done {
		r.srcs.Copies(x, r.copy)
	}
}

// copy records one copy of a batch at its offset; one without (a refused
// or unanswered produce) only if its CRC fails.
func (r *rule) copy(c *copies.Copy) {
	b, base, m := c.B, c.Base, c.Msg
	if !c.Answered && b.CRCOK {
		return // acks=0 or unanswered: no offset, but a bad CRC is still one
	}
	p := r.parts.Of(b)
	if p == nil {
		return
	}
	if !b.CRCOK {
		p.badCRCs++
		r.badCopy(p, c)
	}
	if base < 0 {
		return
	}
	e, _ := r.entries.Ref(key{part: p.idx, base: base, magic: b.Magic})
	e.copies++
	stored := c.Path.Stored()
	epoch := int32(-1)
	if stored && b.Magic == 2 {
		epoch = b.PartitionLeaderEpoch
	}
	found := false
	for i := range int(e.n) {
		g := r.group(e, i)
		if g.crc == b.CRC && g.valid == b.CRCOK {
			g.copies++
			g.produce = g.produce || !stored
			g.paths |= 1 << c.Path
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
			r.addGroup(e, group{crc: b.CRC, valid: b.CRCOK, attrs: b.Attributes, epoch: epoch,
				copies: 1, produce: !stored, stored: stored, paths: 1 << c.Path, src: c.Src, file: int32(m.File), packet: m.Packet,
				at: m.Time.UnixNano(), topicID: b.TopicID})
		} else {
			e.extra++
		}
	}

	if p.nholders < maxHolders && p.holders.Add(c.Src) {
		p.nholders++
	}
	// A source is one connection: its id is in conns once the source
	// has been seen (index 0 stands for the sources past MaxSources).
	if c.Src == 0 || p.srcsSeen.Add(c.Src) {
		p.conns.Add(int32(m.Conn.ID))
	}
	p.when.Seen(m.Time)
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
	p.ev.Add(copyEv{file: int32(m.File), packet: m.Packet, conn: int32(m.Conn.ID), path: c.Path, base: base, crc: b.CRC})
}

// group returns the i-th group of e.
func (r *rule) group(e *entry, i int) *group {
	if i == 0 {
		return &e.first
	}
	return &r.more[e.more-1][i-1]
}

// addGroup appends a group to e, which has fewer than maxGroups.
func (r *rule) addGroup(e *entry, g group) {
	if e.n > 0 && e.more == 0 {
		if n := len(r.moreFree); n > 0 {
			e.more = r.moreFree[n-1]
			r.moreFree = r.moreFree[:n-1]
		} else {
			r.more = append(r.more, [maxGroups - 1]group{})
			e.more = int32(len(r.more))
		}
	}
	*r.group(e, int(e.n)) = g
	e.n++
}

// problemKey groups the problems of one partition on one connection.
type problemKey struct {
	part uint32
	conn int
}

// badCopies is the copies on one connection whose CRC does not verify.
type badCopies struct {
	part     *part
	src      uint32
	path     copies.Path
	base     int64
	crc      uint32
	computed uint32
	code     int16
	copies   int64
	when     copies.Span
	ev       detectors.Sampler[badEv]
}

func (r *rule) badCopy(p *part, c *copies.Copy) {
	b, m := c.B, c.Msg
	k := problemKey{part: p.idx, conn: m.Conn.ID}
	g := r.bad[k]
	if g == nil {
		if len(r.bad)+len(r.mism) >= maxProblemGroups {
			r.dropped++
			return
		}
		g = &badCopies{part: p, src: c.Src, path: c.Path, base: c.Base, crc: b.CRC, computed: b.ComputedCRC, code: c.Code}
		r.bad[k] = g
		r.badList = append(r.badList, g)
	}
	g.copies++
	g.when.Seen(m.Time)
	g.ev.Add(badEv{file: int32(m.File), packet: m.Packet, conn: int32(m.Conn.ID), key: m.Key, base: c.Base, crc: b.CRC, computed: b.ComputedCRC})
}

// at is a time kept in unix nanoseconds, as groups keep it.
func at(ns int64) time.Time { return time.Unix(0, ns).UTC() }
