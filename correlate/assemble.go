package correlate

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/flows"
)

// An exchange split into several records (Produce, Fetch, ListOffsets,
// OffsetCommit: one record per partition) is put back together before the
// rules see it: its records share an agent, run, connection, correlation
// id and capture time, and the merge by time releases them together. A
// rule then reads one exchange with all its partitions, as in the file:
// counts and latencies are per exchange, an error storm counts answers
// (not partitions), a loop over several partitions of one request is one
// finding. Records held wait for their exchange's others at most the
// reorder window of capture time (and maxAssembling of them across
// exchanges); an exchange whose other records never come (a correlator
// of a group that holds only some of the export topic's partitions) is
// delivered with what came, its records after the first marked
// flows.Exchange.Again as before.

// maxAssembling bounds the split exchanges waiting for their records.
const maxAssembling = 1 << 14

// assembly is a split exchange waiting for its records.
type assembly struct {
	key  exKey
	at   int64
	recs []laned
	done bool
}

// laned is a record of a split exchange and the lane it came in.
type laned struct {
	rec  *Record
	lane int32
}

// drop forgets the records of lane p (a partition revoked) and returns
// how many.
func (a *assembly) drop(p int32) int {
	n := len(a.recs)
	a.recs = slices.DeleteFunc(a.recs, func(r laned) bool { return r.lane == p })
	return n - len(a.recs)
}

// RebuildSplit rebuilds the records of one split exchange (the same
// agent, run, connection, correlation id and API, in the order shipped)
// as one exchange: its request's and response's bodies hold every
// partition, its batches and error codes are all of theirs. A record
// that cannot be rebuilt is left out and its error returned beside the
// events of the rest.
func (rb *Rebuilder) RebuildSplit(recs []*Record) (Events, []error) {
	var out Events
	var errs []error
	for _, r := range recs {
		ev, err := rb.Rebuild(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ev.X == nil {
			continue // a second agent's view (Rebuilder.Twice)
		}
		if out.X == nil {
			out = ev
			continue
		}
		if ev.Opened != nil && out.Opened == nil {
			out.Opened = ev.Opened
		}
		if ev.Req != nil && out.Req == nil {
			out.Req = ev.Req
		}
		mergeExchange(out.X.X, ev.X.X)
	}
	if out.X != nil {
		out.X.X.Again = false
		if r := out.X.X.Resp; r != nil && r.Resp != nil && len(recs) > 1 {
			// Counted once over the merged response: the codes outside
			// its topics (a Fetch session's error) are in every
			// record's body, and count once, as in a capture.
			r.ErrorCodes = flows.ErrorCounts(r.Resp)
		}
	}
	return out, errs
}

// mergeExchange adds y's partitions, batches and error codes to x.
func mergeExchange(x, y *flows.Exchange) {
	if x.Req != nil && y.Req != nil {
		mergeBody(x.Req.Req, y.Req.Req)
		x.Req.Batches = append(x.Req.Batches, y.Req.Batches...)
	}
	if x.Resp != nil && y.Resp != nil {
		mergeBody(x.Resp.Resp, y.Resp.Resp)
		x.Resp.Batches = append(x.Resp.Batches, y.Resp.Batches...)
		for _, e := range y.Resp.ErrorCodes {
			i := slices.IndexFunc(x.Resp.ErrorCodes, func(c flows.ErrorCount) bool { return c.Code == e.Code })
			if i < 0 {
				x.Resp.ErrorCodes = append(x.Resp.ErrorCodes, e)
			} else {
				x.Resp.ErrorCodes[i].Count += e.Count
			}
		}
	}
	x.ConnGaps = max(x.ConnGaps, y.ConnGaps)
}

// nameID is a topic's name and id, which together name it in a body.
func nameID(name string, id [16]byte) string { return name + "\x00" + string(id[:]) }

// mergeTopics appends src's topics to dst, a topic dst has already
// getting src's partitions after its own.
func mergeTopics[T any](dst, src []T, key func(*T) string, parts func(dst, src *T)) []T {
	for i := range src {
		k := key(&src[i])
		j := slices.IndexFunc(dst, func(t T) bool { return key(&t) == k })
		if j < 0 {
			dst = append(dst, src[i])
		} else {
			parts(&dst[j], &src[i])
		}
	}
	return dst
}

// mergeBody adds b's topics to a, two bodies of one split API, a's
// topics growing in place.
func mergeBody(a, b any) {
	switch x := a.(type) {
	case *kmsg.ProduceRequest:
		if y, ok := b.(*kmsg.ProduceRequest); ok {
			x.Topics = mergeTopics(x.Topics, y.Topics, func(t *kmsg.ProduceRequestTopic) string { return nameID(t.Topic, t.TopicID) },
				func(d, s *kmsg.ProduceRequestTopic) { d.Partitions = append(d.Partitions, s.Partitions...) })
		}
	case *kmsg.FetchRequest:
		if y, ok := b.(*kmsg.FetchRequest); ok {
			x.Topics = mergeTopics(x.Topics, y.Topics, func(t *kmsg.FetchRequestTopic) string { return nameID(t.Topic, t.TopicID) },
				func(d, s *kmsg.FetchRequestTopic) { d.Partitions = append(d.Partitions, s.Partitions...) })
		}
	case *kmsg.ListOffsetsRequest:
		if y, ok := b.(*kmsg.ListOffsetsRequest); ok {
			x.Topics = mergeTopics(x.Topics, y.Topics, func(t *kmsg.ListOffsetsRequestTopic) string { return t.Topic },
				func(d, s *kmsg.ListOffsetsRequestTopic) { d.Partitions = append(d.Partitions, s.Partitions...) })
		}
	case *kmsg.OffsetCommitRequest:
		if y, ok := b.(*kmsg.OffsetCommitRequest); ok {
			x.Topics = mergeTopics(x.Topics, y.Topics, func(t *kmsg.OffsetCommitRequestTopic) string { return nameID(t.Topic, t.TopicID) },
				func(d, s *kmsg.OffsetCommitRequestTopic) { d.Partitions = append(d.Partitions, s.Partitions...) })
		}
	case *kmsg.ProduceResponse:
		if y, ok := b.(*kmsg.ProduceResponse); ok {
			x.Topics = mergeTopics(x.Topics, y.Topics, func(t *kmsg.ProduceResponseTopic) string { return nameID(t.Topic, t.TopicID) },
				func(d, s *kmsg.ProduceResponseTopic) { d.Partitions = append(d.Partitions, s.Partitions...) })
		}
	case *kmsg.FetchResponse:
		if y, ok := b.(*kmsg.FetchResponse); ok {
			x.Topics = mergeTopics(x.Topics, y.Topics, func(t *kmsg.FetchResponseTopic) string { return nameID(t.Topic, t.TopicID) },
				func(d, s *kmsg.FetchResponseTopic) { d.Partitions = append(d.Partitions, s.Partitions...) })
		}
	case *kmsg.ListOffsetsResponse:
		if y, ok := b.(*kmsg.ListOffsetsResponse); ok {
			x.Topics = mergeTopics(x.Topics, y.Topics, func(t *kmsg.ListOffsetsResponseTopic) string { return t.Topic },
				func(d, s *kmsg.ListOffsetsResponseTopic) { d.Partitions = append(d.Partitions, s.Partitions...) })
		}
	case *kmsg.OffsetCommitResponse:
		if y, ok := b.(*kmsg.OffsetCommitResponse); ok {
			x.Topics = mergeTopics(x.Topics, y.Topics, func(t *kmsg.OffsetCommitResponseTopic) string { return nameID(t.Topic, t.TopicID) },
				func(d, s *kmsg.OffsetCommitResponseTopic) { d.Partitions = append(d.Partitions, s.Partitions...) })
		}
	}
}
