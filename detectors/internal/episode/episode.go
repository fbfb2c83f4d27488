// Package episode keeps a rule's episodes: unbroken runs of something
// wrong (a client refused by a partition's non-leaders, a fetcher stuck at
// one offset, a broker whose raft fetches fail), at most one open per key,
// and per key the largest finished one that qualified, so that a loop that
// stops and starts again is reported once, at its worst.
package episode

import "sort"

// Table holds the episodes E of keys K, whose clients are C (a client's
// episodes are counted, so that a rule can skip a client with none open
// at the cost of one lookup). Both maps hold at most Max episodes.
type Table[K, C comparable, E any] struct {
	open  map[K]*E
	count map[C]int
	done  map[K]*E
	rule  Rule[K, C, E]
	// provisional counts the entries of open and done under keys
	// Rule.Provisional says may be renamed, so that Rekey costs nothing
	// while there are none.
	provisional int
}

// Rule is what a table needs to know of its rule's episodes.
type Rule[K, C comparable, E any] struct {
	// Max bounds the open episodes, and the finished ones kept.
	Max int
	// Client is the client of key k.
	Client func(k K) C
	// Size is what makes one episode larger than another (answers,
	// fetches); a later one must be strictly larger to replace a kept
	// one.
	Size func(e *E) int64
	// Qualifies says whether e is worth reporting; open says it is still
	// open (at the end of the capture).
	Qualifies func(e *E, open bool) bool
	// Provisional, if set, says that k is a name that may give way to
	// another (Rekey): a partition keyed by its topic id until a name
	// is learned for it.
	Provisional func(k K) bool
}

// New makes a table.
func New[K, C comparable, E any](r Rule[K, C, E]) *Table[K, C, E] {
	return &Table[K, C, E]{open: make(map[K]*E), count: make(map[C]int), done: make(map[K]*E), rule: r}
}

// Open returns k's open episode, or nil.
func (t *Table[K, C, E]) Open(k K) *E {
	if len(t.open) == 0 {
		return nil
	}
	return t.open[k]
}

// Len is how many episodes are open.
func (t *Table[K, C, E]) Len() int { return len(t.open) }

// Idle reports that client c has no episode open.
func (t *Table[K, C, E]) Idle(c C) bool { return len(t.open) == 0 || t.count[c] == 0 }

// Start opens e as k's episode (k has none open), unless the table is
// full: then it reports false and e is not kept.
func (t *Table[K, C, E]) Start(k K, e *E) bool {
	if len(t.open) >= t.rule.Max {
		return false
	}
	t.open[k] = e
	t.count[t.rule.Client(k)]++
	t.counted(k, 1)
	return true
}

// counted adds n to the provisional entries if k is provisional.
func (t *Table[K, C, E]) counted(k K, n int) {
	if t.rule.Provisional != nil && t.rule.Provisional(k) {
		t.provisional += n
	}
}

// Rekey moves what provisional key from holds, its open episode and the
// finished one kept, to key to, when to holds neither: a key learned
// later to be another name of from. moved is called for each episode
// moved (one may hold its key). It reports whether anything moved.
func (t *Table[K, C, E]) Rekey(from, to K, moved func(e *E)) bool {
	if t.provisional == 0 {
		return false
	}
	_, toOpen := t.open[to]
	_, toDone := t.done[to]
	if toOpen || toDone {
		return false
	}
	e, isOpen := t.open[from]
	d, isDone := t.done[from]
	if !isOpen && !isDone {
		return false
	}
	if isOpen {
		delete(t.open, from)
		t.counted(from, -1)
		c := t.rule.Client(from)
		if t.count[c]--; t.count[c] <= 0 {
			delete(t.count, c)
		}
		t.open[to] = e
		t.count[t.rule.Client(to)]++
		t.counted(to, 1)
		moved(e)
	}
	if isDone {
		delete(t.done, from)
		t.counted(from, -1)
		t.done[to] = d
		t.counted(to, 1)
		if d != e {
			moved(d)
		}
	}
	return true
}

// Finish ends k's open episode, if any, keeping it if it qualifies and is
// larger than the one kept for k (if there is room for a new key). It
// returns the episode and whether it qualified: one that did not is
// referenced by nothing and may be reused.
func (t *Table[K, C, E]) Finish(k K) (e *E, qualified bool) {
	e = t.open[k]
	if e == nil {
		return nil, false
	}
	delete(t.open, k)
	t.counted(k, -1)
	c := t.rule.Client(k)
	if t.count[c]--; t.count[c] <= 0 {
		delete(t.count, c)
	}
	if !t.rule.Qualifies(e, false) {
		return e, false
	}
	old, ok := t.done[k]
	if ok && t.rule.Size(old) >= t.rule.Size(e) {
		return e, true
	}
	if !ok && len(t.done) < t.rule.Max {
		t.counted(k, 1)
	}
	if ok || len(t.done) < t.rule.Max {
		t.done[k] = e
	}
	return e, true
}

// Kept is an episode to report.
type Kept[E any] struct {
	E    *E
	Open bool // still open at the end of the capture
}

// Report returns, per key, the larger of the finished episode kept and the
// open one if it qualifies (the finished one when they are as large),
// ordered by less. It changes nothing: it may be called while the capture
// runs.
func (t *Table[K, C, E]) Report(less func(a, b *E) bool) []Kept[E] {
	var out []Kept[E]
	for k, e := range t.done {
		if open := t.open[k]; open != nil && t.rule.Qualifies(open, true) && t.rule.Size(open) > t.rule.Size(e) {
			continue
		}
		out = append(out, Kept[E]{E: e})
	}
	for k, e := range t.open {
		if !t.rule.Qualifies(e, true) {
			continue
		}
		if old := t.done[k]; old != nil && t.rule.Size(old) >= t.rule.Size(e) {
			continue
		}
		out = append(out, Kept[E]{E: e, Open: true})
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i].E, out[j].E) })
	return out
}
