package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/kfsniff/kfsniff/detectors"
)

// findingLimits are the --max-findings flags: how many findings the
// report lists (detectors.Limits); the rest are counted and summarised
// per rule.
type findingLimits struct{ perRule, total int }

func (l *findingLimits) register(fs *pflag.FlagSet) {
	fs.IntVar(&l.total, "max-findings", detectors.DefaultLimits.Total,
		"list at most `N` findings, the most severe first; the rest are counted, one summary finding per rule")
	fs.IntVar(&l.perRule, "max-findings-per-rule", detectors.DefaultLimits.PerRule,
		"list at most `N` findings of one detector; the rest are counted in a summary finding")
}

// apply sets the limits on dets; a limit below 1 is a usage error.
func (l *findingLimits) apply(dets *detectors.Set) error {
	if l.total < 1 || l.perRule < 1 {
		return fmt.Errorf("--max-findings and --max-findings-per-rule must be at least 1 (got %d, %d)", l.total, l.perRule)
	}
	dets.SetLimits(detectors.Limits{PerRule: l.perRule, Total: l.total})
	return nil
}
