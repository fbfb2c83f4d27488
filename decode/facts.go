package decode

import (
	"github.com/kfsniff/kfsniff/cluster"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Facts about requests and responses that several rules need, computed
// one way here rather than in each rule.

// FetchOffsets calls fn for each partition a Fetch request asks for, with
// its fetch offset, in request order.
func FetchOffsets(r *kmsg.FetchRequest, fn func(p cluster.Partition, offset int64)) {
	for i := range r.Topics {
		t := &r.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			fn(cluster.Partition{Topic: t.Topic, TopicID: t.TopicID, Num: p.Partition}, p.FetchOffset)
		}
	}
}

// LeaderHint is a partition's leader as a response names it: a Metadata
// partition's leader (Source "metadata"), or the CurrentLeader that a
// Produce (v10+) or Fetch (v12+) answer carries with NOT_LEADER_OR_FOLLOWER
// or FENCED_LEADER_EPOCH (KIP-951; Source "produce" or "fetch"). Leader is
// -1 when none is named.
type LeaderHint struct {
	cluster.Partition
	Leader, Epoch int32
	ErrorCode     int16
	Source        string
	// Replicas, ISR and Offline are the partition's replicas, in-sync
	// replicas and offline replicas (Metadata v5+) as a Metadata response
	// lists them; nil in Produce and Fetch hints. They belong to the
	// response: copy what is kept.
	Replicas, ISR, Offline []int32
}

// LeaderHints calls fn for each partition a Metadata, Produce or Fetch
// response names a leader for (Metadata: every partition, with its error
// code; Produce and Fetch: those carrying a CurrentLeader with a leader).
// The hint fn gets is reused for the next partition: copy what is kept.
// (A pointer, not a value: a hint is over 130 bytes and a Metadata
// response lists every partition of the cluster.)
func LeaderHints(resp kmsg.Response, fn func(h *LeaderHint)) {
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		h := LeaderHint{Source: "metadata"}
		for i := range r.Topics {
			t := &r.Topics[i]
			h.Topic, h.TopicID = orEmpty(t.Topic), t.TopicID
			for j := range t.Partitions {
				p := &t.Partitions[j]
				h.Num, h.Leader, h.Epoch, h.ErrorCode = p.Partition, p.Leader, p.LeaderEpoch, p.ErrorCode
				h.Replicas, h.ISR, h.Offline = p.Replicas, p.ISR, p.OfflineReplicas
				fn(&h)
			}
		}
	case *kmsg.ProduceResponse:
		if r.Version >= 10 {
			hints(r, "produce", fn)
		}
	case *kmsg.FetchResponse:
		if r.Version >= 12 {
			hints(r, "fetch", fn)
		}
	}
}

// hints calls fn for the partitions of a Produce or Fetch response that
// name a leader.
func hints(resp kmsg.Response, source string, fn func(h *LeaderHint)) {
	PartitionAnswers(resp, func(a PartitionAnswer) {
		if a.Leader >= 0 {
			fn(&LeaderHint{Partition: a.Partition, Leader: a.Leader, Epoch: a.Epoch, ErrorCode: a.ErrorCode, Source: source})
		}
	})
}

// RequestTopics calls fn for each topic a request names, in request order,
// for the requests that name topics (Produce, Fetch, ListOffsets,
// Metadata, OffsetCommit, OffsetFetch, OffsetForLeaderEpoch,
// DeleteRecords, CreateTopics, DeleteTopics, CreatePartitions), and
// returns how many.
func RequestTopics(req kmsg.Request, fn func(name string, id [16]byte)) int {
	n := 0
	emit := func(name string, id [16]byte) {
		n++
		if fn != nil {
			fn(name, id)
		}
	}
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		for _, t := range r.Topics {
			emit(t.Topic, t.TopicID)
		}
	case *kmsg.FetchRequest:
		for _, t := range r.Topics {
			emit(t.Topic, t.TopicID)
		}
	case *kmsg.ListOffsetsRequest:
		for _, t := range r.Topics {
			emit(t.Topic, [16]byte{})
		}
	case *kmsg.MetadataRequest:
		for _, t := range r.Topics {
			emit(orEmpty(t.Topic), t.TopicID)
		}
	case *kmsg.OffsetCommitRequest:
		for _, t := range r.Topics {
			emit(t.Topic, t.TopicID)
		}
	case *kmsg.OffsetFetchRequest:
		for _, t := range r.Topics {
			emit(t.Topic, [16]byte{})
		}
		for _, g := range r.Groups {
			for _, t := range g.Topics {
				emit(t.Topic, t.TopicID)
			}
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		for _, t := range r.Topics {
			emit(t.Topic, [16]byte{})
		}
	case *kmsg.DeleteRecordsRequest:
		for _, t := range r.Topics {
			emit(t.Topic, [16]byte{})
		}
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			emit(t.Topic, [16]byte{})
		}
	case *kmsg.DeleteTopicsRequest:
		for _, t := range r.Topics {
			emit(orEmpty(t.Topic), t.TopicID)
		}
		if len(r.Topics) == 0 {
			for _, name := range r.TopicNames {
				emit(name, [16]byte{})
			}
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			emit(t.Topic, [16]byte{})
		}
	}
	return n
}
