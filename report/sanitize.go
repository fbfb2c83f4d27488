package report

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxField bounds a wire-derived string shown on a terminal.
const maxField = 256

// Clean makes a wire-derived string safe for a terminal: control
// characters (ESC included), invalid UTF-8 and non-printing runes are shown
// as Go escapes (\x1b, \u200b), and very long strings are cut with "…".
// Packet data must never drive the terminal.
func Clean(s string) string { return clean(s, maxField) }

// maxText bounds a detector's explanation, which quotes wire strings.
const maxText = 4096

// CleanText is Clean for prose that quotes wire strings (a finding's
// explanation): escaped the same way, cut only past maxText.
func CleanText(s string) string { return clean(s, maxText) }

func clean(s string, limit int) string {
	if safe(s, limit) {
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
		case r == utf8.RuneError && size <= 1:
			b.WriteString(`\x`)
			b.WriteByte(hexDigit(s[i] >> 4))
			b.WriteByte(hexDigit(s[i] & 0xf))
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x80 && (r < 0x20 || r == 0x7f):
			b.WriteString(`\x`)
			b.WriteByte(hexDigit(byte(r) >> 4))
			b.WriteByte(hexDigit(byte(r) & 0xf))
		case !unicode.IsPrint(r):
			b.WriteString(`\u`)
			const hexd = "0123456789abcdef"
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hexd[(r>>shift)&0xf])
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
func safe(s string, limit int) bool {
	if len(s) > limit {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}
