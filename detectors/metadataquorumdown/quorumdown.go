// Package metadataquorumdown reports a KRaft metadata quorum with no working
// leader: for a while no raft fetch of __cluster_metadata succeeds from
// any node, while several nodes keep asking.
//
// Recorded on Apache Kafka 4.1.1 (fixtures/pcaps/kafka/kraft-election-stall):
// with 2 of 3 controllers killed, the survivor answers every raft fetch
// NOT_LEADER_OR_FOLLOWER naming the dead leader, the brokers reconnect to
// the dead controllers thousands of times (refused), and nothing that needs
// the controller happens: no partition leader is elected for a broker lost
// meanwhile (Metadata keeps naming it), no ISR shrinks (acks=all produce
// waits 30 s and more), no topic is created. The per-node rules
// (not-leader-loop, stalled-fetch, connection-refused) each see a part;
// this rule says what they have in common.
//
// An outage runs from the first failed raft fetch (an error answer, or no
// answer) after the last successful one, from any node, to the next
// successful one. It is reported when raft fetches of at least MinFetchers
// nodes failed in it (one node alone failing while others succeed is that
// node's path, not the quorum: liveness-without-replication and
// not-leader-loop say so), and it lasted at least MinDuration (an election
// after a controller failover takes one to three seconds); graded by how
// long it lasted (detectors.Grade).
package metadataquorumdown

import (
	"net/netip"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "metadata-quorum-down",
	Recorded: []string{"fixtures/pcaps/kafka/kraft-election-stall.pcap.gz"},
	Severity: detectors.Error,
	Doc: "The KRaft metadata quorum has no working leader: no raft fetch of __cluster_metadata succeeds " +
		"from any node while the raft fetches of min-fetchers nodes or more fail (errors such as " +
		"NOT_LEADER_OR_FOLLOWER naming a leader, or no answer), for min-duration (5 s) or more; with the " +
		"leader the answers name, the controllers that answered and those that refused or ignored " +
		"connections, and the Vote requests seen. Nothing that needs the controller happens meanwhile: no " +
		"partition leader election, no ISR change (acks=all produce waits), no topic creation, no broker " +
		"registration. Graded by how long it lasted: from 3 s a warning (after min-duration), from 30 s or " +
		"still down when the capture ended after 10 s an error.",
}, Params{MinFetchers: 2, MinDuration: 5 * time.Second}, New)

// Params are the rule's thresholds.
type Params struct {
	MinFetchers int           `param:"min-fetchers" doc:"nodes whose raft fetches failed during the outage: one node alone failing while the others succeed is its own path, not the quorum"`
	MinDuration time.Duration `param:"min-duration" doc:"how long no raft fetch succeeded, from the first failed one to the next success (or the last failure), before it is reported: a controller election after a failover takes 1-3 s"`
}

// Bounds on what an outage remembers.
const (
	maxFetchers  = 256
	maxEndpoints = 64
)

// New makes the rule.
func New(p Params) detectors.Rule { return &rule{p: p} }

type rule struct {
	p Params
	// lastOK is when a raft fetch last succeeded; cur the outage since.
	lastOK time.Time
	cur    *Outage
	// worst is the longest outage that ended, to be reported.
	worst *Outage
	// refusals are the connection attempts to Kafka endpoints that were
	// refused or never answered, per endpoint, with their times: the
	// dead controllers of an outage are among them.
	refusals map[netip.AddrPort]*refusal
}

type refusal struct {
	first, last time.Time
	attempts    int64
}

// Outage is a time no raft fetch succeeded.
type Outage struct {
	First, last time.Time
	healed      time.Time // the success that ended it (zero: none)
	Fetches     int64
	Unanswered  int64
	Codes       tally.Codes
	fetchers    map[int32]bool
	answering   peers.Servers // controllers that answered (with an error)
	leader      int32         // the leader the answers name, -1 if none
	Epoch       int32
	leaderEP    string
	Votes       int64 // Vote requests answered during the outage
	Granted     int64
	ev          detectors.Sampler[detectors.Evidence]
}

func (o *Outage) held() (time.Duration, bool) {
	if !o.healed.IsZero() {
		return o.healed.Sub(o.First), true
	}
	return o.last.Sub(o.First), false
}

// length is how long the outage held (held's duration).
func (o *Outage) length() time.Duration {
	d, _ := o.held()
	return d
}

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.Fetch, kmsg.Vote}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil {
		return
	}
	switch kmsg.Key(x.Req.Key) {
	case kmsg.Fetch:
		if x.Req.Role == cluster.RoleRaft {
			r.raftFetch(x)
		}
	case kmsg.Vote:
		if r.cur != nil && x.Resp != nil {
			if resp, ok := x.Resp.Resp.(*kmsg.VoteResponse); ok {
				r.cur.Votes++
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						if p.VoteGranted {
							r.cur.Granted++
						}
					}
				}
			}
		}
	}
}

func (r *rule) raftFetch(x *detectors.Exchange) {
	var resp *kmsg.FetchResponse
	if x.Resp != nil {
		if resp, _ = x.Resp.Resp.(*kmsg.FetchResponse); resp == nil {
			return
		}
	} else if !x.Unanswered {
		return
	}
	var code int16
	leader, epoch := int32(-1), int32(-1)
	if resp != nil {
		code = resp.ErrorCode
		for _, a := range x.Answers() {
			if code == 0 {
				code = a.ErrorCode
			}
			if a.Leader >= 0 {
				leader, epoch = a.Leader, a.Epoch
			}
		}
		if code == 0 {
			if x.Resp.Time.After(r.lastOK) {
				r.lastOK = x.Resp.Time
			}
			if r.cur != nil && !x.Req.Time.Before(r.cur.First) {
				r.end(x.Resp.Time)
			}
			return
		}
	}
	if x.Unanswered && !x.Req.Time.After(r.lastOK) {
		return // asked before a success someone had: no outage of the quorum
	}
	o := r.cur
	if o == nil {
		o = &Outage{First: x.Req.Time, leader: -1, Epoch: -1, fetchers: map[int32]bool{}}
		r.cur = o
	}
	o.Fetches++
	peers.Widen(&o.First, &o.last, x)
	if id := x.Req.Fetcher.ID(); id >= 0 && len(o.fetchers) < maxFetchers {
		o.fetchers[id] = true
	}
	if resp == nil {
		o.Unanswered++
		o.ev.Add(detectors.EvidenceAt(x.Req, "raft Fetch to "+peers.Addr(x.Conn.Server).String()+": no answer"))
		return
	}
	o.Codes.Add(code)
	o.answering.Add(x.Conn.Server, 1, 1)
	if leader >= 0 {
		o.leader, o.Epoch = leader, epoch
		if ep := cluster.NodeEndpointOr(resp, leader, o.leaderEP); ep != "" {
			o.leaderEP = ep
		}
	}
	o.ev.Add(detectors.EvidenceAt(x.Resp, "raft Fetch to "+peers.Addr(x.Conn.Server).String()+": "+decode.ErrorName(code)))
}

// end closes the current outage at the success at t, keeping it if it is
// the longest so far.
func (r *rule) end(t time.Time) {
	o := r.cur
	r.cur = nil
	o.healed = t
	if !r.qualifies(o) {
		return
	}
	if r.worst == nil || o.length() > r.worst.length() {
		r.worst = o
	}
}

func (r *rule) qualifies(o *Outage) bool {
	return len(o.fetchers) >= r.p.MinFetchers && o.length() >= r.p.MinDuration
}

// ConnEvent implements detectors.ConnHook: refused and unanswered
// connection attempts, the controllers that are down.
func (r *rule) ConnEvent(_ *detectors.Pass, ev *detectors.ConnEvent) {
	if ev.Kind != flows.ConnRefused && ev.Kind != flows.ConnUnanswered {
		return
	}
	if r.refusals == nil {
		r.refusals = map[netip.AddrPort]*refusal{}
	}
	s := r.refusals[ev.Server]
	if s == nil {
		if len(r.refusals) >= maxEndpoints {
			return
		}
		s = &refusal{first: ev.Time}
		r.refusals[ev.Server] = s
	}
	s.last = ev.Time
	s.attempts++
}

// Findings implements detectors.Rule: the longest outage (the open one
// counted to the capture's end).
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	o, open := r.worst, false
	if c := r.cur; c != nil && r.qualifies(c) {
		if o == nil || c.length() >= o.length() {
			o, open = c, true
		}
	}
	if o == nil {
		return nil
	}
	return []detectors.Finding{finding(p, o, open, r.refusedDuring(p, o))}
}

// Snapshot implements detectors.Snapshotter: Findings changes nothing.
func (r *rule) Snapshot(p *detectors.Pass) []detectors.Finding { return r.Findings(p) }

// refusedDuring lists the endpoints that refused or ignored connection
// attempts during outage o and are controllers: the leader the answers
// name, or a server of raft fetches, or an endpoint on a raft server's
// port.
func (r *rule) refusedDuring(p *detectors.Pass, o *Outage) []Down {
	ports := map[uint16]bool{}
	for _, s := range o.answering.List() {
		ports[s.Addr.Port()] = true
	}
	eps := peers.Endpoints(p, o.leader, o.leaderEP)
	var out []Down
	for ap, s := range r.refusals {
		if s.last.Before(o.First) || s.first.After(o.last) {
			continue
		}
		isLeader, _ := peers.IsNode(p, ap, o.leader, eps)
		if !isLeader && !ports[ap.Port()] {
			continue
		}
		out = append(out, Down{AddrPort: ap, Attempts: s.attempts, Leader: isLeader})
	}
	slices.SortFunc(out, func(a, b Down) int { return a.AddrPort.Compare(b.AddrPort) })
	return out
}

// Down is a controller endpoint that refused or ignored connections.
type Down struct {
	AddrPort netip.AddrPort
	Attempts int64
	Leader   bool
}
