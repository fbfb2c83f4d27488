package flows

// BornLen is how many stream creation times the analyzer holds (born),
// for the tests of flows_test.
func (a *Analyzer) BornLen() int { return len(a.born) }
