package recordsskipped

import (
	"fmt"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one consumer that skipped records. Its exported fields are
// the finding's "fields".
type Finding struct {
	ClientID string   `json:"client_id"`
	Host     string   `json:"host"`
	Groups   []string `json:"groups"`
	// Partitions are the jumps, one per partition and reset.
	Partitions []Skip `json:"partitions"`
	// Skipped is the offsets jumped over in all, Deleted those below the
	// log start (removed before the consumer read them); OutOfRange
	// counts the jumps after an OFFSET_OUT_OF_RANGE answer.
	Skipped    int64 `json:"offsets_skipped"`
	Deleted    int64 `json:"offsets_deleted"`
	OutOfRange int64 `json:"out_of_range"`

	serverLabels []string
	first, last  time.Time
	MoreParts    int64
	Dropped      int64

	// The counts: the offsets the client skipped, those deleted under
	// it, and the partitions it skipped on (those not followed
	// included).
	OffsetsSkipped int64 `count:"offsets_skipped"`
	OffsetsDeleted int64 `count:"offsets_deleted"`
	PartitionCount int64 `count:"partitions"`
}

// Skip is one partition's jump: the position the consumer had (From: a
// committed offset, or a fetch offset answered OFFSET_OUT_OF_RANGE) and
// where it fetched next (To); LogStart the partition's log start as the
// capture showed it (-1: not seen).
type Skip struct {
	Partition  string `json:"partition"`
	From       int64  `json:"from"`
	To         int64  `json:"to"`
	LogStart   int64  `json:"log_start"`
	OutOfRange bool   `json:"out_of_range"`
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	var parts []string
	for _, p := range f.Partitions {
		parts = append(parts, fmt.Sprintf("%s %d->%d", p.Partition, p.From, p.To))
	}
	s := fmt.Sprintf("consumer %q on %s", f.ClientID, f.Host)
	if len(f.Groups) > 0 {
		s += " (group " + strings.Join(f.Groups, ", ") + ")"
	}
	s += fmt.Sprintf(" skipped %s it will never read: %s", text.Plural(f.Skipped, "offset", "offsets"), text.List(parts, 3))
	if f.Deleted > 0 {
		s += fmt.Sprintf("; %d of them deleted from the log before it read them", f.Deleted)
	}
	return s
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var b strings.Builder
	for _, p := range f.Partitions {
		if p.OutOfRange {
			fmt.Fprintf(&b, "%s: a Fetch at offset %d was answered OFFSET_OUT_OF_RANGE", p.Partition, p.From)
		} else {
			fmt.Fprintf(&b, "%s: OffsetFetch answered the committed offset %d, with no error", p.Partition, p.From)
		}
		if p.LogStart >= 0 {
			fmt.Fprintf(&b, "; the log started at %d", p.LogStart)
		}
		fmt.Fprintf(&b, "; the consumer then fetched from %d, jumping over %d offsets. ", p.To, p.To-p.From)
	}
	b.WriteString("The consumer's position fell below the log start: retention (retention.ms, retention.bytes) or " +
		"kafka-delete-records removed the records before it read them, and the client reset as its " +
		"auto.offset.reset says (earliest: to the log start, losing what was deleted; latest: to the end, losing " +
		"everything in between). Nothing failed for the application: the records are simply never delivered. ")
	if f.Deleted > 0 && f.Deleted < f.Skipped {
		fmt.Fprintf(&b, "%d of the %d offsets were still in the log when it reset (auto.offset.reset=latest "+
			"skipped them too). ", f.Skipped-f.Deleted, f.Skipped)
	}
	b.WriteString("Offsets count records only roughly: compaction and transaction markers leave some without one.")
	if f.MoreParts > 0 {
		fmt.Fprintf(&b, " (%d more jumps are not listed.)", f.MoreParts)
	}
	if f.Dropped > 0 {
		fmt.Fprintf(&b, " (%d positions or consumers were not followed: too many.)", f.Dropped)
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	group := "<group>"
	if len(f.Groups) > 0 {
		group = f.Groups[0]
	}
	return fmt.Sprintf("kafka-consumer-groups.sh --bootstrap-server <broker> --describe --group %s shows the "+
		"group's offsets now; kafka-configs.sh --describe --entity-type topics --entity-name <topic> shows "+
		"retention.ms and retention.bytes. A consumer that stops for longer than the retention loses what it "+
		"did not read: alert on lag in time, raise the retention, or replay the lost range from a source that "+
		"still has it.", group)
}
