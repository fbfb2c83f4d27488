// Package cluster holds the Kafka nouns that every layer above the wire
// speaks: a client, a partition, what a request is for (its role, the node
// a Fetch speaks for, the group it names) and Kafka's error codes by their
// names. It imports nothing of ours: decode returns its partitions, flows
// stamps roles, fetchers and groups on each request once, and the rules,
// views and exporters key their state by its types.
package cluster

import (
	"encoding/base64"
	"net/netip"
	"strconv"
	"time"
)

// Client is one client as the wire shows it: a client id on a host.
type Client struct {
	Host netip.Addr
	ID   string
}

// ClientAt is the client id on host, an IPv4-mapped IPv6 host unmapped
// (so that one host is one key whichever way its socket printed it).
func ClientAt(host netip.Addr, id string) Client { return Client{host.Unmap(), id} }

// Less orders clients by host, then client id.
func (c Client) Less(o Client) bool {
	if c.Host != o.Host {
		return c.Host.Less(o.Host)
	}
	return c.ID < o.ID
}

// SeenLess orders clients by when they were first seen, then by client
// id, then by host: the order in which rules that make one finding per
// client list them.
func SeenLess(a Client, aFirst time.Time, b Client, bFirst time.Time) bool {
	if !aFirst.Equal(bFirst) {
		return aFirst.Before(bFirst)
	}
	if a.ID != b.ID {
		return a.ID < b.ID
	}
	return a.Host.Less(b.Host)
}

// Partition is a topic-partition as the wire names it: by topic name, by
// topic id (the versions of KIP-516), or both once a name is known for an
// id. Key says how state is kept by it.
type Partition struct {
	Topic   string
	TopicID [16]byte
	Num     int32
}

// Key is p as state is kept by it, the one keying every table of
// partitions follows: by name when the run knows one (the name the wire
// carries, KRaft's log by its name, or the name names learned for its id
// from Metadata), else by topic id. So a partition asked for by name
// (Produce and Fetch before KIP-516's versions) and by id is one key, and
// Metadata, which names both, finds the state of either. A partition
// asked for by id before any Metadata named it is keyed by the id until
// then (clients ask for Metadata before they produce or fetch, so only a
// capture that starts mid-connection shows that).
func (p Partition) Key(names Names) Partition {
	switch {
	case p.Topic != "":
		return Partition{Topic: p.Topic, Num: p.Num}
	case p.TopicID == [16]byte{}:
		return Partition{Num: p.Num}
	case p.TopicID == ClusterMetadataTopicID:
		return Partition{Topic: ClusterMetadataTopic, Num: p.Num}
	case names != nil:
		if s, ok := names.TopicName(p.TopicID); ok {
			return Partition{Topic: s, Num: p.Num}
		}
	}
	return Partition{TopicID: p.TopicID, Num: p.Num}
}

// Keyer is Partition.Key for the partitions of one request or response:
// the name of a topic id is looked up once while the partitions that
// follow name the same id, not once per partition (and per rule). Names
// must not learn anything while a Keyer is used; its zero value with
// Names set is ready.
type Keyer struct {
	Names Names
	id    [16]byte // the last id looked up, and its name if known
	name  string
	named bool
	set   bool
}

// Key is p.Key(k.Names).
func (k *Keyer) Key(p Partition) Partition {
	switch {
	case p.Topic != "":
		return Partition{Topic: p.Topic, Num: p.Num}
	case p.TopicID == [16]byte{}:
		return Partition{Num: p.Num}
	case !k.set || p.TopicID != k.id:
		k.id, k.set = p.TopicID, true
		k.name, k.named = "", false
		switch {
		case p.TopicID == ClusterMetadataTopicID:
			k.name, k.named = ClusterMetadataTopic, true
		case k.Names != nil:
			k.name, k.named = k.Names.TopicName(p.TopicID)
		}
	}
	if k.named {
		return Partition{Topic: k.name, Num: p.Num}
	}
	return Partition{TopicID: p.TopicID, Num: p.Num}
}

// Names knows topics' names by their ids (cluster.Nodes, learned from
// Metadata); a nil Names, or a nil pointer behind one, knows none.
type Names interface {
	TopicName(id [16]byte) (string, bool)
}

// TopicName is p's topic by name: the name it carries, KRaft's log by its
// name, the name names knows for its id, or else the id as Kafka prints it.
func (p Partition) TopicName(names Names) string {
	switch {
	case p.Topic != "":
		return p.Topic
	case p.TopicID == ClusterMetadataTopicID:
		return ClusterMetadataTopic
	case names != nil:
		if s, ok := names.TopicName(p.TopicID); ok {
			return s
		}
	}
	return TopicID(p.TopicID)
}

// Label is "topic-partition", the topic named as TopicName does.
func (p Partition) Label(names Names) string {
	return p.TopicName(names) + "-" + strconv.Itoa(int(p.Num))
}

// Less orders partitions by topic name, topic id, then number.
func (p Partition) Less(o Partition) bool {
	if p.Topic != o.Topic {
		return p.Topic < o.Topic
	}
	if p.TopicID != o.TopicID {
		return string(p.TopicID[:]) < string(o.TopicID[:])
	}
	return p.Num < o.Num
}

// ClusterMetadataTopic is KRaft's metadata log.
const ClusterMetadataTopic = "__cluster_metadata"

// ClusterMetadataTopicID is the fixed topic id of KRaft's metadata log
// (Uuid.METADATA_TOPIC_ID: 0...01).
var ClusterMetadataTopicID = [16]byte{15: 1}

// TopicID shows a topic id as Kafka's tools print it: base64 URL encoding
// without padding ("FGXyMU9b4wyKh0PtY5aB-g").
func TopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }
