package flows

import (
	"github.com/kfsniff/kfsniff/cluster"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProducedBatches calls fn for every record batch of a Produce request
// whose partition the response answers, in request order, with the offset
// the broker gave it: the partition's baseOffset plus the offsets taken by
// the batches before it in the request. base is -1 when the partition was
// refused (code is the error) or the broker gave no offset. Batches of
// partitions missing from the response are not reported, nor any if resp
// is not a Produce response.
func ProducedBatches(req, resp *Message, fn func(i int, b *BatchRef, base int64, code int16)) {
	if req == nil || resp == nil || len(req.Batches) == 0 {
		return
	}
	r, ok := resp.Resp.(*kmsg.ProduceResponse)
	if !ok {
		return
	}
	var (
		cur     *kmsg.ProduceResponseTopicPartition
		curPart cluster.Partition
		next    int64
		started bool
	)
	for i := range req.Batches {
		b := &req.Batches[i]
		if p := (cluster.Partition{Topic: b.Topic, TopicID: b.TopicID, Num: b.Partition}); !started || p != curPart {
			started, curPart = true, p
			cur = producedPartition(r, b)
			if cur != nil {
				next = cur.BaseOffset
			}
		}
		if cur == nil {
			continue
		}
		if cur.ErrorCode != 0 || cur.BaseOffset < 0 {
			fn(i, b, -1, cur.ErrorCode)
			continue
		}
		fn(i, b, next, 0)
		next += int64(b.LastOffsetDelta) + 1
	}
}

// producedPartition finds b's partition in a Produce response, by topic
// name or (v13+) topic id.
func producedPartition(resp *kmsg.ProduceResponse, b *BatchRef) *kmsg.ProduceResponseTopicPartition {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		byName := t.Topic != "" && t.Topic == b.Topic
		byID := t.TopicID != [16]byte{} && t.TopicID == b.TopicID
		if !byName && !byID {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == b.Partition {
				return &t.Partitions[j]
			}
		}
	}
	return nil
}
