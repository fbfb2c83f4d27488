package detectors

import (
	"fmt"
	"slices"
	"time"
)

// NotListed counts findings left out by the limits (Limits): by the Set,
// or by a rule that makes one finding per key and stops keeping them
// past Pass.MaxFindings (so that its findings are never all in memory at
// once). A rule returns its summary (Finding) among its findings; the Set
// folds it into its own, one per rule.
type NotListed = cut

// cut is what the limits left out of one rule's findings.
type cut struct {
	n           int64
	bySeverity  [Error + 1]int64
	worst       Severity
	first, last time.Time
	conns       []int
}

func cutOf(cuts map[string]*cut, rule string) *cut {
	c := cuts[rule]
	if c == nil {
		c = &cut{}
		cuts[rule] = c
	}
	return c
}

// maxCutConns bounds the connections a summary names.
const maxCutConns = 16

// Add counts f as not listed.
func (c *cut) Add(f *Finding) { c.add(f) }

// Also counts f, not listed, into a finding already counted (a rule that
// merges several into one): its severity and span, not one more.
func (c *cut) Also(f *Finding) {
	n := c.n
	c.add(f)
	c.n = n
	if f.Severity >= Info && f.Severity <= Error {
		c.bySeverity[f.Severity]--
	}
}

// N is how many were counted.
func (c *cut) N() int64 { return c.n }

// Summary is the finding a rule returns to say what it did not list (nil
// if nothing): the Set folds it into its summary of the rule.
func (c *cut) Summary() []Finding {
	if c.n == 0 {
		return nil
	}
	return []Finding{{notListed: c}}
}

// absorb adds what o counted.
func (c *cut) absorb(o *cut) {
	if o.n == 0 {
		return
	}
	if c.n == 0 || o.worst > c.worst {
		c.worst = o.worst
	}
	c.n += o.n
	for i := range c.bySeverity {
		c.bySeverity[i] += o.bySeverity[i]
	}
	c.span(o.first, o.last, o.conns)
}

func (c *cut) add(f *Finding) {
	if f.Severity >= Info && f.Severity <= Error {
		c.bySeverity[f.Severity]++
	}
	if c.n == 0 || f.Severity > c.worst {
		c.worst = f.Severity
	}
	c.span(f.First, f.Last, f.Conns)
	c.n++
}

// span widens the summary's span to first and last and adds conns, up to
// maxCutConns.
func (c *cut) span(first, last time.Time, conns []int) {
	if !first.IsZero() && (c.first.IsZero() || first.Before(c.first)) {
		c.first = first
	}
	if last.After(c.last) {
		c.last = last
	}
	for _, id := range conns {
		if len(c.conns) >= maxCutConns {
			break
		}
		if !slices.Contains(c.conns, id) {
			c.conns = append(c.conns, id)
		}
	}
}

// finding is the summary of the findings of rule left out: as severe as
// the worst of them.
func (c *cut) finding(rule string, l Limits) Finding {
	return Finding{
		Detector: rule,
		Severity: c.worst,
		Summary: fmt.Sprintf("%d more %s findings not listed (%d error, %d warning, %d info)",
			c.n, rule, c.bySeverity[Error], c.bySeverity[Warning], c.bySeverity[Info]),
		First: c.first,
		Last:  c.last,
		Conns: c.conns,
		Counts: map[string]int64{"not_listed": c.n, "error": c.bySeverity[Error],
			"warning": c.bySeverity[Warning], "info": c.bySeverity[Info]},
		Fields: map[string]any{"not_listed": true, "per_rule": l.PerRule, "total": l.Total},
		Explanation: fmt.Sprintf("kfsniff lists at most %d findings of one rule and %d in all, the most severe and "+
			"earliest first, so that no capture can make the report unbounded; these %d were counted, not listed.",
			l.PerRule, l.Total, c.n),
		Next: "List them with a larger --max-findings-per-rule / --max-findings, or analyse the capture in parts " +
			"with a filter (host, port) so that each part has fewer findings.",
	}
}
