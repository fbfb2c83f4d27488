package topicrecreated_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/topicrecreated"
	"github.com/kfsniff/kfsniff/flows"
)

const (
	rule                 = "topic-recreated"
	ok, unknownID, incon = int16(0), int16(100), int16(103)
)

var (
	oldID = [16]byte{0x4a, 0x3a, 1}
	newID = [16]byte{0x9e, 0xcd, 2}
)

// consumer fetches partition 0 of a topic by id.
type consumer struct {
	h *dt.Harness
	c *flows.Conn
	m *flows.Conn
}

func newConsumer(h *dt.Harness) *consumer {
	return &consumer{h: h, c: h.Conn("10.2.0.7:40000", "10.1.0.11:9092"), m: h.Conn("10.2.0.7:40001", "10.1.0.10:9092")}
}

// fetch fetches id at at, answered code 1 ms later.
func (c *consumer) fetch(at time.Duration, id [16]byte, code int16) {
	c.h.Call(c.c, dt.At(at), time.Millisecond, "orders-consumer", dt.FetchByID(id), dt.FetchedByID(id, code))
}

// every fetches id every step in [from, to), answered code.
func (c *consumer) every(from, to, step time.Duration, id [16]byte, code int16) {
	for at := from; at < to; at += step {
		c.fetch(at, id, code)
	}
}

// metadata asks for orders by name and is told its id.
func (c *consumer) metadata(at time.Duration, id [16]byte) {
	c.h.Call(c.m, dt.At(at), time.Millisecond, "orders-consumer", dt.MetadataTopic("orders"),
		dt.MetadataAnswer(3, "orders", id, 0, dt.MetaPartition{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}))
}

func TestTopicRecreated(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		traffic  func(c *consumer)
		want     []dt.Want
	}{
		{
			name: "healthy consumer by topic id: nothing",
			traffic: func(c *consumer) {
				c.metadata(0, oldID)
				c.every(10*time.Millisecond, 5*time.Second, 500*time.Millisecond, oldID, ok)
			},
		},
		{
			name: "near miss: recreated, and the client catches up after one metadata refresh: info with both ids",
			traffic: func(c *consumer) {
				c.metadata(0, oldID)
				c.every(10*time.Millisecond, 2*time.Second, 500*time.Millisecond, oldID, ok)
				c.fetch(2*time.Second, oldID, unknownID)
				c.fetch(2010*time.Millisecond, oldID, unknownID)
				c.metadata(2100*time.Millisecond, newID)
				c.every(2200*time.Millisecond, 3*time.Second, 500*time.Millisecond, newID, ok)
			},
			want: []dt.Want{{Severity: detectors.Info,
				Detail: &topicrecreated.Finding{
					Refusals: 2, FastRetries: 1, ClientID: "orders-consumer", Topic: "orders",
					OldID: cluster.TopicID(oldID), NewID: cluster.TopicID(newID), NewIDPacket: uint64(16),
					Recovered: true, HeldS: 0.2, APIs: []string{"Fetch x2"},
					Errors: []string{"UNKNOWN_TOPIC_ID x2"},
				}, Exact: []string{"OldID", "NewID"},
				Summary:  []string{`client "orders-consumer" (10.2.0.7): Fetch answered UNKNOWN_TOPIC_ID 2 times in 10 ms`, "for orders (topic id " + cluster.TopicID(oldID) + ")", "recreated as topic id " + cluster.TopicID(newID), "caught up after 200 ms"},
				Evidence: []uint64{12, 16}}},
		},
		{
			name: "spinning at round-trip speed on the old id until the end, 12 s: error",
			traffic: func(c *consumer) {
				c.metadata(0, oldID)
				c.fetch(time.Second, oldID, ok)
				c.every(2*time.Second, 2500*time.Millisecond, 5*time.Millisecond, oldID, unknownID)
				c.metadata(2500*time.Millisecond, newID)
				c.every(2500*time.Millisecond, 14*time.Second+time.Millisecond, 5*time.Millisecond, oldID, unknownID)
			},
			want: []dt.Want{{Severity: detectors.Error,
				Detail: &topicrecreated.Finding{
					Refusals: 2401, FastRetries: 2400, Recovered: false, HeldS: 12.0, MeanGapMs: 4.0,
					RatePerS: 200.08, NewID: cluster.TopicID(newID),
				}, Exact: []string{"Recovered", "NewID"},
				Summary: []string{"UNKNOWN_TOPIC_ID 2401 times in 12.0 s (200.08/s)", "still refused at the end (12.0 s)"}}},
		},
		{
			name: "near miss: 2.9 s to catch up stays info",
			traffic: func(c *consumer) {
				c.every(time.Second, 3900*time.Millisecond, 100*time.Millisecond, oldID, unknownID)
				c.metadata(3850*time.Millisecond, newID)
				c.fetch(3900*time.Millisecond, newID, ok)
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &topicrecreated.Finding{
				Refusals: 29, FastRetries: 0, HeldS: 2.9,
			}, Exact: []string{"FastRetries"}}},
		},
		{
			name: "near miss the other way: 3.1 s is a warning",
			traffic: func(c *consumer) {
				c.metadata(0, oldID)
				c.every(time.Second, 4100*time.Millisecond, 100*time.Millisecond, oldID, unknownID)
				c.metadata(4050*time.Millisecond, newID)
				c.fetch(4100*time.Millisecond, newID, ok)
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &topicrecreated.Finding{Refusals: 31, HeldS: 3.1}}},
		},
		{
			name: "Produce and Metadata by the old id too, and the deletion in the capture",
			traffic: func(c *consumer) {
				c.metadata(0, oldID)
				admin := c.h.Conn("10.2.0.9:40000", "10.1.0.10:9092")
				del := kmsg.NewPtrDeleteTopicsRequest()
				del.Version, del.TopicNames = 5, []string{"orders"}
				dr := kmsg.NewPtrDeleteTopicsResponse()
				dr.Version = 5
				drt := kmsg.NewDeleteTopicsResponseTopic()
				drt.Topic = kmsg.StringPtr("orders")
				dr.Topics = append(dr.Topics, drt)
				c.h.Call(admin, dt.At(500*time.Millisecond), time.Millisecond, "ops-admin", del, dr)
				c.fetch(time.Second, oldID, unknownID)
				c.h.Call(c.m, dt.At(1100*time.Millisecond), time.Millisecond, "orders-consumer", dt.ProduceByID(oldID, dt.IdempotentBatch(-1, 0, 0, 0, "x")),
					dt.ProducedByID(oldID, unknownID, 0))
				mr := dt.MetadataTopic("")
				mr.Topics[0].Topic, mr.Topics[0].TopicID = nil, oldID
				c.h.Call(c.m, dt.At(1200*time.Millisecond), time.Millisecond, "orders-consumer", mr, dt.MetadataAnswer(3, "", oldID, unknownID))
				c.fetch(1300*time.Millisecond, oldID, incon)
				c.fetch(1400*time.Millisecond, newID, ok) // no Metadata named it: not known to be the same topic
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &topicrecreated.Finding{
				Refusals: 4, APIs: []string{"Fetch x2", "Produce x1", "Metadata x1"},
				Errors: []string{"UNKNOWN_TOPIC_ID x3", "INCONSISTENT_TOPIC_ID x1"},
			},
				Evidence: []uint64{4}}},
		},
		{
			name: "a topic id no Metadata ever named, refused then forgotten: info without a new id",
			traffic: func(c *consumer) {
				c.fetch(time.Second, oldID, unknownID)
				c.fetch(1100*time.Millisecond, oldID, unknownID)
				c.fetch(1200*time.Millisecond, newID, ok)
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &topicrecreated.Finding{Refusals: 2}}},
		},
		{
			name:     "min-errors above the refusals: nothing",
			settings: map[string]string{"min-errors": "3"},
			traffic: func(c *consumer) {
				c.metadata(0, oldID)
				c.fetch(time.Second, oldID, unknownID)
				c.fetch(1100*time.Millisecond, oldID, unknownID)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, map[string]map[string]string{rule: tc.settings}, topicrecreated.Analyzer)
			tc.traffic(newConsumer(h))
			dt.Check(t, h.Findings(), rule, tc.want...)
		})
	}
}
