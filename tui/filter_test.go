package tui

import (
	"testing"

	"github.com/kfsniff/kfsniff/cluster"
)

func TestFilter(t *testing.T) {
	fetch := Exchange{Conn: 1, Key: 1, Version: 17, ClientID: "raft-client-68", Topic: "__cluster_metadata",
		Role: cluster.RoleRaft, ErrorCode: 6, Errors: 1}
	hb := Exchange{Conn: 4, Key: 63, Version: 1, ClientID: "68", Role: cluster.RoleLiveness}
	produce := Exchange{Conn: 7, Key: 0, Version: 9, ClientID: "orders-producer", Topic: "orders", Role: cluster.RoleProducer, State: Unanswered}
	snapshot := Exchange{Conn: 2, Key: 59, Version: 0, ClientID: "raft-client-3", Role: cluster.RoleRaft}
	all := []Exchange{fetch, hb, produce, snapshot}
	for _, tc := range []struct {
		filter string
		want   []int // indexes into all
	}{
		{"", []int{0, 1, 2, 3}},
		{"Fetch", []int{0, 3}},
		{"fetch", []int{0, 3}},
		{"api:=Fetch", []int{0}},
		{"api:heartbeat", []int{1}},
		{"client:raft-", []int{0, 3}},
		{"raft-client-68", []int{0}},
		{"topic:orders", []int{2}},
		{"orders", []int{2}},
		{"error:NOT_LEADER", []int{0}},
		{"NOT_LEADER_OR_FOLLOWER", []int{0}},
		{"errors", []int{0}},
		{"error:", []int{0}},
		{"role:raft", []int{0, 3}},
		{"conn:4", []int{1}},
		{"conn:#7", []int{2}},
		{"unanswered", []int{2}},
		{"-Fetch", []int{1, 2}},
		{"raft -errors", []int{3}},
		{"Fetch client:68", []int{0}},
		{"10.0.0.1:9092", nil},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			f := ParseFilter(tc.filter)
			var got []int
			for i := range all {
				if f.Match(&all[i]) {
					got = append(got, i)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%q matches %v, want %v", tc.filter, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("%q matches %v, want %v", tc.filter, got, tc.want)
				}
			}
		})
	}
}

func TestFilterNoAllocs(t *testing.T) {
	x := Exchange{Key: 1, ClientID: "raft-client-68", Topic: "__cluster_metadata", ErrorCode: 6, Errors: 1}
	f := ParseFilter("fetch client:RAFT error:not_leader -topic:orders")
	if !f.Match(&x) {
		t.Fatal("no match")
	}
	if n := testing.AllocsPerRun(1000, func() { f.Match(&x) }); n != 0 {
		t.Errorf("%.0f allocations per match, want 0 (the view filters 10,000 exchanges a refresh)", n)
	}
}
