package report

import "reflect"

// walk is marshal's fallback alone: what it writes for v, encodable or not.
func walk(v any) ([]byte, []JSONIssue) {
	var s safeEncoder
	return append(s.value(nil, reflect.ValueOf(v), ""), '\n'), s.issues
}

// Walk exports walk to the external tests.
var Walk = walk
