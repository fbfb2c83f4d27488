package cluster_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
)

func fetch(version int16, replica int32, topic string, id [16]byte) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.ReplicaID, r.ReplicaState.ID, r.ReplicaState.Epoch = version, replica, replica, 7
	r.Topics = []kmsg.FetchRequestTopic{{Topic: topic, TopicID: id}}
	return r
}

// TestRoleAndFetcher: what a request is for, and the node it fetches for,
// as flows stamps them once on each request.
func TestRoleAndFetcher(t *testing.T) {
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = "billing"
	for _, tt := range []struct {
		name     string
		clientID string
		req      kmsg.Request
		key      int16
		role     cluster.Role
		fetcher  cluster.Fetcher
		group    string
	}{
		{"consumer fetch", "app", fetch(12, -1, "orders", [16]byte{}), 1, cluster.RoleConsumer, cluster.Fetcher{}, ""},
		{"follower fetch v11", "broker-2-fetcher-0", fetch(11, 2, "orders", [16]byte{}), 1, cluster.RoleReplication,
			cluster.Fetcher{Node: 2, How: cluster.Declared, Epoch: -1}, ""},
		{"follower fetch v15 declares its epoch", "broker-2-fetcher-0", fetch(15, 2, "", ordersID), 1, cluster.RoleReplication,
			cluster.Fetcher{Node: 2, How: cluster.Declared, Epoch: 7}, ""},
		{"voter fetch by id", "raft-client-3", fetch(17, 3, "", cluster.ClusterMetadataTopicID), 1, cluster.RoleRaft,
			cluster.Fetcher{Node: 3, How: cluster.Declared, Epoch: 7}, ""},
		{"undecoded fetch by client id", "broker-4-fetcher-1", nil, 1, cluster.RoleReplication,
			cluster.Fetcher{Node: 4, How: cluster.ByClientID, Epoch: -1}, ""},
		{"node 0 is a node", "broker-0-fetcher-0", nil, 23, cluster.RoleReplication,
			cluster.Fetcher{Node: 0, How: cluster.ByClientID, Epoch: -1}, ""},
		{"commit names its group", "app", commit, 8, cluster.RoleGroup, cluster.Fetcher{}, "billing"},
		{"not a fetcher id", "broker-x-fetcher-0", nil, 3, cluster.RoleMetadata, cluster.Fetcher{}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := cluster.RoleOf(tt.key, tt.clientID, tt.req); got != tt.role {
				t.Errorf("RoleOf = %v, want %v", got, tt.role)
			}
			got := cluster.FetcherOf(tt.clientID, tt.req)
			if got != tt.fetcher {
				t.Errorf("FetcherOf = %+v, want %+v", got, tt.fetcher)
			}
			if want := map[bool]int32{true: tt.fetcher.Node, false: -1}[tt.fetcher.How != cluster.NoFetcher]; got.ID() != want {
				t.Errorf("ID = %d, want %d", got.ID(), want)
			}
			if g := cluster.GroupOf(tt.req); g != tt.group {
				t.Errorf("GroupOf = %q, want %q", g, tt.group)
			}
		})
	}
	if cluster.ParseRole("replication") != cluster.RoleReplication || cluster.ParseRole("") != cluster.RoleNone {
		t.Error("ParseRole does not read back Role.String")
	}
}
