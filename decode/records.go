package decode

import "github.com/twmb/franz-go/pkg/kmsg"

// RecordSet is the records field of one partition in a Produce request or a
// Fetch response.
type RecordSet struct {
	Topic     string   // empty when the version names topics by id
	TopicID   [16]byte // zero before topic ids
	Partition int32
	Records   []byte
}

// RecordSets calls fn for every partition's records in a Produce request or a
// Fetch response (client, replica and raft fetches alike); other messages
// carry no record batches.
func RecordSets(msg any, fn func(RecordSet)) {
	switch m := msg.(type) {
	case *kmsg.ProduceRequest:
		for i := range m.Topics {
			t := &m.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				fn(RecordSet{Topic: t.Topic, TopicID: t.TopicID, Partition: p.Partition, Records: p.Records})
			}
		}
	case *kmsg.FetchResponse:
		for i := range m.Topics {
			t := &m.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				fn(RecordSet{Topic: t.Topic, TopicID: t.TopicID, Partition: p.Partition, Records: p.RecordBatches})
			}
		}
	}
}

// ReleaseRecords drops the record bytes of a decoded Produce request or
// Fetch response, which alias the frame buffer, so the message can be kept
// after the frame is gone.
func ReleaseRecords(msg any) {
	switch m := msg.(type) {
	case *kmsg.ProduceRequest:
		for i := range m.Topics {
			for j := range m.Topics[i].Partitions {
				m.Topics[i].Partitions[j].Records = nil
			}
		}
	case *kmsg.FetchResponse:
		for i := range m.Topics {
			for j := range m.Topics[i].Partitions {
				m.Topics[i].Partitions[j].RecordBatches = nil
			}
		}
	}
}
