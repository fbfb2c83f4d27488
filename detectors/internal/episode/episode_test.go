package episode_test

import (
	"fmt"
	"testing"

	"github.com/kfsniff/kfsniff/detectors/internal/episode"
)

// run is an episode of a client ("a", "b") on a partition: key "a/0".
type run struct {
	key  string
	n    int64
	open bool // Qualifies was last asked about it open
}

func table(max int) *episode.Table[string, string, run] {
	return episode.New(episode.Rule[string, string, run]{
		Max:    max,
		Client: func(k string) string { return k[:1] },
		Size:   func(r *run) int64 { return r.n },
		// Three or more qualify; open ones from two.
		Qualifies: func(r *run, open bool) bool { r.open = open; return r.n >= 3 || open && r.n >= 2 },
	})
}

// report lists what would be reported as key:size, open ones marked.
func report(t *episode.Table[string, string, run]) string {
	var out []string
	for _, k := range t.Report(func(a, b *run) bool { return a.key < b.key }) {
		s := fmt.Sprintf("%s:%d", k.E.key, k.E.n)
		if k.Open {
			s += "(open)"
		}
		out = append(out, s)
	}
	return fmt.Sprint(out)
}

func TestTable(t *testing.T) {
	tb := table(3)
	start := func(k string, n int64) *run {
		r := &run{key: k, n: n}
		if !tb.Start(k, r) {
			t.Fatalf("%s not started", k)
		}
		return r
	}
	if !tb.Idle("a") || tb.Open("a/0") != nil {
		t.Fatal("an empty table has something open")
	}
	start("a/0", 5)
	start("a/1", 1)
	if tb.Idle("a") || !tb.Idle("b") || tb.Len() != 2 || tb.Open("a/1").n != 1 {
		t.Fatalf("after two starts for a: idle a %v, idle b %v, %d open", tb.Idle("a"), tb.Idle("b"), tb.Len())
	}
	// A short one ends unqualified: it may be reused.
	if r, ok := tb.Finish("a/1"); r == nil || ok {
		t.Errorf("a/1 of 1 finished as qualified %v", ok)
	}
	if r, ok := tb.Finish("a/1"); r != nil || ok {
		t.Error("a/1 finished twice")
	}
	if _, ok := tb.Finish("a/0"); !ok {
		t.Error("a/0 of 5 did not qualify")
	}
	if !tb.Idle("a") {
		t.Error("a has nothing open but is not idle")
	}
	// A later, smaller or equal episode of the same key does not replace
	// the larger.
	start("a/0", 5)
	tb.Finish("a/0")
	start("a/0", 4)
	if _, ok := tb.Finish("a/0"); !ok {
		t.Error("a/0 of 4 did not qualify")
	}
	if got, want := report(tb), "[a/0:5]"; got != want {
		t.Errorf("report %s, want %s", got, want)
	}
	// An open one is reported in place of the kept one only when larger,
	// and judged as open.
	r := start("a/0", 5)
	if got, want := report(tb), "[a/0:5]"; got != want || !r.open {
		t.Errorf("report with an open equal run: %s, want %s (judged open: %v)", got, want, r.open)
	}
	r.n = 6
	if got, want := report(tb), "[a/0:6(open)]"; got != want {
		t.Errorf("report with a larger open run: %s, want %s", got, want)
	}
	start("b/0", 2) // qualifies only open
	if got, want := report(tb), "[a/0:6(open) b/0:2(open)]"; got != want {
		t.Errorf("report %s, want %s", got, want)
	}
	if _, ok := tb.Finish("b/0"); ok {
		t.Error("b/0 of 2 qualified once finished")
	}
	// Report changed nothing.
	if got, want := report(tb), "[a/0:6(open)]"; got != want {
		t.Errorf("report again %s, want %s", got, want)
	}
}

// TestTableBounds: no more than Max open, and no more than Max keys kept;
// a kept key is still replaced by a larger episode when the table is full.
func TestTableBounds(t *testing.T) {
	tb := table(2)
	for i, k := range []string{"a/0", "a/1", "a/2"} {
		if ok := tb.Start(k, &run{key: k, n: 10}); ok != (i < 2) {
			t.Errorf("start %s: %v", k, ok)
		}
	}
	if tb.Len() != 2 || tb.Open("a/2") != nil {
		t.Fatalf("%d open", tb.Len())
	}
	tb.Finish("a/0")
	tb.Finish("a/1")
	tb.Start("a/2", &run{key: "a/2", n: 10})
	tb.Finish("a/2") // no room to keep a third key
	tb.Start("a/0", &run{key: "a/0", n: 11})
	tb.Finish("a/0") // replaces a kept key
	if got, want := report(tb), "[a/0:11 a/1:10]"; got != want {
		t.Errorf("report %s, want %s", got, want)
	}
}

// TestRekey: what a provisional key holds, open and finished, moves to
// its other name when that holds nothing; a client's count follows it.
func TestRekey(t *testing.T) {
	tb := episode.New(episode.Rule[string, string, run]{
		Max:         8,
		Client:      func(k string) string { return k[:1] },
		Size:        func(r *run) int64 { return r.n },
		Qualifies:   func(r *run, open bool) bool { return r.n >= 3 },
		Provisional: func(k string) bool { return k[1] == '#' }, // "a#id/0": by id
	})
	moved := func(r *run) { r.key = "a/0" }
	if tb.Rekey("a#id/0", "a/0", moved) {
		t.Fatal("moved from an empty table")
	}
	tb.Start("a#id/0", &run{key: "a#id/0", n: 4})
	tb.Finish("a#id/0")
	tb.Start("a#id/0", &run{key: "a#id/0", n: 2})
	tb.Start("b/0", &run{key: "b/0", n: 5})
	if tb.Rekey("b#id/0", "b/0", moved) {
		t.Error("moved onto a key that holds an episode")
	}
	if !tb.Rekey("a#id/0", "a/0", moved) {
		t.Fatal("nothing moved")
	}
	if tb.Open("a#id/0") != nil || tb.Open("a/0") == nil || tb.Idle("a") || tb.Len() != 2 {
		t.Fatalf("after the move: open under the id %v, under the name %v, a idle %v, %d open",
			tb.Open("a#id/0") != nil, tb.Open("a/0") != nil, tb.Idle("a"), tb.Len())
	}
	tb.Open("a/0").n = 6
	if got, want := report(tb), "[a/0:6(open) b/0:5(open)]"; got != want {
		t.Errorf("report %s, want %s", got, want)
	}
	if tb.Rekey("a#id/0", "a/0", moved) {
		t.Error("moved twice")
	}
	// Nothing provisional left: the next Rekey is a counter's test.
	tb.Start("c/0", &run{key: "c/0", n: 1})
	if tb.Rekey("c/0", "c/1", moved) {
		t.Error("moved a key that is not provisional")
	}
}
