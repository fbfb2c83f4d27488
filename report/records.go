package report

import (
	"bufio"
	"cmp"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
)

// RecordFilter selects the records --records prints. Empty fields match
// all.
type RecordFilter struct {
	Topics     []string
	Partitions []int32
	// From and To bound the offsets, inclusive, when HasFrom and HasTo
	// are set. Records whose offset is unknown (a Produce without its
	// response) do not match a bound.
	From, To       int64
	HasFrom, HasTo bool
	// Packets, if set, keeps only the exchanges whose request or response
	// completed at one of these packets (a finding's evidence).
	Packets map[PacketRef]bool
	// Ranges, if set, keeps only the records at offsets in one of them
	// (inclusive; a finding's offsets), besides From and To.
	Ranges []OffsetRange
}

// OffsetRange is offsets From to To, inclusive.
type OffsetRange struct{ From, To int64 }

// overlapsRanges reports whether offsets first..last meet one of f's
// Ranges (true without Ranges).
func (f *RecordFilter) overlapsRanges(first, last int64) bool {
	if len(f.Ranges) == 0 {
		return true
	}
	for _, r := range f.Ranges {
		if first <= r.To && last >= r.From {
			return true
		}
	}
	return false
}

// Where --records takes records from (RecordOptions.From).
const (
	// RecordsFromAuto prints each record once: from its Produce where the
	// capture holds it, else from the Fetch. A fetched batch is the
	// produced one when its partition and checksum are those of a batch
	// a Produce request of the capture carried, and its checksum
	// verifies (a batch damaged on the way is printed again).
	RecordsFromAuto = "auto"
	// RecordsFromProduce prints the records of Produce requests only.
	RecordsFromProduce = "produce"
	// RecordsFromFetch prints the records of Fetch responses only.
	RecordsFromFetch = "fetch"
	// RecordsFromBoth prints both: a record produced and consumed in the
	// capture prints twice.
	RecordsFromBoth = "both"
)

// ParseRecordsFrom checks a --records-from value ("" is RecordsFromAuto).
func ParseRecordsFrom(s string) (string, error) {
	switch s {
	case "", RecordsFromAuto:
		return RecordsFromAuto, nil
	case RecordsFromProduce, RecordsFromFetch, RecordsFromBoth:
		return s, nil
	}
	return "", fmt.Errorf("%q: want produce, fetch or both (default: produce where a produce was seen, else fetch)", s)
}

// PacketRef is a packet of one input file.
type PacketRef struct {
	File   int
	Packet uint64
}

// ParseOffsets parses an offset range: "100-200", "100-" (from 100),
// "-200" (up to 200) or "150" (that offset only).
func ParseOffsets(spec string, f *RecordFilter) error {
	spec = strings.TrimSpace(spec)
	from, to, isRange := strings.Cut(spec, "-")
	if !isRange {
		to = from
	}
	var err error
	if from != "" {
		if f.From, err = strconv.ParseInt(from, 10, 64); err != nil || f.From < 0 {
			return fmt.Errorf("offset range %q: want FROM-TO, FROM-, -TO or one offset", spec)
		}
		f.HasFrom = true
	}
	if to != "" {
		if f.To, err = strconv.ParseInt(to, 10, 64); err != nil || f.To < 0 {
			return fmt.Errorf("offset range %q: want FROM-TO, FROM-, -TO or one offset", spec)
		}
		f.HasTo = true
	}
	if !f.HasFrom && !f.HasTo {
		return fmt.Errorf("offset range %q is empty", spec)
	}
	if f.HasFrom && f.HasTo && f.From > f.To {
		return fmt.Errorf("offset range %q ends before it begins", spec)
	}
	return nil
}

// RecordOptions configure a RecordWriter.
type RecordOptions struct {
	Filter RecordFilter
	// Format is the line format (RecordFormatHelp lists its tokens);
	// empty: DefaultRecordFormat. Not used for JSON.
	Format string
	JSON   bool
	// Base64 shows bytes that are not printable text in base64 rather
	// than hex (text output; JSON always uses base64).
	Base64 bool
	// MaxBytes is how many bytes of one key, value or header value are
	// shown (default 4096); the rest is counted, not shown.
	MaxBytes int
	// MaxFrame is the largest request frame kept until its response
	// gives the offsets of the records it produced.
	MaxFrame int
	// Decompress bounds the decompressed records of one batch (default
	// 16 MiB).
	Decompress int
	// Stream flushes the output after each exchange that printed
	// records (a live capture).
	Stream bool
	// From is where records are taken from: RecordsFromAuto (also ""),
	// RecordsFromProduce, RecordsFromFetch or RecordsFromBoth.
	From string
	// HideControl leaves out the control batches' records (transaction
	// markers), which are otherwise shown as COMMIT or ABORT lines.
	HideControl bool
	// ReadCommitted prints records as a read_committed consumer (kcat's
	// default) reads them: a transaction's records when it commits (its
	// EndTxn, or its COMMIT marker in a Fetch), none of an aborted one,
	// none of one not ended in the capture; no markers.
	ReadCommitted bool
}

// DefaultRecordFormat is the line --records prints without
// --records-format.
const DefaultRecordFormat = `%a %t[%p]@%o %T key=%k value=%s headers=%h packet %n\n`

// RecordFormatHelp documents the --records-format tokens.
const RecordFormatHelp = `%t topic, %p partition, %o offset (? when unknown: a Produce without its response), %T timestamp (ms since the epoch), %k key, %K key length (-1 for null), %s value, %S value length, %h headers (key=value,...), %a API (Produce or Fetch), %n packet, %c connection, %i client id, %e the partition's error in the response (or -), \n newline, \t tab, %% percent`

// Bounds of what is shown.
const (
	defaultRecordBytes      = 4096
	defaultRecordDecompress = 16 << 20
	maxRecordHeaders        = 64
)

// RecordStats count what a RecordWriter printed and could not print.
type RecordStats struct {
	Records int64
	Batches int64
	// NotKept are Produce requests whose frame was no longer kept at
	// their response (over flows' bounds): their records are not shown.
	// FirstNotKept is the first one's packet.
	NotKept      int64
	FirstNotKept PacketRef
	// Undecoded are batches whose records could not be listed (some of
	// them, or none): over the decompression bound, malformed, or
	// compressed legacy messages. FirstUndecoded is the first one's
	// packet, UndecodedErr why.
	Undecoded      int64
	FirstUndecoded PacketRef
	UndecodedErr   string
	// Markers are the control records shown (COMMIT, ABORT, ...);
	// HiddenMarkers those left out by HideControl.
	Markers, HiddenMarkers int64
	// Twins are fetched records not printed because a Produce carried
	// their batch (RecordsFromAuto).
	Twins int64
	// With ReadCommitted: Aborted are records of aborted transactions,
	// Open those of transactions not ended in the capture, Overflow those
	// printed before their transaction ended because what waited passed
	// maxPending bytes.
	Aborted, Open, Overflow int64
}

// RecordWriter prints the records of Produce requests and Fetch responses
// as lines of a kcat-like format or as JSON Lines. It is a flows handler:
// Produce records are printed at their exchange, when the response has
// given their offsets (flows keeps the request's frame until then,
// Keeper); Fetch records at theirs. Wire bytes are shown as text when
// they are printable UTF-8 (escaped as report.Clean escapes), else in hex
// or base64; JSON strings are escaped by encoding/json, then what it
// leaves that a terminal acts on by SafeJSON.
type RecordWriter struct {
	w      *bufio.Writer
	opt    RecordOptions
	format []formatPart
	h      *decode.RecordHasher
	err    error
	stats  RecordStats
	line   []byte
	bases  []int64
	codes  []int16
	batch  int
	rec    recordJSON
	hdrs   []headerJSON
	// produced are the batches Produce requests carried, by partition
	// and checksum (RecordsFromAuto), at most maxProduced of them.
	produced map[producedKey]struct{}
	// pending (ReadCommitted) holds the lines of transactional records
	// until their transaction ends, by producer id and partition;
	// into is where lines go while one is written (nil: the output).
	pending      map[txnPart]*pendingLines
	pendingBytes int
	pendingSeq   int64 // numbers the pending lists in the order they began
	into         *pendingLines
}

type txnPart struct {
	pid  int64
	part cluster.Partition // flows.Message.PartitionKey
}

type pendingLines struct {
	buf     []byte
	records int64
	seq     int64 // when its first line waited: lists print in this order
}

// maxPending bounds the bytes of lines waiting for their transaction's
// end; past it the waiting lines are printed (Stats.Overflow).
const maxPending = 64 << 20

// partOf is b's partition as state is kept by it.
func partOf(m *flows.Message, b *flows.BatchRef) cluster.Partition {
	return m.PartitionKey(cluster.Partition{Topic: b.Topic, TopicID: b.TopicID, Num: b.Partition})
}

type producedKey struct {
	part cluster.Partition // flows.Message.PartitionKey
	crc  uint32
}

// maxProduced bounds the produced batches remembered; past it, fetched
// batches of the Produce requests not remembered print again.
const maxProduced = 1 << 20

type formatPart struct {
	lit  string
	verb byte // 0 for a literal
}

// NewRecordWriter returns a writer to w, or an error naming a bad token
// of the format.
func NewRecordWriter(w io.Writer, opt RecordOptions) (*RecordWriter, error) {
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = defaultRecordBytes
	}
	if opt.Decompress <= 0 {
		opt.Decompress = defaultRecordDecompress
	}
	if opt.MaxFrame <= 0 {
		opt.MaxFrame = flows.DefaultConfig().MaxFrame
	}
	opt.Format = cmp.Or(opt.Format, DefaultRecordFormat)
	from, err := ParseRecordsFrom(opt.From)
	if err != nil {
		return nil, err
	}
	opt.From = from
	parts, err := parseRecordFormat(opt.Format)
	if err != nil {
		return nil, err
	}
	return &RecordWriter{w: bufio.NewWriterSize(w, 64<<10), opt: opt, format: parts, h: decode.NewRecordHasher(opt.Decompress),
		hdrs: make([]headerJSON, 0, 8), produced: map[producedKey]struct{}{}, pending: map[txnPart]*pendingLines{}}, nil
}

func parseRecordFormat(s string) ([]formatPart, error) {
	var parts []formatPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, formatPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' && c != '\\' || i == len(s)-1 {
			if c == '%' {
				return nil, errors.New("format ends with a lone %")
			}
			lit.WriteByte(c)
			continue
		}
		i++
		n := s[i]
		if c == '\\' {
			switch n {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case '\\':
				lit.WriteByte('\\')
			default:
				lit.WriteByte('\\')
				lit.WriteByte(n)
			}
			continue
		}
		switch n {
		case '%':
			lit.WriteByte('%')
		case 't', 'p', 'o', 'T', 'k', 'K', 's', 'S', 'h', 'a', 'n', 'c', 'i', 'e':
			flush()
			parts = append(parts, formatPart{verb: n})
		default:
			return nil, fmt.Errorf("unknown format token %%%c (known: %%t %%p %%o %%T %%k %%K %%s %%S %%h %%a %%n %%c %%i %%e %%%%)", n)
		}
	}
	flush()
	return parts, nil
}

// Keep implements flows.Keeper: a Produce request's frame is kept until
// its response gives the offsets of its records.
func (rw *RecordWriter) Keep() []flows.Keep { return []flows.Keep{{Frame: rw.opt.MaxFrame}} }

// Stats returns the counts so far.
func (rw *RecordWriter) Stats() RecordStats { return rw.stats }

// Flush writes out what is buffered and returns the first write error.
// With ReadCommitted, the records of transactions not ended by then are
// dropped (Stats.Open), as a read_committed consumer never reads them.
func (rw *RecordWriter) Flush() error {
	for k, pl := range rw.pending {
		rw.stats.Open += pl.records
		rw.stats.Records -= pl.records
		rw.pendingBytes -= len(pl.buf)
		delete(rw.pending, k)
	}
	if err := rw.w.Flush(); err != nil && rw.err == nil {
		rw.err = err
	}
	return rw.err
}

// OnRequest notes the batches Produce requests carry, so that
// RecordsFromAuto prints their records from the Produce, not again from a
// Fetch (which may come before the Produce's response).
func (rw *RecordWriter) OnRequest(m *flows.Message) {
	if rw.opt.From != RecordsFromAuto || m.Key != 0 {
		return
	}
	for i := range m.Batches {
		if len(rw.produced) >= maxProduced {
			return
		}
		b := &m.Batches[i]
		rw.produced[producedKey{partOf(m, b), b.CRC}] = struct{}{}
	}
}

// OnExchange prints the records of a Produce request (with the offsets
// its response gave) or of a Fetch response.
func (rw *RecordWriter) OnExchange(x *flows.Exchange) {
	if rw.err != nil {
		return
	}
	if f := rw.opt.Filter.Packets; f != nil {
		hit := false
		for _, m := range [2]*flows.Message{x.Req, x.Resp} {
			if m != nil && f[PacketRef{m.File, m.Packet}] {
				hit = true
			}
		}
		if !hit {
			return
		}
	}
	if q := x.Req; q != nil && q.Key == 0 && len(q.Batches) > 0 && rw.opt.From != RecordsFromFetch {
		rw.produce(x)
	}
	if p := x.Resp; p != nil && p.Key == 1 && len(p.Batches) > 0 && rw.opt.From != RecordsFromProduce {
		rw.fetched(p)
	}
	if rw.opt.ReadCommitted && x.Req != nil && x.Resp != nil {
		rw.endTxn(x)
	}
	if rw.opt.Stream && rw.w.Buffered() > 0 && rw.err == nil {
		rw.err = rw.w.Flush()
	}
}

// produce re-reads the request's batches from its kept frame and prints
// their records at the offsets the response gave (unknown without one,
// or when the partition was refused).
func (rw *RecordWriter) produce(x *flows.Exchange) {
	q := x.Req
	if !rw.wantAny(q) {
		return
	}
	rw.bases, rw.codes = rw.bases[:0], rw.codes[:0]
	for range q.Batches {
		rw.bases, rw.codes = append(rw.bases, -1), append(rw.codes, 0)
	}
	flows.ProducedBatches(q, x.Resp, func(i int, _ *flows.BatchRef, base int64, code int16) {
		rw.bases[i], rw.codes[i] = base, code
	})
	frame := q.Frame
	if frame == nil || q.Size-decode.SizeLen > len(frame) {
		rw.notKept(q)
		return
	}
	h, err := decode.ParseRequestHeader(frame)
	if err != nil {
		rw.notKept(q)
		return
	}
	body, err := decode.DecodeRequest(h.Key, h.Version, frame[h.Len:])
	if err != nil || body == nil {
		rw.notKept(q)
		return
	}
	i := 0
	decode.RecordSets(body, func(rs decode.RecordSet) {
		if len(rs.Records) == 0 {
			return
		}
		decode.ScanBatches(rs.Records, func(b *decode.Batch) {
			if i >= len(q.Batches) {
				return
			}
			ref := &q.Batches[i]
			base, code := rw.bases[i], rw.codes[i]
			i++
			if !rw.wantPartition(q, ref) {
				return
			}
			known := base >= 0
			rw.batchRecords(q, ref, b, known, base-b.BaseOffset, code)
		})
	})
}

// fetched prints the records of a Fetch response.
func (rw *RecordWriter) fetched(p *flows.Message) {
	for i := range p.Batches {
		ref := &p.Batches[i]
		if !rw.wantPartition(p, ref) {
			continue
		}
		rw.batchRecords(p, ref, &ref.Batch, true, 0, 0)
	}
}

func (rw *RecordWriter) wantAny(m *flows.Message) bool {
	for i := range m.Batches {
		if rw.wantPartition(m, &m.Batches[i]) {
			return true
		}
	}
	return false
}

func (rw *RecordWriter) wantPartition(m *flows.Message, b *flows.BatchRef) bool {
	f := &rw.opt.Filter
	if len(f.Partitions) > 0 && !slices.Contains(f.Partitions, b.Partition) {
		return false
	}
	if len(f.Topics) > 0 && !slices.Contains(f.Topics, m.TopicName(b.Topic, b.TopicID)) {
		return false
	}
	return true
}

// batchRecords prints the records of one batch; shift moves the offsets
// the batch carries to those the broker gave (a Produce's).
func (rw *RecordWriter) batchRecords(m *flows.Message, ref *flows.BatchRef, b *decode.Batch, known bool, shift int64, code int16) {
	f := &rw.opt.Filter
	if known && (f.HasFrom && b.LastOffset()+shift < f.From || f.HasTo && b.BaseOffset+shift > f.To) {
		return
	}
	if !known && (f.HasFrom || f.HasTo) {
		return
	}
	if !known && len(f.Ranges) > 0 || known && !f.overlapsRanges(b.BaseOffset+shift, b.LastOffset()+shift) {
		return
	}
	topic := m.TopicName(ref.Topic, ref.TopicID)
	if b.Control() {
		rw.control(m, ref, topic, b)
		return
	}
	if m.Key == 1 && rw.opt.From == RecordsFromAuto && b.CRCOK {
		// A fetched batch a Produce of the capture carried: printed there.
		if _, twin := rw.produced[producedKey{partOf(m, ref), b.CRC}]; twin {
			rw.stats.Twins += int64(b.Records)
			return
		}
	}
	rw.stats.Batches++
	if rw.opt.ReadCommitted && b.Transactional() {
		// Held until the transaction ends.
		k := txnPart{b.ProducerID, partOf(m, ref)}
		if rw.pending[k] == nil {
			rw.pendingSeq++
			rw.pending[k] = &pendingLines{seq: rw.pendingSeq}
		}
		rw.into = rw.pending[k]
		defer func() { rw.into = nil; rw.overflow() }()
	}
	err := rw.h.Records(b, func(r *decode.Record) bool {
		off := r.Offset + shift
		if known && (f.HasFrom && off < f.From || f.HasTo && off > f.To || !f.overlapsRanges(off, off)) {
			return true
		}
		rw.stats.Records++
		if rw.into != nil {
			rw.into.records++
		}
		if rw.opt.JSON {
			rw.writeJSON(m, topic, ref.Partition, known, off, code, b, r)
		} else {
			rw.writeText(m, topic, ref.Partition, known, off, code, r)
		}
		return rw.err == nil
	})
	rw.undecoded(m, err)
}

// ControlType names a control record by its key: COMMIT, ABORT or a
// KRaft control type (kmsg's names), CONTROL when the key is not one.
func ControlType(key []byte) string {
	var k kmsg.ControlRecordKey
	if k.ReadFrom(key) != nil {
		return "CONTROL"
	}
	return k.Type.String()
}

// control shows a control batch's records as markers, as the broker wrote
// them: COMMIT or ABORT (or a KRaft control type) with the batch's
// producer id and epoch; or counts them, hidden.
func (rw *RecordWriter) control(m *flows.Message, ref *flows.BatchRef, topic string, b *decode.Batch) {
	part := ref.Partition
	err := rw.h.Records(b, func(r *decode.Record) bool {
		typ := ControlType(r.Key)
		if rw.opt.ReadCommitted {
			// The marker ends its producer's transaction on this partition.
			rw.endPending(txnPart{b.ProducerID, partOf(m, ref)}, typ == "COMMIT")
		}
		if rw.opt.HideControl || rw.opt.ReadCommitted {
			rw.stats.HiddenMarkers++
			return true
		}
		rw.stats.Markers++
		if rw.opt.JSON {
			j := rw.head(m, topic, part, b, r)
			off, pid, epoch := r.Offset, b.ProducerID, b.ProducerEpoch
			j.Offset, j.ProducerID, j.ProducerEpoch, j.Control = &off, &pid, &epoch, typ
			rw.writeJSONLine(j)
			return rw.err == nil
		}
		l := append(rw.line[:0], m.Name()...)
		l = append(l, ' ')
		l = append(l, Clean(topic)...)
		l = fmt.Appendf(l, "[%d]@%d %s producer_id=%d producer_epoch=%d packet %s\n", part, r.Offset, typ, b.ProducerID, b.ProducerEpoch, pkt(m.File, m.Packet))
		rw.line = l
		rw.write(l)
		return rw.err == nil
	})
	rw.undecoded(m, err)
}

// undecoded counts a batch whose records err kept from being listed.
func (rw *RecordWriter) undecoded(m *flows.Message, err error) {
	if err == nil {
		return
	}
	if rw.stats.Undecoded == 0 {
		rw.stats.FirstUndecoded, rw.stats.UndecodedErr = PacketRef{m.File, m.Packet}, err.Error()
	}
	rw.stats.Undecoded++
}

func (rw *RecordWriter) notKept(q *flows.Message) {
	if rw.stats.NotKept == 0 {
		rw.stats.FirstNotKept = PacketRef{q.File, q.Packet}
	}
	rw.stats.NotKept++
}

func (rw *RecordWriter) writeText(m *flows.Message, topic string, part int32, known bool, off int64, code int16, r *decode.Record) {
	l := rw.line[:0]
	for _, p := range rw.format {
		switch p.verb {
		case 0:
			l = append(l, p.lit...)
		case 't':
			l = append(l, Clean(topic)...)
		case 'p':
			l = strconv.AppendInt(l, int64(part), 10)
		case 'o':
			if known {
				l = strconv.AppendInt(l, off, 10)
			} else {
				l = append(l, '?')
			}
		case 'T':
			l = strconv.AppendInt(l, r.Timestamp, 10)
		case 'k':
			l = rw.appendBytes(l, r.Key)
		case 'K':
			l = strconv.AppendInt(l, nullableLen(r.Key), 10)
		case 's':
			l = rw.appendBytes(l, r.Value)
		case 'S':
			l = strconv.AppendInt(l, nullableLen(r.Value), 10)
		case 'h':
			for i, h := range r.Headers {
				if i == maxRecordHeaders {
					l = fmt.Appendf(l, ",…%d more", len(r.Headers)-i)
					break
				}
				if i > 0 {
					l = append(l, ',')
				}
				l = rw.appendBytes(l, h.Key)
				l = append(l, '=')
				l = rw.appendBytes(l, h.Value)
			}
		case 'a':
			l = append(l, m.Name()...)
		case 'n':
			l = append(l, pkt(m.File, m.Packet)...)
		case 'c':
			l = strconv.AppendInt(l, int64(m.Conn.ID), 10)
		case 'i':
			l = append(l, Clean(m.Client.ID)...)
		case 'e':
			if code != 0 {
				l = append(l, decode.ErrorName(code)...)
			} else {
				l = append(l, '-')
			}
		}
	}
	rw.line = l
	rw.write(l)
}

func nullableLen(b []byte) int64 {
	if b == nil {
		return -1
	}
	return int64(len(b))
}

// printable reports whether b is UTF-8 text a person can read: no
// control characters but tab, newline and carriage return.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r == '\t' || r == '\n' || r == '\r' {
			continue
		}
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// appendBytes shows wire bytes: printable text escaped as Clean does
// (so that no byte can drive the terminal), other bytes in hex or base64
// ("0x…" or "base64:…"), at most MaxBytes of them, "(null)" for null.
func (rw *RecordWriter) appendBytes(l, b []byte) []byte {
	return appendRecordBytes(l, b, rw.opt.MaxBytes, rw.opt.Base64)
}

// RecordBytes shows a record's key, value or header value as --records
// does: printable text escaped as Clean escapes it, other bytes as "0x"
// and hex (or "base64:" and base64), at most max bytes, "(null)" for
// null. The result is safe for a terminal.
func RecordBytes(b []byte, max int, base64 bool) string {
	return string(appendRecordBytes(nil, b, max, base64))
}

func appendRecordBytes(l, b []byte, max int, b64 bool) []byte {
	if b == nil {
		return append(l, "(null)"...)
	}
	shown := cutBytes(b, max)
	switch {
	case printable(shown):
		l = append(l, clean(string(shown), max, true)...)
	case b64:
		l = append(l, "base64:"...)
		l = base64.StdEncoding.AppendEncode(l, shown)
	default:
		l = append(l, "0x"...)
		l = hex.AppendEncode(l, shown)
	}
	if len(shown) < len(b) {
		l = fmt.Appendf(l, "…(%d bytes)", len(b))
	}
	return l
}

// cutBytes cuts b to at most max bytes, at a rune's start when the cut
// would split a UTF-8 sequence (so that text stays text).
func cutBytes(b []byte, max int) []byte {
	if len(b) <= max {
		return b
	}
	n := max
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(b[n]); i++ {
		n--
	}
	return b[:n]
}

// recordJSON is one line of --records --json.
type recordJSON struct {
	API       string `json:"api"`
	File      int    `json:"file"`
	Packet    uint64 `json:"packet"`
	Conn      int    `json:"conn"`
	Time      string `json:"time"`
	ClientID  string `json:"client_id,omitempty"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is null when unknown (a Produce without its response, or
	// refused: Error).
	Offset    *int64       `json:"offset"`
	Timestamp int64        `json:"timestamp"`
	Codec     string       `json:"codec"`
	Key       *string      `json:"key"`
	KeyB64    string       `json:"key_base64,omitempty"`
	KeySize   int64        `json:"key_size"`
	Value     *string      `json:"value"`
	ValueB64  string       `json:"value_base64,omitempty"`
	ValueSize int64        `json:"value_size"`
	Headers   []headerJSON `json:"headers"`
	Truncated bool         `json:"truncated,omitempty"`
	// BadCRC marks a record of a batch whose checksum does not verify.
	BadCRC bool   `json:"bad_crc,omitempty"`
	Error  string `json:"error,omitempty"`
	// Control is the type of a control record (a transaction marker:
	// COMMIT, ABORT), with its batch's producer id and epoch; absent for
	// data records.
	Control       string `json:"control,omitempty"`
	ProducerID    *int64 `json:"producer_id,omitempty"`
	ProducerEpoch *int16 `json:"producer_epoch,omitempty"`
}

type headerJSON struct {
	Key      string  `json:"key"`
	Value    *string `json:"value"`
	ValueB64 string  `json:"value_base64,omitempty"`
}

// jsonBytes sets text (printable UTF-8) or b64 (any other bytes) from b,
// cut to max bytes; both unset for null.
func jsonBytes(b []byte, max int) (text *string, b64 string, cut bool) {
	if b == nil {
		return nil, "", false
	}
	if len(b) > max {
		b, cut = cutBytes(b, max), true
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, "", cut
	}
	return nil, base64.StdEncoding.EncodeToString(b), cut
}

// head is record r's JSON line with what every line says, in rw.rec.
func (rw *RecordWriter) head(m *flows.Message, topic string, part int32, b *decode.Batch, r *decode.Record) *recordJSON {
	rw.rec = recordJSON{API: m.Name(), File: m.File, Packet: m.Packet, Conn: m.Conn.ID, Time: m.Time.UTC().Format(time.RFC3339Nano),
		ClientID: m.Client.ID, Topic: topic, Partition: part, Timestamp: r.Timestamp, Codec: b.Codec().String(), BadCRC: !b.CRCOK,
		KeySize: nullableLen(r.Key), ValueSize: nullableLen(r.Value), Headers: rw.hdrs[:0]}
	return &rw.rec
}

func (rw *RecordWriter) writeJSON(m *flows.Message, topic string, part int32, known bool, off int64, code int16, b *decode.Batch, r *decode.Record) {
	j := rw.head(m, topic, part, b, r)
	if known {
		j.Offset = &off
	}
	if code != 0 {
		j.Error = decode.ErrorName(code)
	}
	var c1, c2 bool
	j.Key, j.KeyB64, c1 = jsonBytes(r.Key, rw.opt.MaxBytes)
	j.Value, j.ValueB64, c2 = jsonBytes(r.Value, rw.opt.MaxBytes)
	j.Truncated = c1 || c2
	for i, h := range r.Headers {
		if i == maxRecordHeaders {
			j.Truncated = true
			break
		}
		hj := headerJSON{Key: string(h.Key)}
		var c bool
		hj.Value, hj.ValueB64, c = jsonBytes(h.Value, rw.opt.MaxBytes)
		j.Truncated = j.Truncated || c
		j.Headers = append(j.Headers, hj)
	}
	rw.hdrs = j.Headers[:0]
	rw.writeJSONLine(j)
}

// writeJSONLine writes j as a line of JSON.
func (rw *RecordWriter) writeJSONLine(j *recordJSON) {
	line, err := json.Marshal(j)
	if err != nil {
		rw.err = err
		return
	}
	// encoding/json leaves C1 controls and bidi overrides raw.
	line = append(SafeJSON(line), '\n')
	rw.write(line)
}

// write puts a line out, or with the lines waiting for their
// transaction's end.
func (rw *RecordWriter) write(l []byte) {
	if rw.into != nil {
		rw.into.buf = append(rw.into.buf, l...)
		rw.pendingBytes += len(l)
		return
	}
	if _, err := rw.w.Write(l); err != nil && rw.err == nil {
		rw.err = err
	}
}

// endTxn ends the transactions of an EndTxn answered without error:
// its producer's waiting records printed when it committed, dropped
// when it aborted.
func (rw *RecordWriter) endTxn(x *flows.Exchange) {
	q, ok := x.Req.Req.(*kmsg.EndTxnRequest)
	if !ok {
		return
	}
	if p, ok := x.Resp.Resp.(*kmsg.EndTxnResponse); !ok || p.ErrorCode != 0 {
		return
	}
	for _, k := range rw.pendingInOrder(func(k txnPart) bool { return k.pid == q.ProducerID }) {
		rw.endPending(k, q.Commit)
	}
}

// pendingInOrder returns the keys of the waiting lists that keep asks
// for, in the order their first lines waited: a transaction over several
// partitions prints the same way every run (map order did not).
func (rw *RecordWriter) pendingInOrder(keep func(txnPart) bool) []txnPart {
	var ks []txnPart
	for k := range rw.pending {
		if keep(k) {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(a, b txnPart) int { return cmp.Compare(rw.pending[a].seq, rw.pending[b].seq) })
	return ks
}

// endPending prints (commit) or drops the records waiting for k.
func (rw *RecordWriter) endPending(k txnPart, commit bool) {
	pl := rw.pending[k]
	if pl == nil {
		return
	}
	delete(rw.pending, k)
	rw.pendingBytes -= len(pl.buf)
	if !commit {
		rw.stats.Aborted += pl.records
		rw.stats.Records -= pl.records
		return
	}
	if _, err := rw.w.Write(pl.buf); err != nil && rw.err == nil {
		rw.err = err
	}
}

// overflow prints every waiting line when they pass maxPending bytes.
func (rw *RecordWriter) overflow() {
	if rw.pendingBytes <= maxPending {
		return
	}
	for _, k := range rw.pendingInOrder(func(txnPart) bool { return true }) {
		rw.stats.Overflow += rw.pending[k].records
		rw.endPending(k, true)
	}
}

// SetFinding narrows the records to those behind a finding: the
// exchanges of its evidence packets, and its topic and partition where
// the command line did not choose them.
func (rw *RecordWriter) SetFinding(f RecordFilter) {
	flt := &rw.opt.Filter
	flt.Packets = f.Packets
	if len(flt.Topics) == 0 {
		flt.Topics = f.Topics
	}
	if len(flt.Partitions) == 0 {
		flt.Partitions = f.Partitions
	}
	flt.Ranges = f.Ranges
	if f.Packets != nil {
		// The finding names exchanges: each one's records, wherever
		// they were seen.
		rw.opt.From = RecordsFromBoth
	}
}
