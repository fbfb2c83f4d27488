// Package termcheck checks that output is safe to show on a terminal. Test
// code only: the tests of every output mode share it.
package termcheck

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Safe reports the first thing in b that could drive or deceive a
// terminal: invalid UTF-8, a C0 control other than newline and tab, DEL, a
// C1 control (U+0080-U+009F: U+009B is CSI on terminals that honour 8-bit
// controls), or any other non-printing rune (bidi overrides such as U+202E
// reorder what is shown).
func Safe(b []byte) error {
	line := 1
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			return fmt.Errorf("line %d: invalid UTF-8 byte %#x: %q", line, b[i], around(b, i))
		case r == '\n':
			line++
		case r == '\t':
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
			return fmt.Errorf("line %d: control character %U: %q", line, r, around(b, i))
		case !unicode.IsPrint(r) && r != ' ':
			return fmt.Errorf("line %d: non-printing character %U: %q", line, r, around(b, i))
		}
		i += n
	}
	return nil
}

func around(b []byte, i int) []byte { return b[max(0, i-40):min(len(b), i+40)] }
