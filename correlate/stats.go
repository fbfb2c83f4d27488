package correlate

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/report"
)

// Limits bound what Stats remembers; zero values take the defaults.
type Limits struct {
	// Window is how many answered exchanges per agent wait for the same
	// exchange from another agent (DefaultWindow).
	Window int
	// Batches is how many produced batches wait for a consumer's fetch
	// (DefaultBatches).
	Batches int
}

// Stats is the correlator's estimates over every agent's records: clock
// offsets (Skew), producer-to-consumer latency (E2E), and each agent's
// record counts. Add every record Parse returned, Unreadable every error
// it returned, Section for the report. Not safe for concurrent use.
type Stats struct {
	skew   *Skew
	e2e    *E2E
	agents map[string]*agentStats
	limits Limits

	records, agentsOver   int64
	badVersion, malformed int64
}

type agentStats struct {
	report.CorrelationAgent
	first, last int64
}

// NewStats makes the correlator's estimates.
func NewStats(l Limits) *Stats {
	orDefault(&l.Window, DefaultWindow)
	orDefault(&l.Batches, DefaultBatches)
	sk := NewSkew(l.Window)
	return &Stats{skew: sk, e2e: NewE2E(l.Batches, sk), agents: map[string]*agentStats{}, limits: l}
}

// Add takes one record.
func (s *Stats) Add(r *Record) {
	s.records++
	a := s.agents[r.Agent]
	if a == nil {
		if len(s.agents) >= maxAgents {
			s.agentsOver++
			return
		}
		a = &agentStats{CorrelationAgent: report.CorrelationAgent{Agent: r.Agent}}
		s.agents[r.Agent] = a
	}
	a.Records++
	switch r.Type {
	case TypeExchange:
		a.Exchanges++
	case TypeConn:
		a.Conns++
	case TypeFinding:
		a.Findings++
	}
	if r.Type == TypeExchange || r.Type == TypeConn {
		if a.first == 0 || r.TS < a.first {
			a.first = r.TS
		}
		if r.TS > a.last {
			a.last = r.TS
		}
	}
	s.skew.Add(r)
	s.e2e.Add(r)
}

// Unreadable counts a record Parse refused (its error).
func (s *Stats) Unreadable(err error) {
	if errors.Is(err, ErrVersion) {
		s.badVersion++
	} else {
		s.malformed++
	}
}

// Skew is the clock estimator (fed by Add).
func (s *Stats) Skew() *Skew { return s.skew }

// E2E is the latency meter (fed by Add).
func (s *Stats) E2E() *E2E { return s.e2e }

// Section is the report's correlation section for what was added so far;
// Stats goes on taking records after it.
func (s *Stats) Section() *report.Correlation {
	c := &report.Correlation{Records: s.records, AgentsNotListed: s.agentsOver,
		Unreadable: report.Unreadable{Version: s.badVersion, Malformed: s.malformed},
		Reference:  s.skew.Reference(), Agents: []report.CorrelationAgent{}}
	est := s.skew.Estimates()
	for _, a := range s.agents {
		ca := a.CorrelationAgent
		if a.first != 0 {
			f, l := time.Unix(0, a.first).UTC(), time.Unix(0, a.last).UTC()
			ca.First, ca.Last = &f, &l
		}
		if e, ok := est[a.Agent]; ok {
			ca.Clock = &report.ClockOffset{OffsetNs: int64(e.Offset), SpreadNs: int64(e.Spread), DelayNs: int64(e.Delay),
				Samples: e.Samples, Connections: e.Connections, Via: e.Via}
		}
		c.Agents = append(c.Agents, ca)
	}
	slices.SortFunc(c.Agents, func(a, b report.CorrelationAgent) int { return strings.Compare(a.Agent, b.Agent) })
	c.Skew.Exchanges, c.Skew.Matched, c.Skew.Evicted = s.skew.Counts()
	c.Skew.Window = s.limits.Window
	c.E2E.Produced, c.E2E.Evicted, c.E2E.Fetched, c.E2E.TopicsNotListed = s.e2e.Counts()
	c.E2E.Window = s.limits.Batches
	c.E2E.Topics = []report.E2ETopic{}
	for _, t := range s.e2e.Topics() {
		n := int64(t.Latency.Count())
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 } // as the APIs' latencies
		c.E2E.Topics = append(c.E2E.Topics, report.E2ETopic{Cluster: t.Cluster, Topic: t.Topic, Batches: n,
			Latency:  report.Latency{P50: ms(t.Latency.Quantile(0.5)), P99: ms(t.Latency.Quantile(0.99)), Max: ms(t.Latency.Max())},
			Negative: t.Negative, SkewUnknown: t.SkewUnknown, Ambiguous: t.Ambiguous, Mismatched: t.Mismatch, Unmatched: t.Unmatched})
	}
	return c
}
