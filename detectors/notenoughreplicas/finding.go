package notenoughreplicas

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one client's refusals. Its exported fields are the finding's
// "fields".
type Finding struct {
	ClientID   string              `json:"client_id"`
	Clients    []string            `json:"clients"`
	Servers    []string            `json:"servers"`
	Errors     []string            `json:"errors"`
	Acks       int16               `json:"acks"`
	Idempotent bool                `json:"idempotent"`
	Partitions []PartitionRefusals `json:"partitions"`
	// ISR is what Metadata said of the partitions while they were refused.
	ISR []ISR `json:"isr,omitempty"`
	// HeldS is the longest a partition went without a write.
	HeldS     float64 `json:"held_s"`
	Recovered bool    `json:"recovered"`

	Producer *Producer
	Held     time.Duration
	Topic    string // of the first partition refused

	// The counts: the refusals, the partitions refused, those refused
	// after the append (NOT_ENOUGH_REPLICAS_AFTER_APPEND), and the
	// batches written again after such a refusal.
	Refusals       int64 `count:"refusals"`
	PartitionCount int64 `count:"partitions"`
	AfterAppend    int64 `count:"after_append"`
	Rewritten      int64 `count:"rewritten"`
}

// PartitionRefusals is one partition's refusals: how many, the mean time between
// them (the client's retry pace), the longest time without a write.
type PartitionRefusals struct {
	Partition    string  `json:"partition"`
	Refusals     int64   `json:"refusals"`
	RetryEveryMs float64 `json:"retry_every_ms"`
	HeldS        float64 `json:"held_s"`
	Recovered    bool    `json:"recovered"`
}

// ISR is a partition's leader, replicas and in-sync replicas.
type ISR struct {
	Partition string  `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	Packet    uint64  `json:"packet"`
}

func (r *rule) detail(p *detectors.Pass, pr *Producer) *Finding {
	f := &Finding{ClientID: pr.ID, Clients: pr.conns.Clients(), Servers: pr.conns.ServerLabels(p.Nodes), Errors: pr.codes.Parts(),
		Acks: pr.acks, Idempotent: pr.idempotent, Recovered: true, Producer: pr}
	for i, pk := range pr.order {
		if i == 0 {
			f.Topic = pk.TopicName(p.Nodes)
		}
		pt := pr.parts[pk]
		d, ongoing := pt.Held(p.End)
		name := pk.Label(p.Nodes)
		var every float64
		if pt.N > 1 {
			every = text.Millis(pt.Last.Sub(pt.first) / time.Duration(pt.N-1))
		}
		f.Partitions = append(f.Partitions, PartitionRefusals{name, pt.N, every, text.Seconds(d), !ongoing})
		f.Held = max(f.Held, d)
		f.Recovered = f.Recovered && !ongoing
		if s := r.isr[pk]; s != nil && s.at.Packet != 0 {
			f.ISR = append(f.ISR, ISR{name, s.leader, s.replicas, s.isr, s.at.Packet})
		}
	}
	f.HeldS = text.Seconds(f.Held)
	return f
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("producer %q (%s), %s: %s on %s", f.ClientID, text.List(f.Clients, 3), acks(f.Acks),
		strings.Join(f.Errors, ", "), text.List(f.names(), 3))
	if f.Recovered {
		return s + "; a partition went " + text.Duration(f.Held) + " without a write"
	}
	return s + "; still refused at the end (" + text.Duration(f.Held) + ")"
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	pr := f.Producer
	var b strings.Builder
	fmt.Fprintf(&b, "Between %s and %s, %s answered %s of client id %q (%s) with %s: %s.", text.Clock(pr.First),
		text.Clock(pr.Last), text.List(f.Servers, 3), text.Plural(pr.N, "Produce partition", "Produce partitions"),
		f.ClientID, text.List(f.Clients, 3), strings.Join(f.Errors, ", "), text.List(f.perPartition(), 5))
	b.WriteString(" With acks=all a leader appends only while the partition has at least min.insync.replicas in-sync " +
		"replicas: NOT_ENOUGH_REPLICAS refuses the batch before writing it, NOT_ENOUGH_REPLICAS_AFTER_APPEND means the " +
		"leader wrote it but too few replicas acknowledged it in time. The client retries, and the partition's later " +
		"records wait behind the refused batch, so the partition took no writes from this client meanwhile.")
	for _, s := range f.ISR {
		fmt.Fprintf(&b, " Metadata (packet %d) named replicas %s and ISR %s for %s, leader %d: %d of %d replicas in sync.",
			s.Packet, ids(s.Replicas), ids(s.ISR), s.Partition, s.Leader, len(s.ISR), len(s.Replicas))
	}
	if pr.DupRisk > 0 {
		fmt.Fprintf(&b, " The producer does not use idempotence and retried %s after NOT_ENOUGH_REPLICAS_AFTER_APPEND: "+
			"the leader had already appended those records each time, so the log likely holds %s of them.",
			text.Plural(pr.DupRisk, "time", "times"), text.Plural(pr.DupRisk, "extra copy", "extra copies"))
	}
	if pr.More > 0 {
		fmt.Fprintf(&b, " (%d more refusals on further partitions are counted, not listed.)", pr.More)
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	topic := text.ShellOr(f.Topic, "<topic>")
	return fmt.Sprintf("kafka-topics.sh --bootstrap-server <broker> --describe --under-min-isr-partitions (and "+
		"--under-replicated-partitions, --topic %s) shows which partitions lack in-sync replicas now; "+
		"kafka-configs.sh --bootstrap-server <broker> --describe --entity-type topics --entity-name %s (and "+
		"--entity-type brokers --entity-default) shows min.insync.replicas. On the brokers, "+
		"kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount, name=UnderReplicatedPartitions and "+
		"name=IsrShrinksPerSec, and kafka.cluster:type=Partition,name=UnderMinIsr,topic=%s say since when; the "+
		"followers missing from the ISR are down, slow (replica.lag.time.max.ms) or partitioned from the leader: "+
		"check their logs and kafka-metadata-quorum.sh --bootstrap-server <broker> describe --status for fenced "+
		"brokers. Producers without idempotence should enable it (enable.idempotence=true) so that retries after "+
		"NOT_ENOUGH_REPLICAS_AFTER_APPEND are not written twice.", topic, topic, topic)
}

func (f *Finding) names() []string {
	out := make([]string, len(f.Partitions))
	for i, p := range f.Partitions {
		out[i] = p.Partition
	}
	return out
}

func (f *Finding) perPartition() []string {
	out := make([]string, 0, len(f.Partitions))
	for _, p := range f.Partitions {
		s := fmt.Sprintf("%s %s", p.Partition, text.Plural(p.Refusals, "refusal", "refusals"))
		if p.RetryEveryMs > 0 {
			s += " (one every " + text.Duration(time.Duration(p.RetryEveryMs*float64(time.Millisecond))) + ")"
		}
		d := time.Duration(p.HeldS * float64(time.Second))
		if p.Recovered {
			s += ", written again after " + text.Duration(d)
		} else {
			s += ", still refused at the end, " + text.Duration(d) + " after the first"
		}
		out = append(out, s)
	}
	return out
}

func acks(a int16) string {
	if a == -1 {
		return "acks=all"
	}
	return "acks=" + strconv.Itoa(int(a))
}

func ids(l []int32) string { return "[" + text.IDs(l, 0) + "]" }
