package detectors

import (
	"fmt"
	"math"
	"time"
)

// The severity policy (docs/detectors.md), applied by every rule:
//
//   - info: something an operator may want to know: no client was held up,
//     or for less than FeltAfter, or a normal event (a leader election
//     clients follow within a second, the MEMBER_ID_REQUIRED of a first
//     JoinGroup, a consumer idle at the high watermark).
//   - warning: a failure clients felt (requests failing or waiting) for
//     FeltAfter or more, or a misconfiguration that will bite (a listener
//     advertised twice, a dead bootstrap server, request versions the next
//     Kafka release removes); whatever its length, a client retrying
//     faster than any client's backoff allows (Episode.Fast), and a
//     failure still holding BroadClients clients or more when the capture
//     ended (Episode.Broad).
//   - error: a failure that lasted LongAfter or more, or that had not
//     healed when the capture ended after HealAfter.
const (
	FeltAfter = 3 * time.Second
	HealAfter = 10 * time.Second
	LongAfter = 30 * time.Second
)

// The intensity a failure shows, graded whatever its length (Episode).
const (
	// FastRate is the rate of failing answers to one client (for one API
	// and error) that no client's retry backoff allows: the lowest
	// default of the common libraries is 100 ms (Java retry.backoff.ms,
	// librdkafka, sarama, kafka-go; kgo 250 ms, kafkajs 300 ms), a few
	// answers a second per broker even with a request per broker in
	// flight; 100 a second is a client retrying with no backoff at all.
	FastRate = 100.0
	// FastMin is how many failing answers must show that rate: a burst
	// of a few answers after a leader moves is not a storm.
	FastMin = 50
	// BroadClients is how many clients must still be failing at the
	// capture's end, with BroadAfter or more of it seen, for a failure of
	// unknown length to be a warning.
	BroadClients = 3
	BroadAfter   = time.Second
)

// Grade is the policy for a failure clients felt for d (from the first
// failing exchange to the last), ongoing if it had not healed when the
// capture ended (the last exchanges still failed).
func Grade(d time.Duration, ongoing bool) Severity {
	switch {
	case d >= LongAfter, ongoing && d >= HealAfter:
		return Error
	case d >= FeltAfter:
		return Warning
	}
	return Info
}

// Episode is what a failure showed, for the rules that can say more than
// its length: a failure still going on when the capture ended has an
// unknown length, not a short one, and is graded on its intensity too.
type Episode struct {
	// Seen is how long clients felt it (Grade's d): to the capture's end
	// when Ongoing.
	Seen    time.Duration
	Ongoing bool
	// Failures is the failing answers to the client that got them
	// fastest, Rate their rate (answers a second over their span).
	Failures int64
	Rate     float64
	// Clients is how many clients were held up; Failing how many still
	// failed when the capture ended.
	Clients, Failing int
}

// Fast reports whether a client retried faster than any client's backoff
// allows: FastMin failing answers or more at FastRate a second or more.
func (e Episode) Fast() bool { return e.Failures >= FastMin && e.Rate >= FastRate }

// Broad reports whether BroadClients clients or more still failed when
// the capture ended, BroadAfter or more of the failure seen.
func (e Episode) Broad() bool {
	return e.Ongoing && e.Failing >= BroadClients && e.Seen >= BroadAfter
}

// Grade is the policy for e: Grade of its length, and at least a warning
// when it was Fast or Broad.
func (e Episode) Grade() Severity {
	sev := Grade(e.Seen, e.Ongoing)
	if e.Fast() || e.Broad() {
		sev = max(sev, Warning)
	}
	return sev
}

// Felt says in a phrase how long clients felt e and why it has its
// severity: "still failing at the end (seen for 0.7 s)", "held up for
// 4.1 s", with ", retried at 2,300 a second: faster than any client
// backoff allows" or ", 4 clients still failing at the end" when that
// made it a warning.
func (e Episode) Felt() string {
	var s string
	if e.Ongoing {
		s = "still failing at the end (seen for " + seconds(e.Seen) + ")"
	} else {
		s = "held up for " + seconds(e.Seen)
	}
	if e.Fast() {
		s += fmt.Sprintf(", retried %d times at %s a second: faster than any client's backoff allows (%.0f a second or more)",
			e.Failures, rate(e.Rate), FastRate)
	}
	if e.Broad() {
		s += fmt.Sprintf(", %d clients still failing at the end", e.Failing)
	}
	return s
}

// seconds is d as the reports write durations (internal/text.Duration:
// milliseconds below a second, seconds to a tenth above).
func seconds(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
	case d < 2*time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// rate is r rounded to a whole number, or to a tenth below 10.
func rate(r float64) string {
	if r < 10 {
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%d", int64(math.Round(r)))
}
