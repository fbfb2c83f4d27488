package flows

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
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

// RoleOf classifies a request by API key, client id and request fields.
// A request that could not be decoded is classified by key and client id.
func RoleOf(m *Message) Role {
	id := m.ClientID
	switch kmsg.Key(m.Key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return RoleNone
	case kmsg.BrokerRegistration, kmsg.BrokerHeartbeat, kmsg.UnregisterBroker, kmsg.ControllerRegistration:
		return RoleLiveness
	case kmsg.Vote, kmsg.BeginQuorumEpoch, kmsg.EndQuorumEpoch, kmsg.DescribeQuorum, kmsg.FetchSnapshot,
		kmsg.AddRaftVoter, kmsg.RemoveRaftVoter, kmsg.UpdateRaftVoter:
		return RoleRaft
	case kmsg.Fetch:
		if r, ok := m.Req.(*kmsg.FetchRequest); ok {
			for _, t := range r.Topics {
				if t.Topic == ClusterMetadataTopic || t.TopicID == decode.ClusterMetadataTopicID {
					return RoleRaft
				}
			}
			if strings.HasPrefix(id, "raft-client-") {
				return RoleRaft
			}
			if id, _ := decode.FetchReplica(r); id >= 0 {
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
		if r, ok := m.Req.(*kmsg.OffsetForLeaderEpochRequest); ok && r.ReplicaID >= 0 || isFetcherID(id) {
			return RoleReplication
		}
		return RoleConsumer
	case kmsg.ListOffsets:
		if r, ok := m.Req.(*kmsg.ListOffsetsRequest); ok && r.ReplicaID >= 0 {
			return RoleReplication
		}
		return RoleConsumer
	case kmsg.Produce:
		return RoleProducer
	case kmsg.InitProducerID:
		if r, ok := m.Req.(*kmsg.InitProducerIDRequest); ok && r.TransactionalID != nil {
			return RoleTransactions
		}
		return RoleProducer
	case kmsg.FindCoordinator:
		if r, ok := m.Req.(*kmsg.FindCoordinatorRequest); ok && r.CoordinatorType == 1 {
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

// ClusterMetadataTopic is KRaft's metadata log.
const ClusterMetadataTopic = "__cluster_metadata"

// isFetcherID reports a replica fetcher client id, "broker-<id>-fetcher-<n>".
func isFetcherID(id string) bool {
	_, ok := FetcherNode(id)
	return ok
}

// FetcherOf returns the node a Fetch request fetches for: the replica id
// the request declares (ReplicaState.ID from v15, ReplicaID before), or
// else the node named by its client id (FetcherNode); -1 for a consumer,
// or for a request that is not a Fetch and whose client id names none.
func FetcherOf(m *Message) int32 {
	if r, ok := m.Req.(*kmsg.FetchRequest); ok {
		if id, _ := decode.FetchReplica(r); id >= 0 {
			return id
		}
	}
	if id, ok := FetcherNode(m.ClientID); ok {
		return id
	}
	return -1
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
