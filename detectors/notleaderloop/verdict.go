package notleaderloop

import (
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
)

// Shapes of a loop.
const (
	ShapeHintIgnored = "leader-not-followed"    // a leader is named, the client never goes there
	ShapeMetaSelf    = "metadata-names-refuser" // Metadata names the very broker that refuses
	ShapeHintSelf    = "leader-names-itself"    // the refusing broker names itself as leader
	ShapeUnknown     = "leader-unknown"         // nothing in the capture names the leader
	// ShapeUnreachable: a leader is named and the client did try it, but
	// its connection attempts or requests there got no answer at all. Real
	// Kafka 4.1's KRaft observer does this by design when its path to the
	// active controller is cut: after its fetch times out it asks the
	// bootstrap controllers, which answer NOT_LEADER_OR_FOLLOWER naming the
	// leader it cannot reach (fixtures/pcaps/kafka/kraft-observer-loop).
	ShapeUnreachable = "leader-unreachable"
	// ShapeShared: the leader's advertised endpoint is advertised by other
	// nodes too, so requests meant for it reach another broker, which
	// refuses them (Apache Kafka 4.1.1 registers a broker advertising
	// another's listener: fixtures/pcaps/kafka/kraft-listener-conflict).
	ShapeShared = "leader-endpoint-shared"
)

// Verdict is how a run reads once node identities are known.
type Verdict struct {
	Shape         string
	Leader, Epoch int32
	Source        string // "response" or "metadata"
	Endpoint      string
	toLeader      int64 // requests to the leader's endpoint
	FromLeader    int64 // not-leader answers from the leader itself
	Resolved      bool  // every server's identity relative to the leader is known
	// unreached: the client's attempts to reach the leader that got no
	// answer (connection attempts, requests), in and just before the run
	Unreached Unreached
	// sharedWith: the nodes advertised at the leader's endpoint
	// (ShapeShared), the leader among them
	SharedWith []int32
}

// shared marks v ShapeShared when its leader's endpoint is advertised by
// more than one node.
func shared(p *detectors.Pass, v Verdict) Verdict {
	if p.Nodes == nil || v.Endpoint == "" {
		return v
	}
	if ids := p.Nodes.AtEndpoint(v.Endpoint); len(ids) > 1 {
		v.Shape, v.SharedWith = ShapeShared, ids
	}
	return v
}

// count counts the requests to and the not-leader answers from node id
// (at endpoints eps), and whether every server is known to be it or not.
func count(p *detectors.Pass, e *run, id int32, eps []string) (to, from int64, resolved bool) {
	resolved = true
	for _, s := range e.servers.List() {
		is, known := peers.IsNode(p, s.Addr, id, eps)
		if !known {
			resolved = false
		}
		if is {
			to += s.Requests
			from += s.Refused
		}
	}
	return to, from, resolved
}

// against is the verdict's facts about leader id named by source: where
// it is, and what the client sent it.
func against(p *detectors.Pass, e *run, id, epoch int32, source, known string) Verdict {
	eps := peers.Endpoints(p, id, known)
	v := Verdict{Leader: id, Epoch: epoch, Source: source}
	if len(eps) > 0 {
		v.Endpoint = eps[0]
	}
	v.toLeader, v.FromLeader, v.Resolved = count(p, e, id, eps)
	return v
}

// verdictOf reads run e: false if it is not a loop after all (the client
// does reach the leader the answers name). minResponses is the answers
// from the named leader itself that make it the refuser.
func verdictOf(p *detectors.Pass, e *run, minResponses int64) (Verdict, bool) {
	metaOK := e.metaSeen && !e.metaUnstable && e.metaLeader >= 0
	if metaOK {
		if v := against(p, e, e.metaLeader, e.metaEpoch, "metadata", ""); v.FromLeader >= minResponses {
			v.Shape = ShapeMetaSelf
			return shared(p, v), true
		}
	}
	if e.leader >= 0 {
		v := against(p, e, e.leader, e.epoch, "response", e.leaderEP)
		switch {
		case v.FromLeader >= minResponses:
			v.Shape = ShapeHintSelf
			return shared(p, v), true
		case v.toLeader == 0:
			v.Shape = ShapeHintIgnored
			return v, true
		}
		// The client does reach the named leader: whatever goes wrong
		// there, it is not this loop.
		return v, false
	}
	if metaOK {
		v := against(p, e, e.metaLeader, e.metaEpoch, "metadata", "")
		v.Shape = ShapeHintIgnored
		return v, v.toLeader == 0
	}
	return Verdict{Shape: ShapeUnknown, Leader: -1, Epoch: -1}, true
}
