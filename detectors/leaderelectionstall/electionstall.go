// Package leaderelectionstall reports partitions that Metadata answers without a
// leader, graded by how long clients had to wait for one.
//
// A partition is leaderless in a Metadata response when its error is
// LEADER_NOT_AVAILABLE (5) or NOT_LEADER_OR_FOLLOWER (6), or its leader is
// -1 (whatever the error, e.g. LISTENER_NOT_FOUND). A stretch runs from the
// first response saying so to the first response naming a leader (leader
// >= 0, another error or none), or to the end of the capture: that is how
// long a client that needed the partition could not be told where to send.
// Its severity is the policy's (detectors.Grade) with the rule's
// boundaries: shorter than Brief (1 s) it is a normal election that clients
// follow at once and gives no finding; then info; from WarnAfter (3 s) a
// warning; from MinDuration (30 s), or still leaderless at the end after 10
// s, an error. Each topic gives one finding per severity, for the
// partitions whose worst stretch has it.
//
// Who waited is said from the wire: the clients whose Metadata requests
// were answered without a leader, and those whose Produce or Fetch
// requests for the partitions were refused with NOT_LEADER_OR_FOLLOWER or
// LEADER_NOT_AVAILABLE during the stretch or in the 5 s before it (the
// refusal that sent them to ask: kgo refreshes Metadata at most every 5 s
// by default, so it may ask that long after the refusal). Topic-level errors without partitions
// (auto-creation in progress) are not counted. State is kept only for
// partitions seen leaderless, at most maxPartitions of them.
package leaderelectionstall

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name: "leader-election-stall",
	Recorded: []string{"fixtures/pcaps/clients/election-stall-kgo.pcap", "fixtures/pcaps/clients/election-stall-sarama.pcap",
		"fixtures/pcaps/clients/election-stall-librdkafka.pcap"},
	Severity: detectors.Error,
	Doc: "Partitions that Metadata responses answer without a leader (LEADER_NOT_AVAILABLE, " +
		"NOT_LEADER_OR_FOLLOWER, leader -1), from the first response saying so to the first naming a leader " +
		"(or the end of the capture): which topic and partitions, for how long, which brokers answered, which " +
		"replicas are offline (when every replica is offline there is nobody to elect), and which clients waited " +
		"(their Metadata answered without a leader, their Produce and Fetch refused NOT_LEADER_OR_FOLLOWER or " +
		"LEADER_NOT_AVAILABLE meanwhile or in the 5 s before). A healthy election leaves a partition leaderless for milliseconds: under brief " +
		"(1 s) it is not reported; under 3 s it is info; from 3 s clients felt it, a warning; from 30 s, or " +
		"still leaderless at the end of the capture after 10 s, an error.",
}, Params{Brief: time.Second, WarnAfter: detectors.FeltAfter, MinDuration: detectors.LongAfter}, New)

// Params are the rule's thresholds; the defaults are the severity policy's.
type Params struct {
	Brief       time.Duration `param:"brief" unit:"ms" doc:"a partition leaderless for less than this is a normal election that clients follow at once: not reported"`
	WarnAfter   time.Duration `param:"warn-after" unit:"s" doc:"leaderless this long, from the first Metadata response saying so to the first naming a leader, is a warning (clients waited); shorter is info"`
	MinDuration time.Duration `param:"min-duration" unit:"s" doc:"leaderless this long is an error, as is still leaderless at the end of the capture after 10 s (or min-duration if shorter)"`
}

// grade is the severity of a stretch of d, ongoing if it lasted to the end
// of the capture: detectors.Grade with the rule's boundaries. ok is false
// for a stretch shorter than Brief, which is not reported.
func (p *Params) grade(d time.Duration, ongoing bool) (sev detectors.Severity, ok bool) {
	switch {
	case d < p.Brief:
		return detectors.Info, false
	case d >= p.MinDuration, ongoing && d >= min(detectors.HealAfter, p.MinDuration):
		return detectors.Error, true
	case d >= p.WarnAfter:
		return detectors.Warning, true
	}
	return detectors.Info, true
}

// Bounds of what the rule keeps.
const (
	// maxPartitions bounds the leaderless partitions tracked; answers
	// about more are counted (dropped) and said in the findings.
	maxPartitions = 1 << 16
	// What one stretch keeps: connections, replicas listed, error codes,
	// clients that waited.
	maxConns    = 16
	maxReplicas = 32
	maxErrors   = 8
	maxWaiters  = 16
	// recent is how many refusals of partitions not (yet) leaderless are
	// remembered, for a stretch that opens within refusalLead of them.
	recent      = 64
	refusalLead = 5 * time.Second
)

// New makes the rule.
func New(p Params) detectors.Rule {
	return &rule{p: p, topics: map[string]*topic{}}
}

type rule struct {
	p       Params
	topics  map[string]*topic
	parts   int
	open    int   // partitions with an open stretch
	dropped int64 // leaderless answers about partitions beyond maxPartitions
	// hints are the partitions of the topic being read, lost the indices
	// of those without a leader (reused: no allocation per response).
	hints []decode.LeaderHint
	lost  []int
	// refusals are the latest Produce and Fetch refusals of partitions
	// without an open stretch, a ring (next is where the next goes).
	refusals [recent]refusal
	next     int
}

type topic struct {
	// seq counts the responses that listed partitions of the topic; a
	// stretch is the run of them from firstSeq to lastSeq.
	seq   int64
	parts map[int32]*partition
}

type partition struct {
	open  *stretch // the current stretch, nil while the partition has a leader
	worst *stretch // the longest finished stretch of Brief or more
}

// stretch is one run of responses answering a partition without a leader,
// and the answer that ended it.
type stretch struct {
	first, last       time.Time // the first and last answers without a leader
	healed            time.Time // the first answer naming a leader after them; zero while open
	newLeader         int32     // the leader it named
	firstSeq, lastSeq int64
	n                 int64
	errs              []errCount
	leader            int32
	replicas          []int32
	isr               []int32
	offline           []int32
	offlineKnown      bool // Metadata v5+ lists offline replicas
	conns             tally.Conns
	healEv            detectors.Evidence
	ev                detectors.Sampler[detectors.Evidence]
	waiters           []waiter
	waitersMore       int64 // answers to clients beyond maxWaiters
}

// waiter is a client that waited for a leader during a stretch.
type waiter struct {
	cluster.Client
	metadata int64 // Metadata answers telling it the partition had no leader
	produce  int64 // Produce answers refusing the partition
	fetch    int64 // Fetch answers refusing the partition
}

type errCount struct {
	code int16
	n    int64
}

// refusal is a Produce or Fetch answer refusing a partition for want of a
// leader.
type refusal struct {
	part    cluster.Partition // its topic as the rule keeps topics: by TopicName
	client  cluster.Client
	fetch   bool
	code    int16
	at      time.Time
	api     string
	version int16
	server  netip.AddrPort
	ev      detectors.Evidence // its What written when counted
}

// dur is the stretch's length: to the answer that ended it, or to end if
// none did.
func (l *stretch) dur(end time.Time) time.Duration {
	if l.healed.IsZero() {
		return end.Sub(l.first)
	}
	return l.healed.Sub(l.first)
}

// waiter returns the entry of client c, nil if the stretch holds
// maxWaiters others (then counted in waitersMore).
func (l *stretch) waiter(c cluster.Client) *waiter {
	for i := range l.waiters {
		if l.waiters[i].Client == c {
			return &l.waiters[i]
		}
	}
	if len(l.waiters) >= maxWaiters {
		l.waitersMore++
		return nil
	}
	l.waiters = append(l.waiters, waiter{Client: c})
	return &l.waiters[len(l.waiters)-1]
}

// refused counts a refusal of the stretch's partition.
func (l *stretch) refused(rf *refusal) {
	if w := l.waiter(rf.client); w != nil {
		if rf.fetch {
			w.fetch++
		} else {
			w.produce++
		}
	}
	ev := rf.ev
	ev.What = fmt.Sprintf("%s v%d response from %s refuses %s partition %d: %s", rf.api, rf.version, rf.server, rf.part.Topic, rf.part.Num,
		decode.ErrorName(rf.code))
	l.ev.Add(ev)
}

// leaderless reports a partition answered without a leader.
func leaderless(h *decode.LeaderHint) bool {
	return h.Leader < 0 || h.ErrorCode == cluster.LeaderNotAvailable || h.ErrorCode == cluster.NotLeaderOrFollower
}

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.Metadata, kmsg.Produce, kmsg.Fetch}
}

// Exchange implements detectors.ExchangeHook: it reads the partitions of
// each Metadata response, topic by topic, and the refusals of Produce and
// Fetch responses.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Resp == nil {
		return
	}
	switch x.Resp.Resp.(type) {
	case *kmsg.MetadataResponse:
	case *kmsg.ProduceResponse, *kmsg.FetchResponse:
		if len(x.Resp.ErrorCodes) > 0 {
			r.noteRefusals(x)
		}
		return
	default:
		return
	}
	r.hints = r.hints[:0]
	var topic string // the topic being read
	var topicID [16]byte
	decode.LeaderHints(x.Resp.Resp, func(h *decode.LeaderHint) {
		if h.Topic != topic || h.TopicID != topicID {
			if len(r.hints) > 0 {
				r.topic(x, r.hints)
				r.hints = r.hints[:0]
			}
			topic, topicID = h.Topic, h.TopicID
		}
		// With no stretch open, a topic's partitions named with a leader
		// before its first leaderless one have nothing to end: not
		// copied (most Metadata answers are healthy).
		if len(r.hints) == 0 && r.open == 0 && !leaderless(h) {
			return
		}
		r.hints = append(r.hints, *h)
	})
	if len(r.hints) > 0 {
		r.topic(x, r.hints)
	}
	// The hints point into the response: keep none of it.
	clear(r.hints[:cap(r.hints)])
}

// topic reads the partitions one Metadata response lists for one topic.
func (r *rule) topic(x *detectors.Exchange, hs []decode.LeaderHint) {
	r.lost = r.lost[:0]
	for i := range hs {
		if leaderless(&hs[i]) {
			r.lost = append(r.lost, i)
		}
	}
	if len(r.lost) == 0 && r.open == 0 {
		return // healthy, and nothing to end
	}
	name := x.Resp.TopicName(hs[0].Topic, hs[0].TopicID)
	st := r.topics[name]
	if st == nil {
		if len(r.lost) == 0 {
			return // healthy topics take no memory
		}
		if r.parts >= maxPartitions {
			r.dropped += int64(len(r.lost))
			return
		}
		st = &topic{parts: map[int32]*partition{}}
		r.topics[name] = st
	}
	st.seq++
	what := ""
	if len(r.lost) > 0 {
		what = r.describe(x.Resp, name, hs)
	}
	for i := range hs {
		h := &hs[i]
		sp := st.parts[h.Partition.Num]
		if !leaderless(h) {
			if sp != nil && sp.open != nil {
				r.finish(x, sp, h)
			}
			continue
		}
		if sp == nil {
			if r.parts >= maxPartitions {
				r.dropped++
				continue
			}
			r.parts++
			sp = &partition{}
			st.parts[h.Partition.Num] = sp
		}
		if sp.open == nil {
			sp.open = &stretch{first: x.Resp.Time, firstSeq: st.seq, conns: tally.Conns{Max: maxConns}}
			r.open++
			r.absorb(sp.open, cluster.Partition{Topic: name, Num: h.Partition.Num})
		}
		sp.open.add(x, st.seq, h, what)
	}
}

func (l *stretch) add(x *detectors.Exchange, seq int64, h *decode.LeaderHint, what string) {
	l.last, l.lastSeq = x.Resp.Time, seq
	l.n++
	if i := slices.IndexFunc(l.errs, func(e errCount) bool { return e.code == h.ErrorCode }); i >= 0 {
		l.errs[i].n++
	} else if len(l.errs) < maxErrors {
		l.errs = append(l.errs, errCount{h.ErrorCode, 1})
	}
	l.leader = h.Leader
	l.replicas = appendCapped(l.replicas[:0], h.Replicas)
	l.isr = appendCapped(l.isr[:0], h.ISR)
	l.offline = appendCapped(l.offline[:0], h.Offline)
	l.offlineKnown = x.Resp.Version >= 5
	l.conns.Add(x.Conn)
	if w := l.waiter(x.Resp.Client); w != nil {
		w.metadata++
	}
	l.ev.Add(detectors.EvidenceAt(x.Resp, what))
}

func appendCapped(dst, src []int32) []int32 {
	return append(dst, src[:min(len(src), maxReplicas)]...)
}

// finish closes the open stretch of a partition that got a leader (h, in
// the response of x).
func (r *rule) finish(x *detectors.Exchange, sp *partition, h *decode.LeaderHint) {
	l := sp.open
	sp.open = nil
	r.open--
	l.healed, l.newLeader = x.Resp.Time, h.Leader
	d := l.dur(time.Time{})
	if d < r.p.Brief {
		return // a normal election
	}
	if sp.worst == nil || d > sp.worst.dur(time.Time{}) {
		// Only a kept stretch shows the answer that ended it.
		l.healEv = detectors.EvidenceAt(x.Resp, fmt.Sprintf("Metadata v%d response from %s names leader %d for partition %d again",
			x.Resp.Version, x.Resp.Conn.Server, h.Leader, h.Num))
		sp.worst = l
	}
}

// noteRefusals reads a Produce or Fetch response for partitions refused
// for want of a leader: counted on the partition's open stretch, or kept a
// while for one that opens within refusalLead.
func (r *rule) noteRefusals(x *detectors.Exchange) {
	_, fetch := x.Resp.Resp.(*kmsg.FetchResponse)
	if fetch {
		if x.Req == nil {
			return // who fetched is not known
		}
		if _, ok := x.Req.Req.(*kmsg.FetchRequest); !ok {
			return // who fetched is not known
		}
		if x.Req.Fetcher.How == cluster.Declared {
			return // a follower, not a client
		}
	}
	answers := x.Answers()
	for i := range answers {
		a := &answers[i]
		if a.ErrorCode != cluster.LeaderNotAvailable && a.ErrorCode != cluster.NotLeaderOrFollower {
			continue
		}
		// Made in place: in the open stretch's count, or in the ring.
		topic := x.Resp.TopicName(a.Topic, a.TopicID)
		var open *stretch
		if st := r.topics[topic]; st != nil {
			if sp := st.parts[a.Partition.Num]; sp != nil && sp.open != nil {
				open = sp.open
			}
		}
		var counted refusal
		rf := &counted
		if open == nil {
			rf = &r.refusals[r.next]
			r.next = (r.next + 1) % recent
		}
		*rf = refusal{part: cluster.Partition{Topic: topic, Num: a.Partition.Num}, client: x.Resp.Client,
			fetch: fetch, code: a.ErrorCode, at: x.Resp.Time, api: x.Resp.Name(), version: x.Resp.Version, server: x.Conn.Server,
			ev: detectors.Evidence{File: x.Resp.File, Packet: x.Resp.Packet, Conn: x.Conn.ID}}
		if open != nil {
			open.refused(rf)
		}
	}
}

// absorb counts on a stretch just opened the refusals of its partition
// kept from the refusalLead before it.
func (r *rule) absorb(l *stretch, p cluster.Partition) {
	for i := range r.refusals {
		rf := &r.refusals[i]
		if rf.part == p && !rf.at.Before(l.first.Add(-refusalLead)) {
			l.refused(rf)
			*rf = refusal{}
		}
	}
}

// describe is the evidence text for a response with leaderless partitions
// of a topic (those at r.lost).
func (r *rule) describe(m *flows.Message, name string, hs []decode.LeaderHint) string {
	ids := make([]int32, len(r.lost))
	for i, hi := range r.lost {
		ids[i] = hs[hi].Partition.Num
	}
	h := &hs[r.lost[0]]
	return fmt.Sprintf("Metadata v%d response from %s: %s %s without a leader (%s, leader %d)", m.Version, m.Conn.Server, name,
		text.Word(len(ids), "partition", "partitions")+" "+text.IDs(ids, 8), decode.ErrorName(h.ErrorCode), h.Leader)
}
