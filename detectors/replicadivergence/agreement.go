package replicadivergence

import (
	"fmt"
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
	agreed
}

// Agreements sums up the comparison over more partitions than get an
// Agreement each (max-info).
type Agreements struct{ agreed }

// agreed is the comparison's outcome, the prose of both.
type agreed struct {
	what                                                    string // the partition, or "N partitions"
	batches, copies, single, mism, bad, rew, tainted, other int64
	names                                                   []string // the replicas
}

// Summary implements detectors.Detail.
func (a *agreed) Summary() string {
	replicas := text.Plural(int64(len(a.names)), "replica", "replicas")
	if a.mism == 0 && a.bad == 0 {
		return fmt.Sprintf("%s: %s verified byte-identical across %s (%d copies compared)", a.what, text.Plural(a.batches, "batch", "batches"), replicas, a.copies)
	}
	var probs []string
	if a.mism > 0 {
		probs = append(probs, text.Plural(a.mism, "batch differs", "batches differ"))
	}
	if a.bad > 0 {
		probs = append(probs, text.Plural(a.bad, "copy fails its CRC", "copies fail their CRC"))
	}
	return fmt.Sprintf("%s: %d of %d batches identical across %s; %s (see the errors)", a.what, a.batches-a.tainted, a.batches,
		replicas, strings.Join(probs, ", "))
}

// Explanation implements detectors.Detail.
func (a *agreed) Explanation() string {
	var ex strings.Builder
	fmt.Fprintf(&ex, "%s seen in two copies or more (%d copies in all, as produced and as fetched) held by %s. ",
		text.Plural(a.batches, "batch of "+a.what+" was", "batches of "+a.what+" were"), a.copies, strings.Join(a.names, ", "))
	if a.mism == 0 {
		ex.WriteString("Every copy of a batch carries the same CRC-32C, which covers the attributes, producer id, epoch, sequence and every record: the replicas are byte-identical where the capture could see them (the base offset and partition leader epoch are not covered and may be set by the leader). ")
	} else {
		fmt.Fprintf(&ex, "%s copies with different CRCs. ", text.Plural(a.mism, "batch has", "batches have"))
	}
	if a.bad > 0 {
		fmt.Fprintf(&ex, "%s a CRC its bytes do not match. ", text.Plural(a.bad, "copy carries", "copies carry"))
	}
	if a.rew > 0 {
		fmt.Fprintf(&ex, "%s rewritten by the broker (other compression or timestamp type), as the topic's configuration asks; their stored copies were compared with each other. ", text.Plural(a.rew, "produced batch was", "produced batches were"))
	}
	if a.single > 0 {
		fmt.Fprintf(&ex, "%s seen only once and could not be compared.", text.Plural(a.single, "batch was", "batches were"))
	}
	if a.other > 0 {
		fmt.Fprintf(&ex, " %s another topic id (the same name on another cluster, or a recreated topic): not compared.",
			text.Plural(a.other, "copy at these offsets names", "copies at these offsets name"))
	}
	return strings.TrimSpace(ex.String())
}

// Next implements detectors.Detail.
func (a *agreed) Next() string {
	if a.tainted > 0 {
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
	var a agreed
	var when copies.Span
	var ev detectors.Sampler[detectors.Evidence]
	var subject []cluster.Partition
	for _, pt := range parts {
		r.holders(p.Nodes, pt, nodes, names)
		a.batches += pt.batches
		a.copies += pt.copies
		a.single += pt.single
		a.mism += pt.mismatches
		a.tainted += pt.tainted
		a.bad += pt.badCRCs
		a.rew += pt.rewritten
		a.other += pt.otherTopicID
		when.Join(pt.when)
		for id := range pt.conns {
			conns.Add(id)
		}
		for _, e := range pt.ev.List() {
			ev.Add(e)
		}
		subject = append(subject, cluster.Partition{Topic: pt.key.TopicName(p.Nodes), Num: pt.key.Num})
	}
	a.names = text.SortedKeys(names)
	counts := map[string]int64{
		"batches":    a.batches,
		"copies":     a.copies,
		"replicas":   int64(len(names)),
		"mismatches": a.mism,
		"bad_crcs":   a.bad,
	}
	for name, n := range map[string]int64{
		"single_copy_batches":                a.single,
		"rewritten_by_broker":                a.rew,
		"other_topic_id_copies":              a.other,
		"compared_early":                     r.entries.Evicted(),
		"batches_of_partitions_not_followed": r.parts.Dropped,
		"problems_not_detailed":              r.dropped,
	} {
		if n > 0 {
			counts[name] = n
		}
	}
	var detail detectors.Detail
	if len(parts) == 1 {
		pt := parts[0]
		a.what = pt.key.Label(p.Nodes)
		detail = &Agreement{Topic: pt.key.TopicName(p.Nodes), Partition: pt.key.Num, ProducerID: pt.producerID,
			FirstOffset: pt.firstOff, LastOffset: pt.lastOff, agreed: a}
	} else {
		counts["partitions"] = int64(len(parts))
		a.what = fmt.Sprintf("%d partitions", len(parts))
		detail = &Agreements{a}
	}
	return detectors.Finding{
		Severity: detectors.Info, First: when.First, Last: when.Last, Conns: conns.Ints(), Nodes: nodes.Sorted(),
		Counts: counts, Evidence: ev.List(), Subject: detectors.Subject{Nodes: nodes.Sorted(), Partitions: subject}, Detail: detail,
	}
}
