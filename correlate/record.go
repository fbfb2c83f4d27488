// Package correlate reads back what kfsniff agents ship with --export
// (docs/export.md, schema versions 1 to 3) and estimates what only several
// hosts' records together show: the clock skew between the agents, and
// the producer-to-consumer latency of the same batch across hosts.
//
// What a consumer of the export topic can rely on:
//
//   - Parse turns one record's value into a Record, or an error. An error
//     is either ErrVersion (a "v" other than 1, or none) or malformed JSON
//     or a field of the wrong type (ErrMalformed): the caller counts it as
//     a warning and goes on. Unknown fields are skipped (fields may be
//     added within version 1); an unknown "type" is not an error, the
//     Record comes back with that Type and no more than the common fields
//     filled in, for the caller to ignore.
//   - A Record holds every field docs/export.md lists. A field the
//     document says may be absent, where zero is a valid value, is an
//     Opt (Set false when absent); JSON null reads as absent. Strings
//     absent read as "" (the document never gives "" a meaning of its
//     own, except client_id and txn_id, which are Opts). A finding's
//     object is kept as its JSON bytes (Record.Finding): detectors.Severity
//     has no UnmarshalText, so decoding it into a detectors.Finding takes
//     a type of the caller's.
//   - Parse keeps no reference to its input: the caller may reuse the
//     buffer (a kgo record's Value) at once. It is safe for concurrent
//     use; a Record is a plain value.
//   - Stats (stats.go) is the single entry point for the estimates:
//     NewStats(Limits{}), then Add for every record Parse returned and
//     Unreadable for every error it returned, then Section for the
//     report's correlation section (report.Correlation; it may be called
//     again later, Stats goes on). Records may come in any order within
//     bounded windows (per agent for the clocks, across partitions for
//     the batches): reading the export topic's partitions as they come,
//     or merged by time, both do. Memory is bounded whatever the records
//     say. Stats, Skew and E2E are not safe for concurrent use: one
//     goroutine adds, or the caller locks.
//   - Skew (clock offsets) and E2E (producer-to-consumer latency) are
//     Stats' parts, usable alone; Stats.Skew().Offset(agent) gives an
//     agent's offset from the reference agent's clock for a caller that
//     wants to put another agent's times on one clock (cheap enough for
//     every record: the estimates are cached, computed again as samples
//     grow; the reference agent, once chosen, stays).
package correlate

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/kfsniff/kfsniff/decode"
)

// SchemaVersion is the latest version of the records this package
// reads; it reads every version from MinSchemaVersion on (version 2
// added the bodies, ReqBody and RespBody; version 3 the batches' record
// fingerprints, Batch.Prints).
const (
	SchemaVersion    = 3
	MinSchemaVersion = 1
)

// The record types (the "type" field).
const (
	TypeExchange = "exchange"
	TypeConn     = "conn"
	// EventEnd is the event of the connection record that tells where
	// an agent's capture ended (ts_ns) and began (first_ns).
	EventEnd    = "end"
	TypeFinding = "finding"
)

// Errors of Parse, wrapped with the detail (errors.Is tells them apart).
var (
	// ErrVersion: the record's "v" is not one this package reads (or
	// missing).
	ErrVersion = errors.New("not a schema version 1, 2 or 3 record")
	// ErrMalformed: not a JSON object, or a known field of the wrong
	// type or out of its range.
	ErrMalformed = errors.New("malformed record")
)

// The bounds of a record (issue 31: the export topic is written by
// anyone with access to it). A record over MaxRecordBytes, with more than
// MaxBatches batches or MaxErrors error codes is refused (ErrTooLarge);
// a string longer than MaxString bytes (MaxAgent for agent) is cut
// there (Record.Clipped counts the strings cut); an exchange or connection event whose ts_ns or
// end_ns is before 1970 or from 2100 on, or whose latency_ns is
// negative by more than an hour or longer than a week, is refused
// (ErrTime): the difference of any two times accepted fits a
// time.Duration (records at the ends of int64 gave a finding of clients
// waiting 2561451h, in 1677). A record with more than MaxPrints record
// fingerprints is refused (ErrTooLarge). So a record decodes to at most about 475 KiB besides its own bytes whatever it says
// (TestParseBounds, FuzzParse's size invariant).
const (
	MaxRecordBytes = 1 << 20
	MaxBatches     = 512   // the exporter's maxBatchesPerRecord
	MaxPrints      = 16384 // the exporter's MaxPrints
	MaxErrors      = 256   // Kafka has about 140 error codes
	MaxString      = 1024
	MaxBody        = 256 << 10                       // the exporter's maxBody
	MaxAgent       = 255                             // a host name's bound: agents name tables' keys
	minTS          = 0                               // 1970-01-01 (0: absent)
	maxTS          = 4102444800 * int64(time.Second) // 2100-01-01
	minLatency     = -int64(time.Hour)
	maxLatency     = 7 * 24 * int64(time.Hour)
)

// ErrTooLarge and ErrTime are the ErrMalformed records refused for a
// bound (errors.Is tells them apart, and both are ErrMalformed).
var (
	ErrTooLarge = fmt.Errorf("%w: over a bound", ErrMalformed)
	ErrTime     = fmt.Errorf("%w: time out of range", ErrMalformed)
)

// Opt is a field the schema may leave out where zero means something.
type Opt[T any] struct {
	V   T
	Set bool
}

// Record is one shipped record of schema version 1, exchange, connection
// event or finding. The JSON name of each field is in its comment; see
// docs/export.md for what each means.
type Record struct {
	V     int    // v
	Type  string // type: TypeExchange, TypeConn, TypeFinding or one a later agent added
	Agent string // agent
	// Run and Seq are the record's identity within its agent ("" and 0
	// from agents before them): a record read again has all three equal.
	Run     string // run
	Seq     int64  // seq
	Cluster string // cluster ("" when unknown)
	TS      int64  // ts_ns: Unix nanoseconds, the agent's clock (exchanges and connection events)
	// Latency is latency_ns, set only when request and response were
	// both captured.
	Latency  Opt[int64]
	Conn     int    // conn, from 1 (0: absent, a refusal or unanswered SYN)
	Client   string // client: "IP:PORT" or "[IPv6]:PORT"
	Server   string // server
	Node     Opt[int32]
	ClientID Opt[string] // client_id ("" for null; absent on a connection event before any request)
	API      int16       // api
	Ver      int16       // ver
	Corr     int32       // corr
	Role     string      // role ("" when absent: connection set-up)
	Status   string      // status: answered, unanswered, no_response, one_sided, unmatched
	// End is end_ns, set only on an unanswered record of a request still
	// waiting when the agent's capture ended: the capture's end, Unix
	// nanoseconds, the agent's clock (absent from older agents' records).
	End      Opt[int64]
	ConnGaps int         // conn_gaps: holes the connection had lost in the capture by then (0: absent)
	ReqPkt   int64       // req_pkt (0: absent, no request captured)
	RespPkt  int64       // resp_pkt (0: absent, no response captured)
	File     int         // file: the -r file's index (0: the first, or absent)
	Replica  Opt[int32]  // replica: Fetch and ListOffsets
	MaxWait  Opt[int32]  // max_wait_ms: Fetch's MaxWaitMillis (absent from older agents' records)
	Throttle Opt[int32]  // throttle_time_ms: a response's non-zero throttle time (absent when 0, and from older agents' records)
	Acks     Opt[int16]  // acks: Produce
	TxnID    Opt[string] // txn_id: Produce
	Group    string      // group: OffsetCommit
	// PrintFn names the function of the batches' record fingerprints
	// (fp_fn, schema 3: decode.PrintFunc); "" when the agent shipped none.
	PrintFn string
	// Errors are the error codes of an exchange not split by partition.
	Errors []ErrorCount // errors
	// ReqBody and RespBody are the request's and response's bodies as
	// Kafka encodes them at Ver, decoded from base64 (req_body,
	// resp_body; schema 2): a split record's without its topics.
	ReqBody, RespBody []byte

	// The fields of a record split by partition (Parts > 0).
	Parts            int        // parts: the records the exchange was split into (0: not split)
	BatchIndex       Opt[int]   // batch_index: the index of Batches[0] among the partition's, when they took several records
	Topic            string     // topic
	TopicID          string     // topic_id: the topic's id in base64, when the wire named it by id
	Partition        int32      // partition
	FetchOffset      Opt[int64] // fetch_offset
	Timestamp        Opt[int64] // timestamp: ListOffsets
	Offset           Opt[int64] // offset: ListOffsets
	CommittedOffset  Opt[int64] // committed_offset: OffsetCommit
	OffsetEpoch      Opt[int32] // offset_leader_epoch
	Error            Opt[int16] // error
	HighWatermark    Opt[int64] // high_watermark
	LastStableOffset Opt[int64] // last_stable_offset
	LogStartOffset   Opt[int64] // log_start_offset
	BaseOffset       Opt[int64] // base_offset: Produce
	Leader           Opt[int32] // leader
	LeaderEpoch      Opt[int32] // leader_epoch
	Batches          []Batch    // batches

	// A connection event's fields (and Conn, Client, Server, ClientID,
	// Cluster, TS, File above).
	Event string // event: opened, closed, recognised, refused, syn-unanswered, end
	// First is first_ns of an "end" event: the capture's first packet
	// (its ts_ns the last), Unix nanoseconds, the agent's clock.
	First    Opt[int64]
	Attempts int   // attempts (0: absent)
	Pkt      int64 // pkt
	// Handshake and MidStream: an opening whose SYN was captured, or of
	// a connection open before the capture began (schema 2).
	Handshake, MidStream bool // handshake, midstream
	// Last is last_ns on a "closed" event: the connection's last packet,
	// Unix nanoseconds, the agent's clock (schema 2).
	Last Opt[int64]

	// A finding's fields.
	State string // state: raised or final
	// Finding is the finding object as shipped (json.md's finding),
	// its own copy of the bytes, for json.Unmarshal.
	Finding []byte // finding

	// Clipped counts the strings cut to MaxString.
	Clipped int
}

// ErrorCount is one of an exchange's error codes and how often it came.
type ErrorCount struct {
	Code  int16
	Count int64
}

// Batch is one record batch header of a partition record.
type Batch struct {
	// Offset is a Produce batch's log offset (-1 when the partition was
	// refused); BaseOffset a Fetch batch's header base offset. A batch
	// has one or the other.
	Offset          Opt[int64] // offset
	BaseOffset      Opt[int64] // base_offset
	LastOffsetDelta int32      // last_offset_delta
	Records         int32      // records
	CRC             uint32     // crc
	// CRCBad is true when the batch's bytes did not match its CRC
	// ("crc_ok": false).
	CRCBad bool
	// ComputedCRC is the checksum of the batch's bytes when they did not
	// match CRC ("crc_computed"), 0 if not shipped.
	ComputedCRC   uint32
	Magic         int8  // magic
	LeaderEpoch   int32 // leader_epoch
	ProducerID    int64 // producer_id
	ProducerEpoch int16 // producer_epoch
	BaseSequence  int32 // base_sequence
	Attributes    int16 // attributes
	Bytes         int32 // bytes
	FirstTS       int64 // first_ts: Unix milliseconds
	MaxTS         int64 // max_ts
	// Prints are the records' fingerprints (fp, with fp_deltas: schema
	// 3), 128 bits each in Sum and Hi; PrintErr (fp_err) says why a
	// batch whose records could be compared has none.
	Prints   []decode.RecordHash
	PrintErr string
}

// Parse reads one record (a kgo record's Value). It keeps no reference to
// b. See the package documentation for its errors.
func Parse(b []byte) (Record, error) {
	var r Record
	if len(b) > MaxRecordBytes {
		return r, fmt.Errorf("%w: %d bytes, over %d", ErrTooLarge, len(b), MaxRecordBytes)
	}
	d := decoder{b: b, r: &r}
	d.record(&r)
	if d.err == nil {
		d.ws()
		if d.i != len(d.b) {
			d.fail("data after the object")
		}
	}
	if d.err != nil {
		return Record{}, d.err
	}
	if !d.hasV || r.V < MinSchemaVersion || r.V > SchemaVersion {
		if !d.hasV {
			return Record{}, fmt.Errorf("%w: no \"v\"", ErrVersion)
		}
		return Record{}, fmt.Errorf("%w: v %d", ErrVersion, r.V)
	}
	if r.Type == "" {
		return Record{}, fmt.Errorf("%w: no \"type\"", ErrMalformed)
	}
	if r.Type == TypeExchange || r.Type == TypeConn {
		switch {
		case r.TS < minTS || r.TS >= maxTS:
			return Record{}, fmt.Errorf("%w: ts_ns %d is not in the years 1970-2099", ErrTime, r.TS)
		case r.Last.Set && (r.Last.V < minTS || r.Last.V >= maxTS):
			return Record{}, fmt.Errorf("%w: last_ns %d is not in the years 1970-2099", ErrTime, r.Last.V)
		case r.First.Set && (r.First.V < minTS || r.First.V >= maxTS):
			return Record{}, fmt.Errorf("%w: first_ns %d is not in the years 1970-2099", ErrTime, r.First.V)
		case r.End.Set && (r.End.V < minTS || r.End.V >= maxTS):
			return Record{}, fmt.Errorf("%w: end_ns %d is not in the years 1970-2099", ErrTime, r.End.V)
		case r.Latency.Set && (r.Latency.V < minLatency || r.Latency.V > maxLatency):
			return Record{}, fmt.Errorf("%w: latency_ns %d is not within -1h and 168h", ErrTime, r.Latency.V)
		}
	}
	return r, nil
}

// Size is about how many bytes the record holds (FuzzParse's invariant).
func (r *Record) Size() int {
	n := int(unsafe.Sizeof(*r)) + len(r.Batches)*int(unsafe.Sizeof(Batch{})) + len(r.Errors)*int(unsafe.Sizeof(ErrorCount{})) + len(r.Finding) +
		len(r.ReqBody) + len(r.RespBody) + len(r.PrintFn)
	for i := range r.Batches {
		n += len(r.Batches[i].Prints)*int(unsafe.Sizeof(decode.RecordHash{})) + len(r.Batches[i].PrintErr)
	}
	for _, s := range []string{r.Type, r.Agent, r.Run, r.Cluster, r.Client, r.Server, r.ClientID.V, r.Role, r.Status, r.TxnID.V,
		r.Group, r.Topic, r.TopicID, r.Event, r.State} {
		n += len(s)
	}
	return n
}

// decoder is a JSON reader for the shapes of the schema: one pass, no
// reflection, strings allocated only for the fields kept. encoding/json
// into a struct cost about four times as much (BenchmarkParse).
type decoder struct {
	b    []byte
	i    int
	err  error
	hasV bool
	r    *Record // for its Clipped
	// prints counts the record's fingerprints so far (MaxPrints).
	prints int
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", ErrMalformed, what, d.i)
	}
}

// bound refuses the record for holding more than n of what.
func (d *decoder) bound(what string, n int) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: more than %d %s at byte %d", ErrTooLarge, n, what, d.i)
	}
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek is the next byte after white space, 0 at the end.
func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *decoder) lit(s string) bool {
	if d.err != nil {
		return false
	}
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	d.fail("want " + s)
	return false
}

// null consumes a null if one is next.
func (d *decoder) null() bool {
	if d.peek() == 'n' {
		return d.lit("null")
	}
	return false
}

// object calls field for each key of an object, positioned at its value,
// which field must consume (skip, or a typed read).
func (d *decoder) object(field func(key []byte)) {
	d.seq('{', '}', "want an object", "want ',' or '}'", func() {
		if d.peek() != '"' {
			d.fail("want a key")
			return
		}
		k := d.rawString()
		if d.peek() != ':' {
			d.fail("want ':'")
			return
		}
		d.i++
		d.ws()
		field(k)
	})
}

// array calls elem for each element of an array (null: none).
func (d *decoder) array(elem func()) {
	if d.null() {
		return
	}
	d.seq('[', ']', "want an array", "want ',' or ']'", func() {
		d.ws()
		elem()
	})
}

// seq reads what an object and an array share: open, then items
// separated by commas up to close; item reads one.
func (d *decoder) seq(open, close byte, notOpen, notSep string, item func()) {
	if d.peek() != open {
		d.fail(notOpen)
		return
	}
	d.i++
	if d.peek() == close {
		d.i++
		return
	}
	for d.err == nil {
		item()
		if d.err != nil {
			return
		}
		switch d.peek() {
		case ',':
			d.i++
		case close:
			d.i++
			return
		default:
			d.fail(notSep)
		}
	}
}

// rawString returns a string's bytes as they are in the input, escapes
// and all, for comparing keys (the schema's keys have none).
func (d *decoder) rawString() []byte {
	start := d.i + 1
	end, _ := d.scanString()
	if d.err != nil {
		return nil
	}
	return d.b[start : end-1]
}

// scanString moves past a string, checking its escapes, and says whether
// it has escapes or bytes that are not plain ASCII.
func (d *decoder) scanString() (end int, special bool) {
	i := d.i + 1
	for i < len(d.b) {
		c := d.b[i]
		switch {
		case c == '"':
			d.i = i + 1
			return d.i, special
		case c == '\\':
			special = true
			if i+1 >= len(d.b) {
				d.fail("unterminated string")
				return 0, false
			}
			switch d.b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d.b) || !isHex4(d.b[i+2:i+6]) {
					d.i = i
					d.fail("bad \\u escape")
					return 0, false
				}
				i += 6
			default:
				d.i = i
				d.fail("bad escape")
				return 0, false
			}
		case c < 0x20:
			d.i = i
			d.fail("control character in string")
			return 0, false
		default:
			if c >= utf8.RuneSelf {
				special = true
			}
			i++
		}
	}
	d.fail("unterminated string")
	return 0, false
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// quoted reads a string value as it stands, quotes included, and whether
// it holds escapes or bytes past ASCII; ok is false for null or an error.
func (d *decoder) quoted() (q []byte, special, ok bool) {
	if d.null() {
		return nil, false, false
	}
	if d.peek() != '"' {
		d.fail("want a string")
		return nil, false, false
	}
	start := d.i
	end, special := d.scanString()
	if d.err != nil {
		return nil, false, false
	}
	return d.b[start:end], special, true
}

// bytesString reads a string value unescaped; ok is false for null or an
// error.
func (d *decoder) bytesString() ([]byte, bool) {
	q, special, ok := d.quoted()
	switch {
	case !ok:
		return nil, false
	case special:
		return []byte(unquote(q)), true
	}
	return q[1 : len(q)-1], true
}

// str reads a string value (null reads as "", absent).
func (d *decoder) str() (string, bool) {
	q, special, ok := d.quoted()
	if !ok {
		return "", false
	}
	if !special {
		raw := q[1 : len(q)-1]
		if len(raw) > MaxString {
			d.clipped()
			return string(raw[:MaxString]), true
		}
		return string(raw), true
	}
	return d.clip(unquote(q), MaxString), true
}

// clip cuts s to n bytes on a rune boundary, counted.
func (d *decoder) clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	d.clipped()
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n])
}

func (d *decoder) clipped() {
	if d.r != nil {
		d.r.Clipped++
	}
}

// unquote decodes a string value, quotes included, that scanString
// checked and found escapes or bytes past ASCII in, as encoding/json does
// (it is encoding/json): invalid UTF-8 and lone surrogates become U+FFFD.
func unquote(q []byte) string {
	var s string
	json.Unmarshal(q, &s) // checked: no error
	return s
}

// integer reads an integer within [lo, hi]; ok false on null (absent).
func (d *decoder) integer(lo, hi int64) (int64, bool) {
	if d.null() || d.err != nil {
		return 0, false
	}
	i := d.i
	neg := false
	if i < len(d.b) && d.b[i] == '-' {
		neg = true
		i++
	}
	start := i
	var u uint64
	for i < len(d.b) && d.b[i] >= '0' && d.b[i] <= '9' {
		if u > (math.MaxUint64-9)/10 {
			d.fail("integer out of range")
			return 0, false
		}
		u = u*10 + uint64(d.b[i]-'0')
		i++
	}
	if i == start || (d.b[start] == '0' && i-start > 1) {
		d.fail("want an integer")
		return 0, false
	}
	if i < len(d.b) && (d.b[i] == '.' || d.b[i] == 'e' || d.b[i] == 'E') {
		d.fail("want an integer, not a fraction")
		return 0, false
	}
	var v int64
	switch {
	case !neg && u <= math.MaxInt64:
		v = int64(u)
	case neg && u <= 1<<63:
		v = -int64(u-1) - 1
	default:
		d.fail("integer out of range")
		return 0, false
	}
	if v < lo || v > hi {
		d.fail("integer out of range")
		return 0, false
	}
	d.i = i
	return v, true
}

func (d *decoder) i64() int64 {
	v, _ := d.integer(math.MinInt64, math.MaxInt64)
	return v
}

func (d *decoder) i32() int32 {
	v, _ := d.integer(math.MinInt32, math.MaxInt32)
	return int32(v)
}

func (d *decoder) i16() int16 {
	v, _ := d.integer(math.MinInt16, math.MaxInt16)
	return int16(v)
}

func (d *decoder) optI64(o *Opt[int64]) {
	o.V, o.Set = d.integer(math.MinInt64, math.MaxInt64)
}

func (d *decoder) optI32(o *Opt[int32]) {
	v, ok := d.integer(math.MinInt32, math.MaxInt32)
	o.V, o.Set = int32(v), ok
}

func (d *decoder) optI16(o *Opt[int16]) {
	v, ok := d.integer(math.MinInt16, math.MaxInt16)
	o.V, o.Set = int16(v), ok
}

func (d *decoder) optStr(o *Opt[string]) { o.V, o.Set = d.str() }

// body reads a body field: base64 (standard, padded) of at most MaxBody
// bytes; null reads as absent.
func (d *decoder) body() []byte {
	raw, ok := d.bytesString()
	if !ok {
		return nil
	}
	if base64.StdEncoding.DecodedLen(len(raw)) > MaxBody+3 {
		d.bound("body bytes", MaxBody)
		return nil
	}
	out, err := base64.StdEncoding.AppendDecode(nil, raw)
	if err != nil || len(out) > MaxBody {
		d.fail("bad base64 body")
		return nil
	}
	return out
}

func (d *decoder) plainStr() string {
	s, _ := d.str()
	return s
}

func (d *decoder) boolean() (v, ok bool) {
	switch d.peek() {
	case 't':
		return true, d.lit("true")
	case 'f':
		return false, d.lit("false")
	case 'n':
		d.lit("null")
		return false, false
	}
	d.fail("want true or false")
	return false, false
}

// maxDepth bounds the nesting skip follows (a finding's evidence nests a
// few levels; a hostile record must not recurse without end).
const maxDepth = 64

// skip moves past any value, checking it is JSON.
func (d *decoder) skip(depth int) {
	if depth > maxDepth {
		d.fail("nested too deep")
		return
	}
	switch c := d.peek(); {
	case c == '{':
		d.object(func([]byte) { d.skip(depth + 1) })
	case c == '[':
		d.array(func() { d.skip(depth + 1) })
	case c == '"':
		d.scanString()
	case c == 't':
		d.lit("true")
	case c == 'f':
		d.lit("false")
	case c == 'n':
		d.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		d.number()
	default:
		d.fail("want a value")
	}
}

// number moves past a JSON number (RFC 8259's grammar).
func (d *decoder) number() {
	i := d.i
	if i < len(d.b) && d.b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d.b) && d.b[i] >= '0' && d.b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	start := i
	if n := digits(); n == 0 || (d.b[start] == '0' && n > 1) {
		d.fail("bad number")
		return
	}
	if i < len(d.b) && d.b[i] == '.' {
		i++
		if digits() == 0 {
			d.fail("bad number")
			return
		}
	}
	if i < len(d.b) && (d.b[i] == 'e' || d.b[i] == 'E') {
		i++
		if i < len(d.b) && (d.b[i] == '+' || d.b[i] == '-') {
			i++
		}
		if digits() == 0 {
			d.fail("bad number")
			return
		}
	}
	d.i = i
}

// record reads the top-level object into r.
func (d *decoder) record(r *Record) {
	d.object(func(k []byte) {
		switch string(k) {
		case "v":
			v, ok := d.integer(math.MinInt32, math.MaxInt32)
			r.V, d.hasV = int(v), ok
		case "type":
			r.Type = d.plainStr()
		case "agent":
			r.Agent = d.clip(d.plainStr(), MaxAgent)
		case "run":
			r.Run = d.plainStr()
		case "seq":
			r.Seq = d.i64()
		case "cluster":
			r.Cluster = d.plainStr()
		case "ts_ns":
			r.TS = d.i64()
		case "latency_ns":
			d.optI64(&r.Latency)
		case "conn":
			r.Conn = int(d.i32())
		case "client":
			r.Client = d.plainStr()
		case "server":
			r.Server = d.plainStr()
		case "node":
			d.optI32(&r.Node)
		case "client_id":
			d.optStr(&r.ClientID)
		case "api":
			r.API = d.i16()
		case "ver":
			r.Ver = d.i16()
		case "corr":
			r.Corr = d.i32()
		case "role":
			r.Role = d.plainStr()
		case "status":
			r.Status = d.plainStr()
		case "end_ns":
			d.optI64(&r.End)
		case "conn_gaps":
			v, ok := d.integer(0, math.MaxInt32)
			if ok {
				r.ConnGaps = int(v)
			}
		case "req_body":
			r.ReqBody = d.body()
		case "resp_body":
			r.RespBody = d.body()
		case "req_pkt":
			r.ReqPkt = d.i64()
		case "resp_pkt":
			r.RespPkt = d.i64()
		case "file":
			r.File = int(d.i32())
		case "replica":
			d.optI32(&r.Replica)
		case "max_wait_ms":
			d.optI32(&r.MaxWait)
		case "throttle_time_ms":
			d.optI32(&r.Throttle)
		case "acks":
			d.optI16(&r.Acks)
		case "txn_id":
			d.optStr(&r.TxnID)
		case "group":
			r.Group = d.plainStr()
		case "errors":
			d.array(func() {
				var e ErrorCount
				n := 0
				d.array(func() {
					switch n {
					case 0:
						e.Code = d.i16()
					case 1:
						e.Count = d.i64()
					default:
						d.fail("want [code, count]")
					}
					n++
				})
				if n != 2 {
					d.fail("want [code, count]")
				}
				if len(r.Errors) == MaxErrors {
					d.bound("errors", MaxErrors)
					return
				}
				r.Errors = append(r.Errors, e)
			})
		case "parts":
			r.Parts = int(d.i32())
		case "batch_index":
			v, ok := d.integer(0, math.MaxInt32)
			r.BatchIndex = Opt[int]{int(v), ok}
		case "topic":
			r.Topic = d.plainStr()
		case "topic_id":
			r.TopicID = d.plainStr()
		case "partition":
			r.Partition = d.i32()
		case "fetch_offset":
			d.optI64(&r.FetchOffset)
		case "timestamp":
			d.optI64(&r.Timestamp)
		case "offset":
			d.optI64(&r.Offset)
		case "committed_offset":
			d.optI64(&r.CommittedOffset)
		case "offset_leader_epoch":
			d.optI32(&r.OffsetEpoch)
		case "error":
			d.optI16(&r.Error)
		case "high_watermark":
			d.optI64(&r.HighWatermark)
		case "last_stable_offset":
			d.optI64(&r.LastStableOffset)
		case "log_start_offset":
			d.optI64(&r.LogStartOffset)
		case "base_offset":
			d.optI64(&r.BaseOffset)
		case "leader":
			d.optI32(&r.Leader)
		case "leader_epoch":
			d.optI32(&r.LeaderEpoch)
		case "fp_fn":
			r.PrintFn = d.plainStr()
		case "batches":
			d.array(func() {
				if len(r.Batches) == MaxBatches {
					d.bound("batches", MaxBatches)
					return
				}
				r.Batches = append(r.Batches, Batch{})
				d.batch(&r.Batches[len(r.Batches)-1])
			})
		case "event":
			r.Event = d.plainStr()
		case "last_ns":
			d.optI64(&r.Last)
		case "first_ns":
			d.optI64(&r.First)
		case "handshake":
			r.Handshake, _ = d.boolean()
		case "midstream":
			r.MidStream, _ = d.boolean()
		case "attempts":
			r.Attempts = int(d.i32())
		case "pkt":
			r.Pkt = d.i64()
		case "state":
			r.State = d.plainStr()
		case "finding":
			start := d.i
			d.skip(1)
			if d.err == nil && string(d.b[start:d.i]) != "null" {
				r.Finding = append([]byte(nil), d.b[start:d.i]...)
			}
		default:
			d.skip(1)
		}
	})
}

func (d *decoder) batch(b *Batch) {
	var deltas []int32
	hasDeltas := false
	d.object(func(k []byte) {
		switch string(k) {
		case "offset":
			d.optI64(&b.Offset)
		case "base_offset":
			d.optI64(&b.BaseOffset)
		case "last_offset_delta":
			b.LastOffsetDelta = d.i32()
		case "records":
			b.Records = d.i32()
		case "crc":
			v, _ := d.integer(0, math.MaxUint32)
			b.CRC = uint32(v)
		case "crc_computed":
			v, _ := d.integer(0, math.MaxUint32)
			b.ComputedCRC = uint32(v)
		case "crc_ok":
			v, ok := d.boolean()
			b.CRCBad = ok && !v
		case "magic":
			v, _ := d.integer(math.MinInt8, math.MaxInt8)
			b.Magic = int8(v)
		case "leader_epoch":
			b.LeaderEpoch = d.i32()
		case "producer_id":
			b.ProducerID = d.i64()
		case "producer_epoch":
			b.ProducerEpoch = d.i16()
		case "base_sequence":
			b.BaseSequence = d.i32()
		case "attributes":
			b.Attributes = d.i16()
		case "bytes":
			b.Bytes = d.i32()
		case "first_ts":
			b.FirstTS = d.i64()
		case "max_ts":
			b.MaxTS = d.i64()
		case "fp":
			b.Prints = d.fingerprints()
		case "fp_deltas":
			deltas = deltas[:0]
			d.array(func() {
				if len(deltas) < MaxPrints {
					deltas = append(deltas, d.i32())
				} else {
					d.bound("fingerprint deltas", MaxPrints)
				}
			})
			hasDeltas = true
		case "fp_err":
			b.PrintErr = d.plainStr()
		default:
			d.skip(1)
		}
	})
	if hasDeltas && d.err == nil {
		if len(deltas) != len(b.Prints) {
			d.fail("fp_deltas not one per fingerprint")
			return
		}
		for i := range b.Prints {
			b.Prints[i].Delta = deltas[i]
		}
	}
}

// fingerprints reads a batch's fp: base64 (standard, padded) of 16 bytes
// a record, at most MaxPrints in the record; null reads as absent.
func (d *decoder) fingerprints() []decode.RecordHash {
	raw, ok := d.bytesString()
	if !ok {
		return nil
	}
	if n := base64.StdEncoding.DecodedLen(len(raw)) / 16; d.prints+n > MaxPrints+1 {
		d.bound("record fingerprints", MaxPrints)
		return nil
	}
	bs, err := base64.StdEncoding.AppendDecode(nil, raw)
	if err != nil || len(bs)%16 != 0 {
		d.fail("bad base64 fingerprints")
		return nil
	}
	if d.prints += len(bs) / 16; d.prints > MaxPrints {
		d.bound("record fingerprints", MaxPrints)
		return nil
	}
	out := make([]decode.RecordHash, len(bs)/16)
	for i := range out {
		p := bs[16*i:]
		out[i] = decode.RecordHash{Sum: binary.BigEndian.Uint64(p), Hi: binary.BigEndian.Uint64(p[8:]), Delta: int32(i)}
	}
	return out
}
