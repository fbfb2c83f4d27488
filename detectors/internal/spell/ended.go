package spell

import (
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Prompt is how soon after a run's last failure the success that ends it
// must come to count as the end of what the client felt. Clients that
// retry do so within seconds: kgo waits for its next metadata refresh (5 s
// MetadataMinAge) after NOT_LEADER_OR_FOLLOWER without a leader hint,
// kafkajs doubles 300 ms over 5 retries, librdkafka and kafka-go back off
// 1 s at most. A success later than this is a client that had stopped
// trying (it gave up on the record, paused the partition, had nothing more
// to send), not one held up all along: the run then held it up until its
// last failure.
const Prompt = detectors.HealAfter

// Ended is how long a run of failures from first to last held its client
// up, given the success that ended it at healed (zero if none did): to
// the success if it came within Prompt of the last failure (healed
// true), else to the last failure.
func Ended(first, last, healed time.Time) (d time.Duration, ok bool) {
	if !healed.IsZero() && healed.Sub(last) <= Prompt {
		return healed.Sub(first), true
	}
	return last.Sub(first), false
}

// Tail is what a finding's summary adds about how its run ended: "; still
// <state> when the capture ended" if ongoing, "; <healedAs> <held> after
// the first <first>" if a success ended it promptly (Ended), else nothing.
func Tail(ongoing, healed bool, held time.Duration, state, healedAs, first string) string {
	switch {
	case ongoing:
		return "; still " + state + " when the capture ended"
	case healed:
		return "; " + healedAs + " " + text.Duration(held) + " after the first " + first
	}
	return ""
}
