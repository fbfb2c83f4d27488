package errorstorm

import (
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
)

// A Metadata (or DescribeTopicPartitions) answer of UNKNOWN_TOPIC_OR_PARTITION
// for a topic that is being created is a wait, not a failure: Apache Kafka
// Streams asks for its repartition topic from its first poll and its group
// leader creates it only after the first rebalance, seconds later (4.6 s in
// fixtures/pcaps/kafka/kraft-healthy-load, Kafka 4.1.1). Such a storm is
// explained, and info, when every topic its answers named unknown was asked
// for by a CreateTopics request in the capture or appeared without error in
// a later answer.

const (
	unknownTopic = 3 // UNKNOWN_TOPIC_OR_PARTITION
	// maxTopics bounds the topics a group remembers, and the topics asked
	// for by CreateTopics or seen appearing: past it nothing is explained.
	maxTopics = 1024
)

// topicsOf calls fn for each topic a Metadata or DescribeTopicPartitions
// answer names, with its error code.
func topicsOf(resp kmsg.Response, fn func(topic string, code int16)) {
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Topics {
			if t := r.Topics[i].Topic; t != nil {
				fn(*t, r.Topics[i].ErrorCode)
			}
		}
	case *kmsg.DescribeTopicPartitionsResponse:
		for i := range r.Topics {
			if t := r.Topics[i].Topic; t != nil {
				fn(*t, r.Topics[i].ErrorCode)
			}
		}
	}
}

// creation follows the topics answered unknown and those created.
type creation struct {
	// created holds the topics a CreateTopics request asked for, or that
	// a Metadata answer listed without error after they had been unknown.
	created map[string]time.Time
}

// topics records what one exchange says of topics: a CreateTopics
// request's topics; a topic answer's unknown topics into g (nil: the
// exchange's group for code 3 is not followed) and the known ones.
func (r *rule) topics(x *detectors.Exchange) {
	switch req := x.Req.Req.(type) {
	case *kmsg.CreateTopicsRequest:
		for i := range req.Topics {
			r.created(req.Topics[i].Topic, x.Req.Time)
		}
		return
	case *kmsg.MetadataRequest, *kmsg.DescribeTopicPartitionsRequest:
	default:
		return
	}
	g := r.groups[groupKey{x.Req.Key, unknownTopic}]
	topicsOf(x.Resp.Resp, func(topic string, code int16) {
		switch {
		case code == unknownTopic && g != nil:
			if g.unknown == nil {
				g.unknown = map[string]bool{}
			}
			if len(g.unknown) < maxTopics {
				g.unknown[topic] = true
			} else if !g.unknown[topic] {
				g.unknownCut = true
			}
		case code == 0 && g != nil && g.unknown[topic]:
			r.created(topic, x.Resp.Time)
		}
	})
}

func (r *rule) created(topic string, t time.Time) {
	c := &r.creation
	if c.created == nil {
		c.created = map[string]time.Time{}
	}
	if _, ok := c.created[topic]; ok {
		return
	}
	if len(c.created) < maxTopics {
		c.created[topic] = t
	}
}

// beingCreated returns the topics of group g's unknown answers, sorted,
// if every one of them was created in the capture; nil otherwise.
func (r *rule) beingCreated(g *Group) []string {
	if g.code != unknownTopic || len(g.unknown) == 0 || g.unknownCut {
		return nil
	}
	for t := range g.unknown {
		if _, ok := r.creation.created[t]; !ok {
			return nil
		}
	}
	return slices.Sorted(maps.Keys(g.unknown))
}
