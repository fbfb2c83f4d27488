package report

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// maxField bounds a wire-derived string shown on a terminal.
const maxField = 256

// Clean makes a wire-derived string safe for a terminal: control
// characters (ESC included), invalid UTF-8 and non-printing runes are shown
// as Go escapes (\x1b, \u200b), and very long strings are cut with "…".
// Packet data must never drive the terminal.
func Clean(s string) string { return clean(s, maxField, true) }

// maxText bounds a detector's explanation, which quotes wire strings.
const maxText = 4096

// CleanText is Clean for prose that quotes wire strings (a finding's
// explanation): escaped the same way, cut only past maxText.
func CleanText(s string) string { return clean(s, maxText, true) }

// clean escapes s for a terminal, cut at limit runes; slash doubles
// backslashes, so that an escape written here cannot be confused with the
// same characters in the string (prose.go leaves them).
func clean(s string, limit int, slash bool) string {
	if safe(s, limit, slash) {
		return s
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); {
		if n >= limit {
			b.WriteString("…")
			break
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1, r < 0x20 || r == 0x7f:
			// An invalid byte, or an ASCII control character: the byte.
			b.WriteString(`\x`)
			b.WriteByte(hexDigit(s[i] >> 4))
			b.WriteByte(hexDigit(s[i] & 0xf))
		case r == '\\' && slash:
			b.WriteString(`\\`)
		case !unicode.IsPrint(r):
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hexDigit(byte(r >> shift)))
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
		n++
	}
	return b.String()
}

func hexDigit(b byte) byte { return "0123456789abcdef"[b&0xf] }

// safe reports whether s needs no escaping (the common case, no allocation).
func safe(s string, limit int, slash bool) bool {
	if len(s) > limit {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '\\' && slash {
			return false
		}
	}
	return true
}

// SafeJSON rewrites, inside a JSON document, every rune a terminal could
// act on that encoding/json leaves raw (C1 controls such as U+009B, the
// 8-bit CSI, and other non-printing runes) as a \uXXXX escape. Such runes
// only occur inside strings, so the document stays valid and means the same.
func SafeJSON(b []byte) []byte {
	clean := true
	for _, c := range b {
		if c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r >= 0x80 && (!unicode.IsPrint(r) || r == utf8.RuneError && size == 1) {
			for _, u := range utf16.AppendRune(nil, r) {
				out = append(out, '\\', 'u', hexDigit(byte(u>>12)), hexDigit(byte(u>>8)), hexDigit(byte(u>>4)), hexDigit(byte(u)))
			}
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}
