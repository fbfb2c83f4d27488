package report

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
)

// The field tree of a Kafka body, as --frames -v prints it and the TUI's
// detail shows it: every field kmsg decodes, by name, arrays as [i] named
// by their topic and partition, error codes named, topic ids as Kafka
// prints them (base64url, 22 characters), record batches summarised
// (offsets, records, CRC checked, codec, producer) with their records
// decompressed, bytes as text when printable. Wire strings are cleaned
// (Clean); the tree is bounded so that a hostile frame cannot make it
// huge.

// NodeKind colours a line of the detail tree.
type NodeKind uint8

const (
	KindPlain NodeKind = iota
	KindHeading
	KindGood // CRC verified, no error
	KindBad  // error code, CRC mismatch, decode error
	KindDim  // notes: cut, not kept
)

// TreeNode is one line of the detail tree. Text is sanitised for a
// terminal (report.Clean on every wire-derived part) but not yet escaped
// for tview.
type TreeNode struct {
	Text     string
	Kind     NodeKind
	Children []*TreeNode
}

func (n *TreeNode) Add(c *TreeNode) *TreeNode {
	n.Children = append(n.Children, c)
	return c
}

// walk visits the tree depth first with each node's depth.
func (n *TreeNode) Walk(depth int, fn func(*TreeNode, int)) {
	fn(n, depth)
	for _, c := range n.Children {
		c.Walk(depth+1, fn)
	}
}

// count is the number of lines of the tree.
func (n *TreeNode) Count() int {
	c := 0
	n.Walk(0, func(*TreeNode, int) { c++ })
	return c
}

// String renders the tree as indented text (for tests and debugging).
func (n *TreeNode) String() string {
	var b strings.Builder
	n.Walk(0, func(n *TreeNode, d int) {
		b.WriteString(strings.Repeat("  ", d))
		b.WriteString(n.Text)
		b.WriteByte('\n')
	})
	return b.String()
}

// Bounds of the detail tree, so a hostile or huge frame cannot stall the
// UI: elements listed per array, nodes per tree.
const (
	maxElems     = 200
	MaxTreeNodes = 20000
	maxInline    = 32 // scalars shown inline for an array of scalars
	hexPreview   = 32 // bytes of a bytes field shown inline in hex
	textPreview  = 96 // bytes of a printable bytes field shown inline
)

type TreeBuilder struct {
	// Secrets shows credentials (--show-secrets): otherwise bodies are
	// shown redacted (decode.Redact).
	Secrets bool
	nodes   int
	cut     bool
	// recs lists the records of the batches shown, decompressed within
	// its bound; made at the first batch.
	recs *decode.RecordHasher
	// Request is set while a request's fields are added: the offsets of
	// its records are the producer's (from 0), not the log's.
	Request bool
}

// Bounds of the records listed in the detail: per batch, and bytes of
// one key or value shown, and the decompressed size of one batch.
const (
	maxRecords       = 100
	recordBytes      = 256
	recordDecompress = 16 << 20
)

func (b *TreeBuilder) Node(text string, kind NodeKind) *TreeNode {
	b.nodes++
	return &TreeNode{Text: text, Kind: kind}
}

// Cut reports whether the tree reached MaxTreeNodes and was cut.
func (b *TreeBuilder) Cut() bool { return b.cut }

// Body adds body's fields under parent (redacted unless Secrets).
func (b *TreeBuilder) Body(parent *TreeNode, body any) {
	b.Fields(parent, reflect.ValueOf(b.Shown(body)).Elem())
}

// Full reports whether the tree reached its bound (and marks it cut).
func (b *TreeBuilder) Full() bool {
	if b.nodes >= MaxTreeNodes {
		b.cut = true
		return true
	}
	return false
}

// shown is the body the tree shows: redacted unless secrets.
func (b *TreeBuilder) Shown(body any) any {
	if b.Secrets {
		return body
	}
	r, _ := decode.Redact(body)
	return r
}

var (
	tagsType  = reflect.TypeOf(kmsg.Tags{})
	bytesType = reflect.TypeOf([]byte(nil))
	uuidType  = reflect.TypeOf([16]byte{})
)

// fields adds a node for every exported field of struct v.
func (b *TreeBuilder) Fields(parent *TreeNode, v reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if b.Full() {
			return
		}
		b.field(parent, f.Name, v.Field(i))
	}
}

func (b *TreeBuilder) field(parent *TreeNode, name string, v reflect.Value) {
	switch {
	case v.Type() == tagsType:
		if v.CanAddr() {
			if tags := v.Addr().Interface().(*kmsg.Tags); tags.Len() > 0 {
				tn := parent.Add(b.Node(fmt.Sprintf("%s: %d", name, tags.Len()), KindPlain))
				tags.Each(func(k uint32, val []byte) {
					tn.Add(b.Node(fmt.Sprintf("tag %d: %s", k, bytesPreview(val)), KindPlain))
				})
			}
		}
		return
	case v.Type() == bytesType:
		if isRecords(name) {
			b.records(parent, name, v.Bytes())
			return
		}
		if v.IsNil() {
			parent.Add(b.Node(name+": null", KindPlain))
			return
		}
		parent.Add(b.Node(name+": "+bytesPreview(v.Bytes()), KindPlain))
		return
	case v.Type() == uuidType:
		id := v.Interface().([16]byte)
		parent.Add(b.Node(name+": "+uuidStr(id), KindPlain))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			parent.Add(b.Node(name+": null", KindPlain))
			return
		}
		b.field(parent, name, v.Elem())
	case reflect.Struct:
		n := parent.Add(b.Node(name, KindPlain))
		b.Fields(n, v)
	case reflect.Slice, reflect.Array:
		b.list(parent, name, v)
	default:
		text, kind := scalar(name, v)
		parent.Add(b.Node(name+": "+text, kind))
	}
}

// list shows an array: scalars inline, structs as children [i].
func (b *TreeBuilder) list(parent *TreeNode, name string, v reflect.Value) {
	n := v.Len()
	et := v.Type().Elem()
	if et.Kind() != reflect.Struct && !(et.Kind() == reflect.Pointer && et.Elem().Kind() == reflect.Struct) && et.Kind() != reflect.Slice {
		parts := make([]string, 0, min(n, maxInline))
		for i := 0; i < n && i < maxInline; i++ {
			s, _ := scalar(name, v.Index(i))
			parts = append(parts, s)
		}
		text := fmt.Sprintf("%s (%d): [%s", name, n, strings.Join(parts, ", "))
		if n > maxInline {
			text += fmt.Sprintf(", … %d more", n-maxInline)
		}
		parent.Add(b.Node(text+"]", KindPlain))
		return
	}
	ln := parent.Add(b.Node(fmt.Sprintf("%s (%d)", name, n), KindPlain))
	for i := 0; i < n; i++ {
		if i >= maxElems {
			ln.Add(b.Node(fmt.Sprintf("… %d more", n-i), KindDim))
			return
		}
		if b.Full() {
			return
		}
		e := v.Index(i)
		if e.Kind() == reflect.Pointer {
			if e.IsNil() {
				ln.Add(b.Node(fmt.Sprintf("[%d]: null", i), KindPlain))
				continue
			}
			e = e.Elem()
		}
		if e.Kind() != reflect.Struct {
			b.field(ln, fmt.Sprintf("[%d]", i), e)
			continue
		}
		en := ln.Add(b.Node(fmt.Sprintf("[%d]%s", i, elemHint(e)), KindPlain))
		b.Fields(en, e)
	}
}

// elemHint names an array element by its topic or partition, so a
// collapsed list is still readable.
func elemHint(v reflect.Value) string {
	var parts []string
	if f := v.FieldByName("Topic"); f.IsValid() {
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			f = f.Elem()
		}
		if f.Kind() == reflect.String && f.String() != "" {
			parts = append(parts, "topic "+cleanQuoted(f.String()))
		}
	}
	if len(parts) == 0 {
		if f := v.FieldByName("TopicID"); f.IsValid() && f.Type() == uuidType {
			if id := f.Interface().([16]byte); id != ([16]byte{}) {
				parts = append(parts, "topic id "+uuidStr(id))
			}
		}
	}
	if f := v.FieldByName("Partition"); f.IsValid() && f.Kind() == reflect.Int32 {
		parts = append(parts, fmt.Sprintf("partition %d", f.Int()))
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, " ")
}

func isRecords(name string) bool {
	return strings.HasSuffix(name, "Records") || strings.HasSuffix(name, "RecordBatches")
}

// scalar formats a scalar value; error codes get their name and colour.
func scalar(name string, v reflect.Value) (string, NodeKind) {
	switch v.Kind() {
	case reflect.String:
		return cleanQuoted(v.String()), KindPlain
	case reflect.Bool:
		return strconv.FormatBool(v.Bool()), KindPlain
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		s := strconv.FormatInt(v.Int(), 10)
		if v.Kind() == reflect.Int16 && strings.HasSuffix(name, "ErrorCode") {
			if v.Int() != 0 {
				return s + " " + decode.ErrorName(int16(v.Int())), KindBad
			}
			return s + " NONE", KindGood
		}
		return s, KindPlain
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return strconv.FormatUint(v.Uint(), 10), KindPlain
	case reflect.Float32, reflect.Float64:
		// As JSON numbers print: 1048576, not 1.048576e+06; NaN,
		// +Inf and -Inf by name.
		f := v.Float()
		if math.Abs(f) < 1e21 {
			return strconv.FormatFloat(f, 'f', -1, 64), KindPlain
		}
		return strconv.FormatFloat(f, 'g', -1, 64), KindPlain
	case reflect.Pointer:
		if v.IsNil() {
			return "null", KindPlain
		}
		return scalar(name, v.Elem())
	case reflect.Array:
		if v.Type() == uuidType {
			return uuidStr(v.Interface().([16]byte)), KindPlain
		}
	}
	return Clean(fmt.Sprint(v.Interface())), KindPlain
}

// records shows a records field as its batches, each with its CRC status.
func (b *TreeBuilder) records(parent *TreeNode, name string, raw []byte) {
	if raw == nil {
		parent.Add(b.Node(name+": null", KindPlain))
		return
	}
	n := parent.Add(b.Node("", KindPlain))
	var batches []*TreeNode
	scan, err := decode.ScanBatches(raw, func(bt *decode.Batch) {
		if len(batches) >= maxElems || b.Full() {
			return
		}
		batches = append(batches, b.batch(len(batches), bt))
	})
	text := fmt.Sprintf("%s: %d bytes, %d batches", name, len(raw), scan.Batches)
	if scan.BadCRC > 0 {
		text += fmt.Sprintf(", %d with a bad CRC", scan.BadCRC)
		n.Kind = KindBad
	}
	if scan.Truncated {
		text += ", last batch cut short (normal at a fetch's byte limit)"
	}
	n.Text = text
	n.Children = batches
	if scan.Batches > len(batches) {
		n.Add(b.Node(fmt.Sprintf("… %d more batches", scan.Batches-len(batches)), KindDim))
	}
	if err != nil {
		n.Add(b.Node(fmt.Sprintf("after %d batches: %v", scan.Batches, err), KindBad))
	}
}

func (b *TreeBuilder) batch(i int, bt *decode.Batch) *TreeNode {
	n := b.Node(fmt.Sprintf("batch %d: offsets %d..%d, %d records, %d bytes", i, bt.BaseOffset, bt.LastOffset(), bt.Records, len(bt.Raw)), KindPlain)
	crc := fmt.Sprintf("CRC %08x ok", bt.CRC)
	kind := KindGood
	if !bt.CRCOK {
		crc, kind = fmt.Sprintf("CRC %08x MISMATCH: the batch was corrupted", bt.CRC), KindBad
		n.Kind = KindBad
	}
	n.Add(b.Node(crc, kind))
	n.Add(b.Node(fmt.Sprintf("magic %d, codec %s", bt.Magic, bt.Codec()), KindPlain))
	if bt.Magic < 2 {
		b.recordNodes(n, bt)
		return n
	}
	n.Add(b.Node(fmt.Sprintf("partition leader epoch %d", bt.PartitionLeaderEpoch), KindPlain))
	n.Add(b.Node(fmt.Sprintf("producer id %d, epoch %d, base sequence %d", bt.ProducerID, bt.ProducerEpoch, bt.BaseSequence), KindPlain))
	ts := "create time"
	if bt.LogAppendTime() {
		ts = "log append time"
	}
	n.Add(b.Node(fmt.Sprintf("timestamps (%s) %s .. %s", ts, TreeTime(bt.FirstTimestamp), TreeTime(bt.MaxTimestamp)), KindPlain))
	var flags []string
	if bt.Transactional() {
		flags = append(flags, "transactional")
	}
	if bt.Control() {
		flags = append(flags, "control")
	}
	if len(flags) > 0 {
		n.Add(b.Node(strings.Join(flags, ", "), KindPlain))
	}
	b.recordNodes(n, bt)
	return n
}

// recordNodes lists a batch's records, decompressed: offset, timestamp,
// key, value and headers, text as text and other bytes in hex, as
// --records prints them.
func (b *TreeBuilder) recordNodes(parent *TreeNode, bt *decode.Batch) {
	if b.recs == nil {
		b.recs = decode.NewRecordHasher(recordDecompress)
	}
	n := parent.Add(b.Node("records", KindPlain))
	shown := 0
	err := b.recs.Records(bt, func(r *decode.Record) bool {
		if shown == maxRecords || b.Full() {
			return false
		}
		shown++
		at := fmt.Sprintf("offset %d", r.Offset)
		if b.Request {
			at = fmt.Sprintf("record %d", r.Offset-bt.BaseOffset) // the response gives the log's offsets
		}
		line := fmt.Sprintf("%s  %s  key %s  value %s", at, TreeTime(r.Timestamp),
			RecordBytes(r.Key, recordBytes, false), RecordBytes(r.Value, recordBytes, false))
		if bt.Control() {
			// A transaction marker, as --records shows it.
			line = fmt.Sprintf("%s  %s  producer id %d epoch %d", at, ControlType(r.Key), bt.ProducerID, bt.ProducerEpoch)
		}
		rn := n.Add(b.Node(line, KindPlain))
		for i, h := range r.Headers {
			if i == maxElems || b.Full() {
				break
			}
			rn.Add(b.Node("header "+RecordBytes(h.Key, recordBytes, false)+" = "+RecordBytes(h.Value, recordBytes, false), KindPlain))
		}
		return true
	})
	n.Text = fmt.Sprintf("records (%d listed)", shown)
	if int(bt.Records) > shown && err == nil {
		n.Add(b.Node(fmt.Sprintf("… %d more records", int(bt.Records)-shown), KindDim))
	}
	if err != nil {
		n.Add(b.Node("records not listed: "+err.Error(), KindDim))
	}
}

func TreeTime(ms int64) string {
	if ms <= 0 {
		return strconv.FormatInt(ms, 10)
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000")
}

func cleanQuoted(s string) string { return `"` + Clean(s) + `"` }

func uuidStr(id [16]byte) string {
	s := cluster.TopicID(id)
	if id == cluster.ClusterMetadataTopicID {
		s += " (" + cluster.ClusterMetadataTopic + ")"
	}
	return s
}

// bytesPreview shows a bytes field: its length, then its start as text
// when it is printable (Clean escapes what a terminal would act on), else
// in hex.
func bytesPreview(b []byte) string {
	s := fmt.Sprintf("%d bytes", len(b))
	if len(b) == 0 {
		return s
	}
	if text := cutBytes(b, textPreview); printable(text) {
		s += " " + cleanQuoted(string(text))
		if len(text) < len(b) {
			s += "…"
		}
		return s
	}
	n := min(len(b), hexPreview)
	s += fmt.Sprintf(" %x", b[:n])
	if n < len(b) {
		s += "…"
	}
	return s
}
