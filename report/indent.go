package report

import "bytes"

// appendIndent appends to dst the valid JSON src indented as json.Indent
// (and json.Encoder's SetIndent) does it: each element and member on its own
// line after prefix and one indent per level, ": " after a key, empty
// objects and arrays kept as {} and [], whitespace between tokens dropped,
// whitespace after the value (the Encoder's newline) kept.
//
// It exists for speed: json.Indent runs the full JSON scanner over every
// byte, which costs more than encoding the report in the first place, while
// the input here is json's own output, valid by construction. So it checks
// nothing: it copies strings whole, finding their closing quote with
// bytes.IndexByte, and only looks at the bytes between them. On invalid
// input it returns something, without panicking, that may differ from
// json.Indent (which fails there).
func appendIndent(dst, src []byte, prefix, indent string) []byte {
	// Whitespace after the value is copied as it is, as json.Indent does.
	end := len(src)
	for end > 0 && isSpace(src[end-1]) {
		end--
	}
	tail := src[end:]
	src = src[:end]

	// nl is a newline, prefix and the indents of the deepest level so far:
	// the newline at depth d is its first 1+len(prefix)+d*len(indent) bytes,
	// one copy rather than one per level.
	nl := append(append(make([]byte, 0, 64), '\n'), prefix...)
	base := len(nl)
	depth := 0
	// open is set after '{' or '[': the newline that follows it waits for
	// the next token, which gives {} and [] when it closes them.
	open := false
	for i := 0; i < len(src); {
		c := src[i]
		if isSpace(c) {
			i++
			continue
		}
		if open && c != '}' && c != ']' {
			open = false
			depth++
			dst, nl = newline(dst, nl, base, indent, depth)
		}
		switch c {
		case '"':
			j := stringEnd(src, i)
			dst = append(dst, src[i:j]...)
			i = j
			continue
		case '{', '[':
			open = true
			dst = append(dst, c)
		case '}', ']':
			if open {
				open = false
			} else {
				depth--
				dst, nl = newline(dst, nl, base, indent, depth)
			}
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			dst, nl = newline(dst, nl, base, indent, depth)
		case ':':
			dst = append(dst, c, ' ')
		default:
			// A number or a literal (true, false, null): copy it up to the
			// next punctuation or space.
			j := i + 1
			for j < len(src) && !delim[src[j]] {
				j++
			}
			dst = append(dst, src[i:j]...)
			i = j
			continue
		}
		i++
	}
	return append(dst, tail...)
}

// stringEnd returns the index just past the string that starts with the
// quote at src[i], or len(src) if it does not end. A quote ends the string
// unless an odd number of backslashes precede it: inside a string every
// backslash starts an escape, and no escape ends in a backslash but \\.
func stringEnd(src []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(src[j:], '"')
		if k < 0 {
			return len(src)
		}
		q := j + k
		n := 0
		for q-n-1 > i && src[q-n-1] == '\\' {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// newline appends the newline at depth to dst: the first base (newline
// and prefix) plus depth indents bytes of nl, which it extends as needed.
func newline(dst, nl []byte, base int, indent string, depth int) ([]byte, []byte) {
	n := base + max(depth, 0)*len(indent)
	for len(nl) < n {
		nl = append(nl, indent...)
	}
	return append(dst, nl[:n]...), nl
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// delim marks the bytes that end a number or a literal (read only, a
// table as encoding/json keeps its safeSet).
var delim = [256]bool{',': true, ':': true, '{': true, '}': true, '[': true, ']': true, '"': true,
	' ': true, '\t': true, '\n': true, '\r': true}
