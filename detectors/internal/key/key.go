// Package key names what rules keep their state by: a client, as the wire
// shows it (a client id on a host), and a partition, by topic id when the
// request names one, by name otherwise.
package key

import (
	"net/netip"
	"strconv"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/flows"
)

// Client is a client id on a host.
type Client struct {
	ID   string
	Host netip.Addr
}

// ClientOf is the client that sent m (a request, or the answer to one).
func ClientOf(m *flows.Message) Client { return Client{m.Client.ID, m.Conn.Client.Addr().Unmap()} }

// Partition is a partition by topic id, or by name when no id is known.
type Partition struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
}

// PartitionOf keys a partition by its topic id when there is one (flows
// fills in a name for an id once Metadata told it, so the same partition
// could otherwise be keyed two ways), by name otherwise.
func PartitionOf(topic string, id [16]byte, partition int32) Partition {
	if id != ([16]byte{}) {
		return Partition{"", id, partition}
	}
	return Partition{topic, id, partition}
}

// TopicName is the partition's topic by name: the name it was keyed by,
// the name the run learned for its id, or else the id as Kafka prints it.
func (p Partition) TopicName(n *flows.Nodes) string {
	if p.Topic != "" {
		return p.Topic
	}
	if n != nil {
		if s, ok := n.TopicName(p.TopicID); ok {
			return s
		}
	}
	return cluster.TopicID(p.TopicID)
}

// Label is "topic-partition", the topic named as TopicName does.
func (p Partition) Label(n *flows.Nodes) string {
	return p.TopicName(n) + "-" + strconv.Itoa(int(p.Partition))
}
