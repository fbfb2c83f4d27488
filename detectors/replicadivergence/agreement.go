package replicadivergence

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/copies"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Agreement sums up the comparison of one partition's copies: how many
// batches were seen in two copies or more, across how many replicas, and
// how many differed (each reported on its own). Its exported fields are
// the finding's "fields".
type Agreement struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	ProducerID  int64  `json:"producer_id"` // the first seen, -1 if none
	FirstOffset int64  `json:"first_offset"`
	LastOffset  int64  `json:"last_offset"`
	Agreed
}

// Agreements sums up the comparison over more partitions than get an
// Agreement each (max-info).
type Agreements struct{ Agreed }

// Agreed is the comparison's outcome, the counts and prose of both.
type Agreed struct {
	// What is the partition, or "N partitions"; Names the replicas.
	What  string
	Names []string
	// Batches were seen in two copies or more: Copies in all, across
	// Replicas; Mismatches of them differ, BadCRCs copies fail their
	// CRC, Tainted batches have either.
	Batches    int64 `count:"batches"`
	Copies     int64 `count:"copies"`
	Replicas   int64 `count:"replicas"`
	Mismatches int64 `count:"mismatches"`
	BadCRCs    int64 `count:"bad_crcs"`
	Tainted    int64
	// Single batches were seen once; Rewritten produced batches the
	// broker rewrote; OtherTopicID copies name another topic id;
	// ComparedEarly, NotFollowed and NotDetailed are what the rule's
	// bounds left out (copies compared before all were in, batches of
	// partitions not followed, problems not reported on their own);
	// Partitions, of Agreements, how many partitions it sums up.
	Single        int64 `count:"single_copy_batches,omitempty"`
	Rewritten     int64 `count:"rewritten_by_broker,omitempty"`
	OtherTopicID  int64 `count:"other_topic_id_copies,omitempty"`
	ComparedEarly int64 `count:"compared_early,omitempty"`
	NotFollowed   int64 `count:"batches_of_partitions_not_followed,omitempty"`
	NotDetailed   int64 `count:"problems_not_detailed,omitempty"`
	Partitions    int64 `count:"partitions,omitempty"`
}

// Summary implements detectors.Detail.
func (a *Agreed) Summary() string {
	replicas := text.Plural(int64(len(a.Names)), "replica", "replicas")
	if a.Mismatches == 0 && a.BadCRCs == 0 {
		return fmt.Sprintf("%s: %s verified byte-identical across %s (%d copies compared)", a.What, text.Plural(a.Batches, "batch", "batches"), replicas, a.Copies)
	}
	var probs []string
	if a.Mismatches > 0 {
		probs = append(probs, text.Plural(a.Mismatches, "batch differs", "batches differ"))
	}
	if a.BadCRCs > 0 {
		probs = append(probs, text.Plural(a.BadCRCs, "copy fails its CRC", "copies fail their CRC"))
	}
	return fmt.Sprintf("%s: %d of %d batches identical across %s; %s (see the errors)", a.What, a.Batches-a.Tainted, a.Batches,
		replicas, strings.Join(probs, ", "))
}

// Explanation implements detectors.Detail.
func (a *Agreed) Explanation() string {
	var ex strings.Builder
	fmt.Fprintf(&ex, "%s seen in two copies or more (%d copies in all, as produced and as fetched) held by %s. ",
		text.Plural(a.Batches, "batch of "+a.What+" was", "batches of "+a.What+" were"), a.Copies, strings.Join(a.Names, ", "))
	if a.Mismatches == 0 {
		ex.WriteString("Every copy of a batch carries the same CRC-32C, which covers the attributes, producer id, epoch, sequence and every record: the replicas are byte-identical where the capture could see them (the base offset and partition leader epoch are not covered and may be set by the leader). ")
	} else {
		fmt.Fprintf(&ex, "%s copies with different CRCs. ", text.Plural(a.Mismatches, "batch has", "batches have"))
	}
	if a.BadCRCs > 0 {
		fmt.Fprintf(&ex, "%s a CRC its bytes do not match. ", text.Plural(a.BadCRCs, "copy carries", "copies carry"))
	}
	if a.Rewritten > 0 {
		fmt.Fprintf(&ex, "%s rewritten by the broker (other compression or timestamp type), as the topic's configuration asks; their stored copies were compared with each other. ", text.Plural(a.Rewritten, "produced batch was", "produced batches were"))
	}
	if a.Single > 0 {
		fmt.Fprintf(&ex, "%s seen only once and could not be compared.", text.Plural(a.Single, "batch was", "batches were"))
	}
	if a.OtherTopicID > 0 {
		fmt.Fprintf(&ex, " %s another topic id (the same name on another cluster, or a recreated topic): not compared.",
			text.Plural(a.OtherTopicID, "copy at these offsets names", "copies at these offsets name"))
	}
	return strings.TrimSpace(ex.String())
}

// Next implements detectors.Detail.
func (a *Agreed) Next() string {
	if a.Tainted > 0 {
		return "See the replica-divergence errors for the copies that differ or fail their CRC."
	}
	return "Nothing to do for identical copies. To compare more of the log, capture the producer, the followers' replica fetches and a consumer over the same period."
}

// agreements reports, as info, the partitions whose copies were compared
// across enough replicas, or that had a problem.
func (r *rule) agreements(p *detectors.Pass) []detectors.Finding {
	var parts []*part
	for _, pt := range r.partList() {
		if pt.batches == 0 {
			continue
		}
		names := map[string]bool{}
		r.holders(p.Nodes, pt, tally.IDs{}, names)
		if len(names) >= r.minRepl || pt.tainted > 0 {
			parts = append(parts, pt)
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].key.Less(parts[j].key) })
	if len(parts) == 0 {
		return nil
	}
	if len(parts) > r.maxInfo {
		return []detectors.Finding{r.agreement(p, parts)}
	}
	out := make([]detectors.Finding, 0, len(parts))
	for _, pt := range parts {
		out = append(out, r.agreement(p, []*part{pt}))
	}
	return out
}

// agreement sums up the comparison of one partition or, beyond max-info,
// of all.
func (r *rule) agreement(p *detectors.Pass, parts []*part) detectors.Finding {
	nodes := tally.IDs{}
	names := map[string]bool{}
	conns := tally.IDs{}
	var a Agreed
	var when copies.Span
	var ev detectors.Sampler[detectors.Evidence]
	var subject []cluster.Partition
	for _, pt := range parts {
		r.holders(p.Nodes, pt, nodes, names)
		a.Batches += pt.batches
		a.Copies += pt.copies
		a.Single += pt.single
		a.Mismatches += pt.mismatches
		a.Tainted += pt.tainted
		a.BadCRCs += pt.badCRCs
		a.Rewritten += pt.rewritten
		a.OtherTopicID += pt.otherTopicID
		when.Join(pt.when)
		maps.Copy(conns, pt.conns)
		for _, e := range pt.ev.List() {
			ev.Add(e)
		}
		subject = append(subject, cluster.Partition{Topic: pt.key.TopicName(p.Nodes), Num: pt.key.Num})
	}
	a.Names = text.SortedKeys(names)
	a.Replicas = int64(len(names))
	a.ComparedEarly, a.NotFollowed, a.NotDetailed = r.entries.Evicted(), r.parts.Dropped, r.dropped
	var detail detectors.Detail
	if len(parts) == 1 {
		pt := parts[0]
		a.What = pt.key.Label(p.Nodes)
		detail = &Agreement{Topic: pt.key.TopicName(p.Nodes), Partition: pt.key.Num, ProducerID: pt.producerID,
			FirstOffset: pt.firstOff, LastOffset: pt.lastOff, Agreed: a}
	} else {
		a.Partitions = int64(len(parts))
		a.What = fmt.Sprintf("%d partitions", len(parts))
		detail = &Agreements{a}
	}
	return detectors.Finding{
		Severity: detectors.Info, First: when.First, Last: when.Last, Conns: conns.Ints(), Nodes: nodes.Sorted(),
		Evidence: ev.List(), Subject: detectors.Subject{Nodes: nodes.Sorted(), Partitions: subject}, Detail: detail,
	}
}
