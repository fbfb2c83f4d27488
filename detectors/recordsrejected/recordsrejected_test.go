package recordsrejected_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/errorstorm"
	"github.com/kfsniff/kfsniff/detectors/recordsrejected"
)

const broker = "10.1.0.10:9092"

// batch is a batch of n records of size bytes each.
func batch(n, size int) []byte { return batchAt(n, size, 0) }

// batchAt is the same batch made at the k-th millisecond: a new batch of
// the same size (another checksum), not the first sent again.
func batchAt(n, size, k int) []byte {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = strings.Repeat("x", size)
	}
	return dt.IdempotentBatch(-1, 0, 0, 1767225600000+int64(k), vals...)
}

// produce sends one batch to orders-p at, answered with code (and msg
// from v8).
func produce(h *dt.Harness, c string, id string, at time.Duration, p int32, b []byte, code int16, msg string) {
	conn := h.Conn(c, broker)
	resp := dt.ProduceAnswers(9, dt.Answer{Topic: "orders", Partition: p, Err: code, Offset: 10})
	if msg != "" {
		resp.Topics[0].Partitions[0].ErrorMessage = kmsg.StringPtr(msg)
	}
	h.Call(conn, dt.At(at), 2*time.Millisecond, id, dt.ProduceBatches(9, -1, dt.Sent{Topic: "orders", Partition: p, Batch: b}), resp)
}

func describeConfigs(h *dt.Harness, at time.Duration, typ kmsg.ConfigResourceType, name, config, value string) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = typ, name
	req.Resources = append(req.Resources, res)
	resp := kmsg.NewPtrDescribeConfigsResponse()
	rr := kmsg.NewDescribeConfigsResponseResource()
	rr.ResourceType, rr.ResourceName = typ, name
	cf := kmsg.NewDescribeConfigsResponseResourceConfig()
	cf.Name, cf.Value = config, kmsg.StringPtr(value)
	rr.Configs = append(rr.Configs, cf)
	resp.Resources = append(resp.Resources, rr)
	h.Call(h.Conn("10.2.0.9:41000", broker), dt.At(at), time.Millisecond, "ops", req, resp)
}

func TestRecordsRejected(t *testing.T) {
	big, small := batch(1, 3000), batch(2, 100)
	bigSize := int64(len(big))
	dt.Run(t, recordsrejected.Analyzer, []dt.Case{
		{
			Name: "one batch too large, once: a loss, a warning however short",
			Traffic: func(h *dt.Harness) {
				produce(h, "10.2.0.5:40000", "app", time.Second, 0, small, 0, "")
				produce(h, "10.2.0.5:40000", "app", 2*time.Second, 0, big, 10, "")
				produce(h, "10.2.0.5:40000", "app", 3*time.Second, 0, small, 0, "")
			},
			Want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &recordsrejected.Finding{
					Answers: 1, Batches: 1, Records: 1, Bytes: bigSize, ClientID: "app", Host: "10.2.0.5",
					Errors: []string{"MESSAGE_TOO_LARGE"}, Partitions: []string{"orders-0"},
					SmallestTooLarge: bigSize, LargestAccepted: int64(len(small)), Ongoing: false,
					WrittenAfter: int64(1),
				}, Exact: []string{"Bytes", "SmallestTooLarge", "LargestAccepted", "Ongoing"},
				Summary: []string{`client "app" on 10.2.0.5: 1 batch refused for good (MESSAGE_TOO_LARGE)`, "orders-0, 1 record lost",
					"limit between"},
			}},
			Explanation: []string{"No retry mends these errors", "smaller records got through"},
			Next:        []string{"--entity-name orders", "max.request.size"},
		},
		{
			Name: "the limit named by the broker's message",
			Traffic: func(h *dt.Harness) {
				produce(h, "10.2.0.5:40000", "app", time.Second, 1, big, 10,
					"The message is 3082 bytes when serialized which is larger than 1048576, the maximum configured message size of 1000.")
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &recordsrejected.Finding{
				LimitBytes: int64(1000), LimitFrom: "the broker's error message",
			},
				Summary: []string{"limit 1000 bytes"}}},
		},
		{
			Name: "the limit from a DescribeConfigs answer for the topic",
			Traffic: func(h *dt.Harness) {
				describeConfigs(h, 500*time.Millisecond, kmsg.ConfigResourceTypeTopic, "orders", "max.message.bytes", "2048")
				produce(h, "10.2.0.5:40000", "app", time.Second, 1, big, 10, "")
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &recordsrejected.Finding{
				LimitBytes: int64(2048), LimitFrom: "DescribeConfigs: orders max.message.bytes",
			}}},
		},
		{
			Name: "refused for 30 s: an error",
			Traffic: func(h *dt.Harness) {
				for i := range 31 {
					produce(h, "10.2.0.5:40000", "app", time.Duration(i+1)*time.Second, 0, batchAt(1, 3000, i), 10, "")
				}
				produce(h, "10.2.0.5:40000", "app", 33*time.Second, 0, small, 0, "")
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &recordsrejected.Finding{
				Batches: 31, Ongoing: false,
			}, Exact: []string{"Ongoing"}}},
		},
		{
			Name: "near miss: refused for 29 s, then written: a warning",
			Traffic: func(h *dt.Harness) {
				for i := range 30 {
					produce(h, "10.2.0.5:40000", "app", time.Duration(i+1)*time.Second, 0, batchAt(1, 3000, i), 10, "")
				}
				produce(h, "10.2.0.5:40000", "app", 33*time.Second, 0, small, 0, "")
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &recordsrejected.Finding{Batches: 30}}},
		},
		{
			Name: "still refused at the end after 10 s: an error",
			Traffic: func(h *dt.Harness) {
				for i := range 11 {
					produce(h, "10.2.0.5:40000", "app", time.Duration(i+1)*time.Second, 0, batchAt(1, 3000, i), 87, "")
				}
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &recordsrejected.Finding{
				Errors: []string{"INVALID_RECORD"}, Ongoing: true,
			}}},
		},
		{
			Name: "near miss: still refused at the end after 9 s: a warning",
			Traffic: func(h *dt.Harness) {
				for i := range 10 {
					produce(h, "10.2.0.5:40000", "app", time.Duration(i+1)*time.Second, 0, batchAt(1, 3000, i), 87, "")
				}
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &recordsrejected.Finding{Ongoing: true}}},
		},
		{
			Name: "the same batch sent again and again: one batch lost, the re-sends counted",
			Traffic: func(h *dt.Harness) {
				for i := range 5 {
					produce(h, "10.2.0.5:40000", "app", time.Duration(i+1)*time.Millisecond, 0, big, 10, "")
				}
			},
			Want: []dt.Want{{Severity: detectors.Warning,
				Detail: &recordsrejected.Finding{
					Answers: 5, Batches: 1, Records: 1, Bytes: bigSize, Resent: int64(4),
				}, Exact: []string{"Bytes"},
			}},
			Explanation: []string{"4 batches refused again and again were the same bytes sent again"},
		},
		{
			Name: "near miss: retriable errors are not losses",
			Traffic: func(h *dt.Harness) {
				for i := range 20 {
					produce(h, "10.2.0.5:40000", "app", time.Duration(i+1)*time.Second, 0, big, 6, "")
				}
			},
		},
		{
			Name:     "fewer refused batches than min-batches: nothing",
			Settings: map[string]string{"min-batches": "2"},
			Traffic:  func(h *dt.Harness) { produce(h, "10.2.0.5:40000", "app", time.Second, 0, big, 10, "") },
		},
		{
			Name: "two clients, two findings",
			Traffic: func(h *dt.Harness) {
				produce(h, "10.2.0.5:40000", "app", time.Second, 0, big, 10, "")
				produce(h, "10.2.0.6:40000", "app", 2*time.Second, 0, big, 10, "")
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &recordsrejected.Finding{Host: "10.2.0.5"}},
				{Severity: detectors.Warning, Detail: &recordsrejected.Finding{Host: "10.2.0.6"}}},
		},
	}, nil)
}

// TestErrorStormExplained: the error storm of the same refusals defers to
// the loss.
func TestErrorStormExplained(t *testing.T) {
	h := dt.New(t, nil, recordsrejected.Analyzer, errorstorm.Analyzer)
	big := batch(1, 3000)
	for i := range 40 {
		produce(h, "10.2.0.5:40000", "app", time.Second+time.Duration(i)*100*time.Millisecond, 0, big, 10, "")
	}
	for _, f := range h.Findings() {
		if f.Detector == "error-storm" && (f.Severity != detectors.Info || f.Fields["explained_by"] != "records-rejected") {
			t.Errorf("error-storm %s: %s, not explained by records-rejected", f.Severity, f.Summary)
		}
	}
}
