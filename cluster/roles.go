package cluster

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Role is what a request is for. One connection can carry several roles
// (a consumer's connection carries metadata and fetches).
type Role uint8

// Roles, in the order reports list them.
const (
	RoleNone         Role = iota // ApiVersions, SASL: connection set-up
	RoleLiveness                 // broker -> controller: BrokerRegistration, BrokerHeartbeat
	RoleRaft                     // KRaft: Fetch of __cluster_metadata, Vote, BeginQuorumEpoch, ...
	RoleReplication              // inter-broker replica fetches
	RoleConsumer                 // client fetches, ListOffsets
	RoleProducer                 // Produce, InitProducerId
	RoleGroup                    // group coordination
	RoleTransactions             // transaction coordination
	RoleAdmin                    // everything administrative
	RoleMetadata                 // Metadata, DescribeCluster: bootstrap and refresh
	numRoles
)

var roleNames = [numRoles]string{"", "liveness", "raft", "replication", "consumer", "producer", "group", "transactions", "admin", "metadata"}

func (r Role) String() string {
	if r < numRoles {
		return roleNames[r]
	}
	return "?"
}

// RoleOf classifies a request by API key, client id and request fields
// (req nil: a request that could not be decoded, classified by key and
// client id).
func RoleOf(key int16, clientID string, req kmsg.Request) Role {
	id := clientID
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return RoleNone
	case kmsg.BrokerRegistration, kmsg.BrokerHeartbeat, kmsg.UnregisterBroker, kmsg.ControllerRegistration:
		return RoleLiveness
	case kmsg.Vote, kmsg.BeginQuorumEpoch, kmsg.EndQuorumEpoch, kmsg.DescribeQuorum, kmsg.FetchSnapshot,
		kmsg.AddRaftVoter, kmsg.RemoveRaftVoter, kmsg.UpdateRaftVoter:
		return RoleRaft
	case kmsg.Fetch:
		if r, ok := req.(*kmsg.FetchRequest); ok {
			for _, t := range r.Topics {
				if t.Topic == ClusterMetadataTopic || t.TopicID == ClusterMetadataTopicID {
					return RoleRaft
				}
			}
			if strings.HasPrefix(id, "raft-client-") {
				return RoleRaft
			}
			if id, _ := FetchReplica(r); id >= 0 {
				return RoleReplication
			}
			return RoleConsumer
		}
		switch {
		case strings.HasPrefix(id, "raft-client-"):
			return RoleRaft
		case isFetcherID(id):
			return RoleReplication
		}
		return RoleConsumer
	case kmsg.OffsetForLeaderEpoch:
		if r, ok := req.(*kmsg.OffsetForLeaderEpochRequest); ok && r.ReplicaID >= 0 || isFetcherID(id) {
			return RoleReplication
		}
		return RoleConsumer
	case kmsg.ListOffsets:
		if r, ok := req.(*kmsg.ListOffsetsRequest); ok && r.ReplicaID >= 0 {
			return RoleReplication
		}
		return RoleConsumer
	case kmsg.Produce:
		return RoleProducer
	case kmsg.InitProducerID:
		if r, ok := req.(*kmsg.InitProducerIDRequest); ok && r.TransactionalID != nil {
			return RoleTransactions
		}
		return RoleProducer
	case kmsg.FindCoordinator:
		if r, ok := req.(*kmsg.FindCoordinatorRequest); ok && r.CoordinatorType == 1 {
			return RoleTransactions
		}
		return RoleGroup
	case kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup, kmsg.OffsetCommit, kmsg.OffsetFetch,
		kmsg.ConsumerGroupHeartbeat, kmsg.ShareGroupHeartbeat, kmsg.StreamsGroupHeartbeat:
		return RoleGroup
	case kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn, kmsg.TxnOffsetCommit, kmsg.WriteTxnMarkers,
		kmsg.DescribeTransactions, kmsg.ListTransactions:
		return RoleTransactions
	case kmsg.Metadata, kmsg.DescribeCluster:
		return RoleMetadata
	}
	return RoleAdmin
}

// RoleSet is the roles seen on a connection, with request counts.
type RoleSet [numRoles]int

// List returns the roles present, in the canonical order.
func (rs *RoleSet) List() []Role {
	var out []Role
	for r := RoleLiveness; r < numRoles; r++ {
		if rs[r] > 0 {
			out = append(out, r)
		}
	}
	return out
}

// Fetcher is the node a request fetches for: a follower or a KRaft voter
// fetching, or a broker asking for its replicas' epochs. The zero value
// is no node (a consumer's request, or one that is no fetch).
type Fetcher struct {
	// Node is the node, when How is not NoFetcher.
	Node int32
	// How says how the request names Node.
	How FetcherHow
	// Epoch is the broker epoch a Fetch v15+ declares, -1 otherwise.
	Epoch int64
}

// FetcherHow is how a request names the node it fetches for.
type FetcherHow uint8

// How requests name their fetcher.
const (
	NoFetcher FetcherHow = iota
	// Declared: the Fetch declares it (ReplicaState from v15, ReplicaID
	// before).
	Declared
	// ByClientID: only its client id names it ("broker-3-fetcher-0",
	// "raft-client-68").
	ByClientID
)

// ID is the node fetched for, -1 for none.
func (f Fetcher) ID() int32 {
	if f.How == NoFetcher {
		return -1
	}
	return f.Node
}

// FetcherOf is the node a request fetches for: the replica a Fetch
// declares, or else the node its client id names; none for a consumer, or
// for a request that is not a Fetch and whose client id names none.
func FetcherOf(clientID string, req kmsg.Request) Fetcher {
	if r, ok := req.(*kmsg.FetchRequest); ok {
		if id, epoch := FetchReplica(r); id >= 0 {
			return Fetcher{Node: id, How: Declared, Epoch: epoch}
		}
	}
	if id, ok := FetcherNode(clientID); ok {
		return Fetcher{Node: id, How: ByClientID, Epoch: -1}
	}
	return Fetcher{}
}

// FetchReplica returns the replica a Fetch request declares itself to be
// (ReplicaState from v15, ReplicaID before) and its broker epoch (-1
// before v15); the id is -1 for a consumer.
func FetchReplica(r *kmsg.FetchRequest) (id int32, epoch int64) {
	if r.Version >= 15 {
		return r.ReplicaState.ID, r.ReplicaState.Epoch
	}
	return r.ReplicaID, -1
}

// isFetcherID reports a replica fetcher client id, "broker-<id>-fetcher-<n>".
func isFetcherID(id string) bool {
	_, ok := FetcherNode(id)
	return ok
}

// FetcherNode returns the node id in a replica fetcher client id
// ("broker-3-fetcher-0") or a raft client id ("raft-client-68").
func FetcherNode(id string) (int32, bool) {
	switch {
	case strings.HasPrefix(id, "broker-"):
		rest := id[len("broker-"):]
		n, tail, ok := leadingInt(rest)
		return n, ok && strings.HasPrefix(tail, "-fetcher-")
	case strings.HasPrefix(id, "raft-client-"):
		n, tail, ok := leadingInt(id[len("raft-client-"):])
		return n, ok && tail == ""
	}
	return 0, false
}

func leadingInt(s string) (int32, string, bool) {
	i := 0
	var n int64
	for i < len(s) && s[i] >= '0' && s[i] <= '9' && i < 10 {
		n = n*10 + int64(s[i]-'0')
		i++
	}
	if i == 0 || n > 1<<31-1 {
		return 0, s, false
	}
	return int32(n), s[i:], true
}

// GroupOf returns the consumer group a request names (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and KIP-848's
// ConsumerGroupHeartbeat: KIP-848 consumers never join), "" for others.
func GroupOf(req kmsg.Request) string {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return r.Group
	case *kmsg.SyncGroupRequest:
		return r.Group
	case *kmsg.HeartbeatRequest:
		return r.Group
	case *kmsg.LeaveGroupRequest:
		return r.Group
	case *kmsg.OffsetCommitRequest:
		return r.Group
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return r.Group
	}
	return ""
}

// ParseRole is the Role a shipped record names ("" is RoleNone).
func ParseRole(s string) Role {
	if r := slices.Index(roleNames[:], s); r > 0 {
		return Role(r)
	}
	return RoleNone
}
