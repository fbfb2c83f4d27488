package report

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/flows"
)

// Lag is one fetcher's lag on one partition over the capture (the JSON
// report's lag[], docs/json.md): a consumer's distance behind the high
// watermark, or a follower's behind its leader's, from the Fetch exchanges.
type Lag struct {
	// Role is "consumer" or "replication".
	Role string `json:"role"`
	// Groups are the consumer groups of the client id and host (from
	// their JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit or
	// ConsumerGroupHeartbeat requests on any connection); empty when
	// unknown.
	Groups   []string `json:"groups"`
	ClientID string   `json:"client_id"`
	Client   string   `json:"client"`
	// ReplicaNode is a follower's node id.
	ReplicaNode *int32 `json:"replica_node,omitempty"`
	// Server is the broker last fetched from.
	Server        string `json:"server"`
	ServerNode    *int32 `json:"server_node,omitempty"`
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	ReadCommitted bool   `json:"read_committed,omitempty"`
	// Samples counts the points taken (one per Fetch exchange naming the
	// partition, or leaving it out of an incremental session unchanged).
	Samples int64 `json:"samples"`
	// First, Last, Min and Max are the first and last points and those
	// of least and most lag; Points up to LagPoints more, spread evenly
	// over the samples.
	First  LagPoint   `json:"first"`
	Last   LagPoint   `json:"last"`
	Min    LagPoint   `json:"min"`
	Max    LagPoint   `json:"max"`
	Points []LagPoint `json:"points"`
}

// LagPoint is one sample: at a Fetch response's packet, the fetch offset
// its request asked from, the high watermark it gave and the lag.
type LagPoint struct {
	Time          time.Time `json:"time"`
	File          int       `json:"file"`
	Packet        uint64    `json:"packet"`
	Conn          int       `json:"conn"`
	FetchOffset   int64     `json:"fetch_offset"`
	HighWatermark int64     `json:"high_watermark"`
	Lag           int64     `json:"lag"`
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
func (c *LagCollector) Rows(nodes *flows.Nodes) []Lag {
	out := []Lag{}
	for _, s := range c.table.Series(cluster.RoleNone) {
		t := c.tracks.Get(s.Index)
		if t == nil || t.n == 0 {
			continue // its samples never reached us (a handler before panicked)
		}
		k := &s.Key
		l := Lag{Role: s.Role().String(), Groups: c.table.Groups(k.Client.ID, k.Client.Host), ClientID: k.Client.ID, Client: k.Client.Host.String(),
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

func lagPoint(p flows.LagPoint) LagPoint {
	return LagPoint{Time: p.Time, File: p.File, Packet: p.Packet, Conn: p.Conn, FetchOffset: p.Offset, HighWatermark: p.HighWatermark, Lag: p.Lag}
}

// maxLagLines bounds the series the text report lists (--json has all).
const maxLagLines = 200

// lag prints the lag of each fetcher's partitions: one line per series,
// consumers then followers.
func (p *printer) lag(r *Report) {
	if len(r.Lag) == 0 {
		return
	}
	p.f("\nLag (high watermark minus fetch offset, per fetcher and partition; records)\n")
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  FETCHER\tGROUP\tPARTITION\tFROM\tSAMPLES\tFIRST\tLAST\tMIN\tMAX\tOVER TIME\n")
	for i, l := range r.Lag {
		if i == maxLagLines {
			break
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", lagFetcher(&l), lagGroup(&l),
			Clean(l.Topic)+"-"+strconv.Itoa(int(l.Partition)), nodeLabel(l.Server, l.ServerNode), l.Samples,
			l.First.Lag, l.Last.Lag, l.Min.Lag, l.Max.Lag, lagOverTime(&l))
	}
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
	if n := len(r.Lag) - maxLagLines; n > 0 {
		p.f("  ... and %d more series (--json lists them all)\n", n)
	}
	if r.LagDropped > 0 {
		p.f("  %d samples of partitions beyond the first %d series not followed\n", r.LagDropped, flows.DefaultMaxLagSeries)
	}
}

func lagFetcher(l *Lag) string {
	who := fmt.Sprintf("%q %s", Clean(l.ClientID), l.Client)
	if l.ReplicaNode != nil {
		return fmt.Sprintf("follower node %d (%s)", *l.ReplicaNode, who)
	}
	return "consumer " + who
}

func lagGroup(l *Lag) string {
	switch {
	case l.ReplicaNode != nil:
		return "-"
	case len(l.Groups) == 0:
		return "unknown group"
	}
	gs := make([]string, len(l.Groups))
	for i, g := range l.Groups {
		gs[i] = fmt.Sprintf("%q", Clean(g))
	}
	return strings.Join(gs, ",")
}

// lagOverTime shows the points' lags with the time of the first and last:
// "0 40 95 160 (15:04:05.1..15:04:20.3)".
func lagOverTime(l *Lag) string {
	if len(l.Points) == 0 {
		return "-"
	}
	parts := make([]string, len(l.Points))
	for i, pt := range l.Points {
		parts[i] = strconv.FormatInt(pt.Lag, 10)
	}
	return fmt.Sprintf("%s (%s..%s)", strings.Join(parts, " "), l.Points[0].Time.UTC().Format("15:04:05.0"),
		l.Points[len(l.Points)-1].Time.UTC().Format("15:04:05.0"))
}
