package stalledfetch

import (
	"fmt"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
	"github.com/kfsniff/kfsniff/detectors/internal/spell"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// stuck is the evidence of one stuck fetch, formatted if it is listed.
type stuck struct {
	packet  uint64
	file    int32
	corr    int32
	version int16
	code    int16
	offset  int64
	hw      int64
	conn    *flows.ConnInfo
}

// Evidence implements detectors.Evidencer.
func (s stuck) Evidence() detectors.Evidence {
	what := fmt.Sprintf("Fetch v%d corr %d to %s at offset %d: 0 records, high watermark %d", s.version,
		s.corr, peers.Addr(s.conn.Server), s.offset, s.hw)
	if s.code != 0 {
		what += ", " + detectors.ErrorName(s.code)
	}
	return detectors.Evidence{File: int(s.file), Packet: s.packet, Conn: s.conn.ID, What: what}
}

// Finding is one fetcher stuck at one offset of one partition. Its
// exported fields are the finding's "fields".
type Finding struct {
	peers.Fields
	FetchOffset   int64 `json:"fetch_offset"`
	HighWatermark int64 `json:"high_watermark"` // -1: no answer said
	// Duration is the span of the stuck fetches; HeldS how long the
	// fetcher was held up (to the fetch that moved it, if one followed
	// promptly); Ongoing that it was still stuck when the capture ended.
	Duration float64  `json:"duration_s"`
	HeldS    float64  `json:"held_s"`
	Ongoing  bool     `json:"ongoing"`
	Rate     float64  `json:"rate_per_s"`
	Servers  []string `json:"servers"`
	Role     string   `json:"role"`
	// Isolation and the last stable offset, for read_committed fetches.
	Isolation        string `json:"isolation,omitempty"`
	LastStableOffset *int64 `json:"last_stable_offset,omitempty"`
	// Error is the most frequent error of the answers, if any.
	Error string `json:"error,omitempty"`

	Who, TopicPartition string
	Node                int32
	FetcherRole         cluster.Role
	LSO                 int64
	Committed           bool
	Span                time.Duration
	Held                time.Duration
	Healed              bool
	Code                int16
	CodeN               int64
	Codes               []string
	ServerLabels        []string

	// The counts: the fetches that got nothing, Records none of them
	// (always 0, the count that says so), ErrorResponses of them answered
	// with an error, Throttled of them throttled.
	Fetches        int64 `count:"fetches"`
	Records        int64 `count:"records"`
	ErrorResponses int64 `count:"errors"`
	Throttled      int64 `count:"throttled,omitempty"`
}

// finding makes the finding of window w; open if it was still stuck when
// the capture ended.
func finding(p *detectors.Pass, w *window, open bool) detectors.Finding {
	c := w.key.C
	dur := w.duration()
	held, healed := w.held()
	code, codeN := w.codes.Top()
	f := &Finding{
		Fields: w.key.Fields(), FetchOffset: w.offset,
		HighWatermark: w.hw, Duration: text.Seconds(dur), HeldS: text.Seconds(held), Ongoing: open,
		Rate: text.Rate(w.fetches, dur), Servers: w.servers.Strings(),
		Role:           w.role.String(),
		TopicPartition: peers.Label(w.key.P), Node: peers.NodeOf(p, w.fetcher, c.Host), FetcherRole: w.role, Fetches: w.fetches, ErrorResponses: w.errors, Throttled: w.throttled,
		LSO: w.lso, Committed: w.committed, Span: dur, Held: held, Healed: healed, Code: code, CodeN: codeN, Codes: w.codes.Parts(),
		ServerLabels: w.servers.Labels(p),
	}
	if w.committed {
		f.Isolation, f.LastStableOffset = "read_committed", new(w.lso)
	}
	if code != 0 {
		f.Error = detectors.ErrorName(code)
	}
	f.Who = text.Or(c.ID, "fetcher")
	if f.Node >= 0 {
		f.Who += fmt.Sprintf(" (node %d, %s)", f.Node, c.Host)
	} else {
		f.Who += " (" + c.Host.String() + ")"
	}
	nodes := peers.NodeIDs(p, []*peers.Servers{&w.servers}, f.Node)
	return detectors.Finding{
		Severity: detectors.Grade(held, open),
		First:    w.first,
		Last:     w.last,
		Conns:    w.conns.IDs(),
		Nodes:    nodes,
		Evidence: w.ev.List(),
		Subject:  w.key.Subject(&w.servers, nodes, code),
		Detail:   f,
	}
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	hw := fmt.Sprintf("high watermark %d", f.HighWatermark)
	if f.HighWatermark < 0 {
		hw = "high watermark unknown"
	}
	var s string
	if f.Code != 0 {
		s = fmt.Sprintf("%s is stuck at offset %d of %s: %d fetches in %s brought 0 records (%s, %s x%d)",
			f.Who, f.FetchOffset, f.TopicPartition, f.Fetches, text.Duration(f.Span), hw, f.Error, f.CodeN)
	} else {
		s = fmt.Sprintf("%s is stuck at offset %d of %s: %d fetches in %s brought 0 records though the %s",
			f.Who, f.FetchOffset, f.TopicPartition, f.Fetches, text.Duration(f.Span), hw)
	}
	return s + spell.Tail(f.Ongoing, f.Healed, f.Held, "stuck", "moving again", "stuck fetch")
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var state string
	codes := strings.Join(f.Codes, ", ")
	switch {
	case f.ErrorResponses == f.Fetches && f.HighWatermark < 0:
		state = fmt.Sprintf("every answer was an error (%s) and none reported a high watermark", codes)
	case f.ErrorResponses > 0:
		state = fmt.Sprintf("%d answers were errors (%s); the high watermark stayed at %d", f.ErrorResponses, codes, f.HighWatermark)
	default:
		bound := fmt.Sprintf("the high watermark stayed at %d, %d records ahead of it", f.HighWatermark, f.HighWatermark-f.FetchOffset)
		if f.Committed && f.LSO >= 0 {
			bound = fmt.Sprintf("the last stable offset stayed at %d, %d records ahead of it", f.LSO, f.LSO-f.FetchOffset)
		}
		state = "no answer carried an error, yet " + bound
	}
	var felt string
	switch {
	case f.Ongoing:
		felt = fmt.Sprintf(" It was still stuck when the capture ended, %s after its first stuck fetch.", text.Duration(f.Held))
	case f.Healed:
		felt = fmt.Sprintf(" A fetch moved it again %s after the first stuck one: that long the %s was held up.", text.Duration(f.Held), f.kind())
	default:
		felt = fmt.Sprintf(" No fetch moved it at once afterwards: it was stuck for %s.", text.Duration(f.Held))
	}
	return fmt.Sprintf("%s fetched %s %d times over %s (%.1f/s) from %s, and its position never moved: every fetch "+
		"asked for offset %d and every answer brought 0 records; %s. Request and response counters rising on this "+
		"connection is not health: the %s of this partition is not advancing.%s",
		f.Who, f.TopicPartition, f.Fetches, text.Duration(f.Span), f.Rate, strings.Join(f.ServerLabels, ", "), f.FetchOffset, state, f.kind(), felt)
}

// kind is what the fetcher does.
func (f *Finding) kind() string {
	switch f.FetcherRole {
	case cluster.RoleRaft:
		return "metadata replication"
	case cluster.RoleReplication:
		return "replication"
	}
	return "consumption"
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	switch f.FetcherRole {
	case cluster.RoleRaft:
		return fmt.Sprintf("This is the node's KRaft metadata log: kafka-metadata-quorum.sh describe --replication (node %d's LogEndOffset "+
			"and Lag), and on the node raft-metrics fetch-records-rate (0), high-watermark (frozen) and broker-metadata-metrics "+
			"last-applied-record-lag-ms (rising). A not-leader-loop finding says where its fetches go instead.", f.Node)
	case cluster.RoleReplication:
		return fmt.Sprintf("On the leader: kafka-topics.sh --describe --topic %s (is the follower still in the ISR?) and "+
			"kafka.server:type=FetcherLagMetrics on node %d; the follower's server.log for the partition's fetcher errors.", f.Topic, f.Node)
	}
	hint := ""
	if f.Code != 0 {
		hint = " (" + f.Error + ": act on it, e.g. the leader it names)"
	}
	return fmt.Sprintf("kafka-consumer-groups.sh --describe --group <group> (CURRENT-OFFSET %d vs LOG-END-OFFSET for %s); "+
		"the consumer's logs for errors on the partition%s; if there is no error, a record larger than the fetch limits "+
		"(max.partition.fetch.bytes, fetch.max.bytes) or a consumer discarding what it receives.", f.FetchOffset, f.TopicPartition, hint)
}
