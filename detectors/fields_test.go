package detectors_test

import (
	"reflect"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
)

// TestFieldsOfOptional: a pointer field is an optional value: there with
// its value, even zero (node 0, epoch 0), when set; absent when nil.
func TestFieldsOfOptional(t *testing.T) {
	type detail struct {
		Topic    string `json:"topic"`
		LeaderID *int32 `json:"leader_id,omitempty"`
		Epoch    *int32 `json:"epoch,omitempty"`
		MD5      string `json:"md5,omitempty"`
		hidden   int
	}
	zero := int32(0)
	got := detectors.FieldsOf(&detail{Topic: "t", LeaderID: &zero, hidden: 1})
	want := map[string]any{"topic": "t", "leader_id": int32(0)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields %#v, want %#v", got, want)
	}
}
