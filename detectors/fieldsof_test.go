package detectors_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
)

// TestFieldsOfPointers: a field present only sometimes is a pointer tagged
// omitempty; present, it shows its value (zero included), as the JSON
// report and the text report print it; absent, it is left out. Fields of
// an embedded struct are the struct's own.
func TestFieldsOfPointers(t *testing.T) {
	type Where struct {
		Topic string `json:"topic"`
	}
	type prose struct {
		Said string
		told string
	}
	type detail struct {
		Where
		prose
		Leader int32    `json:"leader_id"`
		Epoch  *int32   `json:"leader_epoch,omitempty"`
		Offset *int64   `json:"fetch_offset,omitempty"`
		Fenced *bool    `json:"is_fenced,omitempty"`
		Name   string   `json:"name,omitempty"`
		List   []string `json:"servers"`
		hidden int
	}
	zero, no := int32(0), false
	got := detectors.FieldsOf(&detail{Where: Where{"orders"}, prose: prose{"a", "b"}, Leader: -1, Epoch: &zero, Fenced: &no, hidden: 3})
	want := map[string]any{"leader_id": int32(-1), "leader_epoch": int32(0), "is_fenced": false, "servers": []string(nil), "topic": "orders"}
	if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
		t.Errorf("fields %#v, want %#v", got, want)
	}
	b, _ := json.Marshal(got)
	if s := string(b); s != `{"is_fenced":false,"leader_epoch":0,"leader_id":-1,"servers":null,"topic":"orders"}` {
		t.Errorf("as JSON: %s", s)
	}
	if s := fmt.Sprint(got["leader_epoch"]); s != "0" {
		t.Errorf("as text: %s", s)
	}
}
