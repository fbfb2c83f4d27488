package detectors

import "github.com/kfsniff/kfsniff/flows"

// KeepHook is a rule that needs some of each request when its exchange
// comes, after flows has released the request's bytes: the frame, the
// fingerprints of its records (flows.Keep). The Set asks each rule once,
// when the pipeline starts, and flows keeps it on the request
// (flows.Message.Frame, flows.Message.RecordHashes), so that the rule
// keeps no table of pending requests.
type KeepHook interface {
	Keep() flows.Keep
}

// Keep implements flows.Keeper: what the rules need kept.
func (s *Set) Keep() []flows.Keep {
	var out []flows.Keep
	for _, r := range s.rules {
		if k, ok := r.(KeepHook); ok {
			out = append(out, k.Keep())
		}
	}
	return out
}
