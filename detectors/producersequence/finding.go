package producersequence

import (
	"fmt"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one producer's sequence errors and what followed. Its
// exported fields are the finding's "fields".
type Finding struct {
	ClientID   string   `json:"client_id"`
	Clients    []string `json:"clients"`
	Servers    []string `json:"servers"`
	Partitions []string `json:"partitions"`
	Errors     []string `json:"errors"`
	// ProducerID, Epoch and Sequence are those of the first batch refused.
	ProducerID int64 `json:"producer_id"`
	Epoch      int16 `json:"epoch"`
	Sequence   int32 `json:"sequence"`
	// After is the error the partition answered just before the first
	// sequence error, if any.
	After string `json:"after,omitempty"`
	// Identities are the producer ids and epochs used after the first
	// error, in order.
	Identities      []Identity `json:"identities,omitempty"`
	ResetPartitions []string   `json:"reset_partitions,omitempty" count:"reset_partitions,len"`
	Copies          []Copy     `json:"copies,omitempty"`
	Transactional   bool       `json:"transactional"`
	// HeldS is the longest a partition went without a write, from a
	// sequence error to the next batch written (or the end).
	HeldS     float64 `json:"held_s"`
	Recovered bool    `json:"recovered"`

	Episode            *Episode
	Held               time.Duration
	Forgotten, Dropped int64

	// The counts: sequence errors; producer epochs bumped (new producer
	// ids or epochs); batches resent; batches that may be duplicates,
	// and those seen twice.
	SequenceErrors     int64 `count:"sequence_errors"`
	EpochBumps         int64 `count:"epoch_bumps"`
	ResentBatches      int64 `count:"resent_batches"`
	PossibleDuplicates int64 `count:"possible_duplicates"`
	DuplicateBatches   int64 `count:"duplicate_batches"`
}

// Identity is a producer id and epoch, and where it was first seen.
type Identity struct {
	ProducerID int64  `json:"producer_id"`
	Epoch      int16  `json:"epoch"`
	Packet     uint64 `json:"packet"`
	From       string `json:"from"` // "batch" or "InitProducerId"
}

// Copy is records sent again under a new identity and written.
type Copy struct {
	Partition string `json:"partition"`
	// FirstOffset is where the first copy was written, -1 if its fate is
	// unknown.
	FirstOffset int64 `json:"first_offset"`
	Offset      int64 `json:"offset"`
	ProducerID  int64 `json:"producer_id"`
	Epoch       int16 `json:"epoch"`
	Sequence    int32 `json:"sequence"`
	Certain     bool  `json:"certain"`
}

func (e *Episode) detail(p *detectors.Pass, held time.Duration, ongoing bool) *Finding {
	f := &Finding{
		ClientID: e.ID, Clients: e.conns.Clients(), Servers: e.conns.ServerLabels(p.Nodes),
		Errors: e.codes.Parts(), ProducerID: e.from.pid, Epoch: e.from.epoch, Sequence: e.fromSeq,
		Transactional: e.txn, HeldS: text.Seconds(held), Recovered: !ongoing, Episode: e, Held: held,
	}
	for _, pk := range e.partOrder {
		f.Partitions = append(f.Partitions, pk.Label(e.Nodes))
	}
	for _, pk := range e.resetList {
		f.ResetPartitions = append(f.ResetPartitions, pk.Label(e.Nodes))
	}
	if e.after != 0 {
		f.After = decode.ErrorName(e.after)
	}
	for _, id := range e.IDs {
		from := "batch"
		if id.init {
			from = "InitProducerId"
		}
		f.Identities = append(f.Identities, Identity{id.pid, id.epoch, id.at.packet, from})
	}
	for _, c := range e.copies {
		first := int64(-1)
		if c.certain {
			first = c.first.offset
		}
		f.Copies = append(f.Copies, Copy{Partition: c.part.Label(e.Nodes), FirstOffset: first, Offset: c.again.offset,
			ProducerID: c.again.pid, Epoch: c.again.epoch, Sequence: c.again.seq, Certain: c.certain})
	}
	return f
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	e := f.Episode
	var b strings.Builder
	fmt.Fprintf(&b, "producer %q (%s): %s on %s (producer id %d epoch %d)", f.ClientID, text.List(f.Clients, 3),
		strings.Join(f.Errors, ", "), text.List(f.Partitions, 3), f.ProducerID, f.Epoch)
	if n := int64(len(e.IDs)) + e.MoreIDs; n > 0 {
		fmt.Fprintf(&b, ", %s", text.Plural(n, "new producer epoch", "new producer epochs"))
	}
	if len(f.ResetPartitions) > 0 {
		fmt.Fprintf(&b, ", sequences restarted on %s", text.List(f.ResetPartitions, 3))
	}
	switch {
	case e.Dups > 0:
		fmt.Fprintf(&b, "; %s written twice", text.Plural(e.Dups, "batch", "batches"))
	case e.Maybe > 0:
		fmt.Fprintf(&b, "; %s of unknown fate written again", text.Plural(e.Maybe, "batch", "batches"))
	}
	if f.Recovered {
		fmt.Fprintf(&b, "; written again after %s", text.Duration(f.Held))
	} else {
		fmt.Fprintf(&b, "; not written since (%s)", text.Duration(f.Held))
	}
	return b.String()
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	e := f.Episode
	var b strings.Builder
	when := "At " + text.Clock(e.First)
	if text.Clock(e.Last) != text.Clock(e.First) {
		when = "Between " + text.Clock(e.First) + " and " + text.Clock(e.Last)
	}
	fmt.Fprintf(&b, "%s, %s answered %s of client id %q (%s) with %s, on %s. The first refused batch "+
		"was producer id %d epoch %d, base sequence %d.", when, text.List(f.Servers, 3),
		text.Plural(e.N, "Produce batch", "Produce batches"), f.ClientID, text.List(f.Clients, 3),
		strings.Join(f.Errors, ", "), text.List(f.Partitions, 5), f.ProducerID, f.Epoch, f.Sequence)
	if f.After != "" {
		fmt.Fprintf(&b, " Just before, the partition had answered %s: the sequence error came after a leader change, when "+
			"the new leader's state for this producer did not match the client's (librdkafka issue 3584).", f.After)
	}
	b.WriteString(" A broker accepts an idempotent producer's batch only if its base sequence follows the last one it " +
		"wrote for that producer id and epoch; when it does not, the client has to start numbering again under a new " +
		"epoch (KIP-360: bumped by the client itself, or by InitProducerId), and the broker takes the new epoch's " +
		"sequence 0 as a new producer.")
	if len(f.Identities) > 0 {
		fmt.Fprintf(&b, " The producer then wrote as %s.", text.List(identities(f.Identities), 4))
	} else {
		b.WriteString(" The capture shows no new producer id or epoch afterwards: the producer stopped writing or kept " +
			"its numbering (librdkafka and the Java client may treat this as fatal).")
	}
	if len(f.ResetPartitions) > 0 {
		fmt.Fprintf(&b, " It restarted the sequences of %s, which had no error of their own: any of their batches still "+
			"in flight or of unknown fate can no longer be recognised by the broker as a retry (KAFKA-12152).",
			text.List(f.ResetPartitions, 5))
	}
	if e.Resent > 0 {
		fmt.Fprintf(&b, " %s sent before under the old producer id or epoch went out again under the new one.",
			text.Plural(e.Resent, "batch of records", "batches of records"))
		if e.Dups > 0 {
			fmt.Fprintf(&b, " %s the broker had already written, so the log holds those records twice (%s): the "+
				"idempotence guarantee did not hold (librdkafka issue 4953).", text.Plural(e.Dups, "batch", "batches"),
				text.List(copies(f.Copies, true), 3))
		}
		if e.Maybe > 0 {
			fmt.Fprintf(&b, " %s had an unknown fate the first time (timed out, written to too few replicas, or never "+
				"answered) and were written again (%s): they may be in the log twice.", text.Plural(e.Maybe, "batch", "batches"),
				text.List(copies(f.Copies, false), 3))
		}
	}
	if f.Recovered {
		fmt.Fprintf(&b, " The longest a partition went without a write was %s.", text.Duration(f.Held))
	} else {
		fmt.Fprintf(&b, " A partition had not been written again when the capture ended, %s after the error.", text.Duration(f.Held))
	}
	if f.Transactional {
		b.WriteString(" The batches were transactional: the transaction must be aborted.")
	}
	if f.Forgotten > 0 || f.Dropped > 0 {
		fmt.Fprintf(&b, " (Bounds reached: %d producer partitions forgotten, %d producers not followed; copies may be missed.)",
			f.Forgotten, f.Dropped)
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	topic := text.ShellOr(f.Episode.FromPart.TopicName(f.Episode.Nodes), "<topic>")
	s := fmt.Sprintf("On the partition leader, server.log shows \"Out of order sequence number for producer %d\" with the "+
		"sequence it expected; kafka-transactions.sh --bootstrap-server <broker> describe-producers --topic %s --partition %d "+
		"shows the producer state the broker keeps (KIP-664), and kafka-topics.sh --describe --topic %s the leader and ISR "+
		"changes around %s (unclean.leader.election.enable loses producer state). Client side: "+
		"kafka.producer:type=producer-metrics,client-id=%s record-error-rate and record-retry-rate; keep "+
		"max.in.flight.requests.per.connection at 5 or less with enable.idempotence=true, and a delivery.timeout.ms long "+
		"enough that batches do not expire while in flight (librdkafka issue 2163).",
		f.ProducerID, topic, f.Episode.FromPart.Num, topic, text.Clock(f.Episode.First), f.ClientID)
	if f.Episode.Dups > 0 || f.Episode.Maybe > 0 {
		s += " Find the copies with kafka-dump-log.sh --files <segment>.log --print-data-log around the offsets listed; " +
			"consumers must tolerate or remove them. librdkafka is known to bump the epoch on this error and send " +
			"batches still in flight again as new ones (issue 4953)."
	}
	return s
}

func identities(ids []Identity) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		s := fmt.Sprintf("producer id %d epoch %d (packet %d", id.ProducerID, id.Epoch, id.Packet)
		if id.From == "InitProducerId" {
			s += ", from InitProducerId"
		}
		out = append(out, s+")")
	}
	return out
}

func copies(cs []Copy, certain bool) []string {
	var out []string
	for _, c := range cs {
		if c.Certain != certain {
			continue
		}
		if certain {
			out = append(out, fmt.Sprintf("%s offsets %d and %d", c.Partition, c.FirstOffset, c.Offset))
		} else {
			out = append(out, fmt.Sprintf("%s offset %d", c.Partition, c.Offset))
		}
	}
	return out
}
