package report

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestClean(t *testing.T) {
	cases := []struct{ in, want string }{
		{"raft-client-68", "raft-client-68"},
		{"evil\x1b[2J\x1b]0;pwned\x07", `evil\x1b[2J\x1b]0;pwned\x07`},
		{"nul\x00byte", `nul\x00byte`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"back\\slash", `back\\slash`},
		{"主题-订单", "主题-订单"},
		{"zero\u200bwidth", `zero\u200bwidth`},
		{"del\x7f", `del\x7f`},
	}
	for _, tc := range cases {
		if got := Clean(tc.in); got != tc.want {
			t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := Clean(strings.Repeat("a", 5000))
	if !strings.HasSuffix(long, "…") || len(long) > maxField+10 {
		t.Errorf("long string not cut: %d bytes", len(long))
	}
	for _, s := range []string{"\x1b[31mred", "\x9b2J"} {
		if strings.ContainsAny(Clean(s), "\x1b\x9b") {
			t.Errorf("Clean(%q) still contains a control sequence introducer", s)
		}
	}
}

func TestSafeJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"plain"}`:          `{"a":"plain"}`,
		"{\"a\":\"c1\u009b2J\"}": `{"a":"c1\u009b2J"}`,
		"{\"a\":\"主题\"}":         "{\"a\":\"主题\"}",
		"{\"a\":\"x\u200by\"}":   `{"a":"x\u200by"}`,
		"{\"a\":\"\U000E0001\"}": `{"a":"\udb40\udc01"}`,
	} {
		got := string(SafeJSON([]byte(in)))
		if got != want {
			t.Errorf("SafeJSON(%q) = %q, want %q", in, got, want)
		}
		var v map[string]string
		if err := json.Unmarshal([]byte(got), &v); err != nil {
			t.Errorf("SafeJSON(%q) is not valid JSON: %v", in, err)
		}
		var orig map[string]string
		json.Unmarshal([]byte(in), &orig)
		if v["a"] != orig["a"] {
			t.Errorf("SafeJSON changed the meaning: %q vs %q", v["a"], orig["a"])
		}
	}
}
