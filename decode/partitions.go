package decode

import (
	"github.com/kfsniff/kfsniff/cluster"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RequestPartitions calls fn for each partition a Produce or Fetch request
// names, in request order.
func RequestPartitions(req kmsg.Request, fn func(p cluster.Partition)) {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		for i := range r.Topics {
			t := &r.Topics[i]
			for j := range t.Partitions {
				fn(cluster.Partition{Topic: t.Topic, TopicID: t.TopicID, Num: t.Partitions[j].Partition})
			}
		}
	case *kmsg.FetchRequest:
		FetchOffsets(r, func(p cluster.Partition, _ int64) { fn(p) })
	}
}

// FetchOffsetAt returns the fetch offset a Fetch request gives partition
// p, which its response names at topic index ti, partition index pi: the
// request's partition at the same place is tried first, then any naming
// p. False if the request does not name p (a fetch session's partition
// whose offset has not changed since the request that last named it).
func FetchOffsetAt(r *kmsg.FetchRequest, ti, pi int, p cluster.Partition) (int64, bool) {
	match := func(t *kmsg.FetchRequestTopic) bool { return t.Topic == p.Topic && t.TopicID == p.TopicID }
	if ti < len(r.Topics) && match(&r.Topics[ti]) {
		ps := r.Topics[ti].Partitions
		if pi < len(ps) && ps[pi].Partition == p.Num {
			return ps[pi].FetchOffset, true
		}
	}
	for i := range r.Topics {
		if !match(&r.Topics[i]) {
			continue
		}
		for _, q := range r.Topics[i].Partitions {
			if q.Partition == p.Num {
				return q.FetchOffset, true
			}
		}
	}
	return 0, false
}
