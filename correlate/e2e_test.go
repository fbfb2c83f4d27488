package correlate

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/export"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
	"github.com/kfsniff/kfsniff/report"
)

// wantE2E computes, naively and from the records alone, the latencies
// E2E should measure per topic: each consumer fetch's batch (replica -1)
// against the Produce batch of the same topic, partition, offset and CRC,
// the fetch response's time minus the produce request's, once per batch
// and consumer (client endpoint and client id). Only for records of one
// clock.
func wantE2E(recs []Record) map[string][]time.Duration {
	type at struct {
		topic     string
		partition int32
		offset    int64
		crc       uint32
	}
	produced := map[at]int64{}
	for _, r := range recs {
		if r.Type == TypeExchange && r.API == 0 && (!r.Error.Set || r.Error.V == 0) {
			for _, b := range r.Batches {
				k := at{r.Topic, r.Partition, b.Offset.V, b.CRC}
				if _, ok := produced[k]; b.Offset.Set && b.Offset.V >= 0 && !ok {
					produced[k] = r.TS
				}
			}
		}
	}
	seen := map[[2]any]bool{}
	out := map[string][]time.Duration{}
	for _, r := range recs {
		if r.Type != TypeExchange || r.API != 1 || !r.Replica.Set || r.Replica.V != -1 || !r.Latency.Set {
			continue
		}
		for _, b := range r.Batches {
			k := at{r.Topic, r.Partition, b.BaseOffset.V, b.CRC}
			ts, ok := produced[k]
			c := [2]any{k, r.Client + "|" + r.ClientID.V}
			if !ok || seen[c] {
				continue
			}
			seen[c] = true
			out[r.Topic] = append(out[r.Topic], time.Duration(r.TS+r.Latency.V-ts))
		}
	}
	return out
}

// quantile is the value at q of sorted durations (nearest rank, as hist
// ranks).
func quantile(d []time.Duration, q float64) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	i := int(q*float64(len(d))+0.5) - 1
	return d[max(0, min(i, len(d)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// closeMs: a histogram's value (within ~3%) against the exact one, with
// slack for clocks.
func closeMs(got float64, want time.Duration, slack time.Duration) bool {
	w := ms(want)
	tol := 0.035*w + ms(slack) + 0.002
	return got >= w-tol && got <= w+tol
}

func topicOf(c *report.Correlation, topic string) *report.E2ETopic {
	for i := range c.E2E.Topics {
		if c.E2E.Topics[i].Topic == topic {
			return &c.E2E.Topics[i]
		}
	}
	return nil
}

// e2eCaptures are real clients' captures (kgo or sarama against kfake)
// where a consumer fetches what a producer produced: sub-millisecond to
// seconds, and MirrorMaker's replays (the same CRC produced at two
// offsets).
var e2eCaptures = []string{
	"../fixtures/pcaps/clients/fetch-session-churn-kgo.pcap",
	"../fixtures/pcaps/clients/stalled-fetch-kgo.pcap",
	"../fixtures/pcaps/clients/mm2-replay-kgo.pcap",
	"../fixtures/pcaps/scenarios/healthy-group.pcap",
}

// TestE2EOneAgent: one agent's records of real clients' captures: per
// topic, as many batches as the records hold (computed naively here),
// the same median and maximum.
func TestE2EOneAgent(t *testing.T) {
	for _, c := range e2eCaptures {
		recs := parseAll(t, shipCapture(t, c, "host-a"))
		want := wantE2E(recs)
		if len(want) == 0 {
			t.Fatalf("%s: no batch produced and consumed", c)
		}
		st := NewStats(Limits{})
		for i := range recs {
			st.Add(&recs[i])
		}
		sec := st.Section()
		if len(sec.E2E.Topics) != len(want) {
			t.Errorf("%s: topics %+v; want %d", c, sec.E2E.Topics, len(want))
		}
		for topic, lats := range want {
			got := topicOf(sec, topic)
			if got == nil {
				t.Errorf("%s: no latency for %s", c, topic)
				continue
			}
			if got.Batches != int64(len(lats)) || !closeMs(got.Latency.P50, quantile(lats, 0.5), 0) || !closeMs(got.Latency.Max, quantile(lats, 1), 0) ||
				got.SkewUnknown+got.Ambiguous+got.Mismatched+got.Unmatched+got.Negative != 0 {
				t.Errorf("%s %s: %+v; want %d batches, p50 %v, max %v", c, topic, *got, len(lats), quantile(lats, 0.5), quantile(lats, 1))
			}
		}
	}
}

// TestE2EAcrossAgents: a real client's capture dealt to two agents (a
// third of the connections seen by both), the second's clock 1.234567 s
// ahead (plus up to 150 us per connection): the producer's and
// consumer's batches meet across agents and, corrected by the estimated
// offset, give the latencies of the capture itself (within the
// connections' 300 us of difference).
func TestE2EAcrossAgents(t *testing.T) {
	const capture = "../fixtures/pcaps/clients/mm2-replay-kgo.pcap"
	truth := wantE2E(parseAll(t, shipCapture(t, capture, "whole")))
	const shift = 1234567 * time.Microsecond
	by := splitCapture(t, capture, 30,
		agentView{"host-a", func(s int) bool { return s%3 != 2 }, none},
		agentView{"host-b", func(s int) bool { return s%3 != 1 }, ahead(shift)})
	recs := merged(t, by)
	st := NewStats(Limits{})
	for i := range recs {
		st.Add(&recs[i])
	}
	sec := st.Section()
	if _, ok := st.Skew().Offset("host-b"); !ok {
		t.Fatal("no offset between the agents")
	}
	cross := 0
	for topic, lats := range truth {
		got := topicOf(sec, topic)
		if got == nil {
			t.Fatalf("no latency for %s: %+v", topic, sec.E2E)
		}
		if got.Batches != int64(len(lats)) || !closeMs(got.Latency.P50, quantile(lats, 0.5), 300*time.Microsecond) ||
			!closeMs(got.Latency.Max, quantile(lats, 1), 300*time.Microsecond) || got.SkewUnknown+got.Unmatched != 0 {
			t.Errorf("%s: %+v; the capture's own: %d batches, p50 %v, max %v", topic, *got, len(lats), quantile(lats, 0.5), quantile(lats, 1))
		}
		cross += len(lats)
	}
	// Uncorrected, host-b's fetches of host-a's batches would be 1.2 s
	// late: the test is worth something only if some crossed agents.
	crossed := 0
	producedOn := map[uint32]string{}
	for _, r := range recs {
		if r.Type == TypeExchange && r.API == 0 {
			for _, b := range r.Batches {
				if _, ok := producedOn[b.CRC]; !ok {
					producedOn[b.CRC] = r.Agent
				}
			}
		}
	}
	for _, r := range recs {
		if r.Type == TypeExchange && r.API == 1 && r.Replica.Set && r.Replica.V == -1 {
			for _, b := range r.Batches {
				if a, ok := producedOn[b.CRC]; ok && a != r.Agent {
					crossed++
				}
			}
		}
	}
	if crossed == 0 {
		t.Fatalf("no batch produced on one agent was fetched on the other (%d measured)", cross)
	}
	t.Logf("%d batches measured, %d fetches across agents", cross, crossed)
}

// TestE2ESkewUnknown: the same capture dealt to two agents with no
// connection in common: batches produced on one agent and fetched on the
// other are counted as not measured (clock offset unknown), not measured
// with the raw 3 s of skew; those of one agent are measured.
func TestE2ESkewUnknown(t *testing.T) {
	const capture = "../fixtures/pcaps/clients/mm2-replay-kgo.pcap"
	truth := wantE2E(parseAll(t, shipCapture(t, capture, "whole")))
	by := splitCapture(t, capture, 30,
		agentView{"host-a", func(s int) bool { return s%2 == 0 }, none},
		agentView{"host-b", func(s int) bool { return s%2 == 1 }, func(int, bool) time.Duration { return 3 * time.Second }})
	recs := merged(t, by)
	st := NewStats(Limits{})
	for i := range recs {
		st.Add(&recs[i])
	}
	sec := st.Section()
	unknown := int64(0)
	for topic, lats := range truth {
		got := topicOf(sec, topic)
		if got == nil {
			t.Fatalf("no entry for %s: %+v", topic, sec.E2E)
		}
		// The agent that captured MirrorMaker's Produce v13 (topics by
		// id) saw no Metadata to name them: their topic_id meets the
		// other agent's name for it.
		if got.Batches+got.SkewUnknown != int64(len(lats)) || got.Unmatched != 0 || got.Latency.Max >= 3000 {
			t.Errorf("%s: %+v; %d batches in all, none near the 3 s skew", topic, *got, len(lats))
		}
		unknown += got.SkewUnknown
	}
	if unknown == 0 {
		t.Errorf("no batch across agents counted unknown: %+v", sec.E2E)
	}
}

// builder makes exchanges on one connection and ships them through the
// real exporter as agent.
type builder struct {
	t    *testing.T
	x    *export.Exporter
	s    *shippedValues
	c    *flows.Conn
	corr int32
}

func newBuilder(t *testing.T, agent, client string) *builder {
	s := &shippedValues{}
	c := flows.MakeConn(netip.MustParseAddrPort(client), netip.MustParseAddrPort("10.1.0.1:9092"))
	c.ID = 1
	return &builder{t: t, x: exporter(t, agent, s), s: s, c: c}
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// produce ships a Produce of batches to orders/0 sent at ms, answered
// with base offset base 1 ms later (no answer when base < 0).
func (b *builder) produce(at int, base int64, batches ...[]byte) {
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(9)
	p.Acks = -1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = slices.Concat(batches...)
	pt.Partitions = append(pt.Partitions, pp)
	p.Topics = append(p.Topics, pt)
	b.corr++
	req := flowstest.MakeRequest(b.c, t0.Add(time.Duration(at)*time.Millisecond), b.corr, "producer", p)
	x := &flows.Exchange{Conn: b.c, Req: req}
	if base >= 0 {
		pr := kmsg.NewPtrProduceResponse()
		pr.SetVersion(9)
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = "orders"
		rp := kmsg.NewProduceResponseTopicPartition()
		rp.BaseOffset = base
		rt.Partitions = append(rt.Partitions, rp)
		pr.Topics = append(pr.Topics, rt)
		x.Resp = flowstest.MakeResponse(req, req.Time.Add(time.Millisecond), pr)
	} else {
		x.Unanswered = true
	}
	b.x.OnExchange(x)
}

// fetch ships a consumer's Fetch of orders/0 answered at ms with batches.
func (b *builder) fetch(at int, batches ...[]byte) {
	f := kmsg.NewPtrFetchRequest()
	f.SetVersion(11)
	f.ReplicaID = -1
	fr := kmsg.NewPtrFetchResponse()
	fr.SetVersion(11)
	frt := kmsg.NewFetchResponseTopic()
	frt.Topic = "orders"
	fp := kmsg.NewFetchResponseTopicPartition()
	fp.HighWatermark = 1000
	fp.RecordBatches = slices.Concat(batches...)
	frt.Partitions = append(frt.Partitions, fp)
	fr.Topics = append(fr.Topics, frt)
	b.corr++
	resp := t0.Add(time.Duration(at) * time.Millisecond)
	req := flowstest.MakeRequest(b.c, resp.Add(-time.Millisecond), b.corr, "consumer", f)
	b.x.OnExchange(&flows.Exchange{Conn: b.c, Req: req, Resp: flowstest.MakeResponse(req, resp, fr)})
}

// records are what was shipped, parsed.
func (b *builder) records() []Record {
	b.x.Close()
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	return parseAll(b.t, b.s.vals)
}

// batchAt is a batch of 2 records as a producer without idempotence
// sends it (no producer id), its header's base offset base; its CRC does
// not cover the base offset, so the same batch produced and fetched
// carries the same CRC.
func batchAt(base int64, value int) []byte {
	b, _ := batchBytes(base, 2, -1, int32(-1))
	// Records' bytes differ by value, so different batches have
	// different CRCs.
	return withValue(b, value)
}

// withValue changes a batch's record bytes and recomputes its CRC.
func withValue(b []byte, value int) []byte {
	b = slices.Clone(b)
	b[len(b)-1] = byte(value)
	b[len(b)-2] = byte(value >> 8)
	return fixCRC(b)
}

// feed adds records in order to new Stats with the given limits.
func feed(l Limits, recs ...[]Record) *report.Correlation {
	st := NewStats(l)
	for _, rs := range recs {
		for i := range rs {
			st.Add(&rs[i])
		}
	}
	return st.Section()
}

// TestE2ENearMisses: what must not be measured, or measured otherwise.
func TestE2ENearMisses(t *testing.T) {
	t.Run("same CRC at two offsets", func(t *testing.T) {
		// A replay: the same batch produced twice (at 0 and 100 ms),
		// the log holding it at 10 and 12; the consumer fetches both at
		// 150 ms: 150 and 50 ms, each against its own produce.
		p, c := newBuilder(t, "a", "10.0.0.1:4000"), newBuilder(t, "a", "10.0.0.2:4000")
		p.produce(0, 10, batchAt(0, 7))
		p.produce(100, 12, batchAt(0, 7))
		c.fetch(150, batchAt(10, 7), batchAt(12, 7))
		sec := feed(Limits{}, p.records(), c.records())
		got := topicOf(sec, "orders")
		if got == nil || got.Batches != 2 || got.Latency.Max != 150 || got.Latency.P50 < 49 || got.Latency.P50 > 51 || got.Ambiguous != 0 {
			t.Errorf("%+v; want 2 batches, 50 and 150 ms", got)
		}
	})
	t.Run("same CRC, offsets unknown", func(t *testing.T) {
		// The same batch produced on two connections (a MirrorMaker
		// task restarted), neither answer captured: which one the
		// consumer fetched cannot be told.
		p1, p2, c := newBuilder(t, "a", "10.0.0.1:4000"), newBuilder(t, "a", "10.0.0.3:4000"), newBuilder(t, "a", "10.0.0.2:4000")
		p1.produce(0, -1, batchAt(0, 7))
		p2.produce(100, -1, batchAt(0, 7))
		c.fetch(150, batchAt(10, 7))
		sec := feed(Limits{}, p1.records(), p2.records(), c.records())
		if got := topicOf(sec, "orders"); got == nil || got.Batches != 0 || got.Ambiguous != 1 {
			t.Errorf("%+v; want 1 ambiguous, none measured", got)
		}
	})
	t.Run("sent again on one connection, offset unknown", func(t *testing.T) {
		// A retry of the same batch on the same connection is one
		// batch: measured from its first send.
		p, c := newBuilder(t, "a", "10.0.0.1:4000"), newBuilder(t, "a", "10.0.0.2:4000")
		p.produce(0, -1, batchAt(0, 7))
		p.produce(30, -1, batchAt(0, 7))
		c.fetch(150, batchAt(10, 7))
		sec := feed(Limits{}, p.records(), c.records())
		if got := topicOf(sec, "orders"); got == nil || got.Batches != 1 || got.Latency.Max != 150 || got.Ambiguous != 0 {
			t.Errorf("%+v; want 1 batch, 150 ms from the first send", got)
		}
	})
	t.Run("fetch read before its produce", func(t *testing.T) {
		// The consumer host's records come first: the fetch waits for
		// the produce; another fetch never finds one: unmatched.
		p, c := newBuilder(t, "a", "10.0.0.1:4000"), newBuilder(t, "a", "10.0.0.2:4000")
		p.produce(0, 10, batchAt(0, 7))
		c.fetch(40, batchAt(10, 7))
		c.fetch(50, batchAt(20, 8))
		sec := feed(Limits{}, c.records(), p.records())
		if got := topicOf(sec, "orders"); got == nil || got.Batches != 1 || got.Latency.Max != 40 || got.Unmatched != 1 {
			t.Errorf("%+v; want 1 batch of 40 ms, 1 unmatched", got)
		}
	})
	t.Run("fetched again, by two consumers", func(t *testing.T) {
		// A consumer fetching the batch again counts once; another
		// consumer (another client) counts too.
		p, c1, c2 := newBuilder(t, "a", "10.0.0.1:4000"), newBuilder(t, "a", "10.0.0.2:4000"), newBuilder(t, "a", "10.0.0.4:4000")
		p.produce(0, 10, batchAt(0, 7))
		c1.fetch(20, batchAt(10, 7))
		c1.fetch(30, batchAt(10, 7))
		c2.fetch(90, batchAt(10, 7))
		sec := feed(Limits{}, p.records(), c1.records(), c2.records())
		if got := topicOf(sec, "orders"); got == nil || got.Batches != 2 || got.Latency.Max != 90 || got.Latency.P50 < 19.5 || got.Latency.P50 > 20.5 {
			t.Errorf("%+v; want 20 and 90 ms", got)
		}
	})
	t.Run("CRC differs at the offset", func(t *testing.T) {
		p, c := newBuilder(t, "a", "10.0.0.1:4000"), newBuilder(t, "a", "10.0.0.2:4000")
		p.produce(0, 10, batchAt(0, 7))
		c.fetch(40, batchAt(10, 9))
		sec := feed(Limits{}, p.records(), c.records())
		if got := topicOf(sec, "orders"); got == nil || got.Batches != 0 || got.Mismatched != 1 {
			t.Errorf("%+v; want 1 CRC mismatch, none measured", got)
		}
	})
	t.Run("window reached", func(t *testing.T) {
		// A window of 4 produced batches: the first 2 of 6 are pushed
		// out (counted), their fetch finds nothing; the last is found.
		p, c := newBuilder(t, "a", "10.0.0.1:4000"), newBuilder(t, "a", "10.0.0.2:4000")
		for i := range 6 {
			p.produce(i, int64(10+i), batchAt(0, i))
		}
		c.fetch(100, batchAt(10, 0))
		c.fetch(100, batchAt(15, 5))
		sec := feed(Limits{Batches: 4}, p.records(), c.records())
		got := topicOf(sec, "orders")
		if got == nil || got.Batches != 1 || got.Latency.Max != 95 || got.Unmatched != 1 || sec.E2E.Evicted != 2 || sec.E2E.Produced != 6 {
			t.Errorf("%+v, %+v; want 1 batch of 95 ms, 1 unmatched, 2 evicted of 6", got, sec.E2E)
		}
	})
	t.Run("window of one", func(t *testing.T) {
		// The batch pushed out was its partition's last: the next of
		// the same partition is still found.
		p, c := newBuilder(t, "a", "10.0.0.1:4000"), newBuilder(t, "a", "10.0.0.2:4000")
		p.produce(0, 10, batchAt(0, 1))
		p.produce(5, 12, batchAt(0, 2))
		c.fetch(20, batchAt(12, 2))
		sec := feed(Limits{Batches: 1}, p.records(), c.records())
		if got := topicOf(sec, "orders"); got == nil || got.Batches != 1 || got.Latency.Max != 15 || sec.E2E.Evicted != 1 {
			t.Errorf("%+v, %+v; want 1 batch of 15 ms, 1 evicted", got, sec.E2E)
		}
	})
	t.Run("control batch", func(t *testing.T) {
		// A transaction's marker is the broker's, not a producer's:
		// not looked for, not unmatched.
		p, c := newBuilder(t, "a", "10.0.0.1:4000"), newBuilder(t, "a", "10.0.0.2:4000")
		p.produce(0, 10, batchAt(0, 7))
		marker := batchAt(12, 9)
		marker[22] |= 0x20
		c.fetch(20, batchAt(10, 7), fixCRC(marker))
		sec := feed(Limits{}, p.records(), c.records())
		if got := topicOf(sec, "orders"); got == nil || got.Batches != 1 || got.Unmatched != 0 || sec.E2E.Fetched != 1 {
			t.Errorf("%+v, %+v; want the data batch measured, the marker left out", got, sec.E2E)
		}
	})
	t.Run("replica fetch", func(t *testing.T) {
		// A follower's fetch is replication, not a consumer.
		p, f := newBuilder(t, "a", "10.0.0.1:4000"), newBuilder(t, "a", "10.0.0.5:4000")
		p.produce(0, 10, batchAt(0, 7))
		f.fetchReplica(5, batchAt(10, 7))
		sec := feed(Limits{}, p.records(), f.records())
		if sec.E2E.Fetched != 0 || len(sec.E2E.Topics) != 0 {
			t.Errorf("%+v; a follower's fetch measured", sec.E2E)
		}
	})
}

// fetchReplica is fetch as follower broker 2.
func (b *builder) fetchReplica(at int, batches ...[]byte) {
	f := kmsg.NewPtrFetchRequest()
	f.SetVersion(11)
	f.ReplicaID = 2
	fr := kmsg.NewPtrFetchResponse()
	fr.SetVersion(11)
	frt := kmsg.NewFetchResponseTopic()
	frt.Topic = "orders"
	fp := kmsg.NewFetchResponseTopicPartition()
	fp.RecordBatches = slices.Concat(batches...)
	frt.Partitions = append(frt.Partitions, fp)
	fr.Topics = append(fr.Topics, frt)
	b.corr++
	resp := t0.Add(time.Duration(at) * time.Millisecond)
	req := flowstest.MakeRequest(b.c, resp.Add(-time.Millisecond), b.corr, "broker-2-fetcher", f)
	b.x.OnExchange(&flows.Exchange{Conn: b.c, Req: req, Resp: flowstest.MakeResponse(req, resp, fr)})
}
