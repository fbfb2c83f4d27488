package collect

import (
	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// LagCollector gathers the lag of every consumer and follower for the
// report; the zero value is ready. Given the Delivery's table (UseLag, as
// the report's Collector is) it reads the samples the Delivery took of each
// exchange (LagTable.Samples); else it keeps a table of its own and
// feeds it (the TUI's model, read from the UI's goroutine).
type LagCollector struct {
	table  *flows.LagTable
	shared bool
	// tracks are the series' pictures, by LagSeries.Index.
	tracks flows.LagStates[LagTrack]
}

// UseLag implements flows.LagUser: it follows the Delivery's table.
func (c *LagCollector) UseLag(t *flows.LagTable) bool {
	c.table, c.shared = t, true
	return true
}

func (c *LagCollector) own() *flows.LagTable {
	if c.table == nil {
		c.table = new(flows.LagTable)
	}
	return c.table
}

// OnRequest learns consumer groups.
func (c *LagCollector) OnRequest(m *flows.Message) {
	if !c.shared {
		c.own().Request(m)
	}
}

// OnExchange samples a Fetch exchange.
func (c *LagCollector) OnExchange(x *flows.Exchange) {
	samples := c.table.Samples()
	if !c.shared {
		samples = c.own().Fetch(x.Req, x.Resp)
	}
	for i := range samples {
		s := &samples[i]
		if !s.S.InAll {
			continue
		}
		c.tracks.At(s.S.Index).Add(s.P)
	}
}

// Dropped counts the partitions asked beyond the series followed (the
// table was full).
func (c *LagCollector) Dropped() int64 {
	if c.table == nil {
		return 0
	}
	return c.table.Dropped
}

// Rows returns the series for the report, topic ids and node ids named
// from nodes (nil: as first known).
func (c *LagCollector) Rows(nodes *cluster.Nodes) []report.Lag {
	out := []report.Lag{}
	for _, s := range c.table.Series(cluster.RoleNone) {
		t := c.tracks.Get(s.Index)
		if t == nil || t.n == 0 {
			continue // its samples never reached us (a handler before panicked)
		}
		k := &s.Key
		l := report.Lag{Role: s.Role().String(), Groups: c.table.Groups(k.Client.ID, k.Client.Host), ClientID: k.Client.ID, Client: k.Client.Host.String(),
			Server: s.Server.String(), Partition: k.Partition.Num, ReadCommitted: s.ReadCommitted, Samples: t.n,
			First: lagPoint(t.First), Last: lagPoint(t.Last), Min: lagPoint(t.Min), Max: lagPoint(t.Max)}
		if l.Groups == nil {
			l.Groups = []string{}
		}
		if k.Replica >= 0 {
			id := k.Replica
			l.ReplicaNode = &id
		}
		l.Topic = s.Topic(nodes)
		if nodes != nil {
			if id := nodes.Server(s.Server); id >= 0 {
				l.ServerNode = &id
			}
		}
		for _, p := range t.Points() {
			l.Points = append(l.Points, lagPoint(p))
		}
		out = append(out, l)
	}
	return out
}

func lagPoint(p flows.LagPoint) report.LagPoint {
	return report.LagPoint{Time: p.Time, File: p.File, Packet: p.Packet, Conn: p.Conn, FetchOffset: p.Offset, HighWatermark: p.HighWatermark, Lag: p.Lag}
}

// LagPoints bounds the points a series keeps besides first, last, min and
// max.
const LagPoints = 8

// LagTrack is the bounded picture of one series: the first and last
// points, those of least and most lag, and up to LagPoints spread evenly
// over the samples (every step-th, the step doubling when they fill up).
type LagTrack struct {
	First, Last, Min, Max flows.LagPoint

	n    int64
	pts  [LagPoints]flows.LagPoint
	np   int
	step int64
}

// Add takes the next point.
func (t *LagTrack) Add(p flows.LagPoint) {
	if t.n == 0 {
		t.First, t.Min, t.Max, t.step = p, p, p, 1
	}
	if p.Lag < t.Min.Lag {
		t.Min = p
	}
	if p.Lag > t.Max.Lag {
		t.Max = p
	}
	t.Last = p
	i := t.n
	t.n++
	if i%t.step != 0 {
		return
	}
	if t.np == len(t.pts) {
		for k := range t.np / 2 {
			t.pts[k] = t.pts[2*k]
		}
		t.np /= 2
		t.step *= 2
		if i%t.step != 0 {
			return
		}
	}
	t.pts[t.np] = p
	t.np++
}

// Points returns the points kept, the last one included, in order.
func (t *LagTrack) Points() []flows.LagPoint {
	out := append([]flows.LagPoint(nil), t.pts[:t.np]...)
	if t.n > 0 && (t.np == 0 || out[t.np-1].Packet != t.Last.Packet || out[t.np-1].File != t.Last.File) {
		out = append(out, t.Last)
	}
	return out
}
