package decode

import (
	"github.com/kfsniff/kfsniff/cluster"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// PartitionErrors calls fn for each partition a Produce or Fetch answer
// names, with its error code, and for each topic a Metadata answer names,
// with the topic's error code (Partition -1; a Metadata answer for a topic
// id it does not know has no name and UNKNOWN_TOPIC_ID).
func PartitionErrors(resp kmsg.Response, fn func(p cluster.Partition, code int16)) {
	if r, ok := resp.(*kmsg.MetadataResponse); ok {
		for i := range r.Topics {
			fn(cluster.Partition{Topic: orEmpty(r.Topics[i].Topic), TopicID: r.Topics[i].TopicID, Num: -1}, r.Topics[i].ErrorCode)
		}
		return
	}
	PartitionAnswers(resp, func(a PartitionAnswer) { fn(a.Partition, a.ErrorCode) })
}

// MetadataPartitions calls fn for each partition a Metadata answer
// describes (leader, replicas, ISR), named by topic and id as given.
func MetadataPartitions(r *kmsg.MetadataResponse, fn func(p cluster.Partition, mp *kmsg.MetadataResponseTopicPartition)) {
	for i := range r.Topics {
		t := &r.Topics[i]
		name := orEmpty(t.Topic)
		for j := range t.Partitions {
			fn(cluster.Partition{Topic: name, TopicID: t.TopicID, Num: t.Partitions[j].Partition}, &t.Partitions[j])
		}
	}
}

// orEmpty is *s, "" for a null string.
func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
