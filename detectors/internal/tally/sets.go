package tally

// Within reports whether every id of s is in o (true for an empty s):
// e.g. every replica of a partition is offline.
func (s IDs) Within(o IDs) bool {
	for id := range s {
		if !o[id] {
			return false
		}
	}
	return true
}

// Minus returns the ids of s not in o: e.g. the replicas still online.
func (s IDs) Minus(o IDs) IDs {
	out := IDs{}
	for id := range s {
		if !o[id] {
			out[id] = true
		}
	}
	return out
}

// AddAll adds every known id of ids.
func (s IDs) AddAll(ids []int32) {
	for _, id := range ids {
		s.Add(id)
	}
}
