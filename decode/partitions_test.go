package decode_test

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
)

type partErr struct {
	p    cluster.Partition
	code int16
}

func TestPartitionErrors(t *testing.T) {
	id := [16]byte{7}
	produce := kmsg.NewPtrProduceResponse()
	pt := kmsg.NewProduceResponseTopic()
	pt.TopicID = id
	for _, c := range []int16{0, 19} {
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition, p.ErrorCode = int32(len(pt.Partitions)), c
		pt.Partitions = append(pt.Partitions, p)
	}
	produce.Topics = append(produce.Topics, pt)

	fetch := kmsg.NewPtrFetchResponse()
	ft := kmsg.NewFetchResponseTopic()
	ft.Topic = "orders"
	fp := kmsg.NewFetchResponseTopicPartition()
	fp.Partition, fp.ErrorCode = 2, 100
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)

	meta := kmsg.NewPtrMetadataResponse()
	known := kmsg.NewMetadataResponseTopic()
	known.Topic, known.TopicID = kmsg.StringPtr("orders"), id
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.Partition, mp.Leader, mp.ISR = 0, 1, []int32{1}
	known.Partitions = append(known.Partitions, mp)
	gone := kmsg.NewMetadataResponseTopic()
	gone.TopicID, gone.ErrorCode = [16]byte{9}, 100
	meta.Topics = append(meta.Topics, known, gone)

	for _, tc := range []struct {
		name string
		resp kmsg.Response
		want []partErr
	}{
		{"produce by topic id", produce, []partErr{{cluster.Partition{TopicID: id, Num: 0}, 0}, {cluster.Partition{TopicID: id, Num: 1}, 19}}},
		{"fetch by name", fetch, []partErr{{cluster.Partition{Topic: "orders", Num: 2}, 100}}},
		{"metadata topics", meta, []partErr{{cluster.Partition{Topic: "orders", TopicID: id, Num: -1}, 0},
			{cluster.Partition{TopicID: [16]byte{9}, Num: -1}, 100}}},
		{"other answers name none", kmsg.NewPtrHeartbeatResponse(), nil},
	} {
		var got []partErr
		decode.PartitionErrors(tc.resp, func(p cluster.Partition, code int16) { got = append(got, partErr{p, code}) })
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}

	var isr []int32
	var ref cluster.Partition
	decode.MetadataPartitions(meta, func(p cluster.Partition, mp *kmsg.MetadataResponseTopicPartition) { ref, isr = p, mp.ISR })
	if ref != (cluster.Partition{Topic: "orders", TopicID: id, Num: 0}) || !reflect.DeepEqual(isr, []int32{1}) {
		t.Errorf("MetadataPartitions: %+v ISR %v", ref, isr)
	}
}
