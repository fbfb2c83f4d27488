// Package recordsskipped reports records a consumer will never read: its
// position (the group's committed offset, or a fetch offset) fell below
// the partition's log start, because retention or DeleteRecords removed
// the records first, and the client reset to another offset and went on
// from there. The wire shows it two ways, and both are here:
//
//   - a Fetch at offset X answered OFFSET_OUT_OF_RANGE, then (after a
//     ListOffsets for the earliest or latest offset, the client's
//     auto.offset.reset) a Fetch of the same partition at F > X;
//   - no error at all: OffsetFetch answers a committed offset C, the
//     client's ListOffsets answers show the log starting above C (or the
//     latest offset), and its first Fetch of the partition asks for F > C
//     (sarama checks the committed offset against the log itself and
//     resets without fetching it).
//
// The offsets from X (or C) to F are skipped: about that many records
// (compaction or transaction markers make some offsets hold none), lost
// to the consumer. A skip is counted only when the capture explains it: an
// OFFSET_OUT_OF_RANGE answer, a log start above the position (ListOffsets
// earliest, a Fetch answer's log start offset, DeleteRecords' low
// watermark), or a ListOffsets answer of exactly F; a consumer that simply
// fetches past an old commit (its own position, an application's seek)
// is not one.
package recordsskipped

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "records-skipped",
	Severity: detectors.Warning,
	Recorded: []string{"fixtures/pcaps/clients/offset-reset-kgo.pcap", "fixtures/pcaps/clients/offset-reset-sarama.pcap", "fixtures/pcaps/kafka/java-records-skipped.pcap.gz"},
	Doc: "Records a consumer will never read: its committed or fetch offset fell below the log start (retention or " +
		"DeleteRecords removed the records) and it reset past them. Seen as a Fetch answered OFFSET_OUT_OF_RANGE " +
		"followed by a Fetch of the partition at a higher offset, or with no error at all as OffsetFetch's " +
		"committed offset below the log start ListOffsets answers and a first Fetch above it. Counted only when " +
		"the capture explains the jump (out of range, a log start above the position, or a ListOffsets answer of " +
		"the new offset). Per client id and host: the partitions, the offsets skipped (about as many records), " +
		"how many of them the log no longer held, the group. A loss: always a warning.",
}, Params{MinSkipped: 1}, New)

// Params are the rule's thresholds.
type Params struct {
	MinSkipped int `param:"min-skipped" doc:"offsets skipped by one client before it is reported"`
}

// The bounds.
const (
	maxPositions = 16384 // client and partition pairs followed
	maxStarts    = 16384 // partitions whose log start is kept
	maxClients   = 1024
	maxParts     = 64 // partitions named per client
)

// New makes the rule.
func New(p Params) detectors.Rule {
	return &rule{p: Params{MinSkipped: max(p.MinSkipped, 1)}, pos: map[posKey]*position{}, starts: map[cluster.Partition]int64{},
		clients: map[cluster.Client]*consumer{}}
}

type posKey struct {
	cluster.Client
	cluster.Partition
}

// position is what a client is expected to fetch a partition from next.
type position struct {
	offset int64
	// outOfRange: offset was answered OFFSET_OUT_OF_RANGE; otherwise it
	// is a committed offset OffsetFetch answered.
	outOfRange bool
	group      string
	at         detectors.Evidence
	when       time.Time
	// listed are the offsets the client's ListOffsets answers gave for
	// the partition since (earliest, latest, by time), at most four.
	listed [4]int64
	nl     int
}

type rule struct {
	p         Params
	pos       map[posKey]*position
	starts    map[cluster.Partition]int64
	clients   map[cluster.Client]*consumer
	dropped   int64
	moreStart int64
}

type consumer struct {
	cluster.Client
	skips       []skip
	moreParts   int64
	skipped     int64
	deleted     int64
	groups      []string
	outOfRange  int64
	first, last time.Time
	conns       tally.Conns
	ev          []detectors.Evidence
}

// skip is one jump of a partition's position.
type skip struct {
	cluster.Partition
	from, to   int64
	logStart   int64 // -1 if not seen
	outOfRange bool
	group      string
}

func (r *rule) name(n *cluster.Nodes, topic string, id [16]byte) string {
	return cluster.Partition{Topic: topic, TopicID: id}.TopicName(n)
}

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.Fetch, kmsg.OffsetFetch, kmsg.ListOffsets, kmsg.DeleteRecords}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(p *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.Resp == nil || x.Resp.Resp == nil {
		return
	}
	switch resp := x.Resp.Resp.(type) {
	case *kmsg.FetchResponse:
		if req, ok := x.Req.Req.(*kmsg.FetchRequest); ok {
			if id, _ := cluster.FetchReplica(req); id >= 0 {
				return // a follower
			}
			r.fetched(p, x, req, resp)
		}
	case *kmsg.OffsetFetchResponse:
		r.committed(p, x, resp)
	case *kmsg.ListOffsetsResponse:
		if req, ok := x.Req.Req.(*kmsg.ListOffsetsRequest); ok {
			r.listed(x, req, resp)
		}
	case *kmsg.DeleteRecordsResponse:
		for i := range resp.Topics {
			for _, pp := range resp.Topics[i].Partitions {
				if pp.ErrorCode == 0 {
					r.logStart(cluster.Partition{Topic: resp.Topics[i].Topic, Num: pp.Partition}, pp.LowWatermark)
				}
			}
		}
	}
}

// logStart notes a partition's log start.
func (r *rule) logStart(pt cluster.Partition, off int64) {
	if off < 0 {
		return
	}
	if cur, ok := r.starts[pt]; ok || len(r.starts) < maxStarts {
		if off > cur || !ok {
			r.starts[pt] = off
		}
	} else {
		r.moreStart++
	}
}

func (r *rule) committed(ps *detectors.Pass, x *detectors.Exchange, resp *kmsg.OffsetFetchResponse) {
	req, _ := x.Req.Req.(*kmsg.OffsetFetchRequest)
	c := x.Req.Client
	note := func(group, topic string, pp *kmsg.OffsetFetchResponseTopicPartition) {
		if pp.ErrorCode != 0 || pp.Offset < 0 {
			return
		}
		r.expect(posKey{c, cluster.Partition{Topic: topic, Num: pp.Partition}}, pp.Offset, false, group, x.Resp.Time,
			detectors.EvidenceAt(x.Resp, "OffsetFetch answer: "+topic+"-"+strconv.Itoa(int(pp.Partition))+" committed "+strconv.FormatInt(pp.Offset, 10)))
	}
	group := ""
	if req != nil {
		group = req.Group
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			note(group, resp.Topics[i].Topic, &resp.Topics[i].Partitions[j])
		}
	}
	for gi := range resp.Groups {
		g := &resp.Groups[gi]
		for i := range g.Topics {
			for j := range g.Topics[i].Partitions {
				pp := &g.Topics[i].Partitions[j]
				note(g.Group, r.name(ps.Nodes, g.Topics[i].Topic, g.Topics[i].TopicID), &kmsg.OffsetFetchResponseTopicPartition{Partition: pp.Partition, Offset: pp.Offset, ErrorCode: pp.ErrorCode})
			}
		}
	}
}

// expect sets where the client should fetch the partition from next.
func (r *rule) expect(k posKey, off int64, oor bool, group string, when time.Time, at detectors.Evidence) {
	ps := r.pos[k]
	if ps == nil {
		if len(r.pos) >= maxPositions {
			r.dropped++
			return
		}
		ps = &position{}
		r.pos[k] = ps
	}
	if !oor && ps.outOfRange && ps.offset == off {
		return // the same position again
	}
	*ps = position{offset: off, outOfRange: oor, group: group, at: at, when: when}
}

func (r *rule) listed(x *detectors.Exchange, req *kmsg.ListOffsetsRequest, resp *kmsg.ListOffsetsResponse) {
	c := x.Req.Client
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for _, pp := range t.Partitions {
			if pp.ErrorCode != 0 {
				continue
			}
			pt := cluster.Partition{Topic: t.Topic, Num: pp.Partition}
			if ts, ok := asked(req, t.Topic, pp.Partition); ok && ts == -2 {
				r.logStart(pt, pp.Offset)
			}
			if ps := r.pos[posKey{c, pt}]; ps != nil && ps.nl < len(ps.listed) {
				ps.listed[ps.nl] = pp.Offset
				ps.nl++
			}
		}
	}
}

// asked is the timestamp the request asked for the partition.
func asked(req *kmsg.ListOffsetsRequest, topic string, partition int32) (int64, bool) {
	for i := range req.Topics {
		if req.Topics[i].Topic != topic {
			continue
		}
		for _, p := range req.Topics[i].Partitions {
			if p.Partition == partition {
				return p.Timestamp, true
			}
		}
	}
	return 0, false
}

func (r *rule) fetched(p *detectors.Pass, x *detectors.Exchange, req *kmsg.FetchRequest, resp *kmsg.FetchResponse) {
	// The log starts the answer names, and its out-of-range answers.
	var oor []cluster.Partition
	for i := range resp.Topics {
		t := &resp.Topics[i]
		name := ""
		for j := range t.Partitions {
			pp := &t.Partitions[j]
			if pp.LogStartOffset <= 0 && pp.ErrorCode != cluster.OffsetOutOfRange {
				continue
			}
			if name == "" {
				name = r.name(p.Nodes, t.Topic, t.TopicID)
			}
			pt := cluster.Partition{Topic: name, Num: pp.Partition}
			if pp.LogStartOffset > 0 {
				r.logStart(pt, pp.LogStartOffset)
			}
			if pp.ErrorCode == cluster.OffsetOutOfRange {
				oor = append(oor, pt)
			}
		}
	}
	if len(r.pos) == 0 && len(oor) == 0 {
		return
	}
	c := x.Req.Client
	decode.FetchOffsets(req, func(ref cluster.Partition, off int64) {
		pt := cluster.Partition{Topic: r.name(p.Nodes, ref.Topic, ref.TopicID), Num: ref.Num}
		k := posKey{c, pt}
		group := r.groupOf(k)
		if ps := r.pos[k]; ps != nil {
			r.moved(x, k, ps, off)
		}
		for _, o := range oor {
			if o == pt {
				r.expect(k, off, true, group, x.Resp.Time, detectors.EvidenceAt(x.Resp, "Fetch answer: "+pt.Topic+"-"+
					strconv.Itoa(int(pt.Num))+" OFFSET_OUT_OF_RANGE at offset "+strconv.FormatInt(off, 10)))
			}
		}
	})
}

func (r *rule) groupOf(k posKey) string {
	if ps := r.pos[k]; ps != nil {
		return ps.group
	}
	return ""
}

// moved settles a position at the client's fetch from off.
func (r *rule) moved(x *detectors.Exchange, k posKey, ps *position, off int64) {
	if off == ps.offset {
		if !ps.outOfRange {
			delete(r.pos, k) // fetched from where it was: nothing skipped
		}
		return
	}
	defer delete(r.pos, k)
	if off < ps.offset {
		return // back, not past: read twice, not lost
	}
	start, ok := r.starts[k.Partition]
	if !ok {
		start = -1
	}
	explained := ps.outOfRange || start > ps.offset
	for _, l := range ps.listed[:ps.nl] {
		explained = explained || l == off
	}
	if !explained {
		return
	}
	c := tally.Entry(r.clients, k.Client, maxClients, &r.dropped, func() *consumer { return &consumer{Client: k.Client} })
	if c == nil {
		return
	}
	s := skip{Partition: k.Partition, from: ps.offset, to: off, logStart: start, outOfRange: ps.outOfRange, group: ps.group}
	if len(c.skips) < maxParts {
		c.skips = append(c.skips, s)
	} else {
		c.moreParts++
	}
	t := x.Req.Time
	if c.skipped == 0 {
		c.first = ps.when
	}
	c.last = t
	c.skipped += off - ps.offset
	if start > ps.offset {
		c.deleted += min(start, off) - ps.offset
	}
	if ps.outOfRange {
		c.outOfRange++
	}
	if ps.group != "" && !slices.Contains(c.groups, ps.group) && len(c.groups) < 8 {
		c.groups = append(c.groups, ps.group)
	}
	c.conns.Add(x.Conn)
	if len(c.ev) < 32 {
		c.ev = append(c.ev, ps.at, detectors.EvidenceAt(x.Req, "Fetch request: "+k.Topic+"-"+strconv.Itoa(int(k.Num))+
			" from offset "+strconv.FormatInt(off, 10)))
	}
}

// Findings implements detectors.Rule: one per client id and host.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	return detectors.FindingsOf(maps.Values(r.clients), func(c *consumer) bool { return c.skipped >= int64(r.p.MinSkipped) },
		func(a, b *consumer) bool { return cluster.SeenLess(a.Client, a.first, b.Client, b.first) },
		func(c *consumer) detectors.Finding { return r.finding(p, c) })
}

func (r *rule) finding(p *detectors.Pass, c *consumer) detectors.Finding {
	f := &Finding{ClientID: c.ID, Host: c.Host.String(), Groups: c.groups, Skipped: c.skipped, Deleted: c.deleted,
		OutOfRange: c.outOfRange, serverLabels: c.conns.ServerLabels(p.Nodes), first: c.first, last: c.last,
		MoreParts: c.moreParts, Dropped: r.dropped}
	var parts []cluster.Partition
	for _, s := range c.skips {
		ps := Skip{Partition: s.Topic + "-" + strconv.Itoa(int(s.Num)), From: s.from, To: s.to, OutOfRange: s.outOfRange,
			LogStart: s.logStart}
		f.Partitions = append(f.Partitions, ps)
		parts = append(parts, s.Partition)
	}
	ev := append([]detectors.Evidence(nil), c.ev...)
	detectors.SortEvidence(ev)
	var code int16
	if c.outOfRange > 0 {
		code = 1
	}
	f.OffsetsSkipped, f.OffsetsDeleted, f.PartitionCount = c.skipped, c.deleted, int64(len(c.skips))+c.moreParts
	return detectors.Finding{
		Severity: detectors.Warning,
		First:    c.first,
		Last:     c.last,
		Conns:    c.conns.IDs(),
		Nodes:    c.conns.Nodes(p.Nodes),
		Evidence: ev,
		Subject: detectors.Subject{ClientIDs: []string{c.ID}, Clients: c.conns.ClientAddrs(), Servers: c.conns.ServerAddrs(),
			Partitions: parts, Error: code},
		Detail: f,
	}
}
