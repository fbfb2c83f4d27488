package followeroutofsync

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/lagev"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one follower out of sync with one leader on one or more
// partitions; the numbers are its worst partition's. Its exported fields
// are the finding's "fields".
type Finding struct {
	Follower int32  `json:"follower"`
	ClientID string `json:"client_id"`
	Client   string `json:"client"`
	Leader   string `json:"leader"`
	// LeaderNode is the leader's node id, -1 if unknown.
	LeaderNode int32 `json:"leader_node"`
	// Partitions are those trailing, worst first ("orders-0").
	Partitions []string `json:"partitions" count:"partitions,len"`
	Topic      string   `json:"topic"`
	Partition  int32    `json:"partition"`
	// TrailStart, TrailMax and TrailEnd are the records the worst
	// partition's fetch offset trailed the high watermark by, first, at
	// most and last.
	TrailStart      int64   `json:"trail_start"`
	TrailMax        int64   `json:"trail_max" count:"trail_max"`
	TrailEnd        int64   `json:"trail_end"`
	DurationSeconds float64 `json:"duration_s"`
	Fetches         int     `json:"fetches" count:"fetches"`
	StillTrailing   bool    `json:"still_trailing"`
	CatchingUp      bool    `json:"catching_up"`

	Run     Run
	More    int
	Dropped int64
	p       Params
}

func (r *rule) finding(p *detectors.Pass, fl follower, parts []part) detectors.Finding {
	w := &parts[0]
	s, u := w.s, &w.u
	f := &Finding{
		Follower: fl.node, ClientID: s.Key.Client.ID, Client: s.Key.Client.Host.String(), Leader: p.Label(fl.leader),
		Topic: s.Topic(p.Nodes), Partition: s.Key.Partition.Num,
		TrailStart: u.First.Lag, TrailMax: u.Most.Lag, TrailEnd: u.Last.Lag, DurationSeconds: text.Seconds(u.length()),
		Fetches: u.fetches, StillTrailing: u.End.Packet == 0, CatchingUp: u.catchingUp(),
		LeaderNode: -1, Run: *u, More: len(parts) - 1, Dropped: r.table.RoleDropped(cluster.RoleReplication), p: r.p,
	}
	if p.Nodes != nil {
		f.LeaderNode = p.Nodes.Server(fl.leader)
	}
	ids := tally.IDs{}
	ids.Add(fl.node)
	ids.Add(f.LeaderNode)
	sev := detectors.Info
	var (
		span  lagev.Span
		where lagev.Where
		ev    []detectors.Evidence
	)
	for i, pt := range parts {
		name := span.Add(pt.s.Topic(p.Nodes), pt.s.Key.Partition.Num, pt.u.First.Time, pt.u.Last.Time)
		sev = max(sev, pt.sev)
		where.Add(pt.s.Server, pt.u.First, pt.u.Last)
		if i < 4 {
			ev = lagev.Append(ev, name, pt.u.First, pt.u.Most, pt.u.Last, pt.u.End)
		}
	}
	detectors.SortEvidence(ev)
	f.Partitions = span.Names
	subj := detectors.Subject{ClientIDs: []string{s.Key.Client.ID}, Clients: []netip.Addr{s.Key.Client.Host},
		Servers: []netip.AddrPort{fl.leader}, Nodes: ids.Sorted(), Partitions: span.Partitions}
	return detectors.Finding{
		Severity: sev,
		First:    span.First,
		Last:     span.Last,
		Conns:    where.Conns(),
		Nodes:    subj.Nodes,
		Evidence: ev,
		Subject:  subj,
		Detail:   f,
	}
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("follower node %d out of sync with leader %s on %s-%d: its fetch offset trailed the high watermark "+
		"by %d to %d records for %s", f.Follower, f.Leader, f.Topic, f.Partition, min(f.TrailStart, f.TrailEnd), f.TrailMax,
		text.Duration(f.Run.length()))
	switch {
	case f.StillTrailing && f.CatchingUp:
		s += fmt.Sprintf(", still %d behind and catching up at the end", f.TrailEnd)
	case f.StillTrailing:
		s += fmt.Sprintf(", still %d behind at the end", f.TrailEnd)
	case f.CatchingUp:
		s += ", then caught up"
	default:
		s += ", then back in step"
	}
	if f.More > 0 {
		s += fmt.Sprintf(" (and %s)", text.Plural(f.More, "more partition", "more partitions"))
	}
	return s
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Node %d (client id %q on %s) fetches %s-%d from its leader %s as a replica. A leader counts a follower's "+
		"fetch offset before it advances the high watermark, so a follower in the ISR is never behind it; node %d was, by "+
		"%d records at %s (packet %d), %d at most at %s (packet %d) and %d at its last fetch (packet %d), over %s in %s. "+
		"It is out of the ISR: the partition is under-replicated, a producer with acks=all waits on fewer replicas, and "+
		"with fewer in sync than min.insync.replicas it gets NOT_ENOUGH_REPLICAS.",
		f.Follower, f.ClientID, f.Client, f.Topic, f.Partition, f.Leader, f.Follower, f.TrailStart, text.Clock(f.Run.First.Time),
		f.Run.First.Packet, f.TrailMax, text.Clock(f.Run.Most.Time), f.Run.Most.Packet, f.TrailEnd, f.Run.Last.Packet,
		text.Duration(f.Run.length()), text.Plural(f.Fetches, "fetch", "fetches"))
	switch {
	case f.StillTrailing && f.CatchingUp:
		b.WriteString(" It was catching up when the capture ended (its trail had shrunk to half or less), as a follower " +
			"does after a restart; it rejoins the ISR once it reaches the leader's log end.")
	case f.StillTrailing:
		b.WriteString(" It was not catching up when the capture ended: the follower cannot keep up with the leader (its " +
			"disk, its network, too few replica fetchers) or is stuck.")
	case f.Run.End.Packet != 0:
		fmt.Fprintf(&b, " It was back in step at %s (packet %d: trail %d).", text.Clock(f.Run.End.Time), f.Run.End.Packet, f.Run.End.Lag)
		if f.CatchingUp {
			b.WriteString(" Its trail shrank before that: a follower catching up, as after a restart.")
		}
	}
	b.WriteString(lagev.Others("trailing", f.Partitions, f.Dropped))
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	topic := text.ShellOr(f.Topic, "<topic>")
	return fmt.Sprintf("kafka-topics.sh --bootstrap-server <broker> --describe --under-replicated-partitions (and "+
		"--describe --topic %s) shows the ISR without node %d. On the leader, kafka.server:type=ReplicaManager,"+
		"name=UnderReplicatedPartitions and IsrShrinksPerSec/IsrExpandsPerSec; on node %d, "+
		"kafka.server:type=FetcherLagMetrics,name=ConsumerLag,clientId=ReplicaFetcherThread-*,topic=%s,partition=%d and "+
		"kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica, with its disk, network and GC. "+
		"replica.lag.time.max.ms (30 s since Kafka 2.5, KIP-537) is how long a follower may lag before the leader "+
		"drops it from the ISR; num.replica.fetchers and replica.fetch.max.bytes set how fast it can catch up "+
		"(kafka-configs.sh --describe --entity-type brokers --entity-name %d).",
		topic, f.Follower, f.Follower, topic, f.Partition, f.Follower)
}
