// Package notenoughreplicas reports acks=all producers refused because a partition
// has fewer in-sync replicas than min.insync.replicas: NOT_ENOUGH_REPLICAS
// (refused before the write) and NOT_ENOUGH_REPLICAS_AFTER_APPEND (written
// by the leader, then not acknowledged by enough replicas in time). Per
// client: which partitions, how many answers, how long each partition went
// without a write, and, when Metadata was captured, the partition's
// replicas and ISR while it failed.
package notenoughreplicas

import (
	"maps"
	"net/netip"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/spell"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "not-enough-replicas",
	Recorded: []string{"fixtures/pcaps/clients/not-enough-replicas-kgo.pcap", "fixtures/pcaps/clients/not-enough-replicas-sarama.pcap"},
	Severity: detectors.Error,
	Doc: "acks=all Produce answered NOT_ENOUGH_REPLICAS or NOT_ENOUGH_REPLICAS_AFTER_APPEND: a partition " +
		"with fewer in-sync replicas than min.insync.replicas. Per client id and host: the partitions, the " +
		"answers and retries, how long each partition went without a write, and the replicas and ISR that " +
		"Metadata named meanwhile. Graded by the longest time a partition went without a write, from the first " +
		"refusal to the next write (info below 3 s, warning from 3 s, error from 30 s or when still refused " +
		"after 10 s at the end); at least a warning when a producer without idempotence retried after " +
		"NOT_ENOUGH_REPLICAS_AFTER_APPEND, which writes the records again. One refusal followed by a write is info.",
}, Params{MinErrors: 1}, New)

// Params are the rule's thresholds.
type Params struct {
	MinErrors int `param:"min-errors" doc:"NOT_ENOUGH_REPLICAS answers (either kind) to one client before it is reported"`
}

// Bounds: clients followed, partitions per client, partitions whose
// Metadata is kept.
const (
	maxClients  = 1024
	maxParts    = 256
	maxWatching = 4096
)

// New makes the rule.
func New(p Params) detectors.Rule {
	return &rule{p: Params{MinErrors: max(p.MinErrors, 1)}, clients: map[cluster.Client]*Producer{}, isr: map[cluster.Partition]*isrSeen{}}
}

type rule struct {
	p       Params
	clients map[cluster.Client]*Producer
	// isr is what Metadata said of the partitions refused, while refused.
	isr     map[cluster.Partition]*isrSeen
	dropped int64
}

// Producer is one client's refusals.
type Producer struct {
	cluster.Client
	parts       map[cluster.Partition]*part
	order       []cluster.Partition
	More        int64 // refusals on partitions beyond maxParts
	codes       tally.Codes
	N           int64
	First, Last time.Time
	acks        int16
	idempotent  bool
	// dupRisk counts, for a producer without idempotence, the answers
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND (the leader appended the batch)
	// followed by another attempt on the partition: each is a copy.
	DupRisk int64
	conns   tally.Conns
	ev      detectors.Sampler[detectors.Evidence]
}

type part struct {
	spell.Spell
	first time.Time // the first refusal
	// appended is 1 when the last answer was NOT_ENOUGH_REPLICAS_AFTER_APPEND:
	// the leader appended the batch, and any next attempt is a copy.
	appended int64
}

// isrSeen is a partition as Metadata described it while it was refused:
// the answer with the fewest in-sync replicas, the first of them.
type isrSeen struct {
	leader        int32
	replicas, isr []int32
	at            detectors.Evidence
	open          bool // a client is still refused on it
}

func refusal(code int16) bool {
	return code == cluster.NotEnoughReplicas || code == cluster.NotEnoughReplicasAfterAppend
}

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.Produce, kmsg.Metadata}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Resp == nil || x.Req == nil {
		return
	}
	switch resp := x.Resp.Resp.(type) {
	case *kmsg.ProduceResponse:
		r.produced(x, resp)
	case *kmsg.MetadataResponse:
		if len(r.isr) > 0 {
			r.metadata(x.Resp, resp)
		}
	}
}

func (r *rule) produced(x *detectors.Exchange, resp *kmsg.ProduceResponse) {
	refused := false
	for _, ec := range x.Resp.ErrorCodes {
		refused = refused || refusal(ec.Code)
	}
	if !refused && len(r.clients) == 0 {
		return
	}
	c := x.Req.Client
	pr := r.clients[c]
	if pr == nil && refused {
		pr = tally.Entry(r.clients, c, maxClients, &r.dropped, func() *Producer {
			return &Producer{Client: c, parts: map[cluster.Partition]*part{}}
		})
	}
	if pr == nil {
		return
	}
	req, _ := x.Req.Req.(*kmsg.ProduceRequest)
	decode.PartitionErrors(resp, func(ref cluster.Partition, code int16) {
		pk := x.PartitionKey(ref)
		if refusal(code) {
			r.refused(pr, pk, code, x, req)
			return
		}
		pt := pr.parts[pk]
		if pt == nil {
			return
		}
		pr.retried(pt)
		if code == 0 && pt.Heal(x.Resp.Time) {
			if s := r.isr[pk]; s != nil {
				s.open = false
			}
		}
	})
}

func (r *rule) refused(pr *Producer, pk cluster.Partition, code int16, x *detectors.Exchange, req *kmsg.ProduceRequest) {
	pt := tally.Entry(pr.parts, pk, maxParts, &pr.More, func() *part {
		pr.order = append(pr.order, pk)
		return &part{}
	})
	if pt == nil {
		return
	}
	t := x.Resp.Time
	if pr.N == 0 {
		pr.First = t
	}
	pr.N++
	pr.Last = t
	pr.codes.Add(code)
	pr.conns.Add(x.Conn)
	if pt.N == 0 {
		pt.first = t
	}
	pt.Fail(t)
	pr.retried(pt)
	if code == cluster.NotEnoughReplicasAfterAppend {
		pt.appended = 1
	}
	if req != nil {
		pr.acks = req.Acks
	}
	for i := range x.Req.Batches {
		if b := &x.Req.Batches[i]; b.Partition == pk.Num && b.ProducerID >= 0 {
			pr.idempotent = true
		}
	}
	pr.ev.Add(detectors.EvidenceAt(x.Resp, "Produce answer: "+pk.Label(x.Conn.Nodes())+" "+detectors.ErrorName(code)))
	if s := r.isr[pk]; s != nil {
		s.open = true
	} else if len(r.isr) < maxWatching {
		r.isr[pk] = &isrSeen{leader: -1, open: true}
	}
}

// retried counts a copy if the attempt just answered followed an
// append answered NOT_ENOUGH_REPLICAS_AFTER_APPEND, without idempotence.
func (pr *Producer) retried(pt *part) {
	if !pr.idempotent {
		pr.DupRisk += pt.appended
	}
	pt.appended = 0
}

// metadata keeps what Metadata says of partitions being refused.
func (r *rule) metadata(m *flows.Message, resp *kmsg.MetadataResponse) {
	decode.MetadataPartitions(resp, func(ref cluster.Partition, p *kmsg.MetadataResponseTopicPartition) {
		s := r.isr[ref.Key(m.Conn.Nodes())]
		if s == nil || !s.open || s.at.Packet != 0 && len(p.ISR) >= len(s.isr) {
			return
		}
		s.leader, s.replicas, s.isr = p.Leader, append(s.replicas[:0], p.Replicas...), append(s.isr[:0], p.ISR...)
		s.at = detectors.EvidenceAt(m, "Metadata answer: "+ref.Topic+"-"+strconv.Itoa(int(p.Partition))+" leader "+strconv.Itoa(int(p.Leader))+
			", replicas "+ids(p.Replicas)+", ISR "+ids(p.ISR))
	})
}

// Findings implements detectors.Rule: one per client with at least
// MinErrors refusals.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	return detectors.FindingsOf(maps.Values(r.clients), func(pr *Producer) bool { return pr.N >= int64(r.p.MinErrors) },
		func(a, b *Producer) bool { return a.First.Before(b.First) || a.First.Equal(b.First) && a.ID < b.ID },
		func(pr *Producer) detectors.Finding { return r.finding(p, pr) })
}

func (r *rule) finding(p *detectors.Pass, pr *Producer) detectors.Finding {
	f := r.detail(p, pr)
	sev := detectors.Grade(f.Held, !f.Recovered)
	if pr.DupRisk > 0 {
		sev = max(sev, detectors.Warning)
	}
	code, _ := pr.codes.Top()
	ev := pr.ev.List()
	var parts []cluster.Partition
	for _, pk := range pr.order {
		parts = append(parts, cluster.Partition{Topic: pk.TopicName(p.Nodes), Num: pk.Num})
		if s := r.isr[pk]; s != nil && s.at.Packet != 0 {
			ev = append(ev, s.at)
		}
	}
	detectors.SortEvidence(ev)
	f.Refusals = pr.N
	f.PartitionCount = int64(len(pr.parts))
	f.AfterAppend = pr.codes.Count(cluster.NotEnoughReplicasAfterAppend)
	f.Rewritten = pr.DupRisk
	return detectors.Finding{
		Severity: sev,
		First:    pr.First,
		Last:     pr.Last,
		Conns:    pr.conns.IDs(),
		Nodes:    pr.conns.Nodes(p.Nodes),
		Evidence: ev,
		Subject: detectors.Subject{ClientIDs: []string{pr.ID}, Clients: []netip.Addr{pr.Host}, Servers: pr.conns.ServerAddrs(),
			Nodes: pr.conns.Nodes(p.Nodes), Partitions: parts, Error: code},
		Detail: f,
	}
}
