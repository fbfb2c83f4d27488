// Package report renders an analysis: the text report a person reads, the
// JSON document a machine reads (schema kfsniff/v1, see docs/json.md), and
// the HTML page, and the --frames and --records lines as they stream. It
// renders a Report that package collect counts; it counts nothing itself.
package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
)

// Schema names the JSON document version.
const Schema = "kfsniff/v1"

// Report is the whole analysis, as rendered to text and JSON.
type Report struct {
	Schema      string       `json:"schema"`
	Capture     Capture      `json:"capture"`
	Totals      Totals       `json:"totals"`
	APIs        []API        `json:"apis"`
	Connections []Connection `json:"connections"`
	Events      []Event      `json:"events"`
	// Incidents group the findings at warning or above by cause
	// (incidents.go), each naming its findings by their index in
	// Findings.
	Incidents []Incident          `json:"incidents"`
	Findings  []detectors.Finding `json:"findings"`

	// Clients is the client inventory (clients.go); ClientsNotListed
	// counts the requests of clients past its bound.
	Clients          []ClientEntry `json:"clients"`
	ClientsNotListed int64         `json:"clients_not_listed_requests"`
	// Lag is every consumer's and follower's lag per partition (lag.go);
	// LagDropped counts samples of partitions beyond its bound.
	Lag        []Lag `json:"lag"`
	LagDropped int64 `json:"lag_dropped,omitempty"`
	// Export is what --export shipped (export.go); absent without it.
	Export *Export `json:"export,omitempty"`
	// Correlation is what several agents' shipped records showed
	// together (correlation.go); absent for capture files.
	Correlation *Correlation `json:"correlation,omitempty"`
	// TLS is what key logs decrypted (tls.go); absent without one.
	TLS *TLS `json:"tls,omitempty"`

	// Timeline is the traffic over capture time (timeline.go), drawn by
	// the HTML report; not in the JSON document.
	Timeline *Timeline `json:"-"`
}

// WriteJSON writes r as the --json document: what a json.Encoder with
// SetEscapeHTML(false) and SetIndent("", "  ") writes ('<', '>' and '&' as
// they are, a newline at the end), made safe for a terminal by SafeJSON.
// It streams the document (jsonstream.go): the report's members one by
// one, its lists (connections, findings, clients, ...) an element at a
// time, so that a report of 100,000 connections is never held whole as
// JSON.
func WriteJSON(w io.Writer, r *Report) error { return WriteJSONWarn(w, r, nil) }

// WriteJSONWarn is WriteJSON telling warn of every value that could not
// be written as it is (jsonsafe.go: a time outside years 0-9999, a value
// whose encoding failed), each written otherwise: the document is always
// whole.
func WriteJSONWarn(w io.Writer, r *Report, warn func(JSONIssue)) error {
	return writeJSONStream(w, r, warn)
}

// Capture describes the inputs.
type Capture struct {
	Files    []File    `json:"files"`
	Packets  int64     `json:"packets"`
	Bytes    int64     `json:"bytes"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	Duration float64   `json:"duration_s"`
	// Drops is how many packets the kernel dropped for lack of buffer
	// during a live capture (absent when reading files).
	Drops *uint64 `json:"drops,omitempty"`
	// Partial says why the analysis covers less than its input; nil
	// when it covers all of it.
	Partial *Partial `json:"partial,omitempty"`
	// Filter says what the packets analysed were restricted to; nil when
	// every packet was.
	Filter *Filter `json:"filter,omitempty"`
	// Takeover, in the report a correlator of a group writes after its
	// own for partitions it took over, says which and from whom; nil
	// otherwise.
	Takeover *Takeover `json:"takeover,omitempty"`
}

// Takeover is what a correlator of a group (-r kafka:// --group
// --until-end) reports after its own report: the partitions of the
// export topic a member of Group marked read to their end and left the
// group before its report (killed), read again by this one.
type Takeover struct {
	Group      string      `json:"group"`
	Member     string      `json:"member"`
	Partitions []TakenOver `json:"partitions"`
}

// TakenOver is one partition taken over: the offsets read, From
// included, To not.
type TakenOver struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from_offset"`
	To        int64 `json:"to_offset"`
}

// String says in a sentence what was taken over.
func (t *Takeover) String() string {
	ps := each(t.Partitions, func(p TakenOver) string { return fmt.Sprintf("%d (offsets %d-%d)", p.Partition, p.From, p.To) })
	return fmt.Sprintf("export partitions %s, read to their end by member %s of correlator group %s, which left the group before its report (killed?); this report covers them only",
		strings.Join(ps, ", "), t.Member, t.Group)
}

// Partial is what a run left out of its input.
type Partial struct {
	// Stop is why reading stopped before the end of the input files:
	// "interrupted" (Ctrl-C), "count" (-c), "duration" (--duration),
	// "input error" (an input broke; capture.files[].error says where),
	// "output error"; empty when it reached their end. A live capture
	// has no end, so how it was stopped is no part of this.
	Stop string `json:"stop,omitempty"`
	// Count is the -c limit, when Stop is "count".
	Count int64 `json:"count,omitempty"`
	// Duration is the --duration limit in seconds, when Stop is
	// "duration".
	Duration float64 `json:"duration_s,omitempty"`
	// Bounds are the bounds reached (the keys of totals.bounds_reached):
	// what they kept out was not analysed.
	Bounds []string `json:"bounds,omitempty"`
	// Uncovered are the partitions of the export topic a correlator of
	// a group (-r kafka:// --group --until-end) ended without: no member
	// read them to their end within --group-wait.
	Uncovered []int32 `json:"uncovered_partitions,omitempty"`
}

// String says in a sentence what the run left out.
func (p *Partial) String() string {
	var parts []string
	switch p.Stop {
	case "":
	case "interrupted":
		parts = append(parts, "interrupted (Ctrl-C) before the end of the input")
	case "count":
		parts = append(parts, fmt.Sprintf("stopped after -c %d packets, before the end of the input", p.Count))
	case "duration":
		parts = append(parts, fmt.Sprintf("stopped after --duration %s, before the end of the input", seconds(p.Duration)))
	case "input error":
		parts = append(parts, "an input broke before its end (see Capture)")
	default:
		parts = append(parts, "stopped by an "+p.Stop)
	}
	if len(p.Bounds) > 0 {
		parts = append(parts, "bounds reached, what they kept out not analysed: "+strings.Join(p.Bounds, ", "))
	}
	if len(p.Uncovered) > 0 {
		parts = append(parts, "export partitions "+strings.Join(each(p.Uncovered, itoa), ",")+" not covered: no member of the correlator group read them to their end within --group-wait")
	}
	return strings.Join(parts, "; ")
}

// Filter is what the packets analysed were restricted to.
type Filter struct {
	// Expression is the tcpdump-style filter expression.
	Expression string `json:"expression"`
}

// String says in a sentence what the run was restricted to.
func (f *Filter) String() string {
	return fmt.Sprintf("only packets matching %q were analysed", f.Expression)
}

// File is one input file.
type File struct {
	Name      string   `json:"name"`
	Format    string   `json:"format"`
	LinkTypes []string `json:"link_types"`
	Packets   int64    `json:"packets"`
	// Error says where and why reading stopped early, if it did.
	Error string `json:"error,omitempty"`
}

// Totals are capture-wide counts.
type Totals struct {
	TCPPackets         int64 `json:"tcp_packets"`
	KafkaConnections   int   `json:"kafka_connections"`
	OtherTCP           int64 `json:"other_tcp_connections"`
	Requests           int64 `json:"requests"`
	Responses          int64 `json:"responses"`
	ErrorResponses     int64 `json:"error_responses"`
	UnmatchedResponses int64 `json:"unmatched_responses"`
	UnansweredRequests int64 `json:"unanswered_requests"`
	NoResponseExpected int64 `json:"no_response_expected"`
	// NotCaptured counts requests on one-sided connections (no packet
	// from the server in the capture): whether they were answered
	// cannot be known, so they are not unanswered.
	NotCaptured         int64 `json:"responses_not_captured"`
	OneSidedConnections int   `json:"one_sided_connections"`
	DecodeErrors        int64 `json:"decode_errors"`
	FramingErrors       int64 `json:"framing_errors"`
	Gaps                int64 `json:"gaps"`
	// LostBytes are the bytes missing in the gaps (snaplen cuts apart).
	LostBytes          int64            `json:"lost_bytes"`
	SkippedBytes       map[string]int64 `json:"skipped_bytes"`
	UnknownAPIs        []UnknownAPI     `json:"unknown_apis"`
	RefusedConnections int64            `json:"refused_connections"`
	EvictedConnections int              `json:"evicted_connections"`
	// ClosedFolded counts the connections closed for longer than
	// --keep-closed (live capture) folded into the totals, not listed.
	ClosedFolded      int              `json:"closed_connections_folded,omitempty"`
	IdleEvicted       int64            `json:"idle_evicted_connections"`
	UnansweredSYNs    int64            `json:"unanswered_syns"`
	NonIP             int64            `json:"non_ip_packets"`
	NonTCP            int64            `json:"non_tcp_packets"`
	Fragments         int64            `json:"ip_fragments"`
	Reassembled       int64            `json:"ip_datagrams_reassembled"`
	DatagramsLost     map[string]int64 `json:"ip_datagrams_lost"`
	FragmentBytesLost int64            `json:"ip_fragment_bytes_lost"`
	Truncated         int64            `json:"truncated_packets"`
	BadPackets        int64            `json:"bad_packets"`
	// FirstBadPacket is the first of them.
	FirstBadPacket *Problem `json:"first_bad_packet,omitempty"`
	// InternalErrors counts kfsniff's own faults (recovered panics): a
	// connection abandoned from a packet on (its internal-error finding),
	// or a packet dropped before its connection was known, the first of
	// which is FirstInternalError.
	InternalErrors     int64    `json:"internal_errors"`
	FirstInternalError *Problem `json:"first_internal_error,omitempty"`
	// FingerprintsDropped counts Produce requests whose record
	// fingerprints were dropped before their response, to bound memory
	// (more than 16,384 requests or 32 MiB waiting): duplicate-batches
	// compared their batches by CRC only, so a replay of them with new
	// batch boundaries goes unseen.
	FingerprintsDropped int64 `json:"record_fingerprints_dropped,omitempty"`
	// BoundsReached counts what a bound on something the wire can
	// multiply kept out, by bound (docs/json.md lists them): requests of
	// unknown APIs beyond the pairs listed, node ids, endpoints, topic ids
	// and brokers not learned, findings not listed, and what each rule's
	// bounds kept out of its judgement ("rule.name"). Empty when none was
	// reached.
	BoundsReached map[string]int64 `json:"bounds_reached,omitempty"`
}

// OtherErrorsName is the name, in an API row's errors, of the error codes
// Kafka does not define beyond the first 16 of the row, named by number
// (a code from the wire would otherwise be an entry each).
const OtherErrorsName = "UNDEFINED_ERROR_CODES"

// UnknownAPIName names the API row (key -1, version -1) of every request
// whose key and version kmsg cannot decode, and the requests of unknown
// keys in a connection's APIs.
const UnknownAPIName = "unknown"

// UnknownAPI counts requests of a key or version kmsg cannot decode.
type UnknownAPI struct {
	Key     int16 `json:"key"`
	Version int16 `json:"version"`
	Count   int   `json:"count"`
}

// API is one (key, version) pair.
type API struct {
	Key            int16            `json:"key"`
	Name           string           `json:"name"`
	Version        int16            `json:"version"`
	Requests       int64            `json:"requests"`
	Responses      int64            `json:"responses"`
	ErrorResponses int64            `json:"error_responses"`
	Errors         map[string]int64 `json:"errors"`
	DecodeErrors   int64            `json:"decode_errors"`
	Unanswered     int64            `json:"unanswered"`
	Latency        Latency          `json:"latency_ms"`
}

// Latency quantiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Loss is what a connection lost in the capture: bytes missing in gaps by
// direction, bytes cut by the snaplen, and where the first and last gap
// were.
type Loss struct {
	ToServer int64 `json:"bytes_to_server"`
	ToClient int64 `json:"bytes_to_client"`
	// Snaplen counts the bytes cut from packets by the snaplen (not
	// in ToServer, ToClient).
	Snaplen     int64     `json:"snaplen_bytes"`
	File        int       `json:"file"`
	FirstPacket uint64    `json:"first_packet"`
	LastPacket  uint64    `json:"last_packet"`
	First       time.Time `json:"first"`
	Last        time.Time `json:"last"`
}

// Connection is one Kafka connection.
type Connection struct {
	ID int `json:"id"`
	// Agent is the host that captured the connection, when the input is
	// records shipped by several (kfsniff -r kafka://...).
	Agent      string `json:"agent,omitempty"`
	Client     string `json:"client"`
	Server     string `json:"server"`
	Recognised string `json:"recognised"`
	ClientBy   string `json:"client_by"`
	Handshake  bool   `json:"handshake"`
	MidStream  bool   `json:"mid_stream"`
	TLS        bool   `json:"tls,omitempty"`
	// TLSSession is the connection's TLS as decrypted with a key log.
	TLSSession *ConnTLS       `json:"tls_session,omitempty"`
	ClientNode *int32         `json:"client_node,omitempty"`
	ServerNode *int32         `json:"server_node,omitempty"`
	Roles      []string       `json:"roles"`
	ClientIDs  []string       `json:"client_ids"`
	APIs       map[string]int `json:"apis"`
	Requests   int            `json:"requests"`
	Responses  int            `json:"responses"`
	Errors     int            `json:"error_responses"`
	Unmatched  int            `json:"unmatched_responses"`
	Unanswered int            `json:"unanswered_requests"`
	NoResponse int            `json:"no_response_expected"`
	// OneSided names the only direction with packets in the capture
	// ("client->server" or "server->client"), if one is missing.
	OneSided      string           `json:"one_sided,omitempty"`
	NotCaptured   int              `json:"responses_not_captured"`
	BytesToServer int64            `json:"bytes_to_server"`
	BytesToClient int64            `json:"bytes_to_client"`
	File          int              `json:"file"`
	FirstPacket   uint64           `json:"first_packet"`
	LastPacket    uint64           `json:"last_packet"`
	FirstSeen     time.Time        `json:"first_seen"`
	LastSeen      time.Time        `json:"last_seen"`
	Gaps          int              `json:"gaps"`
	Loss          *Loss            `json:"loss,omitempty"`
	DatagramsLost int              `json:"ip_datagrams_lost,omitempty"`
	FragBytesLost int64            `json:"ip_fragment_bytes_lost,omitempty"`
	FramingErrors int              `json:"framing_errors"`
	DecodeErrors  int              `json:"decode_errors"`
	SkippedBytes  map[string]int64 `json:"skipped_bytes,omitempty"`
	Problems      []Problem        `json:"problems,omitempty"`
	Closed        bool             `json:"closed"`
	Reset         bool             `json:"reset"`
}

// Problem is a framing or decoding problem with its packet.
type Problem struct {
	File   int    `json:"file"`
	Packet uint64 `json:"packet"`
	What   string `json:"what"`
}

// Event is a connection event worth listing: refused and unanswered
// connection attempts.
type Event struct {
	Kind     string    `json:"kind"`
	Client   string    `json:"client"`
	Server   string    `json:"server"`
	File     int       `json:"file"`
	Packet   uint64    `json:"packet"`
	Time     time.Time `json:"time"`
	Attempts int       `json:"attempts"`
}

// Millis is d in milliseconds, to the microsecond.
func Millis(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
