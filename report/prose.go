package report

// A detector's prose (a finding's summary, evidence, explanation and next
// steps) quotes wire strings with %q, which has already escaped them:
// `client "[\"region1\"]region"`. Clean would escape those backslashes
// again (`client "[\\"region1\\"]region"`, issue 16). The prose cleaners
// escape what a terminal could act on as Clean does, and leave
// backslashes as they are.

// CleanProse is Clean for a detector's one-line prose (a summary, an
// evidence line): escaped as Clean escapes, cut only past maxText, as
// CleanText (a summary is read whole; renderers wrap it).
func CleanProse(s string) string { return clean(s, maxText, false) }

// CleanProseText is CleanText for a detector's paragraphs.
func CleanProseText(s string) string { return clean(s, maxText, false) }
