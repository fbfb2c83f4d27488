// Package producersequence reports idempotent producers whose batches a broker
// refused as out of sequence (OUT_OF_ORDER_SEQUENCE_NUMBER, and the other
// errors that make a producer give up its sequence numbers:
// UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH), and what the producer did
// next, from the batches' producer id, epoch and base sequence: a new epoch
// or producer id (a local bump or InitProducerId), sequences restarted at 0
// on partitions that had no error, and records sent again under the new
// identity, which the broker cannot recognise as retries: if their first
// copy was written, they are written twice (librdkafka issue 4953,
// KAFKA-12152). A sequence error right after NOT_LEADER_OR_FOLLOWER on the
// partition is the shape of librdkafka issue 3584.
//
// INVALID_PRODUCER_EPOCH answered to a transactional batch after another
// client (client id or host) asked InitProducerId for the batch's
// transactional.id, or sent batches of its producer id at a later epoch
// (a capture that began after the ask), is fencing, transactional-fencing's finding: the
// producer was replaced, it did not lose its sequence, and it is not
// counted here (recorded on Apache Kafka 4.1.1, java-txn-fenced: the
// coordinator fences at the first ask, answered CONCURRENT_TRANSACTIONS,
// and the fenced Produce is answered before the ask that succeeds). A
// replacement with the fenced producer's own client id and host is not
// told from the producer bumping its own epoch, and still counts.
package producersequence

import (
	"maps"
	"net/netip"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "producer-sequence",
	Recorded: []string{"fixtures/pcaps/clients/producer-sequence-kgo.pcap", "fixtures/pcaps/clients/producer-sequence-librdkafka.pcap"},
	Severity: detectors.Error,
	Doc: "Idempotent producers whose Produce the broker refused with OUT_OF_ORDER_SEQUENCE_NUMBER " +
		"(or UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH), per client id and host: the partitions, the " +
		"producer ids and epochs before and after (a bump in the batches or by InitProducerId), sequences " +
		"restarted on other partitions, and records sent again under the new epoch. An error when records " +
		"whose first copy was written were written again (duplicates); a warning when records of unknown " +
		"fate (timed out, never answered) were sent again under the new epoch; otherwise graded by how long " +
		"a partition went without a write from the first error to the next write (info below 3 s, warning " +
		"from 3 s, error from 30 s or when still not written after 10 s at the end). A single error " +
		"recovered at once is info. INVALID_PRODUCER_EPOCH on a transactional batch after another client asked " +
		"InitProducerId for its transactional.id, or produced with its producer id at a later epoch, is fencing " +
		"(transactional-fencing's), not counted.",
}, Params{MinErrors: 1, MaxPartitions: 8192}, New)

// Params are the rule's thresholds and bounds.
type Params struct {
	MinErrors     int `param:"min-errors" doc:"sequence errors of one producer (client id and host) before it is reported"`
	MaxPartitions int `param:"max-partitions" doc:"producer and partition pairs whose last batches are remembered to recognise records sent again; the oldest are forgotten first"`
}

// maxClients bounds the producers with sequence errors followed, and
// maxInits the transactional ids whose last InitProducerId is remembered
// and the transactional producer ids whose latest epoch is.
const (
	maxClients = 1024
	maxInits   = 4096
)

// New makes the rule.
func New(p Params) detectors.Rule {
	p.MinErrors, p.MaxPartitions = max(p.MinErrors, 1), max(p.MaxPartitions, 1)
	return &rule{p: p, hist: histories{max: p.MaxPartitions}, eps: map[cluster.Client]*Episode{}, inits: map[string]cluster.Client{},
		epochs: map[int64]holder{}}
}

type rule struct {
	p       Params
	hist    histories
	eps     map[cluster.Client]*Episode
	dropped int64
	// inits are the client that last asked InitProducerId for each
	// transactional id.
	inits map[string]cluster.Client
	// epochs are the latest epoch of each transactional producer id
	// seen in Produce batches, and the client that sent it.
	epochs map[int64]holder
}

// holder is the client that sent a producer id's latest epoch.
type holder struct {
	epoch  int16
	client cluster.Client
}

// fenced reports whether a transactional batch (of transactional id txn)
// sent by c, answered code, was refused because another client asked
// InitProducerId for its transactional id: fencing, not a lost sequence.
func (r *rule) fenced(c cluster.Client, id identity, txn *string, code int16) bool {
	if code != cluster.InvalidProducerEpoch {
		return false
	}
	if h, ok := r.epochs[id.pid]; ok && h.client != c && h.epoch > id.epoch {
		return true
	}
	if txn == nil {
		return false
	}
	by, ok := r.inits[*txn]
	return ok && by != c
}

// held remembers the latest epoch of a transactional producer id.
func (r *rule) held(c cluster.Client, id identity) {
	h, ok := r.epochs[id.pid]
	if ok && h.epoch >= id.epoch {
		return
	}
	if ok || len(r.epochs) < maxInits {
		r.epochs[id.pid] = holder{id.epoch, c}
	}
}

// asked remembers who last asked InitProducerId for a transactional id.
func (r *rule) asked(m *flows.Message) {
	req, ok := m.Req.(*kmsg.InitProducerIDRequest)
	if !ok || req.TransactionalID == nil {
		return
	}
	if _, ok := r.inits[*req.TransactionalID]; ok || len(r.inits) < maxInits {
		r.inits[*req.TransactionalID] = m.Client
	}
}

// seqError reports whether code makes an idempotent producer give up its
// sequence numbers.
func seqError(code int16) bool {
	switch code {
	case cluster.OutOfOrderSequenceNumber, cluster.InvalidProducerEpoch, cluster.UnknownProducerID:
		return true
	}
	return false
}

// fate is what an answer's error code says of the batch.
func fate(code int16) outcome {
	switch code {
	case cluster.None, cluster.DuplicateSequenceNumber: // written; written before
		return written
	case cluster.RequestTimedOut, cluster.NotEnoughReplicasAfterAppend, cluster.NetworkException:
		return unsure
	}
	return refused
}

func markOf(m *flows.Message) mark {
	return mark{file: m.File, packet: m.Packet, conn: m.Conn.ID, time: m.Time}
}

// Request implements detectors.RequestHook: every idempotent batch is
// remembered, with its records' fingerprint (the bytes are gone by the
// time the answer comes).
func (r *rule) Request(_ *detectors.Pass, m *flows.Message) {
	if m.Key == int16(kmsg.InitProducerID) {
		r.asked(m)
		return
	}
	if m.Key != int16(kmsg.Produce) || len(m.Batches) == 0 {
		return
	}
	for i := range m.Batches {
		b := &m.Batches[i]
		if b.ProducerID < 0 || b.Magic != 2 {
			continue
		}
		c := m.Client
		if b.Transactional() {
			r.held(c, identity{b.ProducerID, b.ProducerEpoch})
		}
		pk := cluster.Partition{Topic: b.Topic, TopicID: b.TopicID, Num: b.Partition}.Key(m.Conn.Nodes())
		h := r.hist.get(histKey{c, pk})
		s := sent{identity: identity{b.ProducerID, b.ProducerEpoch}, seq: b.BaseSequence, count: b.Records,
			sum: b.PayloadSum(), at: markOf(m), prevSeq: -1}
		if prev := h.find(s.identity, s.seq); prev != nil {
			// The same batch again: the broker deduplicates it.
			if prev.state != written {
				prev.state = pending
			}
			continue
		}
		if e := r.eps[c]; e != nil {
			e.sentAfter(h, &s, pk, b.Transactional())
		}
		h.add(s)
	}
}

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.Produce, kmsg.InitProducerID}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(p *detectors.Pass, x *detectors.Exchange) {
	switch x.Key() {
	case int16(kmsg.Produce):
		r.produced(p, x)
	case int16(kmsg.InitProducerID):
		if x.Resp == nil {
			return
		}
		if resp, ok := x.Resp.Resp.(*kmsg.InitProducerIDResponse); ok && resp.ErrorCode == 0 {
			if e := r.eps[x.Req.Client]; e != nil {
				e.initialised(identity{resp.ProducerID, resp.ProducerEpoch}, markOf(x.Resp))
			}
		}
	}
}

func (r *rule) produced(p *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || len(x.Req.Batches) == 0 || x.NoResponse || x.OneSided {
		return
	}
	var resp *kmsg.ProduceResponse
	if x.Resp != nil {
		resp, _ = x.Resp.Resp.(*kmsg.ProduceResponse)
		if resp == nil {
			return
		}
	}
	c := x.Req.Client
	var txn *string
	if req, ok := x.Req.Req.(*kmsg.ProduceRequest); ok {
		txn = req.TransactionID
	}
	cur := answerCursor{}
	for i := range x.Req.Batches {
		b := &x.Req.Batches[i]
		if b.ProducerID < 0 || b.Magic != 2 {
			continue
		}
		pk := x.PartitionKey(cluster.Partition{Topic: b.Topic, TopicID: b.TopicID, Num: b.Partition})
		h := r.hist.m[histKey{c, pk}]
		if h == nil {
			continue
		}
		s := h.find(identity{b.ProducerID, b.ProducerEpoch}, b.BaseSequence)
		if s == nil {
			continue
		}
		if resp == nil {
			s.state = unsure // never answered
			continue
		}
		code, offset, ok := cur.find(resp, pk, x)
		if !ok {
			continue
		}
		at := markOf(x.Resp)
		before := *s
		s.state, s.code, s.offset, s.answeredAt = fate(code), code, offset, at
		e := r.eps[c]
		if b.Transactional() && r.fenced(c, s.identity, txn, code) {
			continue // transactional-fencing's
		}
		if seqError(code) {
			if e == nil {
				if len(r.eps) >= maxClients {
					r.dropped++
					continue
				}
				e = newEpisode(c, &before, h, p.Nodes)
				r.eps[c] = e
			}
			e.failed(pk, s, code, at, x.Conn, b.Transactional())
			continue
		}
		if e != nil {
			e.answered(h, pk, s, at)
		}
	}
}

// answerCursor finds partitions' answers in a Produce response, trying
// the place after the last one found first (answers come in request
// order), so that a big request costs no quadratic search.
type answerCursor struct{ t, p int }

func (c *answerCursor) find(resp *kmsg.ProduceResponse, pk cluster.Partition, x *detectors.Exchange) (code int16, offset int64, ok bool) {
	match := func(t, p int) bool {
		rt, rp := &resp.Topics[t], &resp.Topics[t].Partitions[p]
		return rp.Partition == pk.Num && x.PartitionKey(cluster.Partition{Topic: rt.Topic, TopicID: rt.TopicID, Num: rp.Partition}) == pk
	}
	if c.t < len(resp.Topics) && c.p < len(resp.Topics[c.t].Partitions) && match(c.t, c.p) {
		rp := &resp.Topics[c.t].Partitions[c.p]
		c.p++
		if c.p == len(resp.Topics[c.t].Partitions) {
			c.t, c.p = c.t+1, 0
		}
		return rp.ErrorCode, rp.BaseOffset, true
	}
	for t := range resp.Topics {
		for p := range resp.Topics[t].Partitions {
			if match(t, p) {
				rp := &resp.Topics[t].Partitions[p]
				return rp.ErrorCode, rp.BaseOffset, true
			}
		}
	}
	return 0, 0, false
}

// Findings implements detectors.Rule: one per producer (client id and
// host) with at least MinErrors sequence errors.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	return detectors.FindingsOf(maps.Values(r.eps), func(e *Episode) bool { return e.N >= int64(r.p.MinErrors) },
		func(a, b *Episode) bool { return a.First.Before(b.First) }, func(e *Episode) detectors.Finding { return r.finding(p, e) })
}

func (r *rule) finding(p *detectors.Pass, e *Episode) detectors.Finding {
	held, ongoing := e.held(p.End)
	sev := detectors.Grade(held, ongoing)
	switch {
	case e.Dups > 0:
		sev = detectors.Error
	case e.Maybe > 0:
		sev = max(sev, detectors.Warning)
	}
	f := e.detail(p, held, ongoing)
	f.Forgotten, f.Dropped = r.hist.forgotten, r.dropped
	code, _ := e.codes.Top()
	parts := make([]cluster.Partition, 0, len(e.parts))
	for _, pk := range e.partOrder {
		parts = append(parts, cluster.Partition{Topic: pk.TopicName(p.Nodes), Num: pk.Num})
	}
	f.SequenceErrors = e.N
	f.EpochBumps = int64(len(e.IDs)) + e.MoreIDs
	f.ResentBatches = e.Resent
	f.PossibleDuplicates = e.Maybe
	f.DuplicateBatches = e.Dups
	return detectors.Finding{
		Severity: sev,
		First:    e.First,
		Last:     e.Last,
		Conns:    e.conns.IDs(),
		Nodes:    e.conns.Nodes(p.Nodes),
		Evidence: e.evidence(),
		Subject: detectors.Subject{ClientIDs: []string{e.ID}, Clients: []netip.Addr{e.Host},
			Servers: e.conns.ServerAddrs(), Nodes: e.conns.Nodes(p.Nodes), Partitions: parts, Error: code},
		Detail: f,
	}
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
