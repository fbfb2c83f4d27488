// Package peers is what the rules about clients stuck on partitions
// (not-leader-loop, stalled-fetch, liveness-without-replication) share
// about clients and servers: who a client is, how a partition is named,
// the servers it went to, and which node a server or a client is.
package peers

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/episode"
)

// Bounds of the tables the rules keep.
const (
	// MaxKeys bounds each table kept per client and partition.
	MaxKeys = 65536
	// MaxServers bounds the servers counted per episode.
	MaxServers = 32
	// MaxConns bounds the connections listed per episode.
	MaxConns = 64
)

// Label is "orders-3", or "topic id <id> partition 3" for a partition
// keyed by an id no Metadata named.
func Label(p cluster.Partition) string {
	if p.Topic != "" {
		return p.Topic + "-" + strconv.Itoa(int(p.Num))
	}
	return "topic id " + cluster.TopicID(p.TopicID) + " partition " + strconv.Itoa(int(p.Num))
}

// Key is one client's partition.
type Key struct {
	C cluster.Client
	P cluster.Partition
}

// Less orders keys by client host, client id, topic and partition.
func (k Key) Less(o Key) bool {
	if k.C.Host != o.C.Host {
		return k.C.Host.Less(o.C.Host)
	}
	if k.C.ID != o.C.ID {
		return k.C.ID < o.C.ID
	}
	if a, b := k.P.TopicName(nil), o.P.TopicName(nil); a != b {
		return a < b
	}
	return k.P.Num < o.P.Num
}

// Fields are the fields that name a finding's client and partition;
// a rule's finding type embeds them.
type Fields struct {
	Client    string `json:"client"`
	ClientID  string `json:"client_id"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// Fields are k's fields.
func (k Key) Fields() Fields {
	return Fields{Client: k.C.Host.String(), ClientID: k.C.ID, Topic: k.P.TopicName(nil), Partition: k.P.Num}
}

// Episodes is a table of a rule's episodes per client and partition.
type Episodes[E any] = episode.Table[Key, cluster.Client, E]

// NewEpisodes makes a table of episodes per client and partition (at most
// MaxKeys): size is what makes one larger than another, qualifies whether
// one is worth reporting.
func NewEpisodes[E any](size func(e *E) int64, qualifies func(e *E) bool) *Episodes[E] {
	return episode.New(episode.Rule[Key, cluster.Client, E]{
		Max:       MaxKeys,
		Client:    func(k Key) cluster.Client { return k.C },
		Size:      size,
		Qualifies: func(e *E, _ bool) bool { return qualifies(e) },
		Provisional: func(k Key) bool {
			return k.P.Topic == "" && k.P.TopicID != [16]byte{}
		},
	})
}

// OpenNamed is t.Open(k), where p is k's partition as the wire named it.
// A partition asked for by topic id before the run learned the topic's
// name was keyed by the id (cluster.Partition.Key); once it is keyed by
// the name, what t holds under the id alone moves to k first (moved is
// called with each episode moved), so that an episode begun before the
// name was known goes on under it: one run of refusals, not two.
func OpenNamed[E any](t *Episodes[E], k Key, p cluster.Partition, moved func(e *E)) *E {
	if e := t.Open(k); e != nil || k.P.Topic == "" || p.TopicID == [16]byte{} {
		return e
	}
	if t.Rekey(Key{C: k.C, P: cluster.Partition{TopicID: p.TopicID, Num: p.Num}}, k, moved) {
		return t.Open(k)
	}
	return nil
}

// Subject is what a finding about key k is about: its client, its
// partition, the servers it went to, the nodes involved and the Kafka
// error (0 if none).
func (k Key) Subject(servers *Servers, nodes []int32, code int16) detectors.Subject {
	return detectors.Subject{ClientIDs: []string{k.C.ID}, Clients: []netip.Addr{k.C.Host}, Servers: servers.Addrs(), Nodes: nodes,
		Partitions: []cluster.Partition{{Topic: k.P.TopicName(nil), Num: k.P.Num}}, Error: code}
}

// Widen stretches [first, last] over exchange x: its request's time and
// its response's (or the request's, unanswered). Unanswered requests are
// delivered late, at the end of the capture, so a span is widened both
// ways, not only extended.
func Widen(first, last *time.Time, x *detectors.Exchange) {
	if x.Req.Time.Before(*first) {
		*first = x.Req.Time
	}
	end := x.Req.Time
	if x.Resp != nil {
		end = x.Resp.Time
	}
	if end.After(*last) {
		*last = end
	}
}

// Addr is an address as Kafka advertises it (no IPv4-mapped IPv6).
func Addr(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// UnionIDs returns the ids in a or b, once each, sorted.
func UnionIDs[T cmp.Ordered](a, b []T) []T {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
