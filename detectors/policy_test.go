package detectors

import (
	"testing"
	"time"
)

func TestGrade(t *testing.T) {
	for _, tc := range []struct {
		d       time.Duration
		ongoing bool
		want    Severity
	}{
		{0, false, Info},
		{2999 * time.Millisecond, true, Info},
		{FeltAfter, false, Warning},
		{9 * time.Second, true, Warning},
		{HealAfter, true, Error},
		{HealAfter, false, Warning},
		{29 * time.Second, false, Warning},
		{LongAfter, false, Error},
	} {
		if got := Grade(tc.d, tc.ongoing); got != tc.want {
			t.Errorf("Grade(%v, ongoing %v) = %s, want %s", tc.d, tc.ongoing, got, tc.want)
		}
	}
}

// TestEpisodeGrade: a failure's intensity grades it whatever its length,
// with near misses on both sides of every threshold.
func TestEpisodeGrade(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		e    Episode
		want Severity
	}{
		{"short, healed, slow", Episode{Seen: 700 * ms, Failures: 7, Rate: 10}, Info},
		{"short, ongoing, slow: unknown end alone is not enough", Episode{Seen: 700 * ms, Ongoing: true, Failures: 7, Rate: 10, Clients: 1, Failing: 1}, Info},
		{"fast: no backoff", Episode{Seen: 700 * ms, Ongoing: true, Failures: 1600, Rate: 2300}, Warning},
		{"fast at the threshold", Episode{Seen: 500 * ms, Failures: FastMin, Rate: FastRate}, Warning},
		{"just below the fast rate", Episode{Seen: 500 * ms, Failures: 1000, Rate: FastRate - 0.1}, Info},
		{"fast rate, too few answers", Episode{Seen: 10 * ms, Failures: FastMin - 1, Rate: 4900}, Info},
		{"fast and long", Episode{Seen: LongAfter, Failures: 100000, Rate: 3000}, Error},
		{"fast, ongoing after HealAfter", Episode{Seen: HealAfter, Ongoing: true, Failures: 100000, Rate: 3000}, Error},
		{"broad: 3 clients failing at the end", Episode{Seen: BroadAfter, Ongoing: true, Clients: 3, Failing: 3, Failures: 5, Rate: 5}, Warning},
		{"2 clients failing at the end", Episode{Seen: 2 * time.Second, Ongoing: true, Clients: 3, Failing: 2, Failures: 5, Rate: 5}, Info},
		{"3 clients, seen just under BroadAfter", Episode{Seen: BroadAfter - ms, Ongoing: true, Clients: 3, Failing: 3, Failures: 5, Rate: 5}, Info},
		{"3 clients, healed", Episode{Seen: 2 * time.Second, Clients: 3, Failing: 0, Failures: 5, Rate: 5}, Info},
		{"long enough alone", Episode{Seen: FeltAfter, Failures: 3, Rate: 1}, Warning},
	} {
		if got := tc.e.Grade(); got != tc.want {
			t.Errorf("%s: %+v graded %s, want %s", tc.name, tc.e, got, tc.want)
		}
	}
}

func TestEpisodeFelt(t *testing.T) {
	for _, tc := range []struct {
		e    Episode
		want string
	}{
		{Episode{Seen: 700 * time.Millisecond, Ongoing: true, Failures: 3, Rate: 4.26}, "still failing at the end (seen for 700 ms)"},
		{Episode{Seen: 4100 * time.Millisecond}, "held up for 4.1 s"},
		{Episode{Seen: 740 * time.Millisecond, Ongoing: true, Failures: 1600, Rate: 2162.4},
			"still failing at the end (seen for 740 ms), retried 1600 times at 2162 a second: faster than any client's backoff allows (100 a second or more)"},
		{Episode{Seen: 1500 * time.Millisecond, Ongoing: true, Failing: 4, Clients: 4, Failures: 3, Rate: 2},
			"still failing at the end (seen for 1.5 s), 4 clients still failing at the end"},
	} {
		if got := tc.e.Felt(); got != tc.want {
			t.Errorf("%+v: Felt() = %q, want %q", tc.e, got, tc.want)
		}
	}
}
