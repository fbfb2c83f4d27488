package decode_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

// TestLeaderHintReplicas: a Metadata hint carries the partition's
// replicas, in-sync and offline replicas (what a leaderless partition's
// election can pick from); Produce and Fetch hints carry none.
func TestLeaderHintReplicas(t *testing.T) {
	meta := kmsg.NewPtrMetadataResponse()
	meta.Version = 12
	name := "orders"
	meta.Topics = []kmsg.MetadataResponseTopic{{Topic: &name, Partitions: []kmsg.MetadataResponseTopicPartition{
		{Partition: 0, Leader: -1, ErrorCode: 5, Replicas: []int32{4}, ISR: []int32{4}, OfflineReplicas: []int32{4}},
		{Partition: 1, Leader: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}, OfflineReplicas: []int32{}},
	}}}
	prod := kmsg.NewPtrProduceResponse()
	prod.Version = 10
	prod.Topics = []kmsg.ProduceResponseTopic{{Topic: "orders", Partitions: []kmsg.ProduceResponseTopicPartition{
		{Partition: 0, ErrorCode: 6, CurrentLeader: kmsg.ProduceResponseTopicPartitionCurrentLeader{LeaderID: 4, LeaderEpoch: 8}},
	}}}
	var got []string
	for _, r := range []kmsg.Response{meta, prod} {
		decode.LeaderHints(r, func(h *decode.LeaderHint) {
			got = append(got, fmt.Sprintf("%s %s-%d leader %d replicas %v isr %v offline %v (nil %v)", h.Source, h.Topic, h.Num,
				h.Leader, h.Replicas, h.ISR, h.Offline, h.Offline == nil))
		})
	}
	want := "[metadata orders-0 leader -1 replicas [4] isr [4] offline [4] (nil false) " +
		"metadata orders-1 leader 2 replicas [1 2 3] isr [2 3] offline [] (nil false) " +
		"produce orders-0 leader 4 replicas [] isr [] offline [] (nil true)]"
	if fmt.Sprint(got) != want {
		t.Errorf("got  %v\nwant %s", got, want)
	}
}
