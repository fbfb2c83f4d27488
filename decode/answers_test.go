package decode_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
)

func TestPartitionAnswers(t *testing.T) {
	prod := kmsg.NewPtrProduceResponse()
	prod.Version = 11
	prod.Topics = []kmsg.ProduceResponseTopic{{Topic: "orders", Partitions: []kmsg.ProduceResponseTopicPartition{
		{Partition: 0, ErrorCode: 6, CurrentLeader: kmsg.ProduceResponseTopicPartitionCurrentLeader{LeaderID: 4, LeaderEpoch: 8}},
		{Partition: 1},
	}}}
	prod.Topics[0].Partitions[1].Default()
	// A Fetch v11 decoded from the wire: no CurrentLeader at that version.
	old := kmsg.NewPtrFetchResponse()
	old.Version = 11
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition, p.ErrorCode, p.HighWatermark, p.LastStableOffset = 2, 74, 50, 40
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 9, 9 // not encoded at v11
	old.Topics = []kmsg.FetchResponseTopic{{Topic: "a"}, {Topic: "b", Partitions: []kmsg.FetchResponseTopicPartition{p}}}
	decoded := kmsg.NewPtrFetchResponse()
	decoded.Version = 11
	if err := decoded.ReadFrom(old.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range []kmsg.Response{prod, decoded, kmsg.NewPtrMetadataResponse()} {
		decode.PartitionAnswers(r, func(a decode.PartitionAnswer) {
			got = append(got, fmt.Sprintf("%s-%d@%d.%d err %d leader %d/%d hw %d lso %d", a.Topic, a.Num, a.TopicIndex, a.Index,
				a.ErrorCode, a.Leader, a.Epoch, a.HighWatermark, a.LastStableOffset))
		})
	}
	want := "[orders-0@0.0 err 6 leader 4/8 hw -1 lso -1 orders-1@0.1 err 0 leader -1/-1 hw -1 lso -1 b-2@1.0 err 74 leader -1/-1 hw 50 lso 40]"
	if fmt.Sprint(got) != want {
		t.Errorf("got  %v\nwant %s", got, want)
	}
}

func TestFetchOffsetAt(t *testing.T) {
	id := [16]byte{7}
	r := kmsg.NewPtrFetchRequest()
	r.Topics = []kmsg.FetchRequestTopic{
		{Topic: "a", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 10}, {Partition: 3, FetchOffset: 30}}},
		{TopicID: id, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 1, FetchOffset: 99}}},
	}
	for _, tc := range []struct {
		ti, pi int
		p      cluster.Partition
		want   string
	}{
		{0, 1, cluster.Partition{Topic: "a", Num: 3}, "30 true"},              // at its place
		{1, 0, cluster.Partition{Topic: "a", Num: 3}, "30 true"},              // elsewhere
		{5, 9, cluster.Partition{TopicID: id, Num: 1}, "99 true"},             // past the end
		{0, 0, cluster.Partition{Topic: "a", Num: 2}, "0 false"},              // not asked for
		{1, 0, cluster.Partition{Topic: "b", TopicID: id, Num: 1}, "0 false"}, // another topic
	} {
		off, ok := decode.FetchOffsetAt(r, tc.ti, tc.pi, tc.p)
		if got := fmt.Sprint(off, ok); got != tc.want {
			t.Errorf("%+v at %d.%d: %s, want %s", tc.p, tc.ti, tc.pi, got, tc.want)
		}
	}
}

func TestFetchReplica(t *testing.T) {
	for _, tc := range []struct {
		version   int16
		old, st   int32
		wantID    int32
		wantEpoch int64
	}{
		{12, -1, 5, -1, -1}, // a consumer before v15: ReplicaState is not on the wire
		{12, 3, -1, 3, -1},  // a follower
		{15, 3, 68, 68, 77}, // v15: the replica state, ReplicaID is gone
		{17, -1, -1, -1, 77},
	} {
		r := kmsg.NewPtrFetchRequest()
		r.Version, r.ReplicaID, r.ReplicaState.ID, r.ReplicaState.Epoch = tc.version, tc.old, tc.st, 77
		if id, epoch := cluster.FetchReplica(r); id != tc.wantID || epoch != tc.wantEpoch {
			t.Errorf("v%d replica %d state %d: %d/%d, want %d/%d", tc.version, tc.old, tc.st, id, epoch, tc.wantID, tc.wantEpoch)
		}
	}
}

func TestRequestPartitions(t *testing.T) {
	prod := kmsg.NewPtrProduceRequest()
	prod.Topics = []kmsg.ProduceRequestTopic{{Topic: "a", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 2}, {Partition: 0}}},
		{TopicID: [16]byte{3}, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 1}}}}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: "b", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 5, FetchOffset: 9}}}}
	var got []string
	for _, r := range []kmsg.Request{prod, fetch, kmsg.NewPtrMetadataRequest()} {
		decode.RequestPartitions(r, func(p cluster.Partition) {
			got = append(got, fmt.Sprintf("%s/%x-%d", p.Topic, p.TopicID[0], p.Num))
		})
	}
	if want := "[a/0-2 a/0-0 /3-1 b/0-5]"; fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
}
