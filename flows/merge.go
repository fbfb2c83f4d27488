package flows

import (
	"cmp"
	"maps"
	"slices"
)

// Add adds the counters of o, another analyzer's over other connections
// of the same capture (see Config.Deferred), to s.
func (s *Stats) Add(o *Stats) {
	s.Packets += o.Packets
	s.Bytes += o.Bytes
	s.NonIP += o.NonIP
	s.NonTCP += o.NonTCP
	s.Fragments += o.Fragments
	s.Reassembled += o.Reassembled
	for k, v := range o.FragLost {
		if s.FragLost == nil {
			s.FragLost = make(map[string]int64)
		}
		s.FragLost[k] += v
	}
	s.FragLostBytes += o.FragLostBytes
	s.Truncated += o.Truncated
	s.BadPackets += o.BadPackets
	s.TCPPackets += o.TCPPackets
	s.KafkaPackets += o.KafkaPackets
	s.OtherTCP += o.OtherTCP
	if !o.FirstTime.IsZero() && (s.FirstTime.IsZero() || o.FirstTime.Before(s.FirstTime)) {
		s.FirstTime = o.FirstTime
	}
	if o.LastTime.After(s.LastTime) {
		s.LastTime = o.LastTime
	}
	s.FirstBad.keepFirst(o.FirstBad)
	s.FirstInternal.keepFirst(o.FirstInternal)
	// In order, so that which pairs are listed past the bound does not
	// depend on the map's.
	for _, k := range slices.SortedFunc(maps.Keys(o.UnknownAPIs), func(a, b UnknownAPI) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Version, b.Version))
	}) {
		s.countUnknown(k, o.UnknownAPIs[k])
	}
	s.UnknownAPIsNotListed += o.UnknownAPIsNotListed
	s.InternalErrors += o.InternalErrors
	s.IdleEvicted += o.IdleEvicted
	s.IdleForgotten += o.IdleForgotten
	s.KeptDropped += o.KeptDropped
	s.TLS.add(&o.TLS)
	s.Evicted.add(&o.Evicted)
}

// Fold adds the counters of a connection no longer listed.
func (e *EvictedConns) Fold(c *Conn) {
	e.add(&EvictedConns{
		Conns: 1, Requests: c.Requests, Responses: c.Responses, ErrorResponses: c.ErrorResponses,
		Unmatched: c.Unmatched, Unanswered: c.Unanswered, NoResponse: c.NoResponse, NotCaptured: c.NotCaptured, Gaps: c.Gaps, Lost: c.Lost[0] + c.Lost[1],
		FramingErrors: c.FramingErrors, DecodeErrs: c.DecodeErrors, Skipped: c.Skipped,
	})
}

// add adds the counters of f to e.
func (e *EvictedConns) add(f *EvictedConns) {
	e.Conns += f.Conns
	e.Aged += f.Aged
	e.Requests += f.Requests
	e.Responses += f.Responses
	e.ErrorResponses += f.ErrorResponses
	e.Unmatched += f.Unmatched
	e.Unanswered += f.Unanswered
	e.NoResponse += f.NoResponse
	e.NotCaptured += f.NotCaptured
	e.Lost += f.Lost
	e.Gaps += f.Gaps
	e.FramingErrors += f.FramingErrors
	e.DecodeErrs += f.DecodeErrs
	for k, v := range f.Skipped {
		if e.Skipped == nil {
			e.Skipped = map[string]int64{}
		}
		e.Skipped[k] += v
	}
}

// Abandon marks c broken at a packet after a handler panicked on one of
// its events (deferred analyzers: the panic is met where events are
// delivered). Call it only once the analyzer that owns c is done.
func (c *Conn) Abandon(file int, packet uint64, why string) {
	if c.Broken {
		return
	}
	c.Broken = true
	c.BrokenPacket, c.BrokenFile, c.BrokenWhy = packet, file, why
	c.problem(file, packet, "internal error, connection abandoned: "+why)
}

// MaxUnknownAPIs bounds the (key, version) pairs Stats.UnknownAPIs lists.
const MaxUnknownAPIs = 256

// UnknownKey is the key under which Conn.APIs counts the requests of every
// key kmsg does not know.
const UnknownKey int16 = -1

// countUnknown counts n requests of the unknown pair k: listed while the
// table has room, else in UnknownAPIsNotListed.
func (s *Stats) countUnknown(k UnknownAPI, n int) {
	if s.UnknownAPIs == nil {
		s.UnknownAPIs = make(map[UnknownAPI]int)
	}
	if _, ok := s.UnknownAPIs[k]; ok || len(s.UnknownAPIs) < MaxUnknownAPIs {
		s.UnknownAPIs[k] += n
		return
	}
	s.UnknownAPIsNotListed += int64(n)
}
