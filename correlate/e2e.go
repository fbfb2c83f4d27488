package correlate

import (
	"hash/maphash"
	"slices"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/hist"
)

// E2E measures the producer-to-consumer latency of batches: a batch of a
// Produce request, on any agent, found again in a Fetch response to a
// consumer (replica -1), on any agent. The latency is the fetch
// response's capture time minus the produce request's, the two put on the
// reference agent's clock by Skew's offsets.
//
// A fetched batch is the produced one when the partition (topic and
// partition; the cluster too when both records name it) and the CRC are
// the same and, when the produce response gave the batch its offset, the
// offset too: the same CRC produced twice at two offsets (a replay) is
// told apart by the offset. A batch produced without a known offset (the
// response not captured, acks=0) is found by its CRC alone; when two such
// batches share the CRC the fetch is counted ambiguous, not measured. The
// same batch shipped by two agents (the producer's host and the broker's)
// is remembered once, as the first shipped it; a consumer fetching a
// batch again is measured once (by client endpoint and client id), each
// consumer once. A fetched batch whose produce was not read yet (records
// of several agents do not arrive in the order things happened) waits for
// it, up to 65536 of them; those still waiting at the end, or pushed out,
// count as unmatched.
//
// Memory is bounded: the most recent Window produced batches, across
// partitions, are remembered; older ones are evicted and counted. Latencies
// between two agents wait for their clock offset (up to 65536 of them);
// past that those whose offset is still unknown are counted, not measured.
// Not safe for concurrent use.
type E2E struct {
	skew   *Skew
	window int
	ring   []produced
	next   int
	parts  map[partKey]*partIndex
	topics map[topicKey]*topicStats
	order  []*topicStats
	seed   maphash.Seed

	pending []pendingLatency
	// waits are consumers' fetched batches whose produce was not read
	// yet, a ring indexed by waiting.
	waits   []waiting
	wnext   int
	waiting map[waitKey][]int32

	produced, evicted, fetched, topicsOver int64
}

// DefaultBatches is how many produced batches E2E remembers by default.
const DefaultBatches = 262144

// maxTopics bounds the topics E2E reports.
const maxTopics = 4096

// maxPending bounds the latencies waiting for a clock offset.
const maxPending = 65536

// maxConsumers is how many consumers of one batch are told apart.
const maxConsumers = 4

type partKey struct {
	topic     string
	partition int32
}

type topicKey struct{ cluster, topic string }

// partIndex finds a partition's remembered batches: by offset, and by CRC
// those produced without a known offset (ring indexes).
type partIndex struct {
	byOffset map[int64][]int32
	byCRC    map[uint32][]int32
	n        int
}

// produced is one remembered batch of a Produce request.
type produced struct {
	part          *partIndex
	key           partKey
	cluster       string
	agent         string
	client        string
	offset        int64 // -1: unknown
	crc           uint32
	producerID    int64
	sequence      int32
	ts            int64
	consumers     [maxConsumers]uint64
	nconsumers    uint8
	fetched, live bool
}

type topicStats struct {
	key                                         topicKey
	h                                           hist.Histogram
	batches, negative                           int64
	skewUnknown, ambiguous, mismatch, unmatched int64
	// waiting counts its fetched batches waiting for their produce.
	waiting int64
}

// pendingLatency is a latency between two agents waiting for their
// clocks' offset.
type pendingLatency struct {
	t                  *topicStats
	producer, consumer string
	raw                int64
}

// NewE2E makes a latency meter remembering batches produced batches
// (DefaultBatches when 0 or less), its clock offsets from skew (which the
// caller feeds the same records).
func NewE2E(batches int, skew *Skew) *E2E {
	if batches <= 0 {
		batches = DefaultBatches
	}
	return &E2E{skew: skew, window: batches, parts: map[partKey]*partIndex{}, topics: map[topicKey]*topicStats{}, waiting: map[waitKey][]int32{}, seed: maphash.MakeSeed()}
}

// Add takes one record: the batches of a Produce request are remembered,
// those of a consumer's Fetch response looked up and measured; other
// records are ignored.
func (e *E2E) Add(r *Record) {
	if r.Type != TypeExchange || r.Parts == 0 || len(r.Batches) == 0 {
		return
	}
	switch r.API {
	case 0: // Produce
		if r.Error.Set && r.Error.V != 0 {
			return // refused: not in the log
		}
		for i := range r.Batches {
			e.remember(r, &r.Batches[i])
		}
	case 1: // Fetch
		if !r.Replica.Set || r.Replica.V >= 0 || !r.Latency.Set {
			return
		}
		resp := r.TS + r.Latency.V
		for i := range r.Batches {
			e.lookup(r, &r.Batches[i], resp)
		}
	}
}

func compatible(a, b string) bool { return a == "" || b == "" || a == b }

// remember keeps a produced batch, unless it is one already remembered
// (the same batch shipped by another agent, or sent again).
func (e *E2E) remember(r *Record, b *Batch) {
	k := partKey{r.Topic, r.Partition}
	p := e.parts[k]
	offset := int64(-1)
	if b.Offset.Set && b.Offset.V >= 0 {
		offset = b.Offset.V
	}
	if p != nil {
		if offset >= 0 {
			for _, i := range p.byOffset[offset] {
				if x := &e.ring[i]; x.crc == b.CRC && compatible(x.cluster, r.Cluster) {
					return
				}
			}
		} else {
			for _, i := range p.byCRC[b.CRC] {
				x := &e.ring[i]
				if x.producerID == b.ProducerID && x.sequence == b.BaseSequence && compatible(x.cluster, r.Cluster) &&
					(b.ProducerID >= 0 || x.client == r.Client) {
					return
				}
			}
		}
	} else {
		p = &partIndex{byOffset: map[int64][]int32{}, byCRC: map[uint32][]int32{}}
		e.parts[k] = p
	}
	e.produced++
	var slot int
	if len(e.ring) < e.window {
		e.ring = append(e.ring, produced{})
		slot = len(e.ring) - 1
	} else {
		slot = e.next
		e.next = (e.next + 1) % e.window
		e.forget(slot)
	}
	e.ring[slot] = produced{part: p, key: k, cluster: r.Cluster, agent: r.Agent, client: r.Client, offset: offset, crc: b.CRC,
		producerID: b.ProducerID, sequence: b.BaseSequence, ts: r.TS, live: true}
	if offset >= 0 {
		p.byOffset[offset] = append(p.byOffset[offset], int32(slot))
	} else {
		p.byCRC[b.CRC] = append(p.byCRC[b.CRC], int32(slot))
	}
	p.n++
	if len(e.waiting) > 0 {
		e.arrived(slot)
	}
}

// forget drops the batch in a ring slot from its partition's index.
func (e *E2E) forget(slot int) {
	x := &e.ring[slot]
	if !x.live {
		return
	}
	if !x.fetched {
		e.evicted++
	}
	p := x.part
	del := func(m map[int64][]int32, k int64) {
		m[k] = slices.DeleteFunc(m[k], func(i int32) bool { return int(i) == slot })
		if len(m[k]) == 0 {
			delete(m, k)
		}
	}
	if x.offset >= 0 {
		del(p.byOffset, x.offset)
	} else {
		p.byCRC[x.crc] = slices.DeleteFunc(p.byCRC[x.crc], func(i int32) bool { return int(i) == slot })
		if len(p.byCRC[x.crc]) == 0 {
			delete(p.byCRC, x.crc)
		}
	}
	if p.n--; p.n == 0 {
		delete(e.parts, x.key)
	}
	*x = produced{}
}

// lookup finds a consumer's fetched batch among the produced ones and
// measures it.
func (e *E2E) lookup(r *Record, b *Batch, resp int64) {
	e.fetched++
	p := e.parts[partKey{r.Topic, r.Partition}]
	var found *produced
	ambiguous, mismatch := false, false
	if p != nil {
		if b.BaseOffset.Set {
			for _, i := range p.byOffset[b.BaseOffset.V] {
				x := &e.ring[i]
				if !compatible(x.cluster, r.Cluster) {
					continue
				}
				if x.crc == b.CRC {
					found = x
					break
				}
				mismatch = true
			}
		}
		if found == nil {
			for _, i := range p.byCRC[b.CRC] {
				x := &e.ring[i]
				if !compatible(x.cluster, r.Cluster) {
					continue
				}
				if found != nil {
					ambiguous = true
					break
				}
				found = x
			}
		}
	}
	cluster := r.Cluster
	if found != nil && found.cluster != "" {
		cluster = found.cluster
	}
	t := e.topic(topicKey{cluster, r.Topic})
	switch {
	case ambiguous:
		if t != nil {
			t.ambiguous++
		}
		return
	case found == nil && mismatch:
		if t != nil {
			t.mismatch++
		}
		return
	case found == nil:
		// The produce may come later: records of several agents do
		// not arrive in the order things happened.
		e.wait(r, b, resp, t)
		return
	}
	e.measure(found, maphash.String(e.seed, r.Client+"\x00"+r.ClientID.V), r.Agent, resp, t)
}

// measure is the latency of a produced batch fetched by a consumer (its
// hash) on agent at resp, once per consumer.
func (e *E2E) measure(x *produced, consumer uint64, agent string, resp int64, t *topicStats) {
	x.fetched = true
	for _, have := range x.consumers[:x.nconsumers] {
		if have == consumer {
			return // fetched again by the same consumer
		}
	}
	if x.nconsumers < maxConsumers {
		x.consumers[x.nconsumers] = consumer
		x.nconsumers++
	}
	if t == nil {
		e.topicsOver++
		return
	}
	raw := resp - x.ts
	if x.agent == agent {
		t.add(raw)
		return
	}
	if len(e.pending) >= maxPending {
		e.fold()
	}
	e.pending = append(e.pending, pendingLatency{t: t, producer: x.agent, consumer: agent, raw: raw})
}

// maxWaitingFetches bounds the fetched batches waiting for their produce.
const maxWaitingFetches = 65536

// waitKey finds the fetched batches waiting for a produce.
type waitKey struct {
	part partKey
	crc  uint32
}

// waiting is a consumer's fetched batch no produce was known for yet.
type waiting struct {
	key      waitKey
	cluster  string
	agent    string
	offset   int64 // -1: unknown
	consumer uint64
	resp     int64
	t        *topicStats
	live     bool
}

// wait keeps a fetched batch for a produce read later, evicting the
// oldest waiting (counted unmatched) when full.
func (e *E2E) wait(r *Record, b *Batch, resp int64, t *topicStats) {
	if t == nil {
		return
	}
	w := waiting{key: waitKey{partKey{r.Topic, r.Partition}, b.CRC}, cluster: r.Cluster, agent: r.Agent, offset: -1,
		consumer: maphash.String(e.seed, r.Client+"\x00"+r.ClientID.V), resp: resp, t: t, live: true}
	if b.BaseOffset.Set {
		w.offset = b.BaseOffset.V
	}
	var slot int
	if len(e.waits) < maxWaitingFetches {
		e.waits = append(e.waits, waiting{})
		slot = len(e.waits) - 1
	} else {
		slot = e.wnext
		e.wnext = (e.wnext + 1) % maxWaitingFetches
		if old := &e.waits[slot]; old.live {
			old.t.waiting--
			old.t.unmatched++
			e.unwait(slot)
		}
	}
	e.waits[slot] = w
	e.waiting[w.key] = append(e.waiting[w.key], int32(slot))
	t.waiting++
}

// unwait drops a waiting fetch from the index.
func (e *E2E) unwait(slot int) {
	w := &e.waits[slot]
	l := slices.DeleteFunc(e.waiting[w.key], func(i int32) bool { return int(i) == slot })
	if len(l) == 0 {
		delete(e.waiting, w.key)
	} else {
		e.waiting[w.key] = l
	}
	w.live = false
}

// arrived measures the fetches that waited for a batch just produced.
func (e *E2E) arrived(slot int) {
	x := &e.ring[slot]
	for _, i := range slices.Clone(e.waiting[waitKey{x.key, x.crc}]) {
		w := &e.waits[i]
		if !compatible(w.cluster, x.cluster) || x.offset >= 0 && w.offset >= 0 && x.offset != w.offset {
			continue
		}
		w.t.waiting--
		t := w.t
		if x.cluster != "" && w.cluster == "" {
			t = e.topic(topicKey{x.cluster, x.key.topic})
		}
		e.measure(x, w.consumer, w.agent, w.resp, t)
		e.unwait(int(i))
	}
}

// topic is a topic's stats, nil past maxTopics.
func (e *E2E) topic(k topicKey) *topicStats {
	t := e.topics[k]
	if t == nil && len(e.topics) < maxTopics {
		t = &topicStats{key: k}
		e.topics[k] = t
		e.order = append(e.order, t)
	}
	return t
}

func (t *topicStats) add(lat int64) {
	if lat < 0 {
		t.negative++
		lat = 0
	}
	t.batches++
	t.h.Add(time.Duration(lat))
}

// corrected is a latency between two agents on the reference's clock.
func corrected(p *pendingLatency, est map[string]Estimate) (int64, bool) {
	ep, ok1 := est[p.producer]
	ec, ok2 := est[p.consumer]
	if !ok1 || !ok2 {
		return 0, false
	}
	return p.raw - int64(ec.Offset) + int64(ep.Offset), true
}

// fold measures the waiting latencies with the offsets known now; those
// still without are counted unknown.
func (e *E2E) fold() {
	est := e.skew.Estimates()
	for i := range e.pending {
		p := &e.pending[i]
		if lat, ok := corrected(p, est); ok {
			p.t.add(lat)
		} else {
			p.t.skewUnknown++
		}
	}
	e.pending = e.pending[:0]
}

// TopicLatency is one topic's producer-to-consumer latencies.
type TopicLatency struct {
	Cluster, Topic string
	// Latency holds the measured latencies (negative ones as zero,
	// counted in Negative); read only, valid until the next Add.
	Latency  *hist.Histogram
	Negative int64
	// Not measured: SkewUnknown (two agents whose offset is unknown),
	// Ambiguous (a CRC produced twice, the offset not telling),
	// Mismatch (the offset produced with another CRC), Unmatched (no
	// produce remembered: evicted, never captured, or not read yet, the
	// fetch waiting for it).
	SkewUnknown, Ambiguous, Mismatch, Unmatched int64
}

// Topics are the latencies per topic (cluster, then topic name), those
// waiting for a clock offset measured with the offsets known now (a
// snapshot: the waiting ones wait on).
func (e *E2E) Topics() []TopicLatency {
	var est map[string]Estimate
	waiting := map[*topicStats]*hist.Histogram{}
	if len(e.pending) > 0 {
		est = e.skew.Estimates()
		for i := range e.pending {
			t := e.pending[i].t
			if waiting[t] == nil {
				h := t.h // a copy, the waiting ones added to it
				waiting[t] = &h
			}
		}
	}
	byTopic := make(map[*topicStats]*TopicLatency, len(waiting))
	out := make([]TopicLatency, 0, len(e.order))
	for _, t := range e.order {
		h := waiting[t]
		if h == nil {
			h = &t.h
		}
		out = append(out, TopicLatency{Cluster: t.key.cluster, Topic: t.key.topic, Latency: h, Negative: t.negative,
			SkewUnknown: t.skewUnknown, Ambiguous: t.ambiguous, Mismatch: t.mismatch, Unmatched: t.unmatched + t.waiting})
	}
	for i, t := range e.order {
		if waiting[t] != nil {
			byTopic[t] = &out[i]
		}
	}
	for i := range e.pending {
		p := &e.pending[i]
		o := byTopic[p.t]
		lat, ok := corrected(p, est)
		switch {
		case !ok:
			o.SkewUnknown++
		case lat < 0:
			o.Negative++
			o.Latency.Add(0)
		default:
			o.Latency.Add(time.Duration(lat))
		}
	}
	slices.SortFunc(out, func(a, b TopicLatency) int {
		if c := strings.Compare(a.Cluster, b.Cluster); c != 0 {
			return c
		}
		return strings.Compare(a.Topic, b.Topic)
	})
	return out
}

// Counts are the batches produced and remembered, evicted unfetched from
// the window, consumers' fetched batches looked up, and measured batches
// of topics past the bound on topics.
func (e *E2E) Counts() (produced, evicted, fetched, topicsOver int64) {
	return e.produced, e.evicted, e.fetched, e.topicsOver
}
