package detectors

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
)

// Severity ranks findings.
type Severity int

// Severities, in increasing order.
const (
	Info Severity = iota
	Warning
	Error
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return "?"
}

// MarshalText renders the severity as its name in JSON.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// ParseSeverity parses "info", "warning" or "error".
func ParseSeverity(s string) (Severity, error) {
	switch s {
	case "info":
		return Info, nil
	case "warning", "warn":
		return Warning, nil
	case "error":
		return Error, nil
	}
	return 0, fmt.Errorf("unknown severity %q (want info, warning or error)", s)
}

// Evidence points at a packet that shows the problem.
type Evidence struct {
	File   int    `json:"file"`
	Packet uint64 `json:"packet"`
	Conn   int    `json:"conn,omitempty"`
	What   string `json:"what"`
}

// Finding is one thing a detector says is wrong (or, at info, notable).
type Finding struct {
	Detector string    `json:"detector"`
	Severity Severity  `json:"severity"`
	Summary  string    `json:"summary"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	Conns    []int     `json:"connections,omitempty"`
	Nodes    []int32   `json:"nodes,omitempty"`
	// Counts are the numbers behind the finding, by name: those of the
	// Detail's fields tagged `count:"name"` (CountsOf).
	Counts map[string]int64 `json:"counts,omitempty"`
	// Fields are the key field values (topic, partition, leader id,
	// epoch, offsets...), by name, typed.
	Fields      map[string]any `json:"fields,omitempty"`
	Evidence    []Evidence     `json:"evidence,omitempty"`
	Explanation string         `json:"explanation"`
	Next        string         `json:"next"`
	// CaptureLoss, set when the report is built, says that the capture
	// lost segments on the finding's connections during its span: its
	// counts may be low and what it missed may be in the bytes lost.
	CaptureLoss *CaptureLoss `json:"capture_loss,omitempty"`

	// Subject is what the finding is about, typed: how one finding is
	// found to explain another (Subject.Explains).
	Subject Subject `json:"-"`
	// Detail is the rule's own finding, if it has a type of its own: the
	// Set makes Summary, Explanation, Next and Fields from it.
	Detail Detail `json:"-"`

	// notListed, in a finding a rule returns (NotListed.Summary), is
	// what the rule left out: the Set folds it into its summary.
	notListed *cut
}

// Detail is a rule's own finding: typed fields, which become the finding's
// "fields" under their json tags (FieldsOf) and its "counts" under their
// count tags (CountsOf), and its prose, written beside the type from its
// exported fields (franz-go's kgo.ErrDataLoss writes its sentence the
// same way).
type Detail interface {
	Summary() string
	Explanation() string
	Next() string
}

// fill makes the envelope's text and fields from its Detail.
func (f *Finding) fill() {
	if f.Detail == nil {
		return
	}
	f.Summary, f.Explanation, f.Next = f.Detail.Summary(), f.Detail.Explanation(), f.Detail.Next()
	f.Fields = FieldsOf(f.Detail)
	if c := CountsOf(f.Detail); c != nil {
		f.Counts = c
	}
}

// CountsOf returns the counts of a struct (or pointer to one) by name:
// its integer fields tagged `count:"name"`, one tagged
// `count:"name,omitempty"` left out when zero, the length of a slice or
// map tagged `count:"name,len"` (partitions listed), the value of a
// pointer to an integer when set (a count present only sometimes, whose
// value may be zero), and the entries of a
// map[string]int64 field tagged `count:",inline"` (counts named as the
// traffic shows them: an error's name). The fields of an untagged
// embedded struct are the struct's own. Nil if there are none.
func CountsOf(d any) map[string]int64 {
	v := reflect.Indirect(reflect.ValueOf(d))
	if v.Kind() != reflect.Struct {
		return nil
	}
	out := map[string]int64{}
	countsInto(out, v)
	if len(out) == 0 {
		return nil
	}
	return out
}

func countsInto(out map[string]int64, v reflect.Value) {
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		tag, ok := sf.Tag.Lookup("count")
		if !ok {
			if sf.Anonymous && sf.Type.Kind() == reflect.Struct && sf.Tag.Get("json") == "" {
				countsInto(out, v.Field(i))
			}
			continue
		}
		if !sf.IsExported() {
			panic("detectors: count tag on unexported field " + sf.Name)
		}
		name, opts, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		}
		switch {
		case opts == "len" && (fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map):
			out[name] = int64(fv.Len())
		case opts == "inline" && fv.Kind() == reflect.Map:
			for _, k := range fv.MapKeys() {
				out[k.String()] += fv.MapIndex(k).Int()
			}
		case fv.CanInt():
			if opts != "omitempty" || fv.Int() != 0 {
				out[name] = fv.Int()
			}
		case fv.CanUint():
			if opts != "omitempty" || fv.Uint() != 0 {
				out[name] = int64(fv.Uint())
			}
		default:
			panic("detectors: count tag on " + sf.Type.String() + " field " + sf.Name)
		}
	}
}

// FieldsOf returns the fields of a struct (or pointer to one) by their
// json names; a field tagged omitempty is left out when zero, one tagged
// "-" or untagged always. A pointer field gives the value it points at:
// a field present only sometimes, whose value may be zero (an epoch, an
// offset), is a pointer tagged omitempty. The fields of an untagged
// embedded struct are the struct's own, as encoding/json has them.
func FieldsOf(d any) map[string]any {
	v := reflect.Indirect(reflect.ValueOf(d))
	if v.Kind() != reflect.Struct {
		return nil
	}
	out := map[string]any{}
	fieldsInto(out, v)
	if len(out) == 0 {
		return nil
	}
	return out
}

func fieldsInto(out map[string]any, v reflect.Value) {
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" && sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			fieldsInto(out, v.Field(i))
			continue
		}
		if name == "" || name == "-" || !sf.IsExported() {
			continue
		}
		fv := v.Field(i)
		if opts == "omitempty" && fv.IsZero() {
			continue
		}
		if fv.Kind() == reflect.Pointer && !fv.IsNil() {
			fv = fv.Elem()
		}
		out[name] = fv.Interface()
	}
}

// Subject is what a finding is about: the clients (by client id and by
// host), the servers, the nodes, the partitions, and the Kafka error.
type Subject struct {
	ClientIDs  []string
	Clients    []netip.Addr
	Servers    []netip.AddrPort
	Nodes      []int32
	Partitions []cluster.Partition
	// Error is the Kafka error code the finding is about, 0 if none.
	Error int16
	// Waits: the finding is about clients waiting: throttled (the waits'
	// cause: a quota), slow-responses and unanswered-requests (the waits),
	// so that one wait gives one finding at its severity (recorded on
	// Apache Kafka 4.1.1: fixtures/pcaps/kafka/java-throttled).
	Waits bool
	// Reconnects: the finding is about connections opened again and
	// again (reconnect-storm), or names their cause (transactional-fencing:
	// each fenced instance restarted), so that the cause explains the
	// storm of the same client hosts and servers.
	Reconnects bool
	// Rebalances: the finding is about a group's rebalances
	// (rebalance-loop), or names their cause (member-evicted: evictions
	// accounting for them), so that the cause explains the loop's finding
	// for the same clients and servers.
	Rebalances bool
}

// Explains reports whether a specific finding about s accounts for a
// generic finding about g: the same error, and a client id, client host or
// server in common; or, for waits (Waits: throttled explaining
// slow-responses and unanswered-requests), every client id of g among s's
// and a server in common: the waits of other clients are theirs.
// (Severities are compared by the caller.)
func (s *Subject) Explains(g *Subject) bool {
	if s.Rebalances && g.Rebalances {
		return overlap(s.Clients, g.Clients) && overlap(s.Servers, g.Servers)
	}
	if g.Error == 0 {
		if s.Reconnects && g.Reconnects {
			return overlap(s.Clients, g.Clients) && overlap(s.Servers, g.Servers)
		}
		return s.Waits && g.Waits && len(g.ClientIDs) > 0 && subset(g.ClientIDs, s.ClientIDs) && overlap(s.Servers, g.Servers)
	}
	if s.Error != g.Error {
		return false
	}
	return overlap(s.ClientIDs, g.ClientIDs) || overlap(s.Clients, g.Clients) || overlap(s.Servers, g.Servers)
}

// subset reports whether every element of a is in b.
func subset[T comparable](a, b []T) bool {
	return !slices.ContainsFunc(a, func(x T) bool { return !slices.Contains(b, x) })
}

// overlap reports whether a and b have an element in common.
func overlap[T comparable](a, b []T) bool {
	return slices.ContainsFunc(a, func(x T) bool { return slices.Contains(b, x) })
}

// CaptureLoss is what the capture lost on a finding's connections: the
// connections with gaps whose span overlaps the finding's, their gaps and
// the bytes missing.
type CaptureLoss struct {
	Conns []int `json:"connections"`
	Gaps  int   `json:"gaps"`
	Bytes int64 `json:"bytes"`
}
