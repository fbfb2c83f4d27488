package termcheck

import "testing"

func TestSafe(t *testing.T) {
	for _, ok := range []string{"", "plain text\n\tindented", "café, 東京, \\x1b escaped"} {
		if err := Safe([]byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"\x1b[2J", "a\x07b", "\u009b31m", "\u202eevil", "\xff", "del\x7f", "cr\r"} {
		if Safe([]byte(bad)) == nil {
			t.Errorf("%q passed", bad)
		}
	}
}
