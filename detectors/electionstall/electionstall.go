// Package electionstall reports partitions that Metadata keeps answering
// without a leader.
//
// A partition is leaderless in a Metadata response when its error is
// LEADER_NOT_AVAILABLE (5) or NOT_LEADER_OR_FOLLOWER (6), or its leader is
// -1 (whatever the error, e.g. LISTENER_NOT_FOUND). A response that names a
// leader (leader >= 0, another error or none) ends the leaderless stretch.
// A stretch is measured in capture time from the first to the last response
// saying so; at MinDuration or longer it is an error (Finding). Shorter
// stretches (a leader election after a broker restart takes a few seconds)
// are one info finding per topic (Election). Topic-level errors without
// partitions (auto-creation in progress) are not counted. State is kept
// only for partitions seen leaderless, at most maxPartitions of them.
package electionstall

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "leader-election-stall",
	Severity: detectors.Error,
	Doc: "Partitions that Metadata responses keep answering without a leader (LEADER_NOT_AVAILABLE, " +
		"NOT_LEADER_OR_FOLLOWER, leader -1), with no response naming a leader in between, for min-duration " +
		"or longer: which topic and partitions, for how long, which brokers answered, and which replicas " +
		"are offline (when every replica is offline there is nobody to elect). Shorter stretches, as a " +
		"normal election gives, are info.",
}, Params{MinDuration: 30 * time.Second}, New)

// Params are the rule's thresholds.
type Params struct {
	MinDuration time.Duration `param:"min-duration" unit:"s" doc:"capture time a partition must stay leaderless, from the first to the last Metadata response saying so, to be an error"`
}

// Bounds of what the rule keeps.
const (
	// maxPartitions bounds the leaderless partitions tracked; answers
	// about more are counted (dropped) and said in the findings.
	maxPartitions = 1 << 16
	// What one stretch keeps: connections, replicas listed, error codes.
	maxConns    = 16
	maxReplicas = 32
	maxErrors   = 8
)

// New makes the rule.
func New(p Params) detectors.Rule {
	return &rule{p: p, topics: map[string]*topic{}}
}

type rule struct {
	p       Params
	topics  map[string]*topic
	parts   int
	dropped int64 // leaderless answers about partitions beyond maxPartitions
	// hints are the partitions of the topic being read, lost the indices
	// of those without a leader (reused: no allocation per response).
	hints []decode.LeaderHint
	lost  []int
}

type topic struct {
	// seq counts the responses that listed partitions of the topic; a
	// stretch is the run of them from firstSeq to lastSeq.
	seq   int64
	parts map[int32]*partition
}

type partition struct {
	open *stretch // the current stretch, nil while the partition has a leader
	long *stretch // the longest finished stretch of MinDuration or more

	// Finished stretches shorter than MinDuration.
	shortN         int
	shortMax       time.Duration
	shortResponses int64
	shortFirst     time.Time
	shortLast      time.Time
	shortEv        detectors.Evidence // the first response of the longest one
	shortErr       int16              // the most frequent error of the longest one
}

// stretch is one run of responses answering a partition without a leader.
type stretch struct {
	first, last       time.Time
	firstSeq, lastSeq int64
	n                 int64
	errs              []errCount
	leader            int32
	replicas          []int32
	isr               []int32
	offline           []int32
	offlineKnown      bool // Metadata v5+ lists offline replicas
	conns             tally.Conns
	firstEv           detectors.Evidence
	ev                detectors.Sampler[detectors.Evidence]
}

type errCount struct {
	code int16
	n    int64
}

func (l *stretch) dur() time.Duration { return l.last.Sub(l.first) }

// mainErr is the error code answered most often in the stretch.
func (l *stretch) mainErr() int16 {
	m := make(map[int16]int64, len(l.errs))
	for _, e := range l.errs {
		m[e.code] += e.n
	}
	return mostFrequent(m)
}

// leaderless reports a partition answered without a leader.
func leaderless(h *decode.LeaderHint) bool {
	return h.Leader < 0 || h.ErrorCode == kerr.LeaderNotAvailable.Code || h.ErrorCode == kerr.NotLeaderForPartition.Code
}

// Exchange implements detectors.ExchangeHook: it reads the partitions of
// each Metadata response, topic by topic.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Resp == nil {
		return
	}
	if _, ok := x.Resp.Resp.(*kmsg.MetadataResponse); !ok {
		return
	}
	r.hints = r.hints[:0]
	decode.LeaderHints(x.Resp.Resp, func(h decode.LeaderHint) {
		if len(r.hints) > 0 && (h.Topic != r.hints[0].Topic || h.TopicID != r.hints[0].TopicID) {
			r.topic(x, r.hints)
			r.hints = r.hints[:0]
		}
		r.hints = append(r.hints, h)
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
	if len(r.lost) == 0 && len(r.topics) == 0 {
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
		sp := st.parts[h.Partition]
		if !leaderless(h) {
			if sp != nil && sp.open != nil {
				r.finish(sp)
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
			st.parts[h.Partition] = sp
		}
		if sp.open == nil {
			sp.open = &stretch{first: x.Resp.Time, firstSeq: st.seq, conns: tally.Conns{Max: maxConns}}
		}
		sp.open.add(x, st.seq, h, what)
	}
}

func (l *stretch) add(x *detectors.Exchange, seq int64, h *decode.LeaderHint, what string) {
	l.last, l.lastSeq = x.Resp.Time, seq
	l.n++
	found := false
	for i := range l.errs {
		if l.errs[i].code == h.ErrorCode {
			l.errs[i].n++
			found = true
			break
		}
	}
	if !found && len(l.errs) < maxErrors {
		l.errs = append(l.errs, errCount{h.ErrorCode, 1})
	}
	l.leader = h.Leader
	l.replicas = appendCapped(l.replicas[:0], h.Replicas)
	l.isr = appendCapped(l.isr[:0], h.ISR)
	l.offline = appendCapped(l.offline[:0], h.Offline)
	l.offlineKnown = x.Resp.Version >= 5
	l.conns.Add(x.Conn)
	ev := detectors.EvidenceAt(x.Resp, what)
	if l.n == 1 {
		l.firstEv = ev
	}
	l.ev.Add(ev)
}

func appendCapped(dst, src []int32) []int32 {
	if len(src) > maxReplicas {
		src = src[:maxReplicas]
	}
	return append(dst, src...)
}

// finish closes the open stretch of a partition that got a leader.
func (r *rule) finish(sp *partition) {
	l := sp.open
	sp.open = nil
	if l.dur() >= r.p.MinDuration {
		if sp.long == nil || l.dur() > sp.long.dur() {
			sp.long = l
		}
		return
	}
	if sp.shortN == 0 || l.first.Before(sp.shortFirst) {
		sp.shortFirst = l.first
	}
	if l.last.After(sp.shortLast) {
		sp.shortLast = l.last
	}
	if sp.shortN == 0 || l.dur() > sp.shortMax {
		sp.shortMax = l.dur()
		sp.shortEv = l.firstEv
		sp.shortErr = l.mainErr()
	}
	sp.shortN++
	sp.shortResponses += l.n
}

// describe is the evidence text for a response with leaderless partitions
// of a topic (those at r.lost).
func (r *rule) describe(m *flows.Message, name string, hs []decode.LeaderHint) string {
	ids := make([]int32, len(r.lost))
	for i, hi := range r.lost {
		ids[i] = hs[hi].Partition
	}
	h := &hs[r.lost[0]]
	return fmt.Sprintf("Metadata v%d response from %s: %s %s without a leader (%s, leader %d)", m.Version, m.Conn.Server, name,
		text.Word(len(ids), "partition", "partitions")+" "+text.IDs(ids, 8), decode.ErrorName(h.ErrorCode), h.Leader)
}
