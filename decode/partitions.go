package decode

import "github.com/twmb/franz-go/pkg/kmsg"

// RequestPartitions calls fn for each partition a Produce or Fetch request
// names, in request order.
func RequestPartitions(req kmsg.Request, fn func(p PartitionRef)) {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		for i := range r.Topics {
			t := &r.Topics[i]
			for j := range t.Partitions {
				fn(PartitionRef{t.Topic, t.TopicID, t.Partitions[j].Partition})
			}
		}
	case *kmsg.FetchRequest:
		FetchOffsets(r, func(p PartitionRef, _ int64) { fn(p) })
	}
}

// FetchOffsetAt returns the fetch offset a Fetch request gives partition
// p, which its response names at topic index ti, partition index pi: the
// request's partition at the same place is tried first, then any naming
// p. False if the request does not name p (a fetch session's partition
// whose offset has not changed since the request that last named it).
func FetchOffsetAt(r *kmsg.FetchRequest, ti, pi int, p PartitionRef) (int64, bool) {
	match := func(t *kmsg.FetchRequestTopic) bool { return t.Topic == p.Topic && t.TopicID == p.TopicID }
	if ti < len(r.Topics) && match(&r.Topics[ti]) {
		ps := r.Topics[ti].Partitions
		if pi < len(ps) && ps[pi].Partition == p.Partition {
			return ps[pi].FetchOffset, true
		}
	}
	for i := range r.Topics {
		if !match(&r.Topics[i]) {
			continue
		}
		for _, q := range r.Topics[i].Partitions {
			if q.Partition == p.Partition {
				return q.FetchOffset, true
			}
		}
	}
	return 0, false
}

// FetchReplica returns the replica a Fetch request declares itself to be
// (ReplicaState from v15, ReplicaID before) and its broker epoch (-1
// before v15); the id is -1 for a consumer.
func FetchReplica(r *kmsg.FetchRequest) (id int32, epoch int64) {
	if r.Version >= 15 {
		return r.ReplicaState.ID, r.ReplicaState.Epoch
	}
	return r.ReplicaID, -1
}
