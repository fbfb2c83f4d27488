package cluster

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNodesBounds: what the wire can multiply in the node tables is
// bounded and what is left out is counted: node ids at one endpoint (the
// 160,000 brokers of one Metadata response at one host:port took 53 s
// when every insert scanned and sorted), brokers per response, endpoints
// and topic ids in all.
func TestNodesBounds(t *testing.T) {
	n := NewNodes()
	resp := kmsg.NewPtrMetadataResponse()
	const brokers = 160_000
	for i := range brokers {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = int32(brokers-i), "10.0.0.2", 9092 // descending: each insert at the front
		resp.Brokers = append(resp.Brokers, b)
	}
	start := time.Now()
	n.LearnResponse(resp)
	took := time.Since(start)
	ids := n.AtEndpoint("10.0.0.2:9092")
	want := make([]int32, maxIDs)
	for i := range want {
		want[i] = int32(brokers - maxIDs + 1 + i) // the first 64 seen
	}
	if !slices.Equal(ids, want) {
		t.Errorf("ids at the endpoint %v, want the first %d seen, sorted", ids, maxIDs)
	}
	d := n.Dropped()
	if d.Brokers != brokers-MaxBrokersPerResponse || d.IDs != MaxBrokersPerResponse-maxIDs {
		t.Errorf("dropped %+v, want %d brokers and %d ids", d, brokers-MaxBrokersPerResponse, MaxBrokersPerResponse-maxIDs)
	}
	t.Logf("one response of %d brokers learned in %v", brokers, took)

	// The same id again is no new entry and no drop.
	n.learnEndpoint(want[0], "10.0.0.2", 9092)
	if n.Dropped().IDs != d.IDs {
		t.Errorf("an id already there counted as dropped")
	}

	// Endpoints in all, and topic ids.
	n = NewNodes()
	for i := range maxNodeEntries + 10 {
		n.learnEndpoint(int32(i%100), fmt.Sprintf("h%d", i), 9092)
	}
	if len(n.Endpoints()) != maxNodeEntries || n.Dropped().Endpoints != 10 {
		t.Errorf("%d endpoints, %d dropped; want %d and 10", len(n.Endpoints()), n.Dropped().Endpoints, maxNodeEntries)
	}
	resp = kmsg.NewPtrMetadataResponse()
	for i := range maxNodeEntries + 5 {
		tp := kmsg.NewMetadataResponseTopic()
		tp.Topic = kmsg.StringPtr(fmt.Sprint("t", i))
		tp.TopicID[15], tp.TopicID[14], tp.TopicID[13] = byte(i), byte(i>>8), byte(i>>16)
		tp.TopicID[0] = 1
		resp.Topics = append(resp.Topics, tp)
	}
	n.LearnResponse(resp)
	if len(n.topics) != maxNodeEntries || n.Dropped().Topics != 5 {
		t.Errorf("%d topic ids, %d dropped; want %d and 5", len(n.topics), n.Dropped().Topics, maxNodeEntries)
	}
}

// TestNodesInsertCost: the ids of a client host are bounded too, kept
// sorted, and inserting more allocates nothing once they are full.
func TestNodesInsertCost(t *testing.T) {
	n := NewNodes()
	allocs := testing.AllocsPerRun(20, func() {
		for i := range 10_000 {
			n.learnHost(netipFrom(i%4), int32((i*7919)%100_000))
		}
	})
	if allocs > 50 {
		t.Errorf("%.0f allocations per 10,000 inserts at 4 hosts: the ids of a host are not bounded", allocs)
	}
	for h := range 4 {
		if ids := n.byHost[netipFrom(h)]; len(ids) != maxIDs || !slices.IsSorted(ids) {
			t.Errorf("host %d: %d ids, sorted %v; want %d sorted", h, len(ids), slices.IsSorted(ids), maxIDs)
		}
	}
}

func netipFrom(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 1, 0, byte(i)}) }

// TestNodesRelearnFree: the same NOT_LEADER_OR_FOLLOWER answer, naming its
// leader's endpoint, arrives thousands of times in a retry storm; once the
// endpoint is known, learning it again makes no string, and the endpoint
// and its node stay as learned (IPv4 name, IPv6 address).
func TestNodesRelearnFree(t *testing.T) {
	n := NewNodes()
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 10
	resp.Brokers = []kmsg.ProduceResponseBroker{{NodeID: 1, Host: "kafka-1.example", Port: 9092}, {NodeID: 2, Host: "fe80::2", Port: 9093}}
	n.LearnResponse(resp)
	if allocs := testing.AllocsPerRun(100, func() { n.LearnResponse(resp) }); allocs != 0 {
		t.Errorf("%.1f allocations to learn a known answer again, want 0", allocs)
	}
	for ep, id := range map[string]int32{"kafka-1.example:9092": 1, "[fe80::2]:9093": 2} {
		if ids := n.AtEndpoint(ep); !slices.Equal(ids, []int32{id}) {
			t.Errorf("%s: nodes %v, want [%d]", ep, ids, id)
		}
		if eps := n.EndpointsOf(id); !slices.Equal(eps, []string{ep}) {
			t.Errorf("node %d: endpoints %v, want [%s]", id, eps, ep)
		}
	}
}
