package detectors

// Sort orders findings as a Set lists them: most severe first, then by
// time and rule (a correlator joining the findings of several Sets).
func Sort(fs []Finding) { sortFindings(fs) }
