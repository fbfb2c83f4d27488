package detectors

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Set is the rules of one run: a flows handler handing each event to the
// rules whose hooks take it, and the findings at the end.
type Set struct {
	analyzers []*Analyzer
	rules     []Rule
	req       []RequestHook
	ex        []ExchangeHook
	conn      []ConnHook
	pass      Pass
	// exBy are the exchange hooks that take an exchange whose request
	// has API key k (KeyedExchangeHook), in the order of ex; keys no
	// rule lists share one slice.
	exBy [maxKeyed][]ExchangeHook
	// x and e are reused for every event (the hooks must not keep them).
	x Exchange
	e ConnEvent
	// answers is the buffer of Exchange.Answers, reused for every
	// exchange.
	answers answerBuf
	// lag is the Delivery's lag table, if a rule follows lag (LagHook).
	lag *flows.LagTable
	// limits bound the findings listed.
	limits Limits
	// notListed counts the findings the limits left out of the last
	// Findings or Snapshot.
	notListed int64
}

// Limits bound the findings a run lists: at most PerRule of each rule and
// Total in all, the most severe and earliest first. The rest are counted,
// and summarised by one finding per rule that had findings cut (its
// severity the worst of them, so that --fail-on still sees them).
type Limits struct {
	PerRule, Total int
}

// DefaultLimits are the limits of a Set unless SetLimits changes them:
// a capture of a large incident gives a few dozen findings (the rules
// merge a client's partitions and topics); thousands are hostile traffic
// or a capture of many incidents, which a filter splits better.
var DefaultLimits = Limits{PerRule: 200, Total: 1000}

// SetLimits changes the limits on the findings listed (0: the default).
func (s *Set) SetLimits(l Limits) {
	if l.PerRule <= 0 {
		l.PerRule = DefaultLimits.PerRule
	}
	if l.Total <= 0 {
		l.Total = DefaultLimits.Total
	}
	s.limits = l
}

// Limits returns the limits in force.
func (s *Set) Limits() Limits { return s.limits }

// Cut returns what bounds kept out: the findings not listed by the last
// Findings ("findings_not_listed") and what each rule's bounds kept out
// of its judgement (Bounded), as "rule.name"; counts of zero are left
// out.
func (s *Set) Cut() map[string]int64 {
	out := map[string]int64{}
	if s.notListed > 0 {
		out["findings_not_listed"] = s.notListed
	}
	for i, r := range s.rules {
		b, ok := r.(Bounded)
		if !ok {
			continue
		}
		for k, n := range b.Cut() {
			if n > 0 {
				out[s.analyzers[i].Name+"."+k] += n
			}
		}
	}
	return out
}

// NewSet makes the rules of the analyzers, with their parameters changed by
// settings (rule name -> parameter -> value, as -o gives them).
func NewSet(analyzers []*Analyzer, settings map[string]map[string]string) (*Set, error) {
	if err := unknownRule(analyzers, settings); err != nil {
		return nil, err
	}
	s := &Set{analyzers: analyzers, limits: DefaultLimits}
	for _, a := range analyzers {
		r, err := a.New(settings[a.Name])
		if err != nil {
			return nil, err
		}
		s.rules = append(s.rules, r)
		if h, ok := r.(RequestHook); ok {
			s.req = append(s.req, h)
		}
		if h, ok := r.(ExchangeHook); ok {
			s.ex = append(s.ex, h)
		}
		if h, ok := r.(ConnHook); ok {
			s.conn = append(s.conn, h)
		}
	}
	s.keyExchanges()
	return s, nil
}

// maxKeyed bounds the API keys KeyedExchangeHook may list (kmsg's
// highest is under 100).
const maxKeyed = 128

// keyExchanges makes exBy from ex.
func (s *Set) keyExchanges() {
	// Each hook is asked once (start-up: a type assertion and an
	// ExchangeKeys slice per hook and key cost a run of a small capture
	// about 0.5 % of its time).
	var all []ExchangeHook // the hooks that list no keys
	keys := make([][]kmsg.Key, len(s.ex))
	keyed := make([]bool, len(s.ex))
	var listed [maxKeyed]bool
	for i, h := range s.ex {
		kh, ok := h.(KeyedExchangeHook)
		if !ok {
			all = append(all, h)
			continue
		}
		keyed[i], keys[i] = true, kh.ExchangeKeys()
		for _, k := range keys[i] {
			if k < 0 || k >= maxKeyed {
				panic(fmt.Sprintf("detectors: ExchangeKeys lists API key %d, out of [0, %d)", k, maxKeyed))
			}
			listed[k] = true
		}
	}
	for k := range s.exBy {
		if !listed[k] {
			s.exBy[k] = all
			continue
		}
		var l []ExchangeHook
		for i, h := range s.ex {
			if !keyed[i] || slices.Contains(keys[i], kmsg.Key(k)) {
				l = append(l, h)
			}
		}
		s.exBy[k] = l
	}
}

// exchangeHooks are the hooks that take x.
func (s *Set) exchangeHooks(x *flows.Exchange) []ExchangeHook {
	if x.Req == nil || x.Req.Key < 0 || x.Req.Key >= maxKeyed || x.Resp != nil && x.Resp.Key != x.Req.Key {
		return s.ex
	}
	return s.exBy[x.Req.Key]
}

// CheckSettings reports the first error NewSet would return for
// settings, without making the rules.
func CheckSettings(analyzers []*Analyzer, settings map[string]map[string]string) error {
	if err := unknownRule(analyzers, settings); err != nil {
		return err
	}
	for _, a := range analyzers {
		if _, err := a.set(settings[a.Name]); err != nil {
			return err
		}
	}
	return nil
}

func unknownRule(analyzers []*Analyzer, settings map[string]map[string]string) error {
	for name := range settings {
		if !slices.ContainsFunc(analyzers, func(a *Analyzer) bool { return a.Name == name }) {
			for param := range settings[name] {
				return fmt.Errorf("unknown detector setting %q (kfsniff --list-detectors lists them)", name+"."+param)
			}
		}
	}
	return nil
}

// Analyzers returns the analyzers the set runs.
func (s *Set) Analyzers() []*Analyzer { return s.analyzers }

// SetKeepClosed tells the rules flows.Config.KeepClosed (Pass.KeepClosed).
func (s *Set) SetKeepClosed(d time.Duration) { s.pass.KeepClosed = d }

// SetPorts tells the rules the run's Kafka ports.
func (s *Set) SetPorts(p *flows.Ports) { s.pass.Ports = p }

func (s *Set) at(c *flows.ConnInfo, m *flows.Message) {
	if s.pass.Nodes == nil && c != nil {
		s.pass.Nodes = c.Nodes()
	}
	if m != nil {
		if s.pass.Start.IsZero() || m.Time.Before(s.pass.Start) {
			s.pass.Start = m.Time
		}
		if m.Time.After(s.pass.End) {
			s.pass.End = m.Time
		}
	}
}

// OnRequest implements flows.RequestHandler.
func (s *Set) OnRequest(m *flows.Message) {
	s.at(m.Conn, m)
	for _, h := range s.req {
		h.Request(&s.pass, m)
	}
}

// OnExchange implements flows.ExchangeHandler.
func (s *Set) OnExchange(x *flows.Exchange) {
	m := x.Resp
	if m == nil {
		m = x.Req
	}
	s.at(&x.Conn.ConnInfo, m)
	s.x = Exchange{Conn: &x.Conn.ConnInfo, Req: x.Req, Resp: x.Resp, Unanswered: x.Unanswered,
		NoResponse: x.NoResponse, OneSided: x.OneSided, Again: x.Again, ConnGaps: x.ConnGaps, Lag: s.lag.Samples(),
		buf: &s.answers}
	for _, h := range s.exchangeHooks(x) {
		h.Exchange(&s.pass, &s.x)
	}
	s.x = Exchange{}
	if s.answers.produced {
		s.answers.release()
	}
}

// OnConnEvent implements flows.ConnHandler.
func (s *Set) OnConnEvent(e *flows.ConnEvent) {
	var c *flows.ConnInfo
	if e.Conn != nil {
		c = &e.Conn.ConnInfo
	}
	s.at(c, nil)
	s.e = ConnEvent{Kind: e.Kind, Conn: c, Client: e.Client, Server: e.Server, File: e.File, Packet: e.Packet,
		Time: e.Time, Attempts: e.Attempts}
	for _, h := range s.conn {
		h.ConnEvent(&s.pass, &s.e)
	}
	s.e = ConnEvent{}
}

// Findings collects every rule's findings at the end of the run: p is what
// the pipeline knows then. Most severe first, then by time and rule, so
// output is deterministic. Some rules finalise their state (Snapshotter).
func (s *Set) Findings(p Pass) []Finding { return s.findings(p, false) }

// Snapshot returns the findings as they stand, as Findings would now,
// without finalising or disturbing any rule: it may be called any number
// of times while the capture runs (on the goroutine that feeds the Set
// its events), and the final findings are the same as without it. The
// findings share no state the rules change later.
func (s *Set) Snapshot(p Pass) []Finding { return s.findings(p, true) }

func (s *Set) findings(p Pass, snapshot bool) []Finding {
	if p.Nodes == nil {
		p.Nodes = s.pass.Nodes
	}
	if p.Ports == nil {
		p.Ports = s.pass.Ports
	}
	var out []Finding
	generic := map[int]bool{}
	cuts := map[string]*cut{}
	p.MaxFindings = s.limits.PerRule
	for i, r := range s.rules {
		var fs []Finding
		if sn, ok := r.(Snapshotter); ok && snapshot {
			fs = sn.Snapshot(&p)
		} else {
			fs = r.Findings(&p)
		}
		// A rule's own summary of what it did not list.
		kept := fs[:0]
		for j := range fs {
			if c := fs[j].notListed; c != nil {
				cutOf(cuts, s.analyzers[i].Name).absorb(c)
				continue
			}
			kept = append(kept, fs[j])
		}
		clear(fs[len(kept):])
		fs = kept
		if len(fs) > s.limits.PerRule {
			sortFindings(fs)
			for j := range fs[s.limits.PerRule:] {
				cutOf(cuts, s.analyzers[i].Name).add(&fs[s.limits.PerRule+j])
			}
			clear(fs[s.limits.PerRule:])
			fs = fs[:s.limits.PerRule]
		}
		for _, f := range fs {
			if f.Detector == "" {
				f.Detector = s.analyzers[i].Name
			}
			f.fill()
			if s.analyzers[i].Generic {
				generic[len(out)] = true
			}
			out = append(out, f)
		}
	}
	// A generic finding explained by a specific one is info and names it;
	// one already info still names it, so that a reader is sent there.
	// A finding about reconnects or rebalances (Subject.Reconnects,
	// Rebalances) is explained the same way by another rule naming their
	// cause (transactional-fencing, member-evicted).
	for i := range out {
		if !generic[i] && !out[i].Subject.Reconnects && !out[i].Subject.Rebalances {
			continue
		}
		for j := range out {
			g := &out[j]
			if !generic[i] && !(g.Subject.Reconnects && out[i].Subject.Reconnects) && !(g.Subject.Rebalances && out[i].Subject.Rebalances) {
				// A specific finding (a storm's or a loop's cause among
				// them) is explained only as a storm or loop: one that
				// shares its error code is not its cause (recorded on
				// Apache Kafka 4.1.1, java-txn-fenced: producer-sequence's
				// INVALID_PRODUCER_EPOCH had demoted transactional-fencing).
				continue
			}
			if !generic[j] && g.Detector != out[i].Detector && g.Severity >= out[i].Severity && g.Subject.Explains(&out[i].Subject) {
				f := &out[i]
				f.Severity = Info
				f.Summary += " (explained by " + g.Detector + ")"
				if f.Fields == nil {
					f.Fields = map[string]any{}
				}
				f.Fields["explained_by"] = g.Detector
				break
			}
		}
	}
	sortFindings(out)
	if len(out) > s.limits.Total {
		for i := range out[s.limits.Total:] {
			f := &out[s.limits.Total+i]
			cutOf(cuts, f.Detector).add(f)
		}
		clear(out[s.limits.Total:])
		out = out[:s.limits.Total]
	}
	s.notListed = 0
	if len(cuts) > 0 {
		for name, c := range cuts {
			s.notListed += c.n
			out = append(out, c.finding(name, s.limits))
		}
		sortFindings(out)
	}
	return out
}

// sortFindings orders findings most severe first, then by time and rule.
func sortFindings(out []Finding) {
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(b.Severity, a.Severity), a.First.Compare(b.First), cmp.Compare(a.Detector, b.Detector))
	})
}
