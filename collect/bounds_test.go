package collect

import (
	"testing"

	"github.com/kfsniff/kfsniff/flows"
)

// The report names the connections table's bound when connections were
// dropped from it, and the quiet connections forgotten (counted again).
func TestBoundsNameConnectionTable(t *testing.T) {
	st := &flows.Stats{IdleForgotten: 7}
	st.Evicted.Conns = 3
	r := NewCollector().Build(nil, st, nil, nil, nil)
	if n := r.Totals.BoundsReached["connections_not_listed"]; n != 3 {
		t.Errorf("bounds_reached connections_not_listed = %d, want 3 (%v)", n, r.Totals.BoundsReached)
	}
	if n := r.Totals.BoundsReached["idle_connections_forgotten"]; n != 7 {
		t.Errorf("bounds_reached idle_connections_forgotten = %d, want 7 (%v)", n, r.Totals.BoundsReached)
	}
	none := NewCollector().Build(nil, &flows.Stats{}, nil, nil, nil)
	if len(none.Totals.BoundsReached) != 0 {
		t.Errorf("bounds_reached without any: %v", none.Totals.BoundsReached)
	}
}
