package legacy

// Helpers of rules that have moved to packages of their own (issue 11),
// still used by rules here.

// hasString reports whether s holds v (advertised-listener-conflict).
func hasString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
