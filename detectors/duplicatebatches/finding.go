package duplicatebatches

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/copies"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one partition holding data twice: the main run of repeats
// (the shift with the most records repeated). Its exported fields are the
// finding's "fields".
type Finding struct {
	Topic             string  `json:"topic"`
	Partition         int32   `json:"partition"`
	OffsetShift       int64   `json:"offset_shift"`
	Shifts            []int64 `json:"shifts"`
	Contiguous        bool    `json:"contiguous"`
	FirstOffset       int64   `json:"first_offset"`
	LastOffset        int64   `json:"last_offset"`
	RepeatFirstOffset int64   `json:"repeat_first_offset"`
	RepeatLastOffset  int64   `json:"repeat_last_offset"`
	ProducerID        int64   `json:"producer_id"`
	ClientID          string  `json:"client_id"`
	// Compared is how the repeats were found: "crc", "records" or
	// "crc+records".
	Compared string `json:"compared"`
	// Replay is set when the main run is an MM2-style replay:
	// replay-batches or more batches appended again at one shift (an
	// error); a warning otherwise.
	Replay bool `json:"replay"`
	// CRCSequenceMD5, set when the repeat is the original run batch for
	// batch, is the MD5 of their CRCs in order (one per line): the same
	// for both halves.
	CRCSequenceMD5 string `json:"crc_sequence_md5,omitempty"`

	Label         string
	MainBatches   int64
	MainByRecords int64
	Idempotent    int64 // repeats with a producer id
	Produced      bool  // the repeat's Produce was captured
	Server        string
	ReplayBatches int64 // the rule's replay-batches
	ReplayRecords int64 // and replay-records

	// The counts: the partition's batches and records seen, the
	// batches and records repeated; then, where not zero, the repeats
	// found by their records rather than their CRCs, the batches over
	// the rule's caps and budget or undecodable, the repeats at other
	// offset shifts, and what the bounds forgot or did not follow.
	Batches      int64 `count:"batches"`
	Records      int64 `count:"records"`
	DupBatches   int64 `count:"duplicate_batches"`
	DupRecords   int64 `count:"duplicate_records"`
	DupByRecords int64 `count:"duplicate_batches_by_records,omitempty"`
	OverCap      int64 `count:"batches_over_cap,omitempty"`
	OverBudget   int64 `count:"batches_over_budget,omitempty"`
	Undecodable  int64 `count:"undecodable_batches,omitempty"`
	OtherShifts  int64 `count:"repeats_at_other_shifts,omitempty"`
	Forgotten    int64 `count:"forgotten_batches,omitempty"`
	NotFollowed  int64 `count:"batches_of_partitions_not_followed,omitempty"`
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	return fmt.Sprintf("%s: %d batches (%d records) written twice, offsets %d-%d again at %d-%d (shift %+d), producerId %d",
		f.Label, f.DupBatches, f.DupRecords, f.FirstOffset, f.LastOffset, f.RepeatFirstOffset, f.RepeatLastOffset, f.OffsetShift, f.ProducerID)
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var ex strings.Builder
	how := "byte for byte (same CRC, record count and size)"
	if f.MainByRecords == f.MainBatches {
		how = "record for record (same timestamps, keys, values and headers, in batches whose CRCs differ: re-batched or recompressed)"
	} else if f.MainByRecords > 0 {
		how = fmt.Sprintf("byte for byte or, for %d of them, record for record", f.MainByRecords)
	}
	fmt.Fprintf(&ex, "%d of the %d batches seen in %s repeat, %s, data already at %d offsets lower: ", f.DupBatches, f.Batches, f.Label, how, f.OffsetShift)
	if f.Contiguous {
		fmt.Fprintf(&ex, "the %d batches at offsets %d-%d appear again as one contiguous run at %d-%d", f.MainBatches, f.FirstOffset, f.LastOffset, f.RepeatFirstOffset, f.RepeatLastOffset)
		if f.CRCSequenceMD5 != "" {
			ex.WriteString(", with the same CRC sequence")
		}
		ex.WriteString(". ")
	} else {
		fmt.Fprintf(&ex, "%d batches between offsets %d and %d repeat at %d-%d, not as one unbroken run. ", f.MainBatches, f.FirstOffset, f.LastOffset, f.RepeatFirstOffset, f.RepeatLastOffset)
	}
	if len(f.Shifts) > 1 {
		fmt.Fprintf(&ex, "Repeats were found at %d different shifts (%s). ", len(f.Shifts), text.IDs(f.Shifts, 0))
	}
	fmt.Fprintf(&ex, "The log now holds %d records twice; every consumer of the partition reads them twice, and the log keeps both copies until retention removes them. ", f.DupRecords)
	if f.Produced {
		fmt.Fprintf(&ex, "The repeat was produced by %s to %s", f.ClientID, f.Server)
	} else {
		fmt.Fprintf(&ex, "The repeat was seen by %s (its Produce was not captured)", f.ClientID)
	}
	if f.Idempotent == 0 {
		ex.WriteString(" with producerId -1: idempotence was off, so the broker had no producer id and sequence to recognise the resend and appended it as new data. ")
	} else {
		fmt.Fprintf(&ex, " with producerId %d: the broker deduplicates only retries of the same producer id and epoch (its last 5 batches), so this data came back as new batches (a new producer id after a restart, or records re-sent in new batches). ", f.ProducerID)
	}
	if f.Replay {
		fmt.Fprintf(&ex, "%d batches appended again at one shift (replay-batches is %d) are a replay, not a retry: a producer resends at most the batches it had in flight (max.in.flight.requests.per.connection, 5 by default), whereas a pipeline that consumes a source and produces its records re-reads, after a crash, everything since its last committed position, as a MirrorMaker 2 task killed before its source offsets were committed does.",
			f.MainBatches, f.ReplayBatches)
	} else {
		fmt.Fprintf(&ex, "%s at one shift, fewer than replay-batches (%d): the size of a producer's resend of the batches it had in flight after a lost acknowledgement (a request timeout, a dropped connection), or of a pipeline replaying a few batches.",
			text.Plural(f.MainBatches, "batch", "batches"), f.ReplayBatches)
		if f.DupRecords >= f.ReplayRecords {
			fmt.Fprintf(&ex, " But %d records written twice reach replay-records (%d): an error whatever the pattern.", f.DupRecords, f.ReplayRecords)
		} else {
			fmt.Fprintf(&ex, " A warning: fewer than replay-records (%d) records, but they stay in the log twice.", f.ReplayRecords)
		}
	}
	return ex.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return "Check the producer's restarts around the repeat (the connections and times in the evidence) and, for MirrorMaker 2 or Kafka Connect, " +
		"whether source offsets were committed before the stop (offset.flush.interval.ms, the mm2-offsets/connect-offsets topic). " +
		"Turn on exactly-once delivery (exactly.once.source.support=enabled on the Connect cluster, or enable.idempotence=true " +
		"with transactions for a custom pipeline). Confirm on the broker: kafka-dump-log.sh --files <segment>.log | grep -E 'baseOffset|crc' " +
		"around both ranges; downstream consumers must tolerate or remove the duplicated records."
}

// Findings implements detectors.Rule: one per partition with repeats.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	var out []detectors.Finding
	parts := append([]*part(nil), r.parts.List()...)
	sort.Slice(parts, func(i, j int) bool { return parts[i].key.Less(parts[j].key) })
	for _, pt := range parts {
		if f, ok := r.finding(p, pt); ok {
			out = append(out, f)
		}
	}
	return out
}

func (r *rule) finding(p *detectors.Pass, pt *part) (detectors.Finding, bool) {
	var runs []*run
	var dupBatches, dupRecords, byRecords, idem int64
	for _, rn := range pt.runs {
		runs = append(runs, rn)
		dupBatches += rn.batches
		dupRecords += rn.records
		byRecords += rn.byRecords
		idem += rn.idempotent
	}
	if dupBatches < int64(r.minBatches) || len(runs) == 0 {
		return detectors.Finding{}, false
	}
	// The main run holds the most repeated records.
	slices.SortFunc(runs, func(a, b *run) int { return cmp.Or(cmp.Compare(b.records, a.records), cmp.Compare(a.shift, b.shift)) })
	main := runs[0]
	f := &Finding{
		Topic: pt.key.TopicName(p.Nodes), Partition: pt.key.Num, OffsetShift: main.shift,
		Contiguous:  main.span == main.repLast-main.repFirst+1,
		FirstOffset: main.origFirst, LastOffset: main.origLast, RepeatFirstOffset: main.repFirst, RepeatLastOffset: main.repLast,
		ProducerID: main.producerID, Compared: comparedBy(main),
		Label: pt.key.Label(p.Nodes), Batches: pt.batches, DupBatches: dupBatches, DupRecords: dupRecords,
		MainBatches: main.batches, MainByRecords: main.byRecords, Idempotent: idem,
		Replay: main.batches >= r.replay, ReplayBatches: r.replay, ReplayRecords: r.replayRecs,
	}
	for _, rn := range runs {
		f.Shifts = append(f.Shifts, rn.shift)
	}
	slices.Sort(f.Shifts)
	if f.Contiguous && main.ordered && main.byRecords == 0 {
		// Both halves have this CRC sequence: the repeats are equal
		// batch for batch to the original run.
		f.CRCSequenceMD5 = hex.EncodeToString(main.md5.Sum(nil))
	}
	src := r.srcs.Get(uint32(max(main.seenSrc, 0)))
	if main.producerSrc >= 0 {
		src = r.srcs.Get(uint32(main.producerSrc))
	}
	f.ClientID, f.Produced, f.Server = src.ClientID, main.producerSrc >= 0, src.ServerLabel(p.Nodes)

	nodes := tally.IDs{}
	nodes.Add(src.ServerNode(p.Nodes))
	conns := tally.IDs{}
	when := main.when
	for _, rn := range runs {
		for id := range rn.conns {
			conns.Add(id)
		}
		when.Join(rn.when)
		if rn.hasOrig {
			when.Join(copies.Span{First: time.Unix(0, rn.orig.at).UTC()})
		}
	}
	var ev []detectors.Evidence
	if main.hasOrig {
		ev = append(ev, detectors.Evidence{File: int(main.orig.file), Packet: main.orig.packet, Conn: int(main.orig.conn),
			What: fmt.Sprintf("first copy: batch at offset %d", main.orig.offset)})
	}
	ev = append(ev, main.ev.List()...)

	f.Records, f.DupByRecords, f.OverCap, f.OverBudget = pt.records, byRecords, pt.overCap, pt.overBudget
	f.Undecodable, f.OtherShifts, f.Forgotten, f.NotFollowed = pt.badRecs, pt.dropRuns, r.crcs.Evicted(), r.parts.Dropped
	sev := detectors.Warning
	if f.Replay || dupRecords >= r.replayRecs {
		sev = detectors.Error
	}
	return detectors.Finding{
		Severity: sev,
		First:    when.First,
		Last:     when.Last,
		Conns:    conns.Ints(),
		Nodes:    nodes.Sorted(),
		Evidence: ev,
		Subject: detectors.Subject{ClientIDs: []string{src.ClientID}, Nodes: nodes.Sorted(),
			Partitions: []cluster.Partition{{Topic: f.Topic, Num: f.Partition}}},
		Detail: f,
	}, true
}

func comparedBy(rn *run) string {
	switch {
	case rn.byRecords == 0:
		return "crc"
	case rn.byRecords == rn.batches:
		return "records"
	}
	return "crc+records"
}
