package transactionalfencing_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/transactionalfencing"
)

const broker = "10.1.0.10:9092"

func initPID(h *dt.Harness, at time.Duration, client, id, txn string, epoch int16) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.TransactionalID = 4, kmsg.StringPtr(txn)
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.Version, resp.ProducerID, resp.ProducerEpoch = 4, 7, epoch
	h.Call(h.Conn(client, broker), dt.At(at), time.Millisecond, id, req, resp)
}

func endTxn(h *dt.Harness, at time.Duration, client, id, txn string, commit bool, code int16) {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version, req.TransactionalID, req.Commit = 3, txn, commit
	resp := kmsg.NewPtrEndTxnResponse()
	resp.Version, resp.ErrorCode = 3, code
	h.Call(h.Conn(client, broker), dt.At(at), time.Millisecond, id, req, resp)
}

func addPartitions(h *dt.Harness, at time.Duration, client, id, txn string, code int16) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version, req.TransactionalID = 3, txn
	t := kmsg.NewAddPartitionsToTxnRequestTopic()
	t.Topic, t.Partitions = "orders", []int32{0}
	req.Topics = append(req.Topics, t)
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	resp.Version = 3
	rt := kmsg.NewAddPartitionsToTxnResponseTopic()
	rt.Topic = "orders"
	rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
	rp.ErrorCode = code
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	h.Call(h.Conn(client, broker), dt.At(at), time.Millisecond, id, req, resp)
}

// fight is two instances fencing each other n times each, a second apart.
func fight(h *dt.Harness, n int) {
	epoch := int16(0)
	for i := range n {
		base := time.Duration(i) * 2 * time.Second
		initPID(h, base, "10.2.0.5:40000", "svc-a", "orders-txn", epoch)
		endTxn(h, base+200*time.Millisecond, "10.2.0.5:40000", "svc-a", "orders-txn", true, 0)
		initPID(h, base+time.Second, "10.2.0.6:40000", "svc-b", "orders-txn", epoch+1)
		addPartitions(h, base+1100*time.Millisecond, "10.2.0.5:40000", "svc-a", "orders-txn", 90)
		endTxn(h, base+1200*time.Millisecond, "10.2.0.6:40000", "svc-b", "orders-txn", true, 0)
		epoch += 2
		if i < n-1 {
			// b is fenced by a's next InitProducerId
			addPartitions(h, base+2100*time.Millisecond, "10.2.0.6:40000", "svc-b", "orders-txn", 90)
		}
	}
}

func TestTransactionalFencing(t *testing.T) {
	dt.Run(t, transactionalfencing.Analyzer, []dt.Case{
		{
			Name:    "two instances fencing each other: a warning naming both",
			Traffic: func(h *dt.Harness) { fight(h, 3) },
			Want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &transactionalfencing.Finding{
					Fenced: 5, Episodes: 5, ProducerCount: 2, Committed: 6, TransactionalID: "orders-txn",
					Errors: []string{"PRODUCER_FENCED"}, ByAPI: []string{"AddPartitionsToTxn x5"},
				},
				Summary: []string{`transactional.id "orders-txn": "svc-a" on 10.2.0.5, "svc-b" on 10.2.0.6 fenced 5 times`,
					"5 fenced answers of 2 producer(s)"},
			}},
			Explanation: []string{`"svc-a" on 10.2.0.5: 3 InitProducerId (epochs 0, 2, 4), fenced 3 time(s)`, "more than one live instance"},
			Next:        []string{"describe --transactional-id orders-txn"},
		},
		{
			Name: "near miss: a zombie fenced once by its replacement: info",
			Traffic: func(h *dt.Harness) {
				initPID(h, 0, "10.2.0.5:40000", "svc", "orders-txn", 0)
				initPID(h, time.Second, "10.2.0.6:40000", "svc", "orders-txn", 1)
				endTxn(h, 1500*time.Millisecond, "10.2.0.5:40000", "svc", "orders-txn", true, 90)
				endTxn(h, 1600*time.Millisecond, "10.2.0.6:40000", "svc", "orders-txn", true, 0)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &transactionalfencing.Finding{
				Episodes: 1, CommitsRefused: 1, Committed: 1,
			}}},
			Explanation: []string{"Fenced once: a replacement stopping a zombie"},
		},
		{
			Name: "one producer fenced twice (restarted into the same fight): a warning",
			Traffic: func(h *dt.Harness) {
				for i := range 2 {
					b := time.Duration(i) * time.Second
					initPID(h, b, "10.2.0.5:40000", "svc", "orders-txn", int16(i))
					endTxn(h, b+500*time.Millisecond, "10.2.0.5:40000", "svc", "orders-txn", false, 47)
				}
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &transactionalfencing.Finding{Episodes: 2, AbortsRefused: 2}}},
		},
		{
			Name:     "fewer episodes than min-episodes: info",
			Settings: map[string]string{"min-episodes": "6"},
			Traffic:  func(h *dt.Harness) { fight(h, 3) },
			Want:     []dt.Want{{Severity: detectors.Info, Detail: &transactionalfencing.Finding{Episodes: 5}}},
		},
		{
			Name: "fencing going on for 30 s: an error",
			Traffic: func(h *dt.Harness) {
				fight(h, 16)
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &transactionalfencing.Finding{Episodes: 31}}},
		},
		{
			Name: "near miss: transactions without fencing: nothing",
			Traffic: func(h *dt.Harness) {
				initPID(h, 0, "10.2.0.5:40000", "svc", "orders-txn", 0)
				addPartitions(h, 100*time.Millisecond, "10.2.0.5:40000", "svc", "orders-txn", 0)
				endTxn(h, 200*time.Millisecond, "10.2.0.5:40000", "svc", "orders-txn", true, 0)
				endTxn(h, 300*time.Millisecond, "10.2.0.5:40000", "svc", "orders-txn", false, 0)
			},
		},
	}, nil)
}
