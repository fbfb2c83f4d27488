package detectors

import (
	"iter"
	"sort"
)

// Sort orders findings as a Set lists them: most severe first, then by
// time and rule (a correlator joining the findings of several Sets).
func Sort(fs []Finding) { sortFindings(fs) }

// FindingsOf is a rule's findings: finding of each of items that keep
// holds (all of them if keep is nil), in the order less gives them.
func FindingsOf[T any](items iter.Seq[T], keep func(T) bool, less func(a, b T) bool, finding func(T) Finding) []Finding {
	var ts []T
	for t := range items {
		if keep == nil || keep(t) {
			ts = append(ts, t)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return less(ts[i], ts[j]) })
	out := make([]Finding, 0, len(ts))
	for _, t := range ts {
		out = append(out, finding(t))
	}
	return out
}
