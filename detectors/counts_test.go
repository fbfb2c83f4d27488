package detectors_test

import (
	"reflect"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
)

// TestCountsOf: a Detail's counts are its fields tagged count, zero
// included unless omitempty, a list's length, a pointer's value when set, the entries of an inline map; fields
// without the tag (prose, JSON fields) are not counts.
func TestCountsOf(t *testing.T) {
	type Shared struct {
		Conns int `count:"connections"`
	}
	type detail struct {
		Shared
		Topic    string           `json:"topic"`
		Requests int64            `count:"requests"`
		Refused  int64            `count:"refused"`
		Retries  int32            `count:"retries,omitempty"`
		Gaps     uint64           `count:"gaps,omitempty"`
		ByError  map[string]int64 `count:",inline"`
		Parts    []int32          `json:"partitions" count:"partitions,len"`
		Held     int64
		ToLeader *int64 `count:"to_leader"`
		Refused2 *int64 `count:"refused_again"`
	}
	got := detectors.CountsOf(&detail{Shared: Shared{Conns: 2}, Topic: "t", Requests: 7, Gaps: 1,
		ByError: map[string]int64{"NOT_LEADER_OR_FOLLOWER": 5}, Parts: []int32{0, 3}, Held: 9, ToLeader: new(int64)})
	want := map[string]int64{"connections": 2, "requests": 7, "refused": 0, "gaps": 1, "NOT_LEADER_OR_FOLLOWER": 5, "partitions": 2, "to_leader": 0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	if got := detectors.CountsOf(struct{ N int }{3}); got != nil {
		t.Errorf("a struct without count tags has counts %v", got)
	}
}
