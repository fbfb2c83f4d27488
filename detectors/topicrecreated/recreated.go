// Package topicrecreated reports clients that keep asking for a topic by an id
// the cluster no longer has: answers UNKNOWN_TOPIC_ID or
// INCONSISTENT_TOPIC_ID to Fetch, Produce and Metadata, in a loop, often
// at round-trip speed (franz-go PR 1426). A topic deleted and created again
// under the same name gets a new id (KIP-516); Metadata then names the new
// id, which the rule shows beside the old one, with the DeleteTopics and
// CreateTopics seen for the name.
package topicrecreated

import (
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/spell"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "topic-recreated",
	Recorded: []string{"fixtures/pcaps/clients/topic-recreated-kgo.pcap"},
	Severity: detectors.Error,
	Doc: "Fetch, Produce or Metadata answered UNKNOWN_TOPIC_ID or INCONSISTENT_TOPIC_ID: a client asking for a " +
		"topic by an id the cluster no longer has, typically a topic deleted and created again under the same name. " +
		"Per client id, host and topic id: the requests refused, their pace (retries within spin-gap of the " +
		"previous refusal are at round-trip speed), the old and the new topic id when Metadata names the new one, " +
		"and the DeleteTopics and CreateTopics seen. Graded by how long the client went without a good answer for " +
		"the topic, from the first refusal to the next good one (info below 3 s, warning from 3 s, error from 30 s or " +
		"when still refused after 10 s at the end); a client that catches up after one metadata refresh is info.",
}, Params{MinErrors: 1, SpinGap: 20 * time.Millisecond}, New)

// Params are the rule's thresholds.
type Params struct {
	MinErrors int           `param:"min-errors" doc:"refused requests of one client for one topic id before it is reported"`
	SpinGap   time.Duration `param:"spin-gap" unit:"ms" doc:"a request sent this soon after the previous refusal is a retry without backoff"`
}

// Bounds: topic names whose ids are remembered, episodes followed.
const (
	maxTopics   = 16384
	maxEpisodes = 1024
	maxIDs      = 4
)

// New makes the rule.
func New(p Params) detectors.Rule {
	p.MinErrors = max(p.MinErrors, 1)
	return &rule{p: p, topics: map[string]*Topic{}, eps: map[epKey]*Episode{}, open: map[cluster.Client]int{}}
}

type rule struct {
	p      Params
	topics map[string]*Topic // by name: ids Metadata named, deletions, creations
	eps    map[epKey]*Episode
	open   map[cluster.Client]int // episodes not yet healed, per client
	// dropped counts refusals not followed (bounds), topicsFull topic
	// names not remembered.
	dropped, topicsFull int64
}

// epKey is a client and the topic it asked for: by id, or by name if the
// request named no id.
type epKey struct {
	cluster.Client
	TopicID [16]byte
	name    string
}

// Topic is what the capture says of a topic name.
type Topic struct {
	ids     [maxIDs]idSeen
	nids    int
	Deleted detectors.Evidence // last DeleteTopics answer naming it
	created detectors.Evidence // last CreateTopics answer naming it
}

type idSeen struct {
	id [16]byte
	at detectors.Evidence
}

// Episode is one client's refusals for one topic id.
type Episode struct {
	epKey
	spell.Spell
	name        string
	Start       time.Time
	Codes       tally.Codes
	apis        tally.APIs
	fast        int64         // requests within SpinGap of the previous refusal
	gaps        time.Duration // sum of those gaps, over the requests after a refusal
	ngaps       int64
	lastRefusal time.Time
	conns       tally.Conns
	ev          detectors.Sampler[detectors.Evidence]
}

func (r *rule) topicOf(name string) *Topic {
	return tally.Entry(r.topics, name, maxTopics, &r.topicsFull, func() *Topic { return &Topic{} })
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(p *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.Resp == nil {
		return
	}
	switch resp := x.Resp.Resp.(type) {
	case *kmsg.MetadataResponse:
		r.metadata(x.Resp, resp)
	case *kmsg.DeleteTopicsResponse:
		for _, t := range resp.Topics {
			if t.ErrorCode == 0 && t.Topic != nil {
				if tp := r.topicOf(*t.Topic); tp != nil {
					tp.Deleted = detectors.EvidenceAt(x.Resp, "DeleteTopics answer: "+*t.Topic+" deleted, asked by client id "+x.Req.Client.ID)
				}
			}
		}
		return
	case *kmsg.CreateTopicsResponse:
		for _, t := range resp.Topics {
			if t.ErrorCode == 0 {
				if tp := r.topicOf(t.Topic); tp != nil {
					tp.created = detectors.EvidenceAt(x.Resp, "CreateTopics answer: "+t.Topic+" created with topic id "+
						cluster.TopicID(t.TopicID)+", asked by client id "+x.Req.Client.ID)
				}
			}
		}
		return
	}
	refused := false
	for _, ec := range x.Resp.ErrorCodes {
		refused = refused || cluster.TopicGone(ec.Code)
	}
	c := x.Req.Client
	if !refused && r.open[c] == 0 {
		return
	}
	decode.PartitionErrors(x.Resp.Resp, func(ref cluster.Partition, code int16) {
		k := epKey{c, ref.TopicID, ""}
		if ref.TopicID == ([16]byte{}) {
			k.name = ref.Topic
		}
		switch {
		case cluster.TopicGone(code):
			r.refused(p, k, ref.Topic, code, x)
		case code == 0 && r.open[c] > 0:
			r.answered(p, c, ref.Topic, ref.TopicID, x.Req.Key, x.Resp.Time)
		}
	})
}

func (r *rule) refused(p *detectors.Pass, k epKey, name string, code int16, x *detectors.Exchange) {
	e := tally.Entry(r.eps, k, maxEpisodes, &r.dropped, func() *Episode { return &Episode{epKey: k, name: name} })
	if e == nil {
		return
	}
	if e.name == "" {
		e.name = r.nameOf(p.Nodes, k.TopicID)
	}
	t := x.Resp.Time
	if !e.lastRefusal.IsZero() {
		gap := x.Req.Time.Sub(e.lastRefusal)
		if gap >= 0 && e.Open {
			e.gaps += gap
			e.ngaps++
			if gap <= r.p.SpinGap {
				e.fast++
			}
		}
	}
	if e.lastRefusal.Equal(t) {
		return // another partition of the same answer
	}
	if !e.Open {
		r.open[k.Client]++
	}
	if e.N == 0 {
		e.Start = t
	}
	e.Fail(t)
	e.lastRefusal = t
	e.Codes.Add(code)
	e.apis.Add(x.Req.Key)
	e.conns.Add(x.Conn)
	e.ev.Add(detectors.EvidenceAt(x.Resp, x.Req.Name()+" answer: "+e.label()+" "+detectors.ErrorName(code)))
}

// answered heals the client's episodes for the topic name when it gets a
// good answer for it, under any id: a Fetch or Produce, or a Metadata for
// an episode of Metadata refusals only (a refresh is not a recovery for a
// client that fetches or produces).
func (r *rule) answered(p *detectors.Pass, c cluster.Client, name string, id [16]byte, api int16, at time.Time) {
	if name == "" {
		name = r.nameOf(p.Nodes, id)
	}
	if name == "" {
		return
	}
	meta := api == int16(kmsg.Metadata)
	for k, e := range r.eps {
		if k.Client != c || !e.Open || e.name != name {
			continue
		}
		if meta && e.apis.Get(int16(kmsg.Fetch))+e.apis.Get(int16(kmsg.Produce)) > 0 {
			continue
		}
		if e.Heal(at) {
			r.open[c]--
		}
	}
}

// metadata remembers the ids Metadata names for each topic name.
func (r *rule) metadata(m *flows.Message, resp *kmsg.MetadataResponse) {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic == nil || t.TopicID == ([16]byte{}) || t.ErrorCode != 0 {
			continue
		}
		tp := r.topicOf(*t.Topic)
		if tp == nil {
			continue
		}
		if tp.nids > 0 && tp.ids[(tp.nids-1)%maxIDs].id == t.TopicID {
			continue
		}
		tp.ids[tp.nids%maxIDs] = idSeen{t.TopicID, detectors.EvidenceAt(m, "Metadata answer: "+*t.Topic+" has topic id "+cluster.TopicID(t.TopicID))}
		tp.nids++
	}
}

// nameOf is the name of a topic id, from the run's nodes or the ids
// Metadata named.
func (r *rule) nameOf(n *cluster.Nodes, id [16]byte) string {
	if n != nil {
		if s, ok := n.TopicName(id); ok {
			return s
		}
	}
	for name, t := range r.topics {
		for i := range min(t.nids, maxIDs) {
			if t.ids[i].id == id {
				return name
			}
		}
	}
	return ""
}

// Findings implements detectors.Rule: one per client and topic id with at
// least MinErrors refusals.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	return detectors.FindingsOf(maps.Values(r.eps), func(e *Episode) bool { return e.N >= int64(r.p.MinErrors) },
		func(a, b *Episode) bool { return a.Start.Before(b.Start) || a.Start.Equal(b.Start) && a.ID < b.ID },
		func(e *Episode) detectors.Finding { return r.finding(p, e) })
}
