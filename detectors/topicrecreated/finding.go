package topicrecreated

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one client's refusals for one topic id. Its exported fields
// are the finding's "fields".
type Finding struct {
	ClientID string   `json:"client_id"`
	Clients  []string `json:"clients"`
	Servers  []string `json:"servers"`
	Topic    string   `json:"topic"`
	// OldID is the id the client asked for; NewID the other id Metadata
	// named for the topic, first at NewIDPacket ("" and 0 if none seen).
	OldID       string   `json:"old_id"`
	NewID       string   `json:"new_id,omitempty"`
	NewIDPacket uint64   `json:"new_id_packet,omitempty"`
	APIs        []string `json:"apis"`
	Errors      []string `json:"errors"`
	RatePerS    float64  `json:"rate_per_s"`
	// MeanGapMs is the mean time from a refusal to the client's next
	// request for the topic; FastRetries how many came within spin-gap.
	MeanGapMs   float64 `json:"mean_gap_ms"`
	FastRetries int64   `json:"fast_retries" count:"fast_retries"`
	HeldS       float64 `json:"held_s"`
	Recovered   bool    `json:"recovered"`

	// Refusals are the requests refused, in Episodes episodes.
	Refusals int64 `count:"refusals"`
	Episodes int   `count:"episodes"`

	Episode   *Episode
	APINames  []string // names of APIs refused
	Held      time.Duration
	SpinGap   time.Duration
	TopicSeen *Topic
	Dropped   int64
}

func (e *Episode) label() string { return label(e.name, e.TopicID) }

// label names a topic by its name and id, as known.
func label(name string, id [16]byte) string {
	if id == ([16]byte{}) {
		return name
	}
	if name == "" {
		return "topic id " + cluster.TopicID(id)
	}
	return name + " (topic id " + cluster.TopicID(id) + ")"
}

// finding reports e, naming its topic from what the run knows now (the
// episode is left as it is: findings may be asked for while the capture
// runs).
func (r *rule) finding(p *detectors.Pass, e *Episode) detectors.Finding {
	name := e.name
	if name == "" {
		name = r.nameOf(p.Nodes, e.TopicID)
	}
	held, ongoing := e.Held(p.End)
	f := &Finding{ClientID: e.ID, Clients: e.conns.Clients(), Servers: e.conns.ServerLabels(p.Nodes), Topic: name,
		Errors: e.Codes.Parts(), RatePerS: text.Rate(e.N, e.Last.Sub(e.Start)), FastRetries: e.fast,
		HeldS: text.Seconds(held), Recovered: !ongoing, Refusals: e.N, Episodes: e.Runs, Episode: e, Held: held, SpinGap: r.p.SpinGap, Dropped: r.dropped}
	if e.TopicID != ([16]byte{}) {
		f.OldID = cluster.TopicID(e.TopicID)
	}
	if e.ngaps > 0 {
		f.MeanGapMs = text.Millis(e.gaps / time.Duration(e.ngaps))
	}
	for _, k := range []int16{1, 0, 3} { // Fetch, Produce, Metadata
		if n := e.apis.Get(k); n > 0 {
			f.APIs = append(f.APIs, decode.Name(k)+" x"+strconv.FormatInt(n, 10))
			f.APINames = append(f.APINames, decode.Name(k))
		}
	}
	ev := e.ev.List()
	if t := r.topics[name]; t != nil && name != "" {
		f.TopicSeen = t
		for i := t.nids - 1; i >= max(t.nids-maxIDs, 0); i-- {
			if s := t.ids[i%maxIDs]; s.id != e.TopicID {
				f.NewID, f.NewIDPacket = cluster.TopicID(s.id), s.at.Packet
				ev = append(ev, s.at)
				break
			}
		}
		for _, x := range []detectors.Evidence{t.Deleted, t.created} {
			if x.Packet != 0 {
				ev = append(ev, x)
			}
		}
	}
	detectors.SortEvidence(ev)
	code, _ := e.Codes.Top()
	var parts []cluster.Partition
	if name != "" {
		parts = []cluster.Partition{{Topic: name, Num: -1}}
	}
	return detectors.Finding{
		Severity: detectors.Grade(held, ongoing),
		First:    e.Start,
		Last:     e.Last,
		Conns:    e.conns.IDs(),
		Nodes:    e.conns.Nodes(p.Nodes),
		Evidence: ev,
		Subject: detectors.Subject{ClientIDs: []string{e.ID}, Clients: []netip.Addr{e.Host}, Servers: e.conns.ServerAddrs(),
			Nodes: e.conns.Nodes(p.Nodes), Partitions: parts, Error: code},
		Detail: f,
	}
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	e := f.Episode
	var b strings.Builder
	fmt.Fprintf(&b, "client %q (%s): %s answered %s %s in %s (%g/s) for %s", f.ClientID, text.List(f.Clients, 3),
		strings.Join(f.APINames, "/"), strings.Join(e.Codes.Names(), "/"), text.Plural(f.Refusals, "time", "times"),
		text.Duration(e.Last.Sub(e.Start)), f.RatePerS, label(f.Topic, e.TopicID))
	if f.NewID != "" {
		fmt.Fprintf(&b, ", recreated as topic id %s", f.NewID)
	}
	if f.Recovered {
		fmt.Fprintf(&b, "; caught up after %s", text.Duration(f.Held))
	} else {
		fmt.Fprintf(&b, "; still refused at the end (%s)", text.Duration(f.Held))
	}
	return b.String()
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	e := f.Episode
	var b strings.Builder
	fmt.Fprintf(&b, "From %s to %s, %s answered %s of client id %q (%s) for %s with %s (%s).", text.Clock(e.Start),
		text.Clock(e.Last), text.List(f.Servers, 3), text.Plural(f.Refusals, "request", "requests"), f.ClientID,
		text.List(f.Clients, 3), label(f.Topic, e.TopicID), strings.Join(f.Errors, ", "), strings.Join(f.APIs, ", "))
	b.WriteString(" Since KIP-516 a topic is known by an id as well as its name, and a topic deleted and created again " +
		"under the same name gets a new id: a request naming the old id is answered UNKNOWN_TOPIC_ID, or " +
		"INCONSISTENT_TOPIC_ID when its name and id disagree.")
	if f.NewID != "" {
		fmt.Fprintf(&b, " Metadata (packet %d) named %s with topic id %s: the topic was recreated.", f.NewIDPacket, f.Topic, f.NewID)
	} else {
		b.WriteString(" No Metadata in the capture names another id for the topic: it was deleted, or this broker does not " +
			"know it yet (just after its creation).")
	}
	if t := f.TopicSeen; t != nil && t.Deleted.Packet != 0 {
		fmt.Fprintf(&b, " The capture holds its deletion (packet %d).", t.Deleted.Packet)
	}
	if f.MeanGapMs > 0 {
		fmt.Fprintf(&b, " The client asked again %s after each refusal on average", text.Duration(time.Duration(f.MeanGapMs*float64(time.Millisecond))))
		if f.FastRetries > 0 {
			fmt.Fprintf(&b, ", %d times within %s: at round-trip speed, without backoff (the spin of franz-go PR 1426)",
				f.FastRetries, text.Duration(f.SpinGap))
		}
		b.WriteString(".")
	}
	if f.Recovered {
		fmt.Fprintf(&b, " It got a good answer for the topic again %s after the first refusal: it adopted the new id "+
			"(and with it the new topic's offsets: the old topic's records and committed offsets are gone).", text.Duration(f.Held))
	} else {
		fmt.Fprintf(&b, " It had no good answer for the topic when the capture ended, %s after the first refusal: a client "+
			"that keeps the old id (kgo does so by design, until PurgeTopicsFromClient) never recovers by itself.",
			text.Duration(f.Held))
	}
	if f.Dropped > 0 {
		fmt.Fprintf(&b, " (%d refusals of other clients and topics were not followed: too many.)", f.Dropped)
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	topic := text.ShellOr(f.Topic, "<topic>")
	return fmt.Sprintf("kafka-topics.sh --bootstrap-server <broker> --describe --topic %s shows the topic's current TopicId; "+
		"the controller's log (and the authorizer's, or kfsniff --frames --api DeleteTopics,CreateTopics on a wider capture) "+
		"says who deleted and created it, and auto.create.topics.enable=true lets any producer or consumer create it again "+
		"by name. Restart the client or make it forget the old topic (kgo: PurgeTopicsFromClient, then AddConsumeTopics); "+
		"a consumer group then starts the new topic from auto.offset.reset: kafka-consumer-groups.sh --bootstrap-server "+
		"<broker> --describe --group <group> shows where it is. Broker metrics: "+
		"kafka.server:type=BrokerTopicMetrics,name=FailedFetchRequestsPerSec and name=FailedProduceRequestsPerSec.", topic)
}
