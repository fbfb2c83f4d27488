package producersequence_test

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/producersequence"
	"github.com/kfsniff/kfsniff/flows"
)

const (
	rule                    = "producer-sequence"
	pid                     = int64(4000)
	ts                      = int64(1_767_225_600_000)
	ok, notLeader, timedOut = int16(0), int16(6), int16(7)
	oosn, unknownPID        = int16(45), int16(59)
)

// producer plays an idempotent producer: one connection per partition
// leader, its producer id and epoch, and the next sequence per partition.
type producer struct {
	h      *dt.Harness
	conns  map[int32]*flows.Conn
	id     string
	pid    int64
	epoch  int16
	seq    map[int32]int32
	offset map[int32]int64
}

func newProducer(h *dt.Harness) *producer {
	return &producer{h: h, conns: map[int32]*flows.Conn{
		0: h.Conn("10.2.0.5:40000", "10.1.0.11:9092"),
		1: h.Conn("10.2.0.5:40001", "10.1.0.12:9092"),
	}, id: "orders-producer", pid: pid, seq: map[int32]int32{}, offset: map[int32]int64{}}
}

// send sends value to orders-part as the next batch, answered with code
// 1 ms later; a batch written moves the sequence on.
func (p *producer) send(at time.Duration, part int32, value string, code int16) {
	p.sendAs(at, part, p.pid, p.epoch, p.seq[part], value, code)
	if code == ok {
		p.seq[part]++
	}
}

// sendAs sends value to orders-part under the identity and sequence given.
func (p *producer) sendAs(at time.Duration, part int32, id int64, epoch int16, seq int32, value string, code int16) {
	b := dt.IdempotentBatch(id, epoch, seq, ts, value)
	a := dt.Answer{Topic: "orders", Partition: part, Err: code}
	if code == ok || code == 46 {
		a.Offset = p.offset[part]
		p.offset[part]++
	}
	p.h.Call(p.conns[part], dt.At(at), time.Millisecond, p.id, dt.ProduceBatches(9, -1, dt.Sent{Topic: "orders", Partition: part, Batch: b}),
		dt.ProduceAnswers(9, a))
}

// bump starts a new epoch with every sequence at 0, as clients do after
// a sequence error.
func (p *producer) bump() {
	p.epoch++
	clear(p.seq)
}

// healthy writes n records to both partitions, 100 ms apart, from at.
func (p *producer) healthy(at time.Duration, n int) time.Duration {
	for i := range n {
		p.send(at, int32(i%2), "r"+itoa(i)+"@"+at.String(), ok)
		at += 100 * time.Millisecond
	}
	return at
}

func itoa(i int) string { return string(rune('a'+i%26)) + string(rune('a'+i/26%26)) }

func TestProducerSequence(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		traffic  func(p *producer)
		want     []dt.Want
	}{
		{
			name: "healthy idempotent producer: nothing",
			traffic: func(p *producer) {
				p.healthy(0, 60)
			},
		},
		{
			name: "near miss: one OUT_OF_ORDER_SEQUENCE_NUMBER, the retry under a new epoch written at once: info",
			traffic: func(p *producer) {
				at := p.healthy(0, 10)
				p.send(at, 0, "x", oosn)
				p.bump()
				p.send(at+50*time.Millisecond, 0, "x", ok)
				p.healthy(at+100*time.Millisecond, 10)
			},
			want: []dt.Want{{Severity: detectors.Info,
				Detail: &producersequence.Finding{
					SequenceErrors: 1, EpochBumps: 1, ResentBatches: 1, PossibleDuplicates: 0,
					DuplicateBatches: 0, ClientID: "orders-producer", Partitions: []string{"orders-0"},
					ProducerID: pid, Epoch: int16(0), Sequence: int32(5), Recovered: true,
					ResetPartitions: []string{"orders-1"},
				}, Exact: []string{"PossibleDuplicates", "DuplicateBatches", "ProducerID", "Epoch"},
				Summary: []string{`producer "orders-producer" (10.2.0.5): OUT_OF_ORDER_SEQUENCE_NUMBER x1 on orders-0`, "1 new producer epoch", "written again after 50 ms"}}},
		},
		{
			name: "an epoch bumped again and again for 4 s before a batch is written: warning",
			traffic: func(p *producer) {
				at := p.healthy(0, 10)
				for i := range 9 {
					p.send(at, 0, "x", oosn)
					p.bump()
					p.send(at+time.Millisecond, 1, "y"+itoa(i), ok) // the other partition goes on, from sequence 0
					at += 500 * time.Millisecond
				}
				p.send(at, 0, "x", ok)
			},
			want: []dt.Want{{Severity: detectors.Warning,
				Detail: &producersequence.Finding{
					SequenceErrors: 9, EpochBumps: 9, PossibleDuplicates: 0, DuplicateBatches: 0, HeldS: 4.5,
					Recovered: true, ResetPartitions: []string{"orders-1"},
				}, Exact: []string{"PossibleDuplicates", "DuplicateBatches"},
				Summary: []string{"OUT_OF_ORDER_SEQUENCE_NUMBER x9 on orders-0", "9 new producer epochs", "sequences restarted on orders-1",
					"written again after 4.5 s"}}},
		},
		{
			name: "near miss: 2.9 s without a write stays info",
			traffic: func(p *producer) {
				at := p.healthy(0, 4)
				p.send(at, 0, "x", oosn)
				p.bump()
				p.send(at+2900*time.Millisecond, 0, "x", ok)
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &producersequence.Finding{HeldS: 2.9}}},
		},
		{
			name: "near miss the other way: 3.1 s without a write is a warning",
			traffic: func(p *producer) {
				at := p.healthy(0, 4)
				p.send(at, 0, "x", oosn)
				p.bump()
				p.send(at+3100*time.Millisecond, 0, "x", ok)
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &producersequence.Finding{HeldS: 3.1}}},
		},
		{
			name: "after NOT_LEADER_OR_FOLLOWER, the new leader refuses the sequence and the producer stops: error at the end",
			traffic: func(p *producer) {
				at := p.healthy(0, 10)
				p.send(at, 0, "x", notLeader)
				p.send(at+100*time.Millisecond, 0, "x", oosn)
				// The other partition's writes go on for 12 s; orders-0 is never written again.
				for i := range 24 {
					p.sendAs(at+time.Duration(i+2)*500*time.Millisecond, 1, p.pid, p.epoch, p.seq[1], "z"+itoa(i), ok)
					p.seq[1]++
				}
			},
			want: []dt.Want{{Severity: detectors.Error,
				Detail: &producersequence.Finding{
					SequenceErrors: 1, EpochBumps: 0, After: "NOT_LEADER_OR_FOLLOWER", Recovered: false,
				}, Exact: []string{"EpochBumps", "Recovered"},
				Summary: []string{"not written since (12.4 s)"}}},
		},
		{
			name: "records of unknown fate sent again under the new epoch and written: warning even when quick",
			traffic: func(p *producer) {
				at := p.healthy(0, 10)
				p.send(at, 1, "in-flight", timedOut) // the broker may have written it
				p.send(at+10*time.Millisecond, 0, "x", oosn)
				p.bump()
				p.send(at+20*time.Millisecond, 0, "x", ok)
				p.send(at+30*time.Millisecond, 1, "in-flight", ok) // now sequence 0 of the new epoch: a new batch to the broker
			},
			want: []dt.Want{{Severity: detectors.Warning,
				Detail: &producersequence.Finding{
					PossibleDuplicates: 1, DuplicateBatches: 0, ResentBatches: 2,
					Copies: []producersequence.Copy{{Partition: "orders-1", FirstOffset: -1, Offset: 5, ProducerID: pid, Epoch: 1, Sequence: 0}},
				}, Exact: []string{"DuplicateBatches"},
				Summary: []string{"1 batch of unknown fate written again"}}},
		},
		{
			name: "records written, then written again under the new epoch: duplicates, error",
			traffic: func(p *producer) {
				at := p.healthy(0, 10)
				p.send(at, 1, "acked", ok) // written at orders-1 offset 5
				p.send(at+10*time.Millisecond, 0, "x", oosn)
				p.bump()
				p.send(at+20*time.Millisecond, 0, "x", ok)
				p.send(at+30*time.Millisecond, 1, "acked", ok) // the client sends them again: offset 6
			},
			want: []dt.Want{{Severity: detectors.Error,
				Detail: &producersequence.Finding{
					DuplicateBatches: 1, PossibleDuplicates: 0,
					Copies: []producersequence.Copy{{Partition: "orders-1", FirstOffset: 5, Offset: 6, ProducerID: pid, Epoch: 1, Sequence: 0, Certain: true}},
				}, Exact: []string{"PossibleDuplicates"},
				Summary: []string{"1 batch written twice"}}},
		},
		{
			name: "near miss: a batch of unknown fate retried under its own epoch and sequence is deduplicated by the broker",
			traffic: func(p *producer) {
				at := p.healthy(0, 10)
				p.send(at, 1, "in-flight", timedOut)
				p.send(at+10*time.Millisecond, 0, "x", oosn)
				p.sendAs(at+15*time.Millisecond, 1, pid, 0, 5, "in-flight", ok) // pinned to epoch 0, sequence 5
				p.bump()
				p.send(at+20*time.Millisecond, 0, "x", ok)
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &producersequence.Finding{
				PossibleDuplicates: 0, DuplicateBatches: 0,
			}, Exact: []string{"PossibleDuplicates", "DuplicateBatches"}}},
		},
		{
			name: "a new producer id from InitProducerId",
			traffic: func(p *producer) {
				at := p.healthy(0, 10)
				p.send(at, 0, "x", unknownPID)
				c := p.h.Conn("10.2.0.5:40002", "10.1.0.10:9092")
				p.h.Call(c, dt.At(at+5*time.Millisecond), time.Millisecond, p.id, dt.InitProducerID(pid, 0), dt.InitProducerIDAnswer(pid+1, 0))
				p.pid, p.epoch = pid+1, 0
				clear(p.seq)
				p.send(at+10*time.Millisecond, 0, "x", ok)
			},
			want: []dt.Want{{Severity: detectors.Info,
				Detail: &producersequence.Finding{
					Errors:     []string{"UNKNOWN_PRODUCER_ID x1"},
					Identities: []producersequence.Identity{{ProducerID: pid + 1, Epoch: 0, Packet: 24, From: "InitProducerId"}},
				}}},
		},
		{
			name:     "min-errors raised above the errors seen: nothing",
			settings: map[string]string{"min-errors": "2"},
			traffic: func(p *producer) {
				at := p.healthy(0, 10)
				p.send(at, 0, "x", oosn)
				p.bump()
				p.send(at+50*time.Millisecond, 0, "x", ok)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, map[string]map[string]string{rule: tc.settings}, producersequence.Analyzer)
			tc.traffic(newProducer(h))
			dt.Check(t, h.Findings(), rule, tc.want...)
		})
	}
}

// txnBatch is IdempotentBatch marked transactional.
func txnBatch(pid int64, epoch int16, seq int32, value string) []byte {
	b := dt.IdempotentBatch(pid, epoch, seq, ts, value)
	b[22] |= 0x10 // attributes' transactional bit
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// TestFencingNotCounted: INVALID_PRODUCER_EPOCH answered to a
// transactional producer replaced by another instance (fencing,
// transactional-fencing's finding; recorded on Apache Kafka 4.1.1:
// fixtures/pcaps/kafka/java-txn-fenced) is not a sequence error, but the
// producer's own epoch bump still is.
func TestFencingNotCounted(t *testing.T) {
	const invalidEpoch = int16(47)
	for _, tc := range []struct {
		name    string
		traffic func(h *dt.Harness, produce func(at time.Duration, client string, epoch int16, seq int32, code int16))
		want    []dt.Want
	}{
		{
			name: "another client asks InitProducerId for the transactional id: nothing",
			traffic: func(h *dt.Harness, produce func(time.Duration, string, int16, int32, int16)) {
				produce(0, "txn-a", 3, 0, ok)
				c := h.Conn("10.2.0.6:40000", "10.1.0.10:9092")
				init := dt.InitProducerID(-1, -1)
				init.TransactionalID = kmsg.StringPtr("shared-tx")
				// The first ask is answered CONCURRENT_TRANSACTIONS (51):
				// the coordinator fences at once, and the fenced Produce is
				// answered before the ask that succeeds.
				h.Call(c, dt.At(100*time.Millisecond), time.Millisecond, "txn-b", init, errInit(51))
				produce(200*time.Millisecond, "txn-a", 3, 1, invalidEpoch)
			},
		},
		{
			name: "the replacement's ask not captured, its batches at a later epoch are: nothing",
			traffic: func(h *dt.Harness, produce func(time.Duration, string, int16, int32, int16)) {
				produce(0, "txn-a", 3, 0, ok)
				produce(100*time.Millisecond, "txn-b", 4, 0, ok)
				produce(200*time.Millisecond, "txn-a", 3, 1, invalidEpoch)
			},
		},
		{
			name: "near miss: the producer bumps its own epoch, then its old epoch is refused: counted",
			traffic: func(h *dt.Harness, produce func(time.Duration, string, int16, int32, int16)) {
				produce(0, "txn-a", 3, 0, ok)
				c := h.Conn("10.2.0.5:40009", "10.1.0.10:9092")
				init := dt.InitProducerID(pid, 3)
				init.TransactionalID = kmsg.StringPtr("shared-tx")
				h.Call(c, dt.At(100*time.Millisecond), time.Millisecond, "txn-a", init, dt.InitProducerIDAnswer(pid, 4))
				produce(200*time.Millisecond, "txn-a", 3, 1, invalidEpoch)
				produce(300*time.Millisecond, "txn-a", 4, 0, ok)
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &producersequence.Finding{SequenceErrors: 1},
				Summary: []string{`producer "txn-a" (10.2.0.5): INVALID_PRODUCER_EPOCH x1 on orders-0`}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, nil, producersequence.Analyzer)
			conns := map[string]*flows.Conn{
				"txn-a": h.Conn("10.2.0.5:40000", "10.1.0.11:9092"),
				"txn-b": h.Conn("10.2.0.6:40001", "10.1.0.11:9092"),
			}
			offset := int64(0)
			produce := func(at time.Duration, client string, epoch int16, seq int32, code int16) {
				req := dt.ProduceBatches(9, -1, dt.Sent{Topic: "orders", Partition: 0, Batch: txnBatch(pid, epoch, seq, client+"@"+at.String())})
				req.TransactionID = kmsg.StringPtr("shared-tx")
				a := dt.Answer{Topic: "orders", Partition: 0, Err: code, Offset: offset}
				if code == ok {
					offset++
				}
				h.Call(conns[client], dt.At(at), time.Millisecond, client, req, dt.ProduceAnswers(9, a))
			}
			tc.traffic(h, produce)
			dt.Check(t, h.Findings(), rule, tc.want...)
		})
	}
}

func errInit(code int16) *kmsg.InitProducerIDResponse {
	r := dt.InitProducerIDAnswer(-1, -1)
	r.ErrorCode = code
	return r
}
