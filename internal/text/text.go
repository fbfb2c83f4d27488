// Package text writes what findings say, in one style everywhere:
// durations, counts with their nouns, lists, times. Wire-derived strings
// are not escaped here: the renderers do that (report.Clean).
package text

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Duration is a duration as people read one: milliseconds below a second
// ("0.077 ms", "5.2 ms", "250 ms"), seconds to a tenth below two minutes
// ("40.0 s"), then Go's form to the second ("5m3s").
func Duration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + Duration(-d)
	case d < 10*time.Millisecond:
		ms := math.Round(float64(d)/1e3) / 1e3
		return strconv.FormatFloat(ms, 'f', -1, 64) + " ms"
	case d < time.Second:
		return strconv.FormatInt(d.Round(time.Millisecond).Milliseconds(), 10) + " ms"
	case d < 2*time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// Seconds is a duration in seconds, to the millisecond (for fields).
func Seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

// Millis is a duration in milliseconds, to the microsecond (for fields).
func Millis(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// Rate is n per second over d, to a hundredth; 0 for no time.
func Rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return math.Round(float64(n)/d.Seconds()*100) / 100
}

// Clock is a time of day in UTC to the millisecond, "15:04:05.000".
func Clock(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// Stamp is a date and time in UTC to the millisecond,
// "2006-01-02 15:04:05.000".
func Stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") }

// Plural is a count with its noun: "1 batch", "3 batches".
func Plural[N ~int | ~int32 | ~int64](n N, one, many string) string {
	return strconv.FormatInt(int64(n), 10) + " " + Word(n, one, many)
}

// Word is the noun for a count: one or many.
func Word[N ~int | ~int32 | ~int64](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// List joins items with commas, the first max of them and "and N more"
// (max <= 0: all).
func List(items []string, max int) string {
	if max <= 0 || len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:max], ", "), len(items)-max)
}

// IDs lists numbers (node ids, partitions, offsets) as List does.
func IDs[N ~int | ~int32 | ~int64](ids []N, max int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(int64(id), 10)
	}
	return List(parts, max)
}

// Quote quotes each string as Go does ("a", "b\n").
func Quote(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// SortedKeys returns a set's keys in order.
func SortedKeys(set map[string]bool) []string {
	out := slices.AppendSeq(make([]string, 0, len(set)), maps.Keys(set))
	slices.Sort(out)
	return out
}

// Or is s, or alt if s is empty.
func Or(s, alt string) string {
	if s != "" {
		return s
	}
	return alt
}

// ShellOr is s if it can be pasted into a shell command as one word
// (ShellWord), else placeholder: "<topic>" in a suggested command.
func ShellOr(s, placeholder string) string {
	if ShellWord(s) {
		return s
	}
	return placeholder
}

// ShellWord reports whether s can be pasted into a shell command as one
// word as it is (for the commands findings suggest).
func ShellWord(s string) bool {
	return s != "" && !strings.ContainsAny(s, " '\"\\$`;&|<>()*?[]{}!#~\t\n")
}
