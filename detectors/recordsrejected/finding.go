package recordsrejected

import (
	"fmt"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one client whose records a broker refused for good. Its
// exported fields are the finding's "fields".
type Finding struct {
	ClientID   string   `json:"client_id"`
	Host       string   `json:"host"`
	Errors     []string `json:"errors"`
	Servers    []string `json:"servers"`
	Partitions []string `json:"partitions"`
	Answers    int64    `json:"answers" count:"refused_answers"`
	Batches    int64    `json:"batches" count:"batches_refused"`
	Records    int64    `json:"records" count:"records_refused"`
	Bytes      int64    `json:"bytes" count:"bytes_refused"`
	// Resent counts refused batches the client had sent before (the same
	// checksum and length): retries, counted once in Batches and Records.
	Resent int64 `json:"resent,omitempty"`
	// SmallestTooLarge and LargestRefused are the smallest payload
	// (bytes of one partition's batches) refused MESSAGE_TOO_LARGE and the
	// largest refused; LargestAccepted the largest payload the same
	// topics accepted, when smaller than SmallestTooLarge (0: not seen).
	SmallestTooLarge int64 `json:"smallest_too_large,omitempty"`
	LargestRefused   int64 `json:"largest_refused"`
	LargestAccepted  int64 `json:"largest_accepted,omitempty"`
	// LimitBytes is the size limit the capture names (0: not named), and
	// LimitFrom where it was read.
	LimitBytes    int64  `json:"limit_bytes,omitempty"`
	LimitFrom     string `json:"limit_from,omitempty"`
	BrokerMessage string `json:"broker_message,omitempty"`
	// Ongoing: no write of the client was accepted after its last
	// refusal; WrittenAfter counts the partition writes accepted after a
	// refusal.
	Ongoing      bool  `json:"ongoing"`
	WrittenAfter int64 `json:"written_after"`

	Codes        []string
	First, Last  time.Time
	ServerLabels []string
	MoreParts    int64
	Dropped      int64
	sev          detectors.Severity
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("client %q on %s: %s refused for good (%s) by %s: %s, %s lost",
		f.ClientID, f.Host, text.Plural(f.Batches, "batch", "batches"), strings.Join(f.Errors, ", "),
		text.List(f.ServerLabels, 3), text.List(f.Partitions, 3), text.Plural(f.Records, "record", "records"))
	if l := f.limit(); l != "" {
		s += "; " + l
	}
	return s
}

// limit says what is known of the size limit.
func (f *Finding) limit() string {
	switch {
	case f.LimitBytes > 0:
		return fmt.Sprintf("limit %d bytes (%s)", f.LimitBytes, f.LimitFrom)
	case f.LargestAccepted > 0 && f.SmallestTooLarge > 0:
		return fmt.Sprintf("limit between %d and %d bytes", f.LargestAccepted, f.SmallestTooLarge)
	case f.SmallestTooLarge > 0:
		return fmt.Sprintf("limit at most %d bytes", f.SmallestTooLarge)
	}
	return ""
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Between %s and %s, %d Produce answer(s) to client id %q on %s refused %s (%s, %d bytes): %s. ",
		text.Clock(f.First), text.Clock(f.Last), f.Answers, f.ClientID, f.Host, text.Plural(f.Batches, "batch", "batches"),
		text.Plural(f.Records, "record", "records"), f.Bytes, strings.Join(f.Codes, ", "))
	b.WriteString("No retry mends these errors: the broker will refuse the same bytes again, so the client fails the " +
		"records back to the application, and unless the application keeps them and sends them differently, they " +
		"are lost. ")
	if f.Resent > 0 {
		fmt.Fprintf(&b, "%s refused again and again were the same bytes sent again (a retry, or a split that "+
			"left the batch as it was: the Java producer splits a refused batch by batch.size, which does not shrink a "+
			"batch already under it, and re-sends it until delivery.timeout.ms), counted once. ",
			text.Plural(f.Resent, "batch", "batches"))
	}
	for _, e := range f.Errors {
		switch e {
		case "MESSAGE_TOO_LARGE":
			b.WriteString("MESSAGE_TOO_LARGE: a batch larger than the topic's max.message.bytes (the broker's " +
				"message.max.bytes by default, 1048588); the producer's max.request.size (Java), message.max.bytes " +
				"(librdkafka) or batch size allows more than the broker takes. ")
			if l := f.limit(); l != "" {
				b.WriteString("The capture shows the " + l + "; the largest batch refused was " + fmt.Sprint(f.LargestRefused) + " bytes. ")
			}
		case "RECORD_LIST_TOO_LARGE":
			b.WriteString("RECORD_LIST_TOO_LARGE: the request's record set exceeds the broker's segment size. ")
		case "INVALID_RECORD", "CORRUPT_MESSAGE":
			b.WriteString(e + ": the broker could not validate the batch (a bad CRC, a compacted topic's record without " +
				"a key, a malformed record); a client bug or corruption on the way. ")
		case "INVALID_TIMESTAMP":
			b.WriteString("INVALID_TIMESTAMP: a record's timestamp lies outside the topic's message.timestamp." +
				"before/after.max.ms window (CreateTime): a producer clock far off, or timestamps set by the application. ")
		case "UNSUPPORTED_COMPRESSION_TYPE":
			b.WriteString("UNSUPPORTED_COMPRESSION_TYPE: the codec is not allowed at this request version (zstd needs Produce v7). ")
		}
	}
	if f.BrokerMessage != "" {
		b.WriteString("The broker said: " + f.BrokerMessage + ". ")
	}
	if f.Ongoing {
		b.WriteString("No write of this client was accepted after its last refusal.")
	} else {
		fmt.Fprintf(&b, "%d partition write(s) of this client were accepted after a refusal: smaller records got through.", f.WrittenAfter)
	}
	if f.MoreParts > 0 {
		fmt.Fprintf(&b, " (%d refusals on further partitions are not named.)", f.MoreParts)
	}
	if f.Dropped > 0 {
		fmt.Fprintf(&b, " (%d refusals to further clients were not followed: too many clients.)", f.Dropped)
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	for _, e := range f.Errors {
		if e == "MESSAGE_TOO_LARGE" {
			topic := "<topic>"
			if len(f.Partitions) > 0 {
				if i := strings.LastIndexByte(f.Partitions[0], '-'); i > 0 {
					topic = f.Partitions[0][:i]
				}
			}
			return fmt.Sprintf("kafka-configs.sh --bootstrap-server <broker> --describe --entity-type topics --entity-name %s "+
				"--all | grep max.message.bytes shows the topic's limit; make the producer's max.request.size (Java), "+
				"message.max.bytes (librdkafka) or batch size no larger, or raise max.message.bytes (and the consumers' "+
				"max.partition.fetch.bytes with it). The application's log has the failed records "+
				"(RecordTooLargeException, kerr.MessageTooLarge): they were not written.", topic)
		}
	}
	return "The application's log has the failed sends with this error: they were not written. Check the producer's " +
		"version and settings (compression, timestamps, keys on compacted topics) against the broker's, and " +
		"kfsniff --records --finding N for the refused batches."
}
