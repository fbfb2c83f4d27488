package correlate

import (
	"cmp"
	"hash/maphash"
	"slices"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/hist"
)

// E2E measures the producer-to-consumer latency of batches: a batch of a
// Produce request, on any agent, found again in a Fetch response to a
// consumer (replica -1), on any agent. The latency is the fetch
// response's capture time minus the produce request's, the two put on the
// reference agent's clock by Skew's offsets.
//
// A fetched batch is the produced one when the partition (topic, by name
// or by topic_id, whichever the records share: an agent that saw no
// Metadata ships an id that another agent's record names; and partition;
// the cluster too when both records name it) and the CRC are the same
// and, when the produce response gave the batch its offset, the offset
// too: the same CRC produced twice at two offsets (a replay) is
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
	parts  map[cluster.Partition]*partIndex
	topics map[topicKey]*topicStats
	// names and ids are the topic ids' names that records carrying both
	// taught, each way.
	names, ids map[string]string
	order      []*topicStats
	seed       maphash.Seed

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
	key           cluster.Partition
	alt           string // the topic's other key (by id beside a name)
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
	orDefault(&batches, DefaultBatches)
	return &E2E{skew: skew, window: batches, parts: map[cluster.Partition]*partIndex{}, topics: map[topicKey]*topicStats{}, waiting: map[waitKey][]int32{},
		names: map[string]string{}, ids: map[string]string{}, seed: maphash.MakeSeed()}
}

// Add takes one record: the batches of a Produce request are remembered,
// those of a consumer's Fetch response looked up and measured; other
// records are ignored.
func (e *E2E) Add(r *Record) {
	if r.Type != TypeExchange || r.Parts == 0 {
		return
	}
	if r.TopicID != "" && r.Topic != r.TopicID && len(e.names) < maxTopicIDs {
		e.names[r.TopicID] = r.Topic
		e.ids[r.Topic] = r.TopicID
	}
	if len(r.Batches) == 0 {
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
			if r.Batches[i].Attributes&0x20 != 0 {
				continue // a control batch: the broker wrote it, no producer
			}
			e.lookup(r, &r.Batches[i], resp)
		}
	}
}

func compatible(a, b string) bool { return a == "" || b == "" || a == b }

// maxTopicIDs bounds the topic ids whose names are remembered.
const maxTopicIDs = 65536

// partKey is the partition of a topic's key (topicKeys): the topic in
// Partition.Topic by its name, or by "#" and its id as records carry it
// (the correlator compares the text agents shipped, and an id's name may
// be learned from another agent's records later).
func partKey(topic string, n int32) cluster.Partition { return cluster.Partition{Topic: topic, Num: n} }

// topicKeys are the keys a record's partition is indexed under: by name
// when its agent or another knew it, else by id ("#" and the id: no
// topic name has a "#"); alt is the id's key beside a known name (the
// same partition as another agent may have indexed it, by id, before the
// name was learned); show is what the report calls the topic.
func (e *E2E) topicKeys(r *Record) (key, alt, show string) {
	name, id := r.Topic, r.TopicID
	if id != "" && name == id {
		name = e.names[id] // "" when no agent named it yet
	}
	if id == "" {
		id = e.ids[name]
	}
	switch {
	case name == "":
		return "#" + id, "", id
	case id != "":
		return name, "#" + id, name
	}
	return name, "", name
}

// remember keeps a produced batch, unless it is one already remembered
// (the same batch shipped by another agent, or sent again).
func (e *E2E) remember(r *Record, b *Batch) {
	key, alt, _ := e.topicKeys(r)
	k := partKey(key, r.Partition)
	offset := int64(-1)
	if b.Offset.Set && b.Offset.V >= 0 {
		offset = b.Offset.V
	}
	for _, kk := range [2]string{key, alt} {
		if kk != "" && e.known(e.parts[partKey(kk, r.Partition)], r, b, offset) {
			return
		}
	}
	e.produced++
	var slot int
	if len(e.ring) < e.window {
		e.ring = append(e.ring, produced{})
		slot = len(e.ring) - 1
	} else {
		slot = e.next
		e.next = (e.next + 1) % e.window
		e.forget(slot) // before looking the partition up: it may go
	}
	p := e.parts[k]
	if p == nil {
		p = &partIndex{byOffset: map[int64][]int32{}, byCRC: map[uint32][]int32{}}
		e.parts[k] = p
	}
	e.ring[slot] = produced{part: p, key: k, alt: alt, cluster: r.Cluster, agent: r.Agent, client: r.Client, offset: offset, crc: b.CRC,
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

// known says whether a partition already holds this produced batch (the
// same batch shipped by another agent, or sent again).
func (e *E2E) known(p *partIndex, r *Record, b *Batch, offset int64) bool {
	if p == nil {
		return false
	}
	if offset >= 0 {
		for _, i := range p.byOffset[offset] {
			if x := &e.ring[i]; x.crc == b.CRC && compatible(x.cluster, r.Cluster) {
				return true
			}
		}
		return false
	}
	for _, i := range p.byCRC[b.CRC] {
		x := &e.ring[i]
		if x.producerID == b.ProducerID && x.sequence == b.BaseSequence && compatible(x.cluster, r.Cluster) &&
			(b.ProducerID >= 0 || x.client == r.Client) {
			return true
		}
	}
	return false
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
	if x.offset >= 0 {
		unindex(p.byOffset, x.offset, slot)
	} else {
		unindex(p.byCRC, x.crc, slot)
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
	key, alt, show := e.topicKeys(r)
	var ps [2]*partIndex
	for n, kk := range [2]string{key, alt} {
		if kk != "" {
			ps[n] = e.parts[partKey(kk, r.Partition)]
		}
	}
	var found *produced
	ambiguous, mismatch := false, false
	if b.BaseOffset.Set {
		for _, p := range ps {
			if p == nil || found != nil {
				continue
			}
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
	}
	if found == nil {
		for _, p := range ps {
			if p == nil {
				continue
			}
			for _, i := range p.byCRC[b.CRC] {
				x := &e.ring[i]
				if !compatible(x.cluster, r.Cluster) || x == found {
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
	if found != nil {
		if found.cluster != "" {
			cluster = found.cluster
		}
		if !strings.HasPrefix(found.key.Topic, "#") {
			show = found.key.Topic
		}
	}
	t := e.topic(topicKey{cluster, show})
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
		e.wait(r, key, b, resp, t)
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
	part cluster.Partition
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
func (e *E2E) wait(r *Record, key string, b *Batch, resp int64, t *topicStats) {
	if t == nil {
		return
	}
	w := waiting{key: waitKey{partKey(key, r.Partition), b.CRC}, cluster: r.Cluster, agent: r.Agent, offset: opt(b.BaseOffset, -1),
		consumer: maphash.String(e.seed, r.Client+"\x00"+r.ClientID.V), resp: resp, t: t, live: true}
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
	unindex(e.waiting, w.key, slot)
	w.live = false
}

// unindex takes a ring slot out of an index's list under k, and k out of
// the index once its list is empty.
func unindex[K comparable](m map[K][]int32, k K, slot int) {
	if l := slices.DeleteFunc(m[k], func(i int32) bool { return int(i) == slot }); len(l) > 0 {
		m[k] = l
	} else {
		delete(m, k)
	}
}

// arrived measures the fetches that waited for a batch just produced
// (under its topic's name or id).
func (e *E2E) arrived(slot int) {
	x := &e.ring[slot]
	for _, kk := range [2]string{x.key.Topic, x.alt} {
		if kk == "" {
			continue
		}
		for _, i := range slices.Clone(e.waiting[waitKey{partKey(kk, x.key.Num), x.crc}]) {
			w := &e.waits[i]
			if !compatible(w.cluster, x.cluster) || x.offset >= 0 && w.offset >= 0 && x.offset != w.offset {
				continue
			}
			w.t.waiting--
			t := w.t
			if named := !strings.HasPrefix(x.key.Topic, "#"); x.cluster != "" && w.cluster == "" || named && t.key.topic != x.key.Topic {
				cluster := w.cluster
				if x.cluster != "" {
					cluster = x.cluster
				}
				show := t.key.topic
				if named {
					show = x.key.Topic
				}
				t = e.topic(topicKey{cluster, show})
			}
			e.measure(x, w.consumer, w.agent, w.resp, t)
			e.unwait(int(i))
		}
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
// snapshot: the waiting ones wait on). A topic first seen by id is
// listed by the name a record taught since, and a topic whose cluster an
// agent did not know with the one cluster others named for it.
func (e *E2E) Topics() []TopicLatency {
	// Where each topic's counts go: its row's key now.
	clusters := map[string][]string{} // topic name -> known clusters
	final := func(t *topicStats) topicKey {
		k := t.key
		if n, ok := e.names[k.topic]; ok {
			k.topic = n
		}
		return k
	}
	for _, t := range e.order {
		if k := final(t); k.cluster != "" && !slices.Contains(clusters[k.topic], k.cluster) {
			clusters[k.topic] = append(clusters[k.topic], k.cluster)
		}
	}
	row := map[topicKey]int{}
	into := make(map[*topicStats]int, len(e.order))
	var members [][]*topicStats
	for _, t := range e.order {
		k := final(t)
		if k.cluster == "" && len(clusters[k.topic]) == 1 {
			k.cluster = clusters[k.topic][0]
		}
		i, ok := row[k]
		if !ok {
			i = len(members)
			row[k] = i
			members = append(members, nil)
		}
		members[i] = append(members[i], t)
		into[t] = i
	}
	var est map[string]Estimate
	pending := make([]bool, len(members))
	if len(e.pending) > 0 {
		est = e.skew.Estimates()
		for i := range e.pending {
			pending[into[e.pending[i].t]] = true
		}
	}
	out := make([]TopicLatency, len(members))
	for k, i := range row {
		o := &out[i]
		o.Cluster, o.Topic = k.cluster, k.topic
		ms := members[i]
		if len(ms) == 1 && !pending[i] {
			o.Latency = &ms[0].h // no copy: read only
		} else {
			o.Latency = new(hist.Histogram)
		}
		for _, t := range ms {
			if o.Latency != &t.h {
				o.Latency.Merge(&t.h)
			}
			o.Negative += t.negative
			o.SkewUnknown += t.skewUnknown
			o.Ambiguous += t.ambiguous
			o.Mismatch += t.mismatch
			o.Unmatched += t.unmatched + t.waiting
		}
	}
	for i := range e.pending {
		p := &e.pending[i]
		o := &out[into[p.t]]
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
		return cmp.Or(strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.Topic, b.Topic))
	})
	return out
}

// Counts are the batches produced and remembered, evicted unfetched from
// the window, consumers' fetched batches looked up, and measured batches
// of topics past the bound on topics.
func (e *E2E) Counts() (produced, evicted, fetched, topicsOver int64) {
	return e.produced, e.evicted, e.fetched, e.topicsOver
}
