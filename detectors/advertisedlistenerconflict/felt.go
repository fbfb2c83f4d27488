package advertisedlistenerconflict

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/spell"
	"github.com/kfsniff/kfsniff/flows"
)

// What clients felt of a shared endpoint: requests for the other nodes
// reach the one listener there, which refuses the partitions it does not
// lead (NOT_LEADER_OR_FOLLOWER), or, asked for another node by a client of
// KIP-1242 (ApiVersions v5 names the node expected), answers
// REBOOTSTRAP_REQUIRED; or nothing listens there and connections are
// refused. Each is a spell (detectors/internal/spell): a partition refused
// at the endpoint until an answer for it carries no error (wherever it
// came from: the client found its leader); a node asked for at the
// endpoint and refused until an ApiVersions for it is answered without
// error; connection attempts to the endpoint refused or unanswered until
// one opens. The longest, or one still running at the end, is graded by
// the policy.

// Bounds of what is kept per shared endpoint.
const (
	maxParts   = 256  // partitions refused at the endpoint
	maxServers = 4096 // server addresses resolved to an endpoint (or none)
)

// felt is what clients met at one shared endpoint.
type felt struct {
	connect  spell.Spell // connection attempts refused or unanswered
	attempts int64
	parts    map[cluster.Partition]*spell.Spell
	refused  int64 // partition answers NOT_LEADER_OR_FOLLOWER
	dropped  int64 // refusals of partitions beyond maxParts, of nodes beyond maxIDs
	// nodes are the nodes asked for at the endpoint and refused
	// REBOOTSTRAP_REQUIRED (KIP-1242), by node id (-1: not known).
	nodes       map[int32]*spell.Spell
	rebootstrap int64
	ev          detectors.Sampler[detectors.Evidence]
}

// held is how long clients were refused at the endpoint: the longest spell,
// ongoing if one had not healed at end. A spell of one refusal (a client
// that did not retry, or did elsewhere) is not counted: clients were not
// held up by it.
func (f *felt) held(end time.Time) (d time.Duration, ongoing bool) {
	for _, s := range f.spells() {
		if s.N >= 2 {
			sd, son := s.Held(end)
			d, ongoing = spell.Worst(d, ongoing, sd, son)
		}
	}
	return d, ongoing
}

// spells lists the connection spell, the partitions' and the nodes'.
func (f *felt) spells() []*spell.Spell {
	out := slices.AppendSeq([]*spell.Spell{&f.connect}, maps.Values(f.parts))
	return slices.AppendSeq(out, maps.Values(f.nodes))
}

// versions reads an ApiVersions exchange: asked for a node and refused
// REBOOTSTRAP_REQUIRED by a shared endpoint fails that node; answered
// without error anywhere, heals it.
func (r *rule) versions(x *detectors.Exchange, resp *kmsg.ApiVersionsResponse) {
	node := int32(-1)
	if x.Req != nil {
		if req, ok := x.Req.Req.(*kmsg.ApiVersionsRequest); ok && req.Version >= 5 {
			node = req.NodeID
		}
	}
	switch resp.ErrorCode {
	case cluster.None:
		if node < 0 {
			return
		}
		for _, is := range r.shared {
			if s := is.felt.nodes[node]; s != nil {
				s.Heal(x.Resp.Time)
			}
		}
	case cluster.RebootstrapRequired:
		is := r.issueAt(x.Conn.Server)
		if is == nil {
			return
		}
		is.felt.rebootstrap++
		s := is.felt.nodes[node]
		if s == nil {
			if len(is.felt.nodes) >= maxIDs {
				is.felt.dropped++
				return
			}
			s = &spell.Spell{}
			is.felt.nodes[node] = s
		}
		s.Fail(x.Resp.Time)
		is.felt.ev.Add(detectors.EvidenceAt(x.Resp, fmt.Sprintf("ApiVersions v%d response from %s asked for node %d: REBOOTSTRAP_REQUIRED",
			x.Resp.Version, x.Conn.Server, node)))
	}
}

// ConnEvent implements detectors.ConnHook: connection attempts to a shared
// endpoint refused or unanswered, and connections to it that open.
func (r *rule) ConnEvent(_ *detectors.Pass, e *detectors.ConnEvent) {
	is := r.issueAt(e.Server)
	if is == nil {
		return
	}
	switch e.Kind {
	case flows.ConnRefused, flows.ConnUnanswered:
		is.felt.connect.Fail(e.Time)
		is.felt.attempts++
		is.felt.ev.Add(detectors.Evidence{File: e.File, Packet: e.Packet,
			What: fmt.Sprintf("connection attempt from %s to %s %s", e.Client, e.Server, e.Kind)})
	case flows.ConnOpened:
		is.felt.connect.Heal(e.Time)
	}
}

// answers reads a Produce or Fetch response: partitions refused
// NOT_LEADER_OR_FOLLOWER by a shared endpoint fail, partitions answered
// without error anywhere heal.
func (r *rule) answers(x *detectors.Exchange) {
	is := r.issueAt(x.Conn.Server)
	if is == nil && r.openParts == 0 {
		return
	}
	at := x.Resp.Time
	for _, a := range x.Answers() {
		k := a.Partition
		switch {
		case a.ErrorCode == 0 && r.openParts > 0:
			r.heal(k, at)
		case a.ErrorCode == cluster.NotLeaderOrFollower && is != nil:
			is.felt.fail(r, x, k, a)
		}
	}
}

// fail counts partition k refused at the endpoint by the response of x.
func (f *felt) fail(r *rule, x *detectors.Exchange, k cluster.Partition, a decode.PartitionAnswer) {
	s := f.parts[k]
	if s == nil {
		if len(f.parts) >= maxParts {
			f.dropped++
			return
		}
		s = &spell.Spell{}
		f.parts[k] = s
	}
	if !s.Open {
		r.openParts++
	}
	s.Fail(x.Resp.Time)
	f.refused++
	f.ev.Add(detectors.EvidenceAt(x.Resp, fmt.Sprintf("%s v%d response from %s refuses %s partition %d: NOT_LEADER_OR_FOLLOWER",
		x.Resp.Name(), x.Resp.Version, x.Conn.Server, x.Resp.TopicName(a.Topic, a.TopicID), a.Num)))
}

// heal ends the spells of partition k, at whichever endpoint refused it.
func (r *rule) heal(k cluster.Partition, at time.Time) {
	for _, is := range r.shared {
		if s := is.felt.parts[k]; s != nil && s.Heal(at) {
			r.openParts--
		}
	}
}

// served reads the responses that say whether clients were served, and
// reports whether resp was one.
func (r *rule) served(x *detectors.Exchange) bool {
	switch resp := x.Resp.Resp.(type) {
	case *kmsg.ProduceResponse, *kmsg.FetchResponse:
		r.answers(x)
	case *kmsg.ApiVersionsResponse:
		if len(r.shared) > 0 {
			r.versions(x, resp)
		}
	default:
		return false
	}
	return true
}
