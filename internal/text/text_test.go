package text

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0 ms"},
		{77 * time.Microsecond, "0.077 ms"},
		{5200 * time.Microsecond, "5.2 ms"},
		{250 * time.Millisecond, "250 ms"},
		{999600 * time.Microsecond, "1000 ms"},
		{time.Second, "1.0 s"},
		{40 * time.Second, "40.0 s"},
		{119 * time.Second, "119.0 s"},
		{2 * time.Minute, "2m0s"},
		{5*time.Minute + 3400*time.Millisecond, "5m3s"},
		{-2 * time.Second, "-2.0 s"},
	} {
		if got := Duration(tc.d); got != tc.want {
			t.Errorf("Duration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestCountsAndLists(t *testing.T) {
	if got := Plural(1, "batch", "batches") + ", " + Plural(int64(3), "batch", "batches"); got != "1 batch, 3 batches" {
		t.Errorf("Plural: %q", got)
	}
	if got := List([]string{"a", "b", "c", "d"}, 2); got != "a, b and 2 more" {
		t.Errorf("List: %q", got)
	}
	if got := IDs([]int32{3, 1, 2}, 0); got != "3, 1, 2" {
		t.Errorf("IDs: %q", got)
	}
	if got := Rate(3, 2*time.Second); got != 1.5 {
		t.Errorf("Rate: %v", got)
	}
	if Seconds(1234567*time.Microsecond) != 1.235 || Millis(1234567*time.Nanosecond) != 1.235 {
		t.Errorf("Seconds %v, Millis %v", Seconds(1234567*time.Microsecond), Millis(1234567*time.Nanosecond))
	}
	if ShellWord("a b") || ShellWord("") || !ShellWord("consumer-1") {
		t.Error("ShellWord")
	}
	if ShellOr("orders", "<topic>") != "orders" || ShellOr("a;rm", "<topic>") != "<topic>" {
		t.Error("ShellOr")
	}
}
