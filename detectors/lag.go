package detectors

import "github.com/kfsniff/kfsniff/flows"

// LagHook is a rule that follows consumers' or followers' lag: rather than
// a table of its own, it is given the Delivery's one (flows.LagUser), fed
// once for every handler, and reads each exchange's samples
// (Exchange.Lag), keeping its state of a series by its index
// (flows.LagSeries.Index).
type LagHook interface {
	UseLag(t *flows.LagTable)
}

// UseLag implements flows.LagUser: it hands the table to the rules that
// follow lag, and takes it only if one does.
func (s *Set) UseLag(t *flows.LagTable) bool {
	used := false
	for _, r := range s.rules {
		if h, ok := r.(LagHook); ok {
			h.UseLag(t)
			used = true
		}
	}
	if used {
		s.lag = t
	}
	return used
}
