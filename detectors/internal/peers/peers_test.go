package peers_test

import (
	"fmt"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
)

// learned is a Pass whose nodes learned brokers 1 and 2 (and topic id 9
// as "orders") from a Metadata answer, and that host 10.2.0.7 is node 7
// (its raft client id).
func learned(t *testing.T) *detectors.Pass {
	h := dt.New(t, nil)
	c := h.Conn("10.2.0.5:40000", "10.1.0.1:9092")
	req, resp := dt.MetadataLeader("orders", 1, 3, []string{"1@10.1.0.1:9092", "2@10.1.0.2:9092"}, 0)
	resp.Topics[0].TopicID = [16]byte{9}
	h.Call(c, dt.At(0), time.Millisecond, "app", req, resp)
	r := h.Conn("10.2.0.7:40000", "10.1.0.1:9093")
	h.Call(r, dt.At(time.Second), time.Millisecond, "raft-client-7", dt.RaftFetch(7, 1, 1), dt.RaftFetched(0, 1, -1, -1, "", 0, nil))
	return &detectors.Pass{Nodes: h.Nodes()}
}

// TestKeyAndLabel: a partition keyed by cluster.Partition.Key through the
// names a run's cluster.Nodes learned, and labelled as the rules print it.
func TestKeyAndLabel(t *testing.T) {
	p := learned(t)
	for _, tc := range []struct {
		ref        cluster.Partition
		str, field string
	}{
		{cluster.Partition{Topic: "logs", Num: 3}, "logs-3", "logs"},
		{cluster.Partition{TopicID: cluster.ClusterMetadataTopicID}, "__cluster_metadata-0", "__cluster_metadata"},
		{cluster.Partition{TopicID: [16]byte{9}, Num: 1}, "orders-1", "orders"},
		{cluster.Partition{TopicID: [16]byte{8}, Num: 2}, "topic id CAAAAAAAAAAAAAAAAAAAAA partition 2", "CAAAAAAAAAAAAAAAAAAAAA"},
	} {
		got := tc.ref.Key(p.Nodes)
		if peers.Label(got) != tc.str || got.TopicName(nil) != tc.field {
			t.Errorf("%+v: %q / %q, want %q / %q", tc.ref, peers.Label(got), got.TopicName(nil), tc.str, tc.field)
		}
	}
	if got := (cluster.Partition{TopicID: [16]byte{9}}).Key(nil); got.Topic != "" {
		t.Errorf("named %q with no nodes", got.Topic)
	}
}

func TestKeyOrder(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	keys := []peers.Key{
		{C: cluster.Client{Host: b, ID: "a"}, P: cluster.Partition{Topic: "t", Num: 0}},
		{C: cluster.Client{Host: a, ID: "b"}, P: cluster.Partition{Topic: "t", Num: 0}},
		{C: cluster.Client{Host: a, ID: "a"}, P: cluster.Partition{Topic: "u", Num: 0}},
		{C: cluster.Client{Host: a, ID: "a"}, P: cluster.Partition{Topic: "t", Num: 10}},
		{C: cluster.Client{Host: a, ID: "a"}, P: cluster.Partition{Topic: "t", Num: 2}},
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Less(keys[j]) })
	var got []string
	for _, k := range keys {
		got = append(got, fmt.Sprintf("%s/%s/%s", k.C.Host, k.C.ID, peers.Label(k.P)))
	}
	if want := "[10.0.0.1/a/t-2 10.0.0.1/a/t-10 10.0.0.1/a/u-0 10.0.0.1/b/t-0 10.0.0.2/a/t-0]"; fmt.Sprint(got) != want {
		t.Errorf("%v, want %s", got, want)
	}
}

func TestServers(t *testing.T) {
	var s peers.Servers
	s.Add(netip.MustParseAddrPort("[::ffff:10.1.0.2]:9092"), 1, 1) // as Kafka advertises it: unmapped
	s.Add(netip.MustParseAddrPort("10.1.0.2:9092"), 2, 0)
	s.Add(netip.MustParseAddrPort("10.1.0.1:9092"), 1, 0)
	for i := range peers.MaxServers + 3 {
		s.Add(netip.AddrPortFrom(netip.MustParseAddr("10.9.0.1"), uint16(1000+i)), 1, 0)
	}
	if s.Len() != peers.MaxServers || s.Other != 5 {
		t.Errorf("%d servers, %d other requests; want %d and 5", s.Len(), s.Other, peers.MaxServers)
	}
	if got := s.List()[0]; got.Addr.String() != "10.1.0.2:9092" || got.Requests != 3 || got.Refused != 1 {
		t.Errorf("first server %+v", got)
	}
	p := learned(t)
	if got := s.Labels(p)[:2]; fmt.Sprint(got) != "[10.9.0.1:1000 10.9.0.1:1001]" {
		t.Errorf("labels start %v", got)
	}
	if got := peers.NodeIDs(p, []*peers.Servers{&s}, 7, -1, 1); fmt.Sprint(got) != "[1 2 7]" {
		t.Errorf("nodes %v", got)
	}
	s.Reset()
	if s.Len() != 0 || s.Other != 0 || len(s.Strings()) != 0 {
		t.Error("Reset left servers")
	}
}

func TestNodes(t *testing.T) {
	p := learned(t)
	none := &detectors.Pass{}
	n1, n3 := netip.MustParseAddrPort("10.1.0.1:9092"), netip.MustParseAddrPort("10.1.0.3:9092")
	for _, tc := range []struct {
		p     *detectors.Pass
		ap    netip.AddrPort
		id    int32
		eps   []string
		is    bool
		known bool
	}{
		{p, n1, 1, nil, true, true},                           // learned from Metadata
		{p, n1, 2, nil, false, true},                          // learned as another node
		{none, n1, 1, []string{"10.1.0.1:9092"}, true, true},  // the endpoint a response gave
		{none, n3, 1, []string{"10.1.0.1:9092"}, false, true}, // an address, not this one
		{none, n3, 1, []string{"kafka-1:9092"}, false, false}, // a host name: cannot tell
		{none, n3, 1, nil, false, false},                      // nothing known
	} {
		is, known := peers.IsNode(tc.p, tc.ap, tc.id, tc.eps)
		if is != tc.is || known != tc.known {
			t.Errorf("%s node %d eps %v: %v %v, want %v %v", tc.ap, tc.id, tc.eps, is, known, tc.is, tc.known)
		}
	}
	if got := peers.Endpoints(p, 2, "kafka-2:9092"); fmt.Sprint(got) != "[kafka-2:9092 10.1.0.2:9092]" {
		t.Errorf("endpoints of 2: %v", got)
	}
	if got := peers.Endpoints(none, 2, ""); got != nil {
		t.Errorf("endpoints with nothing known: %v", got)
	}
	host := netip.MustParseAddr("10.2.0.7")
	if a, b, c := peers.NodeOf(p, 5, host), peers.NodeOf(p, -1, host), peers.NodeOf(none, -1, host); a != 5 || b != 7 || c != -1 {
		t.Errorf("node of a fetcher: %d %d %d, want 5 7 -1", a, b, c)
	}
	if got := peers.UnionIDs([]int{3, 1}, []int{2, 3}); fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("union %v", got)
	}
}
