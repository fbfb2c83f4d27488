package correlate

import (
	"hash/maphash"
	"slices"
	"time"
)

// Skew estimates the clock offsets between agents from the exchanges two
// agents both captured: the same client and server endpoints, API key and
// version, correlation id and client id, answered, shipped by each. As NTP does, with A's
// request and response times and B's of the same exchange,
//
//	offset(B - A) = ((tB_req - tA_req) + (tB_resp - tA_resp)) / 2
//
// (the response time is ts_ns + latency_ns): the network's delay each way
// cancels when it is the same both ways, and the error is at most half the
// difference of the two latencies when it is not (the delay reported).
// The estimate of a pair of agents is the median of its samples (the most
// recent 1024), with their interquartile range as its spread.
//
// Offsets are given relative to a reference agent: the one with the most
// records (ties: the first name in order) when offsets were first
// estimated, kept from then on. An agent that saw no
// connection with the reference is reached through others when it can be
// (its offset to one agent plus that agent's to the reference: Via), else
// its offset is unknown.
//
// Memory is bounded: each agent's answered exchanges wait for a partner in
// a window of the most recent Window of them (and 262144 across agents);
// older ones are evicted and counted. At most 256 agents are followed.
// Not safe for concurrent use.
type Skew struct {
	window int
	agents map[string]int32
	names  []string
	// records counts every record of each agent, for the reference.
	records []int64
	rings   []ring
	waiting map[xkey]*slot
	pairs   map[[2]int32]*pair

	exchanges, matched, evicted int64
	// total is how many exchanges wait, across agents.
	total int
	// ref is the reference agent once offsets were estimated (-1
	// before); cache the estimates Offset gives, computed at cachedAt
	// samples.
	ref      int32
	cache    map[string]Estimate
	cachedAt int64
	seed     maphash.Seed
}

// DefaultWindow is how many exchanges per agent wait for a partner.
const DefaultWindow = 16384

// maxWaiting bounds the exchanges waiting across agents (about 200 bytes
// each): past it an agent's oldest make room, the busiest agent's when
// the new one's agent has none waiting.
const maxWaiting = 1 << 18

// maxAgents bounds the agents followed (names come from the records).
const maxAgents = 256

// maxSamples is how many recent samples a pair of agents keeps;
// maxPairs how many pairs of agents keep samples (others' are counted
// as matched, not kept).
const (
	maxSamples = 1024
	maxPairs   = 4096
)

// maxPairConns bounds the distinct connections counted per pair.
const maxPairConns = 4096

// xkey names one exchange whichever agent captured it: the endpoints,
// API key and version, correlation id and client id (the last two make a
// chance meeting of two connections on the same addresses, a port used
// again or two hosts' loopback, unlikely to pass for one exchange).
//
// The strings are kept as 64-bit hashes (seeded per Skew): a waiting
// exchange costs the same whatever its client id (a record may carry
// MaxString bytes), and two different exchanges take one key with a
// chance of about n²/2⁶⁵ for n waiting.
type xkey struct {
	conn, clientID uint64 // hashes of client and server; of the client id
	api, ver       int16
	corr           int32
}

// obs is one agent's capture of an exchange.
type obs struct {
	agent     int32
	matched   bool
	req, resp int64
}

// slot is what the agents captured of one exchange, waiting.
type slot struct{ obs []obs }

// maxObs bounds the agents one exchange is matched across.
const maxObs = 8

type ring struct {
	keys       []xkey
	head, size int
}

// pair is what two agents (a < b) saw in common.
type pair struct {
	offsets, delays []int64 // rings of the most recent samples
	next            int
	samples         int64
	conns           map[uint64]struct{} // connections' hashes (xkey.conn)
	connsOver       int64
}

// NewSkew makes an estimator whose agents' windows hold window exchanges
// each (DefaultWindow when 0 or less).
func NewSkew(window int) *Skew {
	orDefault(&window, DefaultWindow)
	return &Skew{seed: maphash.MakeSeed(), ref: -1, window: window, agents: map[string]int32{}, waiting: map[xkey]*slot{}, pairs: map[[2]int32]*pair{}}
}

// agent is the index of an agent, added if there is room (-1 past
// maxAgents).
func (s *Skew) agent(name string) int32 {
	if i, ok := s.agents[name]; ok {
		return i
	}
	if len(s.names) >= maxAgents {
		return -1
	}
	i := int32(len(s.names))
	s.agents[name] = i
	s.names = append(s.names, name)
	s.records = append(s.records, 0)
	s.rings = append(s.rings, ring{})
	return i
}

// Add takes one record of any type: every record counts for its agent (the
// reference is the agent with the most); an answered exchange is matched
// with the other agents' captures of it. The records of one exchange split
// by partition count once.
func (s *Skew) Add(r *Record) {
	a := s.agent(r.Agent)
	if a < 0 {
		return
	}
	s.records[a]++
	if r.Type != TypeExchange || r.Status != "answered" || !r.Latency.Set || r.Client == "" || r.Server == "" {
		return
	}
	k := xkey{conn: maphash.Comparable(s.seed, [2]string{r.Client, r.Server}), clientID: maphash.String(s.seed, r.ClientID.V),
		api: r.API, ver: r.Ver, corr: r.Corr}
	resp := r.TS + r.Latency.V
	sl := s.waiting[k]
	if sl == nil {
		sl = &slot{}
		s.waiting[k] = sl
	}
	for i := range sl.obs {
		if sl.obs[i].agent == a {
			return // another partition's record of the same exchange
		}
	}
	if len(sl.obs) >= maxObs {
		return
	}
	s.exchanges++
	me := obs{agent: a, req: r.TS, resp: resp}
	for i := range sl.obs {
		o := &sl.obs[i]
		s.sample(o, &me, k)
		o.matched, me.matched = true, true
	}
	sl.obs = append(sl.obs, me)
	s.push(a, k)
}

// sample adds the offset between two captures of one exchange to their
// pair, as the later agent's clock minus the earlier's.
func (s *Skew) sample(x, y *obs, k xkey) {
	if x.agent > y.agent {
		x, y = y, x
	}
	id := [2]int32{x.agent, y.agent}
	p := s.pairs[id]
	if p == nil {
		if len(s.pairs) >= maxPairs {
			s.matched++
			return
		}
		p = &pair{conns: map[uint64]struct{}{}}
		s.pairs[id] = p
	}
	off := ((y.req - x.req) + (y.resp - x.resp)) / 2
	delay := (x.resp - x.req) - (y.resp - y.req)
	if delay < 0 {
		delay = -delay
	}
	if len(p.offsets) < maxSamples {
		p.offsets = append(p.offsets, off)
		p.delays = append(p.delays, delay)
	} else {
		p.offsets[p.next], p.delays[p.next] = off, delay
		p.next = (p.next + 1) % maxSamples
	}
	p.samples++
	s.matched++
	c := k.conn
	if _, ok := p.conns[c]; !ok {
		if len(p.conns) < maxPairConns {
			p.conns[c] = struct{}{}
		} else {
			p.connsOver++
		}
	}
}

// push puts an exchange in its agent's window, evicting the oldest when
// full (or when all the agents' windows together are).
func (s *Skew) push(a int32, k xkey) {
	if s.total >= maxWaiting {
		victim := a
		if s.rings[a].size == 0 {
			for i := range s.rings {
				if s.rings[i].size > s.rings[victim].size {
					victim = int32(i)
				}
			}
		}
		s.pop(victim)
	}
	rg := &s.rings[a]
	if rg.keys == nil {
		rg.keys = make([]xkey, 0, min(s.window, 1024))
	}
	if rg.size == s.window {
		s.pop(a)
	}
	if len(rg.keys) < s.window {
		rg.keys = append(rg.keys, k)
	} else {
		rg.keys[(rg.head+rg.size)%s.window] = k
	}
	rg.size++
	s.total++
}

// pop evicts an agent's oldest waiting exchange.
func (s *Skew) pop(a int32) {
	rg := &s.rings[a]
	if rg.size == 0 {
		return
	}
	old := rg.keys[rg.head]
	rg.keys[rg.head] = xkey{}
	rg.head = (rg.head + 1) % s.window
	rg.size--
	s.total--
	s.drop(a, old)
}

// drop removes an agent's capture of an exchange from the waiting ones.
func (s *Skew) drop(a int32, k xkey) {
	sl := s.waiting[k]
	if sl == nil {
		return
	}
	for i := range sl.obs {
		if sl.obs[i].agent == a {
			if !sl.obs[i].matched {
				s.evicted++
			}
			sl.obs = slices.Delete(sl.obs, i, i+1)
			break
		}
	}
	if len(sl.obs) == 0 {
		delete(s.waiting, k)
	}
}

// Estimate is an agent's clock offset from the reference agent's.
type Estimate struct {
	// Offset is the agent's clock minus the reference's: subtract it
	// from the agent's times to put them on the reference's clock.
	Offset time.Duration
	// Spread is the samples' interquartile range (summed along Via);
	// Delay the median difference of the two agents' latencies of the
	// same exchanges (the largest along Via).
	Spread, Delay time.Duration
	// Samples and Connections are of the pair's (the least sampled
	// link's along Via).
	Samples, Connections int64
	// Via are the agents between this one and the reference.
	Via []string
}

// Reference is the agent offsets are relative to: the one with the most
// records (ties: the first name in order) when offsets were first
// estimated (two agents had an exchange in common), and from then on,
// so that an agent's corrected times do not jump when another agent
// overtakes it; before that the one with the most records so far; ""
// before any record.
func (s *Skew) Reference() string {
	if s.ref >= 0 {
		return s.names[s.ref]
	}
	return s.mostRecords()
}

func (s *Skew) mostRecords() string {
	best := int32(-1)
	for i := range s.names {
		if best < 0 || s.records[i] > s.records[best] || s.records[i] == s.records[best] && s.names[i] < s.names[best] {
			best = int32(i)
		}
	}
	if best < 0 {
		return ""
	}
	return s.names[best]
}

// Offset is agent's clock offset from the reference's, false when it
// cannot be estimated (the reference's own is 0, true): subtract it from
// the agent's times to put them on the reference's clock. Cheap enough
// for every record: the estimates are computed again only once samples
// have grown by an eighth since the last time (16 at least, 1024 at
// most), so an offset lags its newest samples by that much.
func (s *Skew) Offset(agent string) (time.Duration, bool) {
	if s.cache == nil || s.matched-s.cachedAt >= min(max(16, s.cachedAt/8), maxSamples) {
		s.cache, s.cachedAt = s.Estimates(), s.matched
	}
	e, ok := s.cache[agent]
	return e.Offset, ok
}

// link is one pair's estimate, oriented.
type link struct {
	offset, spread, delay int64
	samples, conns        int64
}

func (p *pair) estimate() link {
	offs := slices.Clone(p.offsets)
	slices.Sort(offs)
	dels := slices.Clone(p.delays)
	slices.Sort(dels)
	n := len(offs)
	return link{offset: offs[n/2], spread: offs[n*3/4] - offs[n/4], delay: dels[n/2],
		samples: p.samples, conns: int64(len(p.conns)) + p.connsOver}
}

// Estimates are the offsets of every agent that has one, by name,
// reference included (0): the shortest chain of pairs from the reference,
// the best sampled of equal length.
func (s *Skew) Estimates() map[string]Estimate {
	out := map[string]Estimate{}
	if s.ref < 0 && len(s.pairs) > 0 {
		s.ref = s.agents[s.mostRecords()]
	}
	ref := s.Reference()
	if ref == "" {
		return out
	}
	links := map[int32]map[int32]link{}
	for id, p := range s.pairs {
		if p.samples == 0 {
			continue
		}
		l := p.estimate()
		back := l
		back.offset = -l.offset
		if links[id[0]] == nil {
			links[id[0]] = map[int32]link{}
		}
		if links[id[1]] == nil {
			links[id[1]] = map[int32]link{}
		}
		links[id[0]][id[1]] = l // id[1]'s clock minus id[0]'s
		links[id[1]][id[0]] = back
	}
	type state struct {
		est  Estimate
		weak int64 // least samples along the chain
		prev int32
	}
	r := s.agents[ref]
	got := map[int32]*state{r: {weak: 1 << 62, prev: -1}}
	level := []int32{r}
	for len(level) > 0 {
		next := map[int32]*state{}
		// Visit in index order, so that equal chains resolve the same
		// way every time.
		slices.Sort(level)
		for _, a := range level {
			sa := got[a]
			for b, l := range links[a] {
				if _, done := got[b]; done {
					continue
				}
				weak := min(sa.weak, l.samples)
				if cur, ok := next[b]; ok && (cur.weak > weak || cur.weak == weak && cur.prev < a) {
					continue
				}
				e := Estimate{Offset: sa.est.Offset + time.Duration(l.offset), Spread: sa.est.Spread + time.Duration(l.spread),
					Delay: max(sa.est.Delay, time.Duration(l.delay))}
				if sa.prev < 0 || l.samples < sa.est.Samples {
					e.Samples, e.Connections = l.samples, l.conns
				} else {
					e.Samples, e.Connections = sa.est.Samples, sa.est.Connections
				}
				if sa.prev >= 0 {
					e.Via = append(slices.Clone(sa.est.Via), s.names[a])
				}
				next[b] = &state{est: e, weak: weak, prev: a}
			}
		}
		level = level[:0]
		for b, st := range next {
			got[b] = st
			level = append(level, b)
		}
	}
	for a, st := range got {
		out[s.names[a]] = st.est
	}
	return out
}

// Counts are the estimator's counts: answered exchanges offered,
// samples (exchange captures matched with another agent's), and captures
// evicted from a window before any partner came.
func (s *Skew) Counts() (exchanges, matched, evicted int64) {
	return s.exchanges, s.matched, s.evicted
}
