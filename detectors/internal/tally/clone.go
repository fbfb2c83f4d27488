package tally

import (
	"maps"
	"slices"
)

// Clone returns a copy of s that can be added to without changing s, and
// the other way round (for a rule's Snapshot).
func (s *Conns) Clone() Conns {
	return Conns{Max: s.Max, More: s.More, list: slices.Clone(s.list), hosts: slices.Clone(s.hosts), servers: slices.Clone(s.servers), seen: maps.Clone(s.seen), last: s.last, hasLast: s.hasLast}
}
