package flows

// SetQuietBounds sets this analyzer's bounds on the quiet connections it
// remembers, listed (maxIdle) and dropped from the table (maxGone), for the
// tests of flows_test: the real ones take hundreds of thousands of
// connections to reach.
func (a *Analyzer) SetQuietBounds(listed, unlisted int) { a.maxIdle, a.maxGone = listed, unlisted }
