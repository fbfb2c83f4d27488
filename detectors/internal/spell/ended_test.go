package spell

import (
	"testing"
	"time"
)

// TestEnded: a run held its client up to the success that ended it when
// that came promptly; a success long after the last failure is a client
// that had gone quiet, and the run held it up to its last failure.
func TestEnded(t *testing.T) {
	for _, tc := range []struct {
		name       string
		healed     time.Time
		want       time.Duration
		wantHealed bool
	}{
		{"no success", time.Time{}, 2 * time.Second, false},
		{"a success 1 s after the last failure", at(3000), 3 * time.Second, true},
		{"a success 5 s after it (kgo's metadata min age)", at(7000), 7 * time.Second, true},
		{"a success Prompt after the last failure", at(2000).Add(Prompt), 2*time.Second + Prompt, true},
		{"a success just over Prompt after it: gone quiet", at(2001).Add(Prompt), 2 * time.Second, false},
	} {
		d, ok := Ended(at(0), at(2000), tc.healed)
		if d != tc.want || ok != tc.wantHealed {
			t.Errorf("%s: held %v healed %v, want %v %v", tc.name, d, ok, tc.want, tc.wantHealed)
		}
	}
}

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		ongoing, healed bool
		want            string
	}{
		{true, false, "; still stuck when the capture ended"},
		{false, true, "; moving again 8.5 s after the first stuck fetch"},
		{false, false, ""},
	} {
		if got := Tail(tc.ongoing, tc.healed, 8500*time.Millisecond, "stuck", "moving again", "stuck fetch"); got != tc.want {
			t.Errorf("ongoing %v healed %v: %q, want %q", tc.ongoing, tc.healed, got, tc.want)
		}
	}
}
