package notenoughreplicas_test

import (
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/notenoughreplicas"
	"github.com/kfsniff/kfsniff/flows"
)

const (
	rule                 = "not-enough-replicas"
	ok, ner, afterAppend = int16(0), int16(19), int16(20)
)

// producer sends one batch at a time to orders-part over one connection.
type producer struct {
	h    *dt.Harness
	c    *flows.Conn
	id   string
	pid  int64 // -1: no idempotence
	seq  int32
	next int64
}

func newProducer(h *dt.Harness, client, id string, pid int64) *producer {
	return &producer{h: h, c: h.Conn(client, "10.1.0.11:9092"), id: id, pid: pid}
}

func (p *producer) send(at time.Duration, part int32, code int16) {
	b := dt.IdempotentBatch(p.pid, 0, p.seq, 1_767_225_600_000+at.Milliseconds(), "order")
	a := dt.Answer{Topic: "orders", Partition: part, Err: code, Offset: p.next}
	if code == ok {
		p.seq++
		p.next++
	}
	p.h.Call(p.c, dt.At(at), time.Millisecond, p.id, dt.ProduceBatches(9, -1, dt.Sent{Topic: "orders", Partition: part, Batch: b}),
		dt.ProduceAnswers(9, a))
}

// every sends to part every step from from to to (excluded), answered code.
func (p *producer) every(from, to, step time.Duration, part int32, code int16) {
	for at := from; at < to; at += step {
		p.send(at, part, code)
	}
}

func TestNotEnoughReplicas(t *testing.T) {
	dt.Run(t, notenoughreplicas.Analyzer, []dt.Case{
		{
			Name: "healthy acks=all producer: nothing",
			Traffic: func(h *dt.Harness) {
				newProducer(h, "10.2.0.5:40000", "orders-producer", 7).every(0, 5*time.Second, 100*time.Millisecond, 0, ok)
			},
		},
		{
			Name: "near miss: one NOT_ENOUGH_REPLICAS, written 100 ms later: info",
			Traffic: func(h *dt.Harness) {
				p := newProducer(h, "10.2.0.5:40000", "orders-producer", 7)
				p.every(0, time.Second, 100*time.Millisecond, 0, ok)
				p.send(time.Second, 0, ner)
				p.every(1100*time.Millisecond, 2*time.Second, 100*time.Millisecond, 0, ok)
			},
			Want: []dt.Want{{Severity: detectors.Info,
				Detail: &notenoughreplicas.Finding{
					Refusals: 1, PartitionCount: 1, ClientID: "orders-producer", Acks: int16(-1),
					Idempotent: true, Recovered: true, HeldS: 0.1,
					Partitions: []notenoughreplicas.PartitionRefusals{{Partition: "orders-0", Refusals: 1, HeldS: 0.1, Recovered: true}},
				},
				Summary: []string{`producer "orders-producer" (10.2.0.5), acks=all: NOT_ENOUGH_REPLICAS x1 on orders-0; a partition went 100 ms without a write`}}},
		},
		{
			Name: "two refusals 4 s apart, written 9 s after the first (kgo retries after each metadata refresh): warning",
			Traffic: func(h *dt.Harness) {
				p := newProducer(h, "10.2.0.5:40000", "orders-producer", 7)
				p.send(time.Second, 0, ner)
				p.send(5*time.Second, 0, ner)
				p.send(10*time.Second, 0, ok)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &notenoughreplicas.Finding{
				Refusals: 2, HeldS: 9.0, Recovered: true,
				Partitions: []notenoughreplicas.PartitionRefusals{{Partition: "orders-0", Refusals: 2, RetryEveryMs: 4000, HeldS: 9, Recovered: true}},
			},
				Summary: []string{"a partition went 9.0 s without a write"}}},
		},
		{
			Name: "near miss: 2.9 s without a write stays info",
			Traffic: func(h *dt.Harness) {
				p := newProducer(h, "10.2.0.5:40000", "orders-producer", 7)
				p.every(time.Second, 3900*time.Millisecond, 250*time.Millisecond, 0, ner)
				p.send(3900*time.Millisecond, 0, ok)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &notenoughreplicas.Finding{Refusals: 12, HeldS: 2.9}}},
		},
		{
			Name: "near miss the other way: 3.1 s without a write is a warning",
			Traffic: func(h *dt.Harness) {
				p := newProducer(h, "10.2.0.5:40000", "orders-producer", 7)
				p.every(time.Second, 4100*time.Millisecond, 250*time.Millisecond, 0, ner)
				p.send(4100*time.Millisecond, 0, ok)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &notenoughreplicas.Finding{Refusals: 13, HeldS: 3.1}}},
		},
		{
			Name: "a retry storm still refused at the end after 12 s, with the ISR Metadata named: error",
			Traffic: func(h *dt.Harness) {
				p := newProducer(h, "10.2.0.5:40000", "orders-producer", 7)
				p.every(time.Second, 6*time.Second, 100*time.Millisecond, 0, ner)
				m := h.Conn("10.2.0.5:40001", "10.1.0.10:9092")
				h.Call(m, dt.At(6*time.Second), time.Millisecond, "orders-producer", dt.MetadataTopic("orders"),
					dt.MetadataAnswer(3, "orders", [16]byte{1}, 0, dt.MetaPartition{Partition: 0, Leader: 1, Replicas: []int32{1, 2, 0}, ISR: []int32{1}}))
				p.every(6*time.Second, 13*time.Second+time.Millisecond, 100*time.Millisecond, 0, ner)
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &notenoughreplicas.Finding{
				Refusals: 121, Recovered: false, HeldS: 12.0,
				ISR: []notenoughreplicas.ISR{{Partition: "orders-0", Leader: 1, Replicas: []int32{1, 2, 0}, ISR: []int32{1}, Packet: 102}},
			}, Exact: []string{"Recovered"},
				Summary:  []string{"still refused at the end (12.0 s)"},
				Evidence: []uint64{102}}},
		},
		{
			Name: "NOT_ENOUGH_REPLICAS_AFTER_APPEND retried by a producer without idempotence: warning even when quick",
			Traffic: func(h *dt.Harness) {
				p := newProducer(h, "10.2.0.5:40000", "legacy-producer", -1)
				p.send(time.Second, 0, afterAppend)
				p.send(1100*time.Millisecond, 0, afterAppend)
				p.send(1200*time.Millisecond, 0, ok)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &notenoughreplicas.Finding{
				AfterAppend: 2, Rewritten: 2, Idempotent: false,
				Errors: []string{"NOT_ENOUGH_REPLICAS_AFTER_APPEND x2"},
			}, Exact: []string{"Idempotent"}}},
		},
		{
			Name: "near miss: the same with idempotence stays info",
			Traffic: func(h *dt.Harness) {
				p := newProducer(h, "10.2.0.5:40000", "orders-producer", 7)
				p.send(time.Second, 0, afterAppend)
				p.send(1200*time.Millisecond, 0, ok)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &notenoughreplicas.Finding{
				AfterAppend: 1, Rewritten: 0,
			}, Exact: []string{"Rewritten"}}},
		},
		{
			Name: "per client: two producers, one on two partitions",
			Traffic: func(h *dt.Harness) {
				a := newProducer(h, "10.2.0.5:40000", "alpha", 7)
				b := newProducer(h, "10.2.0.6:40000", "beta", 8)
				a.send(time.Second, 0, ner)
				a.send(1100*time.Millisecond, 1, ner)
				b.send(2*time.Second, 0, ner)
				a.send(1500*time.Millisecond, 0, ok)
				a.send(1600*time.Millisecond, 1, ok)
				b.send(2200*time.Millisecond, 0, ok)
			},
			Want: []dt.Want{
				{Severity: detectors.Info, Detail: &notenoughreplicas.Finding{
					Refusals: 2, PartitionCount: 2, ClientID: "alpha", HeldS: 0.5,
				},
					Summary: []string{"on orders-0, orders-1"}},
				{Severity: detectors.Info, Detail: &notenoughreplicas.Finding{Refusals: 1, ClientID: "beta"}},
			},
		},
		{
			Name:     "min-errors above the refusals seen: nothing",
			Settings: map[string]string{"min-errors": "3"},
			Traffic: func(h *dt.Harness) {
				p := newProducer(h, "10.2.0.5:40000", "orders-producer", 7)
				p.send(time.Second, 0, ner)
				p.send(5*time.Second, 0, ner)
				p.send(10*time.Second, 0, ok)
			},
		},
	}, nil)
}
