package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"

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

// maxLagLines bounds the series the text report lists (--json has all).
const maxLagLines = 200

// lag prints the lag of each fetcher's partitions: one line per series,
// consumers then followers.
func (p *printer) lag(r *Report) {
	if len(r.Lag) == 0 {
		return
	}
	p.f("\nLag (high watermark minus fetch offset, per fetcher and partition; records)\n")
	p.table("  FETCHER\tGROUP\tPARTITION\tFROM\tSAMPLES\tFIRST\tLAST\tMIN\tMAX\tOVER TIME\n", len(r.Lag), maxLagLines, "series", func(i int) string {
		l := &r.Lag[i]
		return fmt.Sprintf("  %s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", lagFetcher(l), lagGroup(l),
			Clean(l.Topic)+"-"+strconv.Itoa(int(l.Partition)), nodeLabel(l.Server, l.ServerNode), l.Samples,
			l.First.Lag, l.Last.Lag, l.Min.Lag, l.Max.Lag, lagOverTime(l))
	})
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
	return strings.Join(each(l.Groups, quoted), ",")
}

// lagOverTime shows the points' lags with the time of the first and last:
// "0 40 95 160 (15:04:05.1..15:04:20.3)".
func lagOverTime(l *Lag) string {
	if len(l.Points) == 0 {
		return "-"
	}
	lags := each(l.Points, func(pt LagPoint) string { return strconv.FormatInt(pt.Lag, 10) })
	return fmt.Sprintf("%s (%s..%s)", strings.Join(lags, " "), l.Points[0].Time.UTC().Format("15:04:05.0"),
		l.Points[len(l.Points)-1].Time.UTC().Format("15:04:05.0"))
}
