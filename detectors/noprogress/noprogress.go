// Package noprogress reports a client that keeps asking and makes no
// progress: no coordinator found, no group joined, no offset commit
// accepted, no record acknowledged, for seconds, whatever the rate of its
// errors. A client with a sane backoff (5 COORDINATOR_NOT_AVAILABLE in
// 11 s, exponential) stays under every error-rate rule, yet its group is
// stalled for as long: this rule grades the stall itself.
//
// Per client (host and client id), kind and target (the group or
// transactional id for coordinators, the group for joins and commits, the
// partition for Produce), a stall runs from the first failing answer
// after the last success to the next success, or to the capture's end
// when the client was still asking (an answer within MaxGap of the end),
// else to its last failing answer (it gave up). A stall whose first
// failing answer came early, on a connection opened before the capture
// began, with no success before, may have begun earlier: it says so,
// and counts one failing answer more (the client's earlier asks were not
// captured). Answers that are steps
// of a healthy protocol are neither: MEMBER_ID_REQUIRED,
// REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION and the
// KIP-848 fencing codes (rebalance-loop's), and Produce errors another
// rule owns (not-leader-loop, leader-election-stall, not-enough-replicas,
// producer-sequence, and records rejected for good).
//
// Severity is the policy's (detectors.Grade) on the stall's length:
// reported from MinStall (3 s, a warning) with MinAsks failing answers;
// error from 30 s, or from 10 s still stalled at the end.
package noprogress

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "no-progress",
	Recorded: []string{"fixtures/pcaps/clients/coordinator-stall-kgo.pcap", "fixtures/pcaps/clients/coordinator-stall-sarama.pcap"},
	Severity: detectors.Error,
	Doc: "A client keeps asking and makes no progress: no coordinator found (FindCoordinator), no group joined " +
		"(JoinGroup, SyncGroup, ConsumerGroupHeartbeat), no offset commit accepted (OffsetCommit, TxnOffsetCommit), " +
		"no record acknowledged (Produce, per partition), for min-stall or more while it keeps getting errors, " +
		"whatever their rate: a group whose coordinator cannot be found for 11 s, asked 5 times with a backoff, " +
		"is stalled for 11 s though no error rate is high. From the first failing answer after the last success " +
		"to the next success, or to the capture's end while the client still asks (an answer within max-gap of " +
		"it), else to its last failing answer. Protocol steps are not failures (MEMBER_ID_REQUIRED, " +
		"REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, KIP-848 fencing: rebalance-loop's), nor " +
		"Produce errors other rules own (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, NOT_ENOUGH_REPLICAS, " +
		"sequence and fencing errors, records rejected for good). Warning from min-stall (3 s), error from 30 s " +
		"or when still stalled at the end after 10 s; a stall already under way when the capture began says it " +
		"lasted at least that long.",
}, Params{MinStall: detectors.FeltAfter, MinAsks: 2, MaxGap: 10 * time.Second}, New)

// Params are the rule's thresholds.
type Params struct {
	MinStall time.Duration `param:"min-stall" unit:"s" doc:"how long a client must go without progress, getting errors, before it is reported (a warning): a coordinator moving with its partition's leader is found again within a second or two"`
	MinAsks  int           `param:"min-asks" doc:"failing answers in the stall: the client asked again after it failed"`
	MaxGap   time.Duration `param:"max-gap" unit:"s" doc:"a client whose last failing answer came within this of the capture's end was still asking (stalled at the end); a stall also ends, at its last answer, when the client goes this long without asking"`
}

// maxKeys bounds the (client, kind, target) stalls followed.
const maxKeys = 8192

// New makes the rule.
func New(p Params) detectors.Rule {
	return &rule{p: p, keys: map[key]*stall{}}
}

type kind uint8

const (
	coordinator kind = iota
	join
	commit
	produce
)

type key struct {
	kind   kind
	client cluster.Client // the host as its socket showed it
	target string         // group or transactional id, or topic
	part   int32
	coord  int8 // FindCoordinator's CoordinatorType: 1 a transactional coordinator
}

// stall is one key's state: the open stall, if any, and the worst that
// ended.
type stall struct {
	key key
	// The open stall: first and last failing answers, how many; asked is
	// its last request; begun is false once a success was seen (a stall
	// from the capture's start may have begun before it).
	open        bool
	first, last time.Time
	asks        int64
	codes       tally.Codes
	conns       tally.Conns
	ev          detectors.Sampler[detectors.Evidence]
	sawSuccess  bool
	firstSeen   time.Time
	// mid: the open stall's first failing answer came on a connection
	// opened before the capture began (flows.ConnInfo.MidStream).
	mid bool
	// worst is the longest stall that ended (at a success, or given up).
	worst ended
}

type ended struct {
	from, to time.Time
	asks     int64
	healed   bool
	code     int16
	codes    []string
	conns    tally.Conns
	ev       []detectors.Evidence
	atStart  bool
}

func (e ended) length() time.Duration { return e.to.Sub(e.from) }

type rule struct {
	p       Params
	keys    map[key]*stall
	dropped int64
}

// Cut implements detectors.Bounded.
func (r *rule) Cut() map[string]int64 { return map[string]int64{"stalls_not_followed": r.dropped} }

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.ConsumerGroupHeartbeat, kmsg.OffsetCommit, kmsg.TxnOffsetCommit, kmsg.Produce}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(p *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.Resp == nil || x.Req.Req == nil || x.Resp.Resp == nil {
		return
	}
	switch req := x.Req.Req.(type) {
	case *kmsg.FindCoordinatorRequest:
		resp, ok := x.Resp.Resp.(*kmsg.FindCoordinatorResponse)
		if !ok || req.CoordinatorType > 1 {
			return
		}
		k := keyOf(x, coordinator, "")
		k.coord = req.CoordinatorType
		if len(resp.Coordinators) > 0 {
			for _, c := range resp.Coordinators {
				k.target = c.Key
				r.answer(p, x, k, c.ErrorCode)
			}
			return
		}
		if req.Version < 4 {
			k.target = req.CoordinatorKey
			r.answer(p, x, k, resp.ErrorCode)
		}
	case *kmsg.JoinGroupRequest:
		resp, ok := x.Resp.Resp.(*kmsg.JoinGroupResponse)
		if !ok {
			return
		}
		if resp.ErrorCode == 0 {
			return // joined, not yet synced: SyncGroup says
		}
		r.answer(p, x, keyOf(x, join, req.Group), resp.ErrorCode)
	case *kmsg.SyncGroupRequest:
		if resp, ok := x.Resp.Resp.(*kmsg.SyncGroupResponse); ok {
			r.answer(p, x, keyOf(x, join, req.Group), resp.ErrorCode)
		}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		if resp, ok := x.Resp.Resp.(*kmsg.ConsumerGroupHeartbeatResponse); ok {
			r.answer(p, x, keyOf(x, join, req.Group), resp.ErrorCode)
		}
	case *kmsg.OffsetCommitRequest:
		if resp, ok := x.Resp.Resp.(*kmsg.OffsetCommitResponse); ok {
			r.answer(p, x, keyOf(x, commit, req.Group), commitCode(resp.Topics))
		}
	case *kmsg.TxnOffsetCommitRequest:
		if resp, ok := x.Resp.Resp.(*kmsg.TxnOffsetCommitResponse); ok {
			code := int16(0)
			for _, t := range resp.Topics {
				for _, pt := range t.Partitions {
					if pt.ErrorCode == 0 {
						code = 0
						goto done
					}
					code = pt.ErrorCode
				}
			}
		done:
			r.answer(p, x, keyOf(x, commit, req.Group), code)
		}
	case *kmsg.ProduceRequest:
		resp, ok := x.Resp.Resp.(*kmsg.ProduceResponse)
		if !ok || req.Acks == 0 {
			return
		}
		for ti := range resp.Topics {
			t := &resp.Topics[ti]
			name, named := t.Topic, false
			for pi := range t.Partitions {
				pt := &t.Partitions[pi]
				if len(r.keys) == 0 && (pt.ErrorCode == 0 || step(produce, pt.ErrorCode)) {
					continue // no stall to end or open: answer would keep nothing
				}
				if !named && name == "" && p.Nodes != nil {
					name, _ = p.Nodes.TopicName(t.TopicID)
				}
				named = true
				k := keyOf(x, produce, name)
				k.part = pt.Partition
				r.answer(p, x, k, pt.ErrorCode)
			}
		}
	}
}

// keyOf is the key of kind and target for x's client: its host and
// client id (made only for the exchanges a stall may follow).
func keyOf(x *detectors.Exchange, k kind, target string) key {
	return key{kind: k, client: cluster.Client{Host: x.Conn.Client.Addr(), ID: x.Req.Client.ID}, target: target}
}

// commitCode is an OffsetCommit's outcome: 0 if any partition was
// accepted, else the last error.
func commitCode(ts []kmsg.OffsetCommitResponseTopic) int16 {
	code := int16(0)
	for _, t := range ts {
		for _, pt := range t.Partitions {
			if pt.ErrorCode == 0 {
				return 0
			}
			code = pt.ErrorCode
		}
	}
	return code
}

// step reports whether code is a step of a healthy protocol, or owned by
// another rule, for kind: neither a failure nor a success.
func step(k kind, code int16) bool {
	switch k {
	case join, commit:
		switch code {
		case cluster.MemberIDRequired, cluster.RebalanceInProgress, cluster.UnknownMemberID, cluster.IllegalGeneration,
			cluster.FencedMemberEpoch, cluster.UnreleasedInstanceID:
			return true
		}
	case produce:
		switch code {
		case cluster.NotLeaderOrFollower, cluster.FencedLeaderEpoch, cluster.UnknownLeaderEpoch,
			cluster.LeaderNotAvailable,                                      // not-leader-loop, leader-election-stall
			cluster.NotEnoughReplicas, cluster.NotEnoughReplicasAfterAppend, // not-enough-replicas
			cluster.OutOfOrderSequenceNumber, cluster.DuplicateSequenceNumber,
			cluster.InvalidProducerEpoch, cluster.ProducerFenced, // producer-sequence and fencing
			cluster.MessageTooLarge, cluster.RecordListTooLarge, cluster.CorruptMessage,
			cluster.InvalidRecord, cluster.InvalidTimestamp,
			cluster.UnsupportedCompressionType: // records-rejected: too large, corrupt, invalid record or timestamp, compression
			return true
		}
	}
	return false
}

func (r *rule) answer(p *detectors.Pass, x *detectors.Exchange, k key, code int16) {
	s := r.keys[k]
	if s == nil {
		if code == 0 {
			return // nothing stalled yet: no state
		}
		if step(k.kind, code) {
			return
		}
		if len(r.keys) >= maxKeys {
			r.dropped++
			return
		}
		s = &stall{key: k, firstSeen: x.Req.Time}
		r.keys[k] = s
	}
	t := x.Resp.Time
	if s.open && t.Sub(s.last) > r.p.MaxGap {
		s.close(s.last, false) // gave up, then asked again much later
	}
	switch {
	case code == 0:
		if s.open {
			s.close(x.Req.Time, true)
		}
		s.sawSuccess = true
	case step(k.kind, code):
	default:
		if !s.open {
			// From the request: the client waited from when it asked.
			s.open, s.first, s.asks, s.mid = true, x.Req.Time, 0, x.Conn.MidStream
			s.codes = tally.Codes{}
			s.conns.Reset()
			s.ev = detectors.Sampler[detectors.Evidence]{}
		}
		s.last = t
		s.asks++
		s.codes.Add(code)
		s.conns.Add(x.Conn)
		s.ev.Add(detectors.EvidenceAt(x.Resp, x.Req.Name()+" response "+detectors.ErrorName(code)))
	}
}

// close ends the open stall at to, healed by a success or given up.
func (s *stall) close(to time.Time, healed bool) {
	if e := s.ended(to, healed, s.conns.Clone()); s.worst.asks == 0 || e.length() > s.worst.length() {
		s.worst = e
	}
	s.open = false
}

// ended is the open stall as ended at to, naming conns.
func (s *stall) ended(to time.Time, healed bool, conns tally.Conns) ended {
	e := ended{from: s.first, to: to, asks: s.asks, healed: healed, conns: conns, ev: s.ev.List(), atStart: !s.sawSuccess}
	e.code, _ = s.codes.Top()
	e.codes = s.codes.Names()
	return e
}

// verdict is the key's worst stall, the open one counted to end when the
// client was still asking then.
func (r *rule) verdict(s *stall, start, end time.Time, older map[cluster.Client]bool) (e ended, ongoing bool) {
	e = s.worst
	if s.open {
		o := s.ended(s.last, false, s.conns)
		on := end.Sub(s.last) <= r.p.MaxGap
		if on {
			o.to = end
		}
		if e.asks == 0 || o.length() >= e.length() {
			e, ongoing = o, on
		}
	}
	// Already under way when the capture began: its first failing answer
	// came within max-gap of the start, with nothing of the key before,
	// from a client connected before the capture began (its answer came
	// on such a connection, or the client had one: a client such as
	// sarama asks again on new connections).
	e.atStart = e.atStart && (s.mid || older[s.key.client]) &&
		s.firstSeen.Sub(start) <= r.p.MaxGap && e.from.Sub(start) <= r.p.MaxGap
	return e, ongoing
}

// Findings implements detectors.Rule: one per stalled key; Produce stalls
// of one client and topic merged.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	type found struct {
		s       *stall
		e       ended
		ongoing bool
	}
	// The clients (host and client id) with a connection opened before
	// the capture began.
	older := map[cluster.Client]bool{}
	for _, c := range p.Conns {
		if c.MidStream {
			for _, id := range c.ClientIDs {
				older[cluster.Client{Host: c.Client.Addr(), ID: id}] = true
			}
		}
	}
	var fs []found
	for _, s := range r.keys {
		e, on := r.verdict(s, p.Start, p.End, older)
		asks := e.asks
		if e.atStart {
			// Joined mid-stall: the client failed before the capture
			// began, an ask not seen.
			asks++
		}
		if asks >= int64(r.p.MinAsks) && e.length() >= r.p.MinStall {
			fs = append(fs, found{s, e, on})
		}
	}
	slices.SortFunc(fs, func(x, y found) int {
		a, b := x.s.key, y.s.key
		return cmp.Or(
			cmp.Compare(a.kind, b.kind),
			strings.Compare(a.client.ID, b.client.ID),
			a.client.Host.Compare(b.client.Host),
			strings.Compare(a.target, b.target),
			cmp.Compare(a.coord, b.coord),
			cmp.Compare(a.part, b.part),
		)
	})
	var out []detectors.Finding
	for i := 0; i < len(fs); {
		j := i + 1
		if fs[i].s.key.kind == produce {
			for j < len(fs) && fs[j].s.key.kind == produce && fs[j].s.key.client == fs[i].s.key.client &&
				fs[j].s.key.target == fs[i].s.key.target {
				j++
			}
		}
		f := &Finding{Params: r.p}
		for _, g := range fs[i:j] {
			f.add(g.s.key, g.e, g.ongoing)
		}
		out = append(out, f.finding(p))
		i = j
	}
	return out
}
