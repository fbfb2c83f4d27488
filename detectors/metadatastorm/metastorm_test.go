package metadatastorm_test

import (
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/metadatastorm"
	"github.com/kfsniff/kfsniff/flows"
)

const broker = "10.1.0.10:9092"

const ms = time.Millisecond

// refresh sends n Metadata requests from c every period from start, for
// topics (none: all topics).
func refresh(h *dt.Harness, c *flows.Conn, id string, start time.Duration, n int, period time.Duration, topics ...string) {
	for i := range n {
		h.Call(c, dt.At(start+time.Duration(i)*period), 3*ms, id, dt.MetadataFor(topics...), dt.MetadataOf(12))
	}
}

func TestMetadataStorm(t *testing.T) {
	dt.Run(t, metadatastorm.Analyzer, []dt.Case{
		{
			Name: "healthy: a client starting, then refreshing every 30 s for ten minutes, gives nothing",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.2.0.5:40000", broker)
				refresh(h, c, "app", 0, 3, 50*ms, "orders")
				refresh(h, c, "app", 30*time.Second, 20, 30*time.Second)
			},
		},
		{
			Name: "60 all-topics requests in 5.9 s: a storm, a warning",
			Traffic: func(h *dt.Harness) {
				refresh(h, h.Conn("10.2.0.5:40000", broker), "sarama", time.Second, 60, 100*ms)
			},
			End: 30 * time.Second,
			Want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &metadatastorm.Finding{
					MetadataRequests: 60, StormRequests: 60, AllTopicsRequests: 60, Storms: 1,
					ClientID: "sarama", ClientHost: "10.2.0.5", AllTopicsShare: 1.0, PeakPerSecond: 10,
					Ongoing: false, Servers: []string{broker},
				}, Exact: []string{"Ongoing"},
				Summary:  []string{`metadata storm from client "sarama" on 10.2.0.5: 60 Metadata requests in 5.9 s (peak 10/s), 100% for all topics`},
				Evidence: []uint64{1},
			}},
		},
		{
			Name: "near miss: 49 requests within 10 s give nothing",
			Traffic: func(h *dt.Harness) {
				refresh(h, h.Conn("10.2.0.5:40000", broker), "sarama", time.Second, 49, 200*ms, "orders")
				refresh(h, h.Conn("10.2.0.5:40001", broker), "sarama", 20*time.Second, 49, 200*ms, "orders")
			},
		},
		{
			Name: "near miss the other way: 50 within 10 s are a storm",
			Traffic: func(h *dt.Harness) {
				refresh(h, h.Conn("10.2.0.5:40000", broker), "sarama", time.Second, 50, 200*ms, "orders")
			},
			End: time.Minute,
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &metadatastorm.Finding{
				StormRequests: 50, AllTopicsShare: 0.0,
			}, Exact: []string{"AllTopicsShare"}}},
		},
		{
			Name: "per client id and host: two hosts with 30 each, and two client ids on one host with 30 each, give nothing",
			Traffic: func(h *dt.Harness) {
				refresh(h, h.Conn("10.2.0.5:40000", broker), "app", time.Second, 30, 100*ms)
				refresh(h, h.Conn("10.2.0.6:40000", broker), "app", time.Second, 30, 100*ms)
				refresh(h, h.Conn("10.2.0.7:40000", broker), "app-a", time.Second, 30, 100*ms)
				refresh(h, h.Conn("10.2.0.7:40001", broker), "app-b", time.Second, 30, 100*ms)
			},
		},
		{
			Name: "refreshes on error: a Metadata after each NOT_LEADER answer gives nothing",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.2.0.5:40000", broker)
				for i := range 100 {
					at := time.Second + time.Duration(i)*100*ms
					h.Call(c, dt.At(at), 2*ms, "sarama", dt.Produce(9), dt.Produced(9, 6, 0))
					h.Call(c, dt.At(at+50*ms), 2*ms, "sarama", dt.MetadataFor("orders"), dt.MetadataOf(1))
				}
			},
		},
		{
			Name: "near miss: refreshes from 2.2 s after the last error (explain-within 2 s) are all counted",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.2.0.5:40000", broker)
				for i := range 60 {
					at := time.Second + time.Duration(i)*100*ms
					h.Call(c, dt.At(at), 2*ms, "sarama", dt.Produce(9), dt.Produced(9, 6, 0))
				}
				for i := range 60 {
					h.Call(c, dt.At(9100*ms+time.Duration(i)*100*ms), 2*ms, "sarama", dt.MetadataFor("orders"), dt.MetadataOf(1))
				}
			},
			End: time.Minute,
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &metadatastorm.Finding{
				RefreshesAfterError: 0, StormRequests: 60,
			}, Exact: []string{"RefreshesAfterError"}}},
		},
		{
			Name: "one refresh per partition after one error: the error explains one, the rest are a storm",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.2.0.5:40000", broker)
				h.Call(c, dt.At(time.Second), 2*ms, "sarama", dt.Produce(9), dt.Produced(9, 6, 0))
				refresh(h, c, "sarama", time.Second+10*ms, 200, 5*ms, "orders")
			},
			End: time.Minute,
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &metadatastorm.Finding{
				RefreshesAfterError: 1, StormRequests: 199,
			}}},
		},
		{
			Name:    "near miss: a storm of 29.9 s is a warning",
			Traffic: func(h *dt.Harness) { refresh(h, h.Conn("10.2.0.5:40000", broker), "app", 0, 300, 100*ms) },
			End:     2 * time.Minute,
			Want:    []dt.Want{{Severity: detectors.Warning, Detail: &metadatastorm.Finding{StormS: 29.9}}},
		},
		{
			Name:    "a storm of 30 s is an error",
			Traffic: func(h *dt.Harness) { refresh(h, h.Conn("10.2.0.5:40000", broker), "app", 0, 301, 100*ms) },
			End:     2 * time.Minute,
			Want:    []dt.Want{{Severity: detectors.Error, Detail: &metadatastorm.Finding{StormS: 30.0}}},
		},
		{
			Name:    "still storming at the end after 10 s: an error",
			Traffic: func(h *dt.Harness) { refresh(h, h.Conn("10.2.0.5:40000", broker), "app", 0, 101, 100*ms) },
			Want: []dt.Want{{Severity: detectors.Error, Detail: &metadatastorm.Finding{Ongoing: true, StormS: 10.0},
				Summary: []string{"still going on at the end"}}},
		},
		{
			Name:    "near miss: still storming at the end after 9.9 s: a warning",
			Traffic: func(h *dt.Harness) { refresh(h, h.Conn("10.2.0.5:40000", broker), "app", 0, 100, 100*ms) },
			Want:    []dt.Want{{Severity: detectors.Warning, Detail: &metadatastorm.Finding{Ongoing: true}}},
		},
		{
			Name:     "min-requests raised: the 60 requests give nothing",
			Settings: map[string]string{"min-requests": "61"},
			Traffic: func(h *dt.Harness) {
				refresh(h, h.Conn("10.2.0.5:40000", broker), "sarama", time.Second, 60, 100*ms)
			},
		},
	}, nil)
}
