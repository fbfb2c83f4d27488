package decode_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
)

func TestFetchOffsets(t *testing.T) {
	r := kmsg.NewPtrFetchRequest()
	r.Topics = []kmsg.FetchRequestTopic{
		{Topic: "a", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 10}, {Partition: 3, FetchOffset: 7}}},
		{TopicID: [16]byte{1}, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 1, FetchOffset: 99}}},
	}
	var got []string
	decode.FetchOffsets(r, func(p cluster.Partition, off int64) {
		got = append(got, fmt.Sprintf("%s/%x-%d@%d", p.Topic, p.TopicID[0], p.Num, off))
	})
	if want := "[a/0-0@10 a/0-3@7 /1-1@99]"; fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
}

func TestLeaderHints(t *testing.T) {
	meta := kmsg.NewPtrMetadataResponse()
	name := "orders"
	meta.Topics = []kmsg.MetadataResponseTopic{{Topic: &name, Partitions: []kmsg.MetadataResponseTopicPartition{
		{Partition: 0, Leader: 3, LeaderEpoch: 7}, {Partition: 1, Leader: -1, ErrorCode: 5},
	}}}
	prod := kmsg.NewPtrProduceResponse()
	prod.Version = 10
	prod.Topics = []kmsg.ProduceResponseTopic{{Topic: "orders", Partitions: []kmsg.ProduceResponseTopicPartition{
		{Partition: 0, ErrorCode: 6, CurrentLeader: kmsg.ProduceResponseTopicPartitionCurrentLeader{LeaderID: 4, LeaderEpoch: 8}},
		{Partition: 1, ErrorCode: 6, CurrentLeader: kmsg.ProduceResponseTopicPartitionCurrentLeader{LeaderID: -1, LeaderEpoch: -1}},
	}}}
	old := kmsg.NewPtrProduceResponse()
	old.Version = 9
	old.Topics = prod.Topics
	fetch := kmsg.NewPtrFetchResponse()
	fetch.Version = 12
	fetch.Topics = []kmsg.FetchResponseTopic{{Topic: "raft", Partitions: []kmsg.FetchResponseTopicPartition{
		{Partition: 0, ErrorCode: 6, CurrentLeader: kmsg.FetchResponseTopicPartitionCurrentLeader{LeaderID: 1003, LeaderEpoch: 643}},
	}}}
	var got []string
	for _, r := range []kmsg.Response{meta, prod, old, fetch} {
		decode.LeaderHints(r, func(h *decode.LeaderHint) {
			got = append(got, fmt.Sprintf("%s %s-%d leader %d epoch %d err %d", h.Source, h.Topic, h.Num, h.Leader, h.Epoch, h.ErrorCode))
		})
	}
	want := "[metadata orders-0 leader 3 epoch 7 err 0 metadata orders-1 leader -1 epoch 0 err 5 produce orders-0 leader 4 epoch 8 err 6 fetch raft-0 leader 1003 epoch 643 err 6]"
	if fmt.Sprint(got) != want {
		t.Errorf("got  %v\nwant %s", got, want)
	}
}

func TestRequestTopics(t *testing.T) {
	a, b := "a", "b"
	meta := kmsg.NewPtrMetadataRequest()
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: &a}, {Topic: &b}}
	off := kmsg.NewPtrOffsetFetchRequest()
	off.Version = 8
	off.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "c"}}}}
	hb := kmsg.NewPtrHeartbeatRequest()
	for _, tc := range []struct {
		req  kmsg.Request
		want string
	}{
		{meta, "[a b]"},
		{off, "[c]"},
		{hb, "[]"},
	} {
		var got []string
		n := decode.RequestTopics(tc.req, func(name string, _ [16]byte) { got = append(got, name) })
		if fmt.Sprint(got) != tc.want || n != len(got) {
			t.Errorf("%s: %v (%d), want %s", kmsg.NameForKey(tc.req.Key()), got, n, tc.want)
		}
	}
}
