package detectors

import "time"

// The severity policy (docs/detectors.md), applied by every rule:
//
//   - info: something an operator may want to know: no client was held up,
//     or for less than FeltAfter, or a normal event (a leader election
//     clients follow within a second, the MEMBER_ID_REQUIRED of a first
//     JoinGroup, a consumer idle at the high watermark).
//   - warning: a failure clients felt (requests failing or waiting) for
//     FeltAfter or more, or a misconfiguration that will bite (a listener
//     advertised twice, a dead bootstrap server, request versions the next
//     Kafka release removes).
//   - error: a failure that lasted LongAfter or more, or that had not
//     healed when the capture ended after HealAfter.
const (
	FeltAfter = 3 * time.Second
	HealAfter = 10 * time.Second
	LongAfter = 30 * time.Second
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
