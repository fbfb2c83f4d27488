package cluster

import (
	"net/netip"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNodesLearnVoters: BeginQuorumEpoch and Vote v1 name the voter they
// are sent to (KIP-853), so the server of such a request is that node. In
// Apache Kafka 4.1.1's healthy cluster (fixtures/pcaps/kafka) the leader's
// BeginQuorumEpoch to each voter is the only traffic to a voter that no one
// fetches from; before, those servers were unnamed. v0 has no voter id.
func TestNodesLearnVoters(t *testing.T) {
	n := NewNodes()
	host := netip.MustParseAddr("10.77.0.11")
	learn := func(server string, req kmsg.Request) {
		n.LearnRequest(host, netip.MustParseAddrPort(server), "raft-client-1001", Fetcher{}, req)
	}
	begin := kmsg.NewPtrBeginQuorumEpochRequest()
	begin.Version, begin.VoterID = 1, 1002
	learn("10.77.0.12:9093", begin)
	vote := kmsg.NewPtrVoteRequest()
	vote.Version, vote.VoterID = 2, 1003
	learn("10.77.0.13:9093", vote)
	old := kmsg.NewPtrVoteRequest()
	old.Version, old.VoterID = 0, 1004 // v0 carries no voter id (the field stays at its default)
	learn("10.77.0.14:9093", old)
	for server, want := range map[string]int32{"10.77.0.12:9093": 1002, "10.77.0.13:9093": 1003, "10.77.0.14:9093": -1} {
		if got := n.Server(netip.MustParseAddrPort(server)); got != want {
			t.Errorf("server %s is node %d, want %d", server, got, want)
		}
	}
	if got := n.Host(netip.MustParseAddr("10.77.0.11")); got != 1001 {
		t.Errorf("the sender's host is node %d, want 1001 (its raft client id)", got)
	}
}
