package report

import (
	"fmt"
	"strings"
	"time"
)

// Correlation is what reading several agents' shipped records together
// estimated (kfsniff -r kafka://..., docs/export.md "Correlating"): the
// report's "correlation" object and the text report's Correlation
// section. Absent for capture files.
type Correlation struct {
	// Records are the records read, by agent below; Unreadable those the
	// reader refused: Version of another schema version, Malformed not
	// JSON of the schema.
	Records    int64      `json:"records"`
	Unreadable Unreadable `json:"unreadable"`
	// Reference is the agent whose clock the others' offsets are
	// measured against: the one with the most records (ties: the first
	// name in order) when two agents' clocks were first compared, kept
	// from then on.
	Reference string `json:"reference,omitempty"`
	// Agents are the agents read, by name.
	Agents []CorrelationAgent `json:"agents"`
	// AgentsNotListed counts the records of agents past the bound on
	// agents followed.
	AgentsNotListed int64 `json:"agents_not_listed_records,omitempty"`
	// Skew is how the clock offsets were estimated.
	Skew SkewCounts `json:"skew"`
	// E2E is the producer-to-consumer latency of batches, per topic.
	E2E E2E `json:"e2e"`
}

// Unreadable counts the records the reader refused.
type Unreadable struct {
	Version   int64 `json:"version"`
	Malformed int64 `json:"malformed"`
}

// CorrelationAgent is one agent's records and clock.
type CorrelationAgent struct {
	Agent     string `json:"agent"`
	Records   int64  `json:"records"`
	Exchanges int64  `json:"exchanges"`
	Conns     int64  `json:"connection_events"`
	Findings  int64  `json:"findings"`
	// First and Last are the earliest and latest capture times of its
	// records, by its own clock (absent when it shipped only findings).
	First *time.Time `json:"first,omitempty"`
	Last  *time.Time `json:"last,omitempty"`
	// Clock is its clock's offset from the reference's; nil when it
	// cannot be estimated (no connection seen by this agent and by the
	// reference or an agent whose offset is known).
	Clock *ClockOffset `json:"clock,omitempty"`
}

// ClockOffset is an agent's clock minus the reference agent's, estimated
// NTP-style from exchanges both captured.
type ClockOffset struct {
	// OffsetNs is the median of the samples (0 for the reference).
	OffsetNs int64 `json:"offset_ns"`
	// SpreadNs is their interquartile range; DelayNs the median of the
	// difference between the latencies the two agents saw of the same
	// exchange (the network between them: the offset's error is at most
	// half of it when the path is asymmetric).
	SpreadNs int64 `json:"spread_ns"`
	DelayNs  int64 `json:"delay_ns"`
	// Samples are the exchanges both captured, Connections the distinct
	// connections they were on (of the least sampled link when Via).
	Samples     int64 `json:"samples"`
	Connections int64 `json:"connections"`
	// Via are the agents the estimate goes through when this agent and
	// the reference saw no connection in common (offsets added along
	// the chain, spreads too).
	Via []string `json:"via,omitempty"`
}

// SkewCounts are the clock estimation's own counts.
type SkewCounts struct {
	// Exchanges are the answered exchanges offered for matching;
	// Matched those that met the same exchange from another agent.
	Exchanges int64 `json:"exchanges"`
	Matched   int64 `json:"matched"`
	// Evicted left an agent's window of exchanges waiting for a partner
	// (bounded per agent) before any partner came.
	Evicted int64 `json:"evicted"`
	// Window is that bound.
	Window int `json:"window"`
}

// E2E is the producer-to-consumer latency: a batch in a Produce request
// matched with the same batch in a consumer's Fetch response, on any
// agents, corrected by their clock offsets.
type E2E struct {
	Topics []E2ETopic `json:"topics"`
	// TopicsNotListed counts the matched batches of topics past the
	// bound on topics followed.
	TopicsNotListed int64 `json:"topics_not_listed,omitempty"`
	// Produced are the batches of Produce requests remembered; Evicted
	// those that left the window of recent ones (Window) unfetched.
	Produced int64 `json:"produced"`
	Evicted  int64 `json:"evicted"`
	Window   int   `json:"window"`
	// Fetched are the batches of consumers' Fetch responses looked up.
	Fetched int64 `json:"fetched"`
}

// E2ETopic is one topic's producer-to-consumer latency.
type E2ETopic struct {
	Cluster string `json:"cluster,omitempty"`
	Topic   string `json:"topic"`
	// Batches are the (batch, consumer) pairs measured: a batch fetched
	// by two consumers counts twice, a consumer fetching it again once.
	Batches int64 `json:"batches"`
	// Latency is the fetch response's capture time minus the produce
	// request's, corrected by the agents' clock offsets, milliseconds.
	Latency Latency `json:"latency_ms"`
	// Negative counts latencies below zero after the correction (the
	// clock estimate off by more than the latency), measured as zero.
	Negative int64 `json:"negative,omitempty"`
	// SkewUnknown counts batches produced and fetched on two agents
	// whose clock offset is unknown: not measured.
	SkewUnknown int64 `json:"skew_unknown"`
	// Ambiguous counts fetched batches whose CRC was produced more than
	// once where the offset could not tell them apart: not measured.
	Ambiguous int64 `json:"ambiguous"`
	// Mismatched counts fetched batches at an offset produced with
	// another CRC (rewritten by the broker, or diverged).
	Mismatched int64 `json:"crc_mismatch"`
	// Unmatched counts fetched batches no remembered Produce had: the
	// producer not captured, fetched before its produce was read, or
	// evicted.
	Unmatched int64 `json:"unmatched"`
}

// maxCorrelationLines bounds the agents and topics the text lists.
const maxCorrelationLines = 50

func (p *printer) correlation(c *Correlation) {
	if c == nil {
		return
	}
	p.f("\nCorrelation (%d records", c.Records)
	if n := c.Unreadable.Version + c.Unreadable.Malformed; n > 0 {
		p.f("; %d unreadable: %d of another schema version, %d malformed", n, c.Unreadable.Version, c.Unreadable.Malformed)
	}
	p.f(")\n")
	if c.Reference != "" {
		p.f("  Clocks are relative to agent %s's (the agent with the most records when clocks were first compared).\n", Clean(c.Reference))
	}
	p.table("  AGENT\tRECORDS\tEXCHANGES\tCONN EVENTS\tFINDINGS\tCLOCK OFFSET\n", len(c.Agents), maxCorrelationLines, "agents", func(i int) string {
		a := &c.Agents[i]
		return fmt.Sprintf("  %s\t%d\t%d\t%d\t%d\t%s\n", Clean(a.Agent), a.Records, a.Exchanges, a.Conns, a.Findings, clockText(a, c.Reference))
	})
	if c.AgentsNotListed > 0 {
		p.f("  %d records of further agents not followed\n", c.AgentsNotListed)
	}
	s := &c.Skew
	p.f("  Clock offsets from %d exchanges seen by two agents, of %d answered exchanges; %d left the window of %d per agent unmatched\n",
		s.Matched, s.Exchanges, s.Evicted, s.Window)

	e := &c.E2E
	p.f("  Producer to consumer latency: %d batches produced, %d fetched by consumers; %d left the window of %d unfetched\n",
		e.Produced, e.Fetched, e.Evicted, e.Window)
	if len(e.Topics) == 0 {
		return
	}
	p.table("  TOPIC\tBATCHES\tP50 ms\tP99 ms\tMAX ms\tNOT MEASURED\n", len(e.Topics), maxCorrelationLines, "topics", func(i int) string {
		t := &e.Topics[i]
		name := Clean(t.Topic)
		if t.Cluster != "" {
			name = Clean(t.Cluster) + "/" + name
		}
		return fmt.Sprintf("  %s\t%d\t%s\t%s\t%s\t%s\n", name, t.Batches, msStr(t.Latency.P50, t.Batches), msStr(t.Latency.P99, t.Batches),
			msStr(t.Latency.Max, t.Batches), notMeasured(t))
	})
	if e.TopicsNotListed > 0 {
		p.f("  %d batches of further topics not followed\n", e.TopicsNotListed)
	}
}

func clockText(a *CorrelationAgent, ref string) string {
	c := a.Clock
	switch {
	case a.Agent == ref:
		return "reference"
	case c == nil:
		return "unknown (no connection seen with the reference or a known agent)"
	}
	s := fmt.Sprintf("%s ±%s (spread; %d samples, %d connections", signed(c.OffsetNs), time.Duration(c.SpreadNs), c.Samples, c.Connections)
	if len(c.Via) > 0 {
		s += ", via " + strings.Join(each(c.Via, Clean), ", ")
	}
	return s + ")"
}

// signed shows an offset with its sign: "+1.5ms", "-300µs".
func signed(ns int64) string {
	if ns < 0 {
		return time.Duration(ns).String()
	}
	return "+" + time.Duration(ns).String()
}

func notMeasured(t *E2ETopic) string {
	var parts counts
	parts.add(t.SkewUnknown, "clock offset unknown")
	parts.add(t.Ambiguous, "ambiguous CRC")
	parts.add(t.Mismatched, "CRC mismatch")
	parts.add(t.Unmatched, "no produce seen")
	if t.Negative > 0 {
		parts = append(parts, fmt.Sprintf("(%d negative, counted as 0)", t.Negative))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
