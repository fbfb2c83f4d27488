// Package recordsrejected reports records a broker refused for good:
// Produce answers whose error no retry can mend (MESSAGE_TOO_LARGE,
// RECORD_LIST_TOO_LARGE, INVALID_RECORD, CORRUPT_MESSAGE,
// INVALID_TIMESTAMP, UNSUPPORTED_COMPRESSION_TYPE). Each such answer is a
// batch the application was told failed: unless it kept the records and
// sent them differently, they are lost. A loss is at least a warning, as
// duplicates are, however slowly the answers come (an error-storm rule
// sees 0.9 failures a second and calls it info).
//
// A batch sent again (the same checksum and length: a retry, or the Java
// producer's split of a refused batch that leaves it as it was, resent
// about 1,760 times a second against Apache Kafka 4.1.1) is one batch
// lost; the answers count every refusal.
//
// Per client id and host: the partitions, the answers, the batches,
// records and bytes refused, and for MESSAGE_TOO_LARGE the size limit
// where the capture reveals it: the broker's words (when it sends any:
// Apache Kafka 4.1.1 answers MESSAGE_TOO_LARGE with no error message,
// recorded in fixtures/pcaps/kafka/java-too-large), a DescribeConfigs answer
// (max.message.bytes of the topic, message.max.bytes of the broker), else
// the bounds the answers set: larger than the largest batch the topic
// accepted, not larger than the smallest it refused.
package recordsrejected

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "records-rejected",
	Severity: detectors.Error,
	Recorded: []string{"fixtures/pcaps/clients/too-large-kgo.pcap", "fixtures/pcaps/clients/too-large-sarama.pcap", "fixtures/pcaps/kafka/java-too-large.pcap.gz"},
	Doc: "Produce answers refusing records for good: MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_RECORD, " +
		"CORRUPT_MESSAGE, INVALID_TIMESTAMP, UNSUPPORTED_COMPRESSION_TYPE. No retry mends them: each is a batch " +
		"the application was told failed, records lost unless it sent them again differently. Per client id and " +
		"host: the partitions, answers, batches, records and bytes refused, and for MESSAGE_TOO_LARGE the size " +
		"limit where the capture shows it (the broker's message, a DescribeConfigs answer, else between the " +
		"largest batch accepted and the smallest refused). A loss: a warning from min-batches refused batches, " +
		"an error when refused for 30 s or more, or still refused at the end after 10 s (detectors.Grade).",
}, Params{MinBatches: 1}, New)

// Params are the rule's thresholds.
type Params struct {
	MinBatches int `param:"min-batches" doc:"refused batches of one client before it is reported"`
}

// The bounds: clients followed, partitions named per client, topics
// whose largest accepted batch and configured limit are kept.
const (
	maxClients = 1024
	maxParts   = 64
	maxTopics  = 4096
)

// New makes the rule.
func New(p Params) detectors.Rule {
	return &rule{p: Params{MinBatches: max(p.MinBatches, 1)}, clients: map[cluster.Client]*client{},
		accepted: map[string]int64{}, limits: map[string]limit{}}
}

type rule struct {
	p       Params
	clients map[cluster.Client]*client
	dropped int64
	// accepted is the largest partition payload (bytes of its batches)
	// each topic accepted, from any client; limits the max.message.bytes
	// DescribeConfigs answers gave, by topic ("" for the broker's
	// message.max.bytes).
	accepted map[string]int64
	limits   map[string]limit
	moreTops int64
}

type limit struct {
	bytes int64
	from  string
	at    detectors.Evidence
}

type client struct {
	cluster.Client
	codes         tally.Codes
	answers       int64
	batches       int64
	records       int64
	bytes         int64
	smallest      int64 // the smallest payload refused MESSAGE_TOO_LARGE
	largest       int64 // the largest payload refused
	parts         map[cluster.Partition]int64
	order         []cluster.Partition
	moreParts     int64
	first, last   time.Time
	ongoing       bool // no write accepted after the last refusal
	written       int64
	message       string // the broker's first error message
	messageLimit  int64  // the size limit the broker's message names
	messageAt     detectors.Evidence
	topicsRefused map[string]bool
	conns         tally.Conns
	ev            detectors.Sampler[detectors.Evidence]
	// seen holds the batches refused so far, so that a batch sent again
	// (a retry, or the Java producer's split that leaves a batch as it
	// was: recorded against Apache Kafka 4.1.1, java-too-large) is one
	// batch lost, not one per answer; resent counts those sent again.
	seen   map[batchKey]struct{}
	resent int64
}

// batchKey tells a batch sent again from a new one: the same bytes have
// the same checksum and length.
type batchKey struct {
	part    cluster.Partition
	crc     uint32
	length  int32
	records int32
}

// maxSeen bounds the batches remembered per client; past it every refused
// batch counts as new.
const maxSeen = 1 << 14

// lost reports the codes that refuse records for good.
func lost(code int16) bool {
	switch code {
	case cluster.CorruptMessage, cluster.MessageTooLarge, cluster.RecordListTooLarge, cluster.InvalidTimestamp,
		cluster.UnsupportedCompressionType, cluster.InvalidRecord:
		return true
	}
	return false
}

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.Produce, kmsg.DescribeConfigs}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.Resp == nil {
		return
	}
	switch resp := x.Resp.Resp.(type) {
	case *kmsg.ProduceResponse:
		r.produced(x, resp)
	case *kmsg.DescribeConfigsResponse:
		r.configs(x.Resp, resp)
	}
}

func (r *rule) produced(x *detectors.Exchange, resp *kmsg.ProduceResponse) {
	c := r.clients[x.Req.Client]
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		var topic string
		named := false
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if p.ErrorCode != 0 && !lost(p.ErrorCode) {
				continue // neither written nor lost: a retriable refusal
			}
			if !named {
				topic, named = x.Resp.TopicName(t.Topic, t.TopicID), true
			}
			pk := x.PartitionKey(cluster.Partition{Topic: t.Topic, TopicID: t.TopicID, Num: p.Partition})
			size, records, batches := payload(x, pk, nil)
			if p.ErrorCode == 0 {
				if was, ok := r.accepted[topic]; size > was {
					if ok || len(r.accepted) < maxTopics {
						r.accepted[topic] = size
					} else {
						r.moreTops++
					}
				}
				if c != nil && c.answers > 0 {
					c.ongoing = false
					c.written++
				}
				continue
			}
			if c == nil {
				ck := x.Req.Client
				c = tally.Entry(r.clients, ck, maxClients, &r.dropped, func() *client {
					return &client{Client: ck, parts: map[cluster.Partition]int64{}, topicsRefused: map[string]bool{}, smallest: -1, seen: map[batchKey]struct{}{}}
				})
				if c == nil {
					return
				}
			}
			r.refused(c, x, topic, pk, p, size, records, batches)
		}
	}
}

// payload is the bytes, records and batches the request carried for the
// partition; with seen, only those of the batches not in it, which it
// remembers: those a client had not sent before.
func payload(x *detectors.Exchange, pk cluster.Partition, seen map[batchKey]struct{}) (size, records, batches int64) {
	m := x.Req
	for i := range m.Batches {
		b := &m.Batches[i]
		if b.Partition != pk.Num || x.PartitionKey(cluster.Partition{Topic: b.Topic, TopicID: b.TopicID, Num: b.Partition}) != pk {
			continue
		}
		if seen != nil {
			k := batchKey{part: pk, crc: b.CRC, length: b.Length, records: b.Records}
			if _, ok := seen[k]; ok {
				continue
			}
			if len(seen) < maxSeen {
				seen[k] = struct{}{}
			}
		}
		size += int64(b.Length) + 12 // the offset and length before the batch
		batches++
		if b.Magic >= 2 {
			records += int64(b.Records)
		} else {
			records++
		}
	}
	return size, records, batches
}

func (r *rule) refused(c *client, x *detectors.Exchange, topic string, pk cluster.Partition, p *kmsg.ProduceResponseTopicPartition, size, records, batches int64) {
	t := x.Resp.Time
	if c.answers == 0 {
		c.first = t
	}
	c.answers++
	c.last = t
	c.ongoing = true
	c.codes.Add(p.ErrorCode)
	newBytes, newRecords, newBatches := payload(x, pk, c.seen)
	if batches == 0 {
		newBatches = 1 // an answer whose request's batches were not read
	}
	c.batches += newBatches
	c.records += newRecords
	c.bytes += newBytes
	c.resent += batches - min(batches, newBatches)
	if size > 0 && p.ErrorCode == cluster.MessageTooLarge && (c.smallest < 0 || size < c.smallest) {
		c.smallest = size
	}
	c.largest = max(c.largest, size)
	if len(c.topicsRefused) < maxParts {
		c.topicsRefused[topic] = true
	}
	if _, ok := c.parts[pk]; ok || len(c.parts) < maxParts {
		if !ok {
			c.order = append(c.order, pk)
		}
		c.parts[pk]++
	} else {
		c.moreParts++
	}
	c.conns.Add(x.Conn)
	what := "Produce answer: " + topic + "-" + strconv.Itoa(int(p.Partition)) + " " + detectors.ErrorName(p.ErrorCode)
	if size > 0 {
		what += " (" + strconv.FormatInt(size, 10) + " bytes, " + strconv.FormatInt(records, 10) + " records)"
	}
	ev := detectors.EvidenceAt(x.Resp, what)
	c.ev.Add(ev)
	if p.ErrorMessage != nil && *p.ErrorMessage != "" && c.message == "" {
		c.message, c.messageAt = clip(*p.ErrorMessage), ev
		c.messageLimit = limitIn(*p.ErrorMessage)
	}
}

// limitIn is the size a broker's message names as its maximum ("... which
// exceeds the maximum configured message size of 1048588."), 0 if none.
func limitIn(msg string) int64 {
	i := strings.Index(strings.ToLower(msg), "maximum")
	if i < 0 {
		return 0
	}
	var n int64
	found := false
	for _, ch := range msg[i:] {
		switch {
		case ch >= '0' && ch <= '9':
			if n < 1<<40 {
				n = n*10 + int64(ch-'0')
			}
			found = true
		case found:
			return n
		}
	}
	if found {
		return n
	}
	return 0
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// configs keeps the size limits a DescribeConfigs answer gives.
func (r *rule) configs(m *flows.Message, resp *kmsg.DescribeConfigsResponse) {
	for i := range resp.Resources {
		res := &resp.Resources[i]
		for j := range res.Configs {
			cf := &res.Configs[j]
			if cf.Value == nil {
				continue
			}
			var topic string
			switch {
			case res.ResourceType == kmsg.ConfigResourceTypeTopic && cf.Name == "max.message.bytes":
				topic = res.ResourceName
			case res.ResourceType == kmsg.ConfigResourceTypeBroker && cf.Name == "message.max.bytes":
			default:
				continue
			}
			n, err := strconv.ParseInt(*cf.Value, 10, 64)
			if err != nil || n <= 0 {
				continue
			}
			if _, ok := r.limits[topic]; !ok && len(r.limits) >= maxTopics {
				continue
			}
			r.limits[topic] = limit{bytes: n, from: cf.Name, at: detectors.EvidenceAt(m, "DescribeConfigs answer: "+cf.Name+"="+*cf.Value)}
		}
	}
}

// Findings implements detectors.Rule: one per client id and host.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	return detectors.FindingsOf(maps.Values(r.clients), func(c *client) bool { return c.batches >= int64(r.p.MinBatches) },
		func(a, b *client) bool { return cluster.SeenLess(a.Client, a.first, b.Client, b.first) },
		func(c *client) detectors.Finding { return r.finding(p, c) })
}

func (r *rule) finding(p *detectors.Pass, c *client) detectors.Finding {
	code, _ := c.codes.Top()
	f := &Finding{
		ClientID: c.ID, Host: c.Host.String(), Errors: c.codes.Names(), Servers: c.conns.Servers(),
		Answers: c.answers, Batches: c.batches, Resent: c.resent, Records: c.records, Bytes: c.bytes,
		LargestRefused: c.largest, Ongoing: c.ongoing, WrittenAfter: c.written, BrokerMessage: c.message,
		Codes: c.codes.Parts(), First: c.first, Last: c.last, ServerLabels: c.conns.ServerLabels(p.Nodes),
		MoreParts: c.moreParts, Dropped: r.dropped,
	}
	if c.smallest > 0 {
		f.SmallestTooLarge = c.smallest
	}
	var parts []cluster.Partition
	for _, pk := range c.order {
		f.Partitions = append(f.Partitions, pk.Label(p.Nodes))
		parts = append(parts, cluster.Partition{Topic: pk.TopicName(p.Nodes), Num: pk.Num})
	}
	ev := c.ev.List()
	if c.codes.Count(cluster.MessageTooLarge) > 0 {
		r.sizeLimit(c, f, &ev)
	}
	sev := max(detectors.Warning, detectors.Grade(c.last.Sub(c.first), c.ongoing))
	f.sev = sev
	detectors.SortEvidence(ev)
	return detectors.Finding{
		Severity: sev,
		First:    c.first,
		Last:     c.last,
		Conns:    c.conns.IDs(),
		Nodes:    c.conns.Nodes(p.Nodes),
		Evidence: ev,
		Subject: detectors.Subject{ClientIDs: []string{c.ID}, Clients: c.conns.ClientAddrs(), Servers: c.conns.ServerAddrs(),
			Partitions: parts, Error: code},
		Detail: f,
	}
}

// sizeLimit says what the capture shows of the size limit the refused
// batches exceeded.
func (r *rule) sizeLimit(c *client, f *Finding, ev *[]detectors.Evidence) {
	if c.messageLimit > 0 {
		f.LimitBytes, f.LimitFrom = c.messageLimit, "the broker's error message"
		*ev = append(*ev, c.messageAt)
		return
	}
	topics := slices.Sorted(maps.Keys(c.topicsRefused))
	for _, t := range topics {
		if l, ok := r.limits[t]; ok {
			f.LimitBytes, f.LimitFrom = l.bytes, "DescribeConfigs: "+t+" "+l.from
			*ev = append(*ev, l.at)
			return
		}
	}
	if l, ok := r.limits[""]; ok {
		f.LimitBytes, f.LimitFrom = l.bytes, "DescribeConfigs: broker "+l.from
		*ev = append(*ev, l.at)
		return
	}
	// Bounds from the answers: above the largest batch accepted on these
	// topics, below the smallest refused.
	var acc int64
	for _, t := range topics {
		acc = max(acc, r.accepted[t])
	}
	if acc > 0 && (f.SmallestTooLarge == 0 || acc < f.SmallestTooLarge) {
		f.LargestAccepted = acc
	}
}
