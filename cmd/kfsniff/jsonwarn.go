package main

import (
	"fmt"
	"io"

	"github.com/kfsniff/kfsniff/report"
)

// maxJSONWarnings bounds the warnings printed for values JSON could not
// hold as they were; the rest are counted.
const maxJSONWarnings = 10

// jsonWarner prints a warning for each value the JSON outputs wrote
// otherwise than it was (report/jsonsafe.go: a time clamped into years
// 0-9999, a value whose encoding failed), the first maxJSONWarnings in
// full, and a count of all at the end.
type jsonWarner struct {
	w io.Writer
	n int
}

func (j *jsonWarner) frame(err error) { j.warn(err.Error()) }

func (j *jsonWarner) report(i report.JSONIssue) { j.warn("report " + i.Error()) }

func (j *jsonWarner) warn(s string) {
	j.n++
	if j.n <= maxJSONWarnings {
		fmt.Fprintf(j.w, "kfsniff: warning: JSON: %s\n", report.Clean(s))
	}
}

// done prints the count when warnings were left out.
func (j *jsonWarner) done() {
	if j.n > maxJSONWarnings {
		fmt.Fprintf(j.w, "kfsniff: warning: JSON: %d values written otherwise than they were, %d shown\n", j.n, maxJSONWarnings)
	}
}
