package text

import "testing"

func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{[]string{"consumer-1"}, " --client-id consumer-1"},
		{[]string{"a", "b"}, ""},
		{nil, ""},
		{[]string{""}, ""},
		{[]string{"rm -rf"}, ""},
		{[]string{"x;reboot"}, ""},
		{[]string{"$(id)"}, ""},
	} {
		if got := Filter("client-id", tc.ids); got != tc.want {
			t.Errorf("Filter(%q) = %q, want %q", tc.ids, got, tc.want)
		}
	}
}
