package cluster_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
)

// names is a run that learned one topic's name from Metadata.
type names map[[16]byte]string

func (n names) TopicName(id [16]byte) (string, bool) { s, ok := n[id]; return s, ok }

var (
	ordersID = [16]byte{0x14, 0x65, 0xf2, 0x31}
	goneID   = [16]byte{0xde, 0xad}
	learned  = names{ordersID: "orders"}
)

// TestPartitionKey pins the one keying policy: by name when the run knows
// one, else by id; so the mixes a capture shows (a Produce v12 by name, a
// Fetch v13 by id, Metadata naming both, KRaft's log by either) are one key
// once Metadata named the id, and two ids never one key. (A policy by id
// first split a consumer's lag in two where its Fetch moved from v12 to
// v13: the report goldens of basic.pcap hold that.)
func TestPartitionKey(t *testing.T) {
	for _, tt := range []struct {
		name  string
		p     cluster.Partition
		names cluster.Names
		want  cluster.Partition
	}{
		{"by name", cluster.Partition{Topic: "orders", Num: 3}, learned, cluster.Partition{Topic: "orders", Num: 3}},
		{"by id, named by Metadata", cluster.Partition{TopicID: ordersID, Num: 3}, learned, cluster.Partition{Topic: "orders", Num: 3}},
		{"by name and id (Metadata): the name", cluster.Partition{Topic: "orders", TopicID: ordersID, Num: 3}, nil, cluster.Partition{Topic: "orders", Num: 3}},
		{"by id, not named", cluster.Partition{TopicID: goneID, Num: 1}, learned, cluster.Partition{TopicID: goneID, Num: 1}},
		{"by id, no names", cluster.Partition{TopicID: ordersID, Num: 3}, nil, cluster.Partition{TopicID: ordersID, Num: 3}},
		{"by id, a nil Nodes behind Names", cluster.Partition{TopicID: ordersID, Num: 3}, (*nilNames)(nil), cluster.Partition{TopicID: ordersID, Num: 3}},
		{"KRaft's log by id", cluster.Partition{TopicID: cluster.ClusterMetadataTopicID}, nil, cluster.Partition{Topic: "__cluster_metadata"}},
		{"KRaft's log by name", cluster.Partition{Topic: "__cluster_metadata"}, nil, cluster.Partition{Topic: "__cluster_metadata"}},
		{"neither", cluster.Partition{Num: 2}, learned, cluster.Partition{Num: 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Key(tt.names); got != tt.want {
				t.Errorf("Key = %+v, want %+v", got, tt.want)
			}
		})
	}
	// Produce v12 by name, Fetch v13 by id, Metadata by both: one partition.
	a := cluster.Partition{Topic: "orders"}.Key(learned)
	b := cluster.Partition{TopicID: ordersID}.Key(learned)
	c := cluster.Partition{Topic: "orders", TopicID: ordersID}.Key(nil)
	if a != b || b != c {
		t.Errorf("one partition keyed three ways: %+v, %+v, %+v", a, b, c)
	}
}

// TestKeyer: a Keyer keys every partition as Key does, whatever came
// before it (the same id again, another id, a name, no id), with and
// without names, and looks a topic id's name up once while the id repeats.
func TestKeyer(t *testing.T) {
	ps := []cluster.Partition{
		{Topic: "orders", Num: 3}, {TopicID: ordersID, Num: 3}, {TopicID: ordersID, Num: 4},
		{Topic: "orders", TopicID: ordersID, Num: 1}, {TopicID: goneID, Num: 1}, {TopicID: ordersID, Num: 0},
		{TopicID: cluster.ClusterMetadataTopicID}, {Topic: "__cluster_metadata"}, {Num: 2}, {TopicID: goneID, Num: 7},
		{Topic: "", TopicID: [16]byte{}, Num: 9},
	}
	for _, n := range []cluster.Names{learned, nil, (*nilNames)(nil), &nilNames{m: map[[16]byte]string{goneID: ""}}} {
		for first := range ps {
			k := cluster.Keyer{Names: n}
			for i := range ps {
				p := ps[(first+i)%len(ps)]
				if got, want := k.Key(p), p.Key(n); got != want {
					t.Errorf("names %v, after %d: Key(%+v) = %+v, want %+v", n, i, p, got, want)
				}
			}
		}
	}
	lookups := 0
	k := cluster.Keyer{Names: countingNames{learned, &lookups}}
	for i := range 10 {
		k.Key(cluster.Partition{TopicID: ordersID, Num: int32(i)})
		k.Key(cluster.Partition{Topic: "orders", Num: int32(i)}) // a name needs no look-up
	}
	if lookups != 1 {
		t.Errorf("10 partitions of one id looked up %d times, want once", lookups)
	}
}

type countingNames struct {
	names
	n *int
}

func (c countingNames) TopicName(id [16]byte) (string, bool) { *c.n++; return c.names.TopicName(id) }

type nilNames struct{ m map[[16]byte]string }

func (n *nilNames) TopicName(id [16]byte) (string, bool) {
	if n == nil {
		return "", false
	}
	s, ok := n.m[id]
	return s, ok
}

// TestPartitionLabel: a partition is shown as kafka-topics.sh shows it,
// an id by the name learned since it was keyed, else as Kafka prints ids.
func TestPartitionLabel(t *testing.T) {
	for _, tt := range []struct {
		name  string
		p     cluster.Partition
		names cluster.Names
		want  string
	}{
		{"name", cluster.Partition{Topic: "orders", Num: 3}, nil, "orders-3"},
		{"id learned later", cluster.Partition{TopicID: ordersID, Num: 3}, learned, "orders-3"},
		{"id never named", cluster.Partition{TopicID: goneID, Num: 1}, learned, "3q0AAAAAAAAAAAAAAAAAAA-1"},
		{"KRaft's log", cluster.Partition{TopicID: cluster.ClusterMetadataTopicID}, nil, "__cluster_metadata-0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Label(tt.names); got != tt.want {
				t.Errorf("Label = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOrder(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.1")
	b := netip.MustParseAddr("10.0.0.2")
	if !(cluster.Client{Host: a, ID: "z"}).Less(cluster.Client{Host: b, ID: "a"}) {
		t.Error("clients are not ordered by host first")
	}
	if !(cluster.Client{Host: a, ID: "a"}).Less(cluster.Client{Host: a, ID: "b"}) {
		t.Error("clients of one host are not ordered by id")
	}
	if got := cluster.ClientAt(netip.MustParseAddr("::ffff:10.0.0.1"), "app"); got != (cluster.Client{Host: a, ID: "app"}) {
		t.Errorf("ClientAt keeps the IPv4-mapped form: %+v", got)
	}
	ps := []cluster.Partition{{TopicID: goneID}, {Topic: "a", Num: 2}, {Topic: "a", Num: 10}, {Topic: "b"}}
	for i := 1; i < len(ps); i++ {
		if !ps[i-1].Less(ps[i]) && ps[i-1] != ps[i] {
			t.Errorf("%+v not before %+v", ps[i-1], ps[i])
		}
	}
}

func TestSeenLess(t *testing.T) {
	t0 := time.Unix(100, 0)
	a := cluster.Client{Host: netip.MustParseAddr("10.0.0.2"), ID: "a"}
	b := cluster.Client{Host: netip.MustParseAddr("10.0.0.1"), ID: "b"}
	a1 := cluster.Client{Host: netip.MustParseAddr("10.0.0.1"), ID: "a"}
	for _, c := range []struct {
		name string
		x    cluster.Client
		xt   time.Time
		y    cluster.Client
		yt   time.Time
		less bool
	}{
		{"earlier first", b, t0, a, t0.Add(time.Millisecond), true},
		{"later first", a, t0.Add(time.Millisecond), b, t0, false},
		{"same time: id before host", a, t0, b, t0, true},
		{"same time and id: host", a1, t0, a, t0, true},
		{"equal", a, t0, a, t0, false},
	} {
		if got := cluster.SeenLess(c.x, c.xt, c.y, c.yt); got != c.less {
			t.Errorf("%s: SeenLess = %v, want %v", c.name, got, c.less)
		}
	}
}
