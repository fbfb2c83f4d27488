package tui

import "testing"

// TestConnSortAllocates: sorting the connections pane allocates nothing
// per comparison. It allocated two Conn copies a comparison (about 50 MB
// of garbage a refresh of the 4,096 connections the pane may list, the
// soak's largest source of heap churn); now the swapper only.
func TestConnSortAllocates(t *testing.T) {
	c := &connContent{table: table[Conn]{rows: make([]Conn, 4096)}}
	for i := range c.rows {
		c.rows[i].ID = i + 1
		c.rows[i].Requests = (i * 7919) % 1000
	}
	for col := range connColumns {
		if connColumns[col].less == nil {
			continue // not a sort column
		}
		c.sortCol, c.desc = col, col%2 == 1
		if n := testing.AllocsPerRun(3, c.sort); n > 4 {
			t.Errorf("sorting %d rows by column %d allocates %.0f times, want at most 4", len(c.rows), col, n)
		}
	}
}
