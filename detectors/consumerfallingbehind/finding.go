package consumerfallingbehind

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/lagev"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one consumer falling behind on one or more partitions; the
// numbers are those of its worst partition. Its exported fields are the
// finding's "fields".
type Finding struct {
	ClientID string   `json:"client_id"`
	Client   string   `json:"client"`
	Groups   []string `json:"groups"`
	// Partitions are those falling behind, worst first ("orders-0").
	Partitions []string `json:"partitions" count:"partitions,len"`
	Topic      string   `json:"topic"`
	Partition  int32    `json:"partition"`
	// LagStart, LagMax and LagEnd are the worst partition's lag where the
	// growth began, at its highest and at the last fetch of the episode.
	LagStart int64 `json:"lag_start"`
	LagMax   int64 `json:"lag_max" count:"lag_max"`
	LagEnd   int64 `json:"lag_end"`
	// FloorRise is how far its floor (the lowest lag of each slice of
	// time) rose; GrowthPerSec the lag's growth from the start to its
	// highest, per second.
	FloorRise    int64   `json:"floor_rise" count:"floor_rise"`
	GrowthPerSec float64 `json:"growth_per_s"`
	// BehindSeconds is how long the consumer was behind (start to the
	// last fetch of the episode).
	BehindSeconds float64 `json:"behind_s"`
	Fetches       int     `json:"fetches" count:"fetches"`
	// OffsetFrom and OffsetTo are the fetch offsets at the start and at
	// the last fetch: how far the consumer read meanwhile.
	OffsetFrom    int64    `json:"fetch_offset_from"`
	OffsetTo      int64    `json:"fetch_offset_to"`
	StillBehind   bool     `json:"still_behind"`
	ReadCommitted bool     `json:"read_committed,omitempty"`
	Servers       []string `json:"servers"`

	Episode Episode
	More    int
	Dropped int64
	Params  Params
}

func (r *rule) finding(p *detectors.Pass, k flows.LagKey, parts []part) detectors.Finding {
	w := &parts[0]
	s, e := w.s, &w.e
	f := &Finding{
		ClientID: k.Client.ID, Client: k.Client.Host.String(), Groups: r.table.Groups(k.Client.ID, k.Client.Host),
		Topic: s.Topic(p.Nodes), Partition: s.Key.Partition.Num,
		LagStart: e.Start.Lag, LagMax: e.Peak.Lag, LagEnd: e.Last.Lag, FloorRise: e.rise(),
		BehindSeconds: text.Seconds(e.behind()), GrowthPerSec: text.Rate(e.Peak.Lag-e.Start.Lag, e.Peak.Time.Sub(e.Start.Time)),
		Fetches: e.fetches, OffsetFrom: e.Start.Offset, OffsetTo: e.Last.Offset, StillBehind: w.ongoing,
		ReadCommitted: s.ReadCommitted, Episode: *e, More: len(parts) - 1, Dropped: r.table.RoleDropped(cluster.RoleConsumer), Params: r.p,
	}
	if f.Groups == nil {
		f.Groups = []string{}
	}
	sev := detectors.Info
	var (
		span  lagev.Span
		where lagev.Where
		ev    []detectors.Evidence
	)
	for i := range parts {
		pt := &parts[i]
		name := span.Add(pt.s.Topic(p.Nodes), pt.s.Key.Partition.Num, pt.e.Start.Time, pt.e.Last.Time)
		sev = max(sev, pt.sev)
		where.Add(pt.s.Server, pt.e.Start, pt.e.Peak, pt.e.Last)
		switch {
		case i == 0:
			ev = lagev.Append(ev, name, pt.e.Start, pt.e.Floor, pt.e.Peak, pt.e.Last, pt.e.End)
		case i < 4:
			ev = lagev.Append(ev, name, pt.e.Start, pt.e.Last)
		}
	}
	detectors.SortEvidence(ev)
	f.Partitions = span.Names
	subj := detectors.Subject{ClientIDs: []string{k.Client.ID}, Clients: []netip.Addr{k.Client.Host}, Partitions: span.Partitions}
	var nodes []int32
	f.Servers, subj.Servers, nodes = where.Servers(p)
	return detectors.Finding{
		Severity: sev,
		First:    span.First,
		Last:     span.Last,
		Conns:    where.Conns(),
		Nodes:    nodes,
		Evidence: ev,
		Subject:  subj,
		Detail:   f,
	}
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func (f *Finding) group() string {
	if len(f.Groups) == 0 {
		return "unknown group"
	}
	return "group " + strings.Join(text.Quote(f.Groups), ", ")
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("consumer %q on %s (%s) falling behind on %s-%d: lag grew from %d to %d records in %s (%s/s) over %s",
		f.ClientID, f.Client, f.group(), f.Topic, f.Partition, f.LagStart, f.LagMax, text.Duration(f.Episode.Peak.Time.Sub(f.Episode.Start.Time)),
		num(f.GrowthPerSec), text.Plural(f.Fetches, "fetch", "fetches"))
	if f.StillBehind {
		s += fmt.Sprintf(", %d behind at the end", f.LagEnd)
	} else {
		s += ", then caught up"
	}
	if f.More > 0 {
		s += fmt.Sprintf(" (and %s)", text.Plural(f.More, "more partition", "more partitions"))
	}
	return s
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	bound := "high watermark"
	if f.ReadCommitted {
		bound = "last stable offset (the consumer reads committed records only)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Each Fetch response gives the partition's %s and each request the offset the consumer reads from; "+
		"the difference is its lag, the records it has still to read (the consumer's records-lag metric, the LAG column of "+
		"kafka-consumer-groups.sh). On %s-%d it was %d at %s (packet %d) and rose to %d by %s (packet %d), %s records a "+
		"second, over %s from %s; even its lowest point in each %s rose, to %d at %s (packet %d), so this is growth, not "+
		"the ups and downs of fetching.", bound, f.Topic, f.Partition, f.LagStart, text.Clock(f.Episode.Start.Time), f.Episode.Start.Packet,
		f.LagMax, text.Clock(f.Episode.Peak.Time), f.Episode.Peak.Packet, num(f.GrowthPerSec), text.Plural(f.Fetches, "fetch", "fetches"),
		text.List(f.Servers, 3), text.Duration(f.Params.Window/slices), f.Episode.Floor.Lag, text.Clock(f.Episode.Floor.Time), f.Episode.Floor.Packet)
	if f.OffsetTo == f.OffsetFrom {
		fmt.Fprintf(&b, " Its fetch offset stayed at %d throughout: it fetches but does not move on (a record it cannot "+
			"process, a paused partition, a consumer that fetches without polling).", f.OffsetFrom)
	} else {
		fmt.Fprintf(&b, " It read on meanwhile (fetch offset %d to %d), more slowly than producers wrote: the consumer is alive "+
			"but cannot keep up, and every record waits longer before it is processed.", f.OffsetFrom, f.OffsetTo)
	}
	if f.StillBehind {
		fmt.Fprintf(&b, " When the capture ended it was %d records behind, its floor %d above where the growth began %s "+
			"earlier: it had not caught up. Records that outlive the topic's retention are deleted before it reads them "+
			"(OFFSET_OUT_OF_RANGE, then auto.offset.reset skips or replays).", f.LagEnd, f.Episode.Latest.Lag-f.LagStart,
			text.Duration(f.Episode.behind()))
	} else if f.Episode.End.Packet != 0 {
		fmt.Fprintf(&b, " It caught up afterwards: lag %d at %s (packet %d).", f.Episode.End.Lag, text.Clock(f.Episode.End.Time), f.Episode.End.Packet)
	} else {
		fmt.Fprintf(&b, " By the end its floor had come down again (lag %d at the last fetch).", f.LagEnd)
	}
	b.WriteString(lagev.Others("falling behind", f.Partitions, f.Dropped))
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	group := "<group>"
	if len(f.Groups) == 1 && text.ShellWord(f.Groups[0]) {
		group = f.Groups[0]
	}
	return fmt.Sprintf("kafka-consumer-groups.sh --bootstrap-server <broker> --describe --group %s shows each partition's "+
		"LAG and the member reading it. On the consumer, kafka.consumer:type=consumer-fetch-manager-metrics,client-id=%s "+
		"(records-lag-max, and records-lag per partition, KIP-92; fetch-rate, records-per-request-avg) against "+
		"kafka.consumer:type=consumer-metrics,client-id=%s (time-between-poll-avg, poll-idle-ratio-avg, KIP-517) tells "+
		"slow fetching from slow processing; compare with the topic's write rate, "+
		"kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=%s. Raise max.partition.fetch.bytes and "+
		"fetch.max.bytes if each fetch brings little, make processing faster (max.poll.records), or add partitions and "+
		"consumers; check the topic's retention.ms (kafka-configs.sh --describe --entity-type topics --entity-name %s) "+
		"against the time to catch up.", group, f.ClientID, f.ClientID, f.Topic, f.Topic)
}
