package notleaderloop

import (
	"sort"
	"strings"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
	"github.com/kfsniff/kfsniff/internal/text"
)

// loopKey is what the findings of one loop over several partitions share:
// the client, the topic, the shape, the leader and the servers.
type loopKey struct {
	client, clientID, topic, shape string
	leader                         int32
	epoch                          int32
	hasEpoch                       bool
	servers                        string
}

func keyOf(f *Finding) loopKey {
	k := loopKey{client: f.Client, clientID: f.ClientID, topic: f.Topic, shape: f.Shape, leader: f.LeaderID,
		servers: strings.Join(f.Servers, "\x00")}
	if f.LeaderEpoch != nil {
		k.epoch, k.hasEpoch = *f.LeaderEpoch, true
	}
	return k
}

// merge folds the findings of one client that loop the same way over
// several partitions of a topic into one, in the place of the first, so
// that a producer stuck on a broker's fifty partitions is one finding,
// not fifty. Counts are summed; the text describes the first partition.
//
// The findings are merged as they are made (add), so that past max
// findings (Pass.MaxFindings, 0: no limit) those of further loops are
// counted (cut) and dropped rather than all kept until the end: a client
// refused on tens of thousands of topics would otherwise hold a finding
// per topic in memory at once.
type merger struct {
	groups  map[loopKey]int // the group's finding in out
	out     []detectors.Finding
	max     int
	cut     detectors.NotListed
	cutKeys map[loopKey]bool
}

func newMerger(max int) *merger {
	return &merger{groups: map[loopKey]int{}, max: max, cutKeys: map[loopKey]bool{}}
}

func (mg *merger) add(f *detectors.Finding) {
	d := f.Detail.(*Finding)
	k := keyOf(d)
	at, ok := mg.groups[k]
	if !ok {
		if mg.max > 0 && len(mg.out) >= mg.max {
			if mg.cutKeys[k] {
				mg.cut.Also(f)
			} else {
				mg.cutKeys[k] = true
				mg.cut.Add(f)
			}
			return
		}
		mg.groups[k] = len(mg.out)
		mg.out = append(mg.out, *f)
		return
	}
	{
		m := &mg.out[at]
		md := m.Detail.(*Finding)
		if md.Merged == nil {
			md.Merged = []int32{md.Partition}
			md.NotLeaderPerPartition = []int64{md.NotLeader}
		}
		md.Merged = append(md.Merged, d.Partition)
		md.NotLeaderPerPartition = append(md.NotLeaderPerPartition, d.NotLeader)
		m.Severity = max(m.Severity, f.Severity)
		md.Held = max(md.Held, d.Held)
		md.StillRefused = md.StillRefused || d.StillRefused
		md.Healed = md.Healed && d.Healed
		md.addCounts(d)
		if f.First.Before(m.First) {
			m.First = f.First
		}
		if f.Last.After(m.Last) {
			m.Last = f.Last
		}
		m.Conns = peers.UnionIDs(m.Conns, f.Conns)
		m.Nodes = peers.UnionIDs(m.Nodes, f.Nodes)
		m.Evidence = append(m.Evidence, f.Evidence...)
		if len(m.Evidence) > maxMergedEvidence {
			// Thinned as it grows, not only at the end: a loop over
			// tens of thousands of partitions brings that many
			// findings' evidence.
			detectors.SortEvidence(m.Evidence)
			m.Evidence = thin(m.Evidence, maxMergedEvidence/4)
		}
	}
}

// maxMergedEvidence bounds the evidence a merged finding holds while it
// is merged (it keeps 2+detectors.MaxMiddle in the end).
const maxMergedEvidence = 64

// done finishes the merged findings, the summary of those not kept last.
func (mg *merger) done() []detectors.Finding {
	out := mg.out
	for i := range out {
		m := &out[i]
		md := m.Detail.(*Finding)
		if len(md.Merged) < 2 {
			continue
		}
		parts, perPart := md.Merged, md.NotLeaderPerPartition
		sort.Sort(byPartition{parts, perPart})
		md.Partition, md.Partitions = parts[0], parts
		md.FetchOffset, md.FirstFetchOffset = nil, nil
		dur := m.Last.Sub(m.First)
		md.Duration, md.Rate = text.Seconds(dur), text.Rate(md.Requests, dur)
		md.HeldS, md.Ongoing = text.Seconds(md.Held), md.StillRefused
		m.Subject.Nodes = m.Nodes
		m.Subject.Partitions = nil
		for _, p := range parts {
			m.Subject.Partitions = append(m.Subject.Partitions, cluster.Partition{Topic: md.Topic, Num: p})
		}
		detectors.SortEvidence(m.Evidence)
		m.Evidence = thin(m.Evidence, 2+detectors.MaxMiddle)
	}
	return append(out, mg.cut.Summary()...)
}

// addCounts adds d's counts to f's; a count present in either is in the
// sum.
func (f *Finding) addCounts(d *Finding) {
	f.Requests += d.Requests
	f.NotLeaderResponses += d.NotLeaderResponses
	f.FencedLeaderEpoch += d.FencedLeaderEpoch
	f.OtherErrors += d.OtherErrors
	f.Unanswered += d.Unanswered
	for _, c := range []struct{ to, from **int64 }{
		{&f.RequestsToLeader, &d.RequestsToLeader}, {&f.MetadataRefreshes, &d.MetadataRefreshes},
		{&f.UnansweredConnectsToLeader, &d.UnansweredConnectsToLeader},
		{&f.RefusedConnectsToLeader, &d.RefusedConnectsToLeader},
		{&f.UnansweredRequestsToLeader, &d.UnansweredRequestsToLeader},
	} {
		if *c.from == nil {
			continue
		}
		if *c.to == nil {
			*c.to = new(int64)
		}
		**c.to += **c.from
	}
}

// byPartition sorts merged partitions with their answer counts.
type byPartition struct {
	parts []int32
	n     []int64
}

func (b byPartition) Len() int           { return len(b.parts) }
func (b byPartition) Less(i, j int) bool { return b.parts[i] < b.parts[j] }
func (b byPartition) Swap(i, j int) {
	b.parts[i], b.parts[j] = b.parts[j], b.parts[i]
	b.n[i], b.n[j] = b.n[j], b.n[i]
}

// thin keeps the first, the last and evenly spread evidence, n in all.
func thin(ev []detectors.Evidence, n int) []detectors.Evidence {
	if len(ev) <= n || n < 2 {
		return ev
	}
	out := make([]detectors.Evidence, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, ev[i*(len(ev)-1)/(n-1)])
	}
	return out
}
