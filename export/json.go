package export

import (
	"net/netip"
	"strconv"
	"unicode/utf8"
)

// Appending JSON by hand into one reused buffer: encoding/json would
// reflect over a struct and allocate for every exchange, and the hot path
// of a capture must not. Only the few shapes the schema uses are here.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Besides JSON's own escapes,
// C1 controls, the line and paragraph separators and bidirectional
// controls are escaped too (strings come off the wire and may be printed
// on a terminal by whoever reads the topic, e.g. kcat); invalid UTF-8
// becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != 0x7f {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\t':
				b = append(b, '\\', 't')
			case '\r':
				b = append(b, '\\', 'r')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendField appends `,"name":` (the comma left out after '{').
func appendField(b []byte, name string) []byte {
	if n := len(b); n > 0 && b[n-1] != '{' && b[n-1] != '[' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

func appendInt(b []byte, name string, v int64) []byte {
	return strconv.AppendInt(appendField(b, name), v, 10)
}

func appendUint(b []byte, name string, v uint64) []byte {
	return strconv.AppendUint(appendField(b, name), v, 10)
}

func appendStr(b []byte, name, v string) []byte {
	return appendString(appendField(b, name), v)
}

func appendBool(b []byte, name string, v bool) []byte {
	return strconv.AppendBool(appendField(b, name), v)
}

// appendAddr appends an endpoint as "ip:port" (IPv6 in brackets).
func appendAddr(b []byte, name string, ap netip.AddrPort) []byte {
	b = append(appendField(b, name), '"')
	b = ap.AppendTo(b)
	return append(b, '"')
}
