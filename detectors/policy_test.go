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
