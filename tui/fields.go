package tui

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// nodeKind colours a line of the detail tree.
type nodeKind uint8

const (
	kindPlain nodeKind = iota
	kindHeading
	kindGood // CRC verified, no error
	kindBad  // error code, CRC mismatch, decode error
	kindDim  // notes: cut, not kept
)

// treeNode is one line of the detail tree. Text is sanitised for a
// terminal (report.Clean on every wire-derived part) but not yet escaped
// for tview.
type treeNode struct {
	Text     string
	Kind     nodeKind
	Children []*treeNode
}

func (n *treeNode) add(c *treeNode) *treeNode {
	n.Children = append(n.Children, c)
	return c
}

// walk visits the tree depth first with each node's depth.
func (n *treeNode) walk(depth int, fn func(*treeNode, int)) {
	fn(n, depth)
	for _, c := range n.Children {
		c.walk(depth+1, fn)
	}
}

// count is the number of lines of the tree.
func (n *treeNode) count() int {
	c := 0
	n.walk(0, func(*treeNode, int) { c++ })
	return c
}

// String renders the tree as indented text (for tests and debugging).
func (n *treeNode) String() string {
	var b strings.Builder
	n.walk(0, func(n *treeNode, d int) {
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
	maxTreeNodes = 20000
	maxInline    = 32 // scalars shown inline for an array of scalars
	hexPreview   = 32 // bytes of a bytes field shown inline
)

type treeBuilder struct {
	// secrets shows credentials (--show-secrets): otherwise bodies are
	// shown redacted (decode.Redact).
	secrets bool
	nodes   int
	cut     bool
	// recs lists the records of the batches shown, decompressed within
	// its bound; made at the first batch.
	recs *decode.RecordHasher
	// request is set while a request's fields are added: the offsets of
	// its records are the producer's (from 0), not the log's.
	request bool
}

// Bounds of the records listed in the detail: per batch, and bytes of
// one key or value shown, and the decompressed size of one batch.
const (
	maxRecords       = 100
	recordBytes      = 256
	recordDecompress = 16 << 20
)

func (b *treeBuilder) node(text string, kind nodeKind) *treeNode {
	b.nodes++
	return &treeNode{Text: text, Kind: kind}
}

func (b *treeBuilder) full() bool {
	if b.nodes >= maxTreeNodes {
		b.cut = true
		return true
	}
	return false
}

// detailTree builds the decoded exchange: the request and the response,
// each re-decoded from the copied frame (header, then every field kmsg
// has, record batches with their CRC), with latency and packet numbers.
func detailTree(x *Exchange, req, resp []byte) *treeNode {
	return detailTreeOf(x, req, resp, false)
}

// detailTreeOf is detailTree, with the credentials shown if secrets.
func detailTreeOf(x *Exchange, req, resp []byte, secrets bool) *treeNode {
	b := &treeBuilder{secrets: secrets}
	root := b.node(fmt.Sprintf("%s v%d corr %d", x.API(), x.Version, x.Correlation), kindHeading)
	if x.Key < 0 {
		root.Text = fmt.Sprintf("unmatched response corr %d", x.Correlation)
	}
	root.add(b.requestNode(x, req))
	root.add(b.responseNode(x, resp))
	if b.cut {
		root.add(b.node(fmt.Sprintf("… tree cut at %d lines", maxTreeNodes), kindDim))
	}
	return root
}

func (b *treeBuilder) requestNode(x *Exchange, frame []byte) *treeNode {
	switch {
	case x.ReqPacket == 0:
		return b.node("Request: not captured (the response came first, or the capture began after it)", kindDim)
	case frame == nil:
		return b.node(fmt.Sprintf("Request: packet %s, %d bytes: frame no longer kept (older frames are overwritten)", pktStr(x.File, x.ReqPacket), x.ReqSize), kindDim)
	}
	n := b.node(fmt.Sprintf("Request: packet %s, %d bytes, %s", pktStr(x.File, x.ReqPacket), x.ReqSize, x.Time.UTC().Format("15:04:05.000000")), kindHeading)
	h, err := decode.ParseRequestHeader(frame)
	if err != nil {
		n.add(b.node("header does not decode: "+err.Error(), kindBad))
		return n
	}
	hd := n.add(b.node("Header", kindPlain))
	hd.add(b.node(fmt.Sprintf("Key: %d (%s)", h.Key, decode.Name(h.Key)), kindPlain))
	hd.add(b.node(fmt.Sprintf("Version: %d", h.Version), kindPlain))
	hd.add(b.node(fmt.Sprintf("CorrelationID: %d", h.Correlation), kindPlain))
	if h.ClientIDNull {
		hd.add(b.node("ClientID: null", kindPlain))
	} else {
		hd.add(b.node("ClientID: "+quote(string(h.ClientID)), kindPlain))
	}
	hd.add(b.node(fmt.Sprintf("header v%d, %d bytes", h.HeaderVersion, h.Len), kindDim))
	if int(x.ReqSize)-decode.SizeLen > len(frame) {
		n.add(b.node(fmt.Sprintf("body not decoded: only the first %d of %d bytes are kept", len(frame), int(x.ReqSize)-decode.SizeLen), kindDim))
		return n
	}
	body, err := decode.DecodeRequest(h.Key, h.Version, frame[h.Len:])
	if err != nil {
		n.add(b.node("body does not decode: "+err.Error(), kindBad))
		if body == nil {
			return n
		}
	}
	b.request = true // a request's records are at offsets of its own
	b.fields(n, reflect.ValueOf(b.shown(body)).Elem())
	b.request = false
	return n
}

func (b *treeBuilder) responseNode(x *Exchange, frame []byte) *treeNode {
	switch {
	case x.State == Unanswered:
		return b.node("Response: none (unanswered)", kindBad)
	case x.State == NoResponse:
		return b.node("Response: none expected (acks=0)", kindDim)
	case x.State == NotCaptured:
		return b.node("Response: not captured (the capture holds no packet from the server)", kindDim)
	case x.RespPacket == 0:
		return b.node("Response: none", kindDim)
	case frame == nil:
		return b.node(fmt.Sprintf("Response: packet %s, %d bytes: frame no longer kept (older frames are overwritten)", pktStr(x.File, x.RespPacket), x.RespSize), kindDim)
	}
	text := fmt.Sprintf("Response: packet %s, %d bytes", pktStr(x.File, x.RespPacket), x.RespSize)
	if x.State == Answered {
		text += ", latency " + latencyStr(x.Latency)
	}
	n := b.node(text, kindHeading)
	corr, _ := decode.Correlation(frame)
	hd := n.add(b.node("Header", kindPlain))
	hd.add(b.node(fmt.Sprintf("CorrelationID: %d", corr), kindPlain))
	if x.Key < 0 {
		n.add(b.node("body not decoded: its request (API and version) was not captured", kindDim))
		return n
	}
	if int(x.RespSize)-decode.SizeLen > len(frame) {
		n.add(b.node(fmt.Sprintf("body not decoded: only the first %d of %d bytes are kept", len(frame), int(x.RespSize)-decode.SizeLen), kindDim))
		return n
	}
	hl, err := decode.ResponseHeaderLen(frame, x.Key, x.Version)
	if err != nil {
		n.add(b.node("header does not decode: "+err.Error(), kindBad))
		return n
	}
	hd.add(b.node(fmt.Sprintf("header v%d, %d bytes", decode.ResponseHeaderVersion(x.Key, x.Version), hl), kindDim))
	body, err := decode.DecodeResponse(x.Key, x.Version, frame[hl:])
	if err != nil {
		n.add(b.node("body does not decode: "+err.Error(), kindBad))
		if body == nil {
			return n
		}
	} else if body.GetVersion() != x.Version {
		n.add(b.node(fmt.Sprintf("body in the v%d layout: the broker refused v%d (UNSUPPORTED_VERSION)", body.GetVersion(), x.Version), kindPlain))
	}
	b.fields(n, reflect.ValueOf(b.shown(body)).Elem())
	return n
}

// shown is the body the tree shows: redacted unless secrets.
func (b *treeBuilder) shown(body any) any {
	if b.secrets {
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
func (b *treeBuilder) fields(parent *treeNode, v reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if b.full() {
			return
		}
		b.field(parent, f.Name, v.Field(i))
	}
}

func (b *treeBuilder) field(parent *treeNode, name string, v reflect.Value) {
	switch {
	case v.Type() == tagsType:
		if v.CanAddr() {
			if tags := v.Addr().Interface().(*kmsg.Tags); tags.Len() > 0 {
				tn := parent.add(b.node(fmt.Sprintf("%s: %d", name, tags.Len()), kindPlain))
				tags.Each(func(k uint32, val []byte) {
					tn.add(b.node(fmt.Sprintf("tag %d: %s", k, bytesPreview(val)), kindPlain))
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
			parent.add(b.node(name+": null", kindPlain))
			return
		}
		parent.add(b.node(name+": "+bytesPreview(v.Bytes()), kindPlain))
		return
	case v.Type() == uuidType:
		id := v.Interface().([16]byte)
		parent.add(b.node(name+": "+uuidStr(id), kindPlain))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			parent.add(b.node(name+": null", kindPlain))
			return
		}
		b.field(parent, name, v.Elem())
	case reflect.Struct:
		n := parent.add(b.node(name, kindPlain))
		b.fields(n, v)
	case reflect.Slice, reflect.Array:
		b.list(parent, name, v)
	default:
		text, kind := scalar(name, v)
		parent.add(b.node(name+": "+text, kind))
	}
}

// list shows an array: scalars inline, structs as children [i].
func (b *treeBuilder) list(parent *treeNode, name string, v reflect.Value) {
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
		parent.add(b.node(text+"]", kindPlain))
		return
	}
	ln := parent.add(b.node(fmt.Sprintf("%s (%d)", name, n), kindPlain))
	for i := 0; i < n; i++ {
		if i >= maxElems {
			ln.add(b.node(fmt.Sprintf("… %d more", n-i), kindDim))
			return
		}
		if b.full() {
			return
		}
		e := v.Index(i)
		if e.Kind() == reflect.Pointer {
			if e.IsNil() {
				ln.add(b.node(fmt.Sprintf("[%d]: null", i), kindPlain))
				continue
			}
			e = e.Elem()
		}
		if e.Kind() != reflect.Struct {
			b.field(ln, fmt.Sprintf("[%d]", i), e)
			continue
		}
		en := ln.add(b.node(fmt.Sprintf("[%d]%s", i, elemHint(e)), kindPlain))
		b.fields(en, e)
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
			parts = append(parts, "topic "+quote(f.String()))
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
func scalar(name string, v reflect.Value) (string, nodeKind) {
	switch v.Kind() {
	case reflect.String:
		return quote(v.String()), kindPlain
	case reflect.Bool:
		return strconv.FormatBool(v.Bool()), kindPlain
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		s := strconv.FormatInt(v.Int(), 10)
		if v.Kind() == reflect.Int16 && strings.HasSuffix(name, "ErrorCode") {
			if v.Int() != 0 {
				return s + " " + decode.ErrorName(int16(v.Int())), kindBad
			}
			return s + " NONE", kindGood
		}
		return s, kindPlain
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return strconv.FormatUint(v.Uint(), 10), kindPlain
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64), kindPlain
	case reflect.Pointer:
		if v.IsNil() {
			return "null", kindPlain
		}
		return scalar(name, v.Elem())
	case reflect.Array:
		if v.Type() == uuidType {
			return uuidStr(v.Interface().([16]byte)), kindPlain
		}
	}
	return report.Clean(fmt.Sprint(v.Interface())), kindPlain
}

// records shows a records field as its batches, each with its CRC status.
func (b *treeBuilder) records(parent *treeNode, name string, raw []byte) {
	if raw == nil {
		parent.add(b.node(name+": null", kindPlain))
		return
	}
	n := parent.add(b.node("", kindPlain))
	var batches []*treeNode
	scan, err := decode.ScanBatches(raw, func(bt *decode.Batch) {
		if len(batches) >= maxElems || b.full() {
			return
		}
		batches = append(batches, b.batch(len(batches), bt))
	})
	text := fmt.Sprintf("%s: %d bytes, %d batches", name, len(raw), scan.Batches)
	if scan.BadCRC > 0 {
		text += fmt.Sprintf(", %d with a bad CRC", scan.BadCRC)
		n.Kind = kindBad
	}
	if scan.Truncated {
		text += ", last batch cut short (normal at a fetch's byte limit)"
	}
	n.Text = text
	n.Children = batches
	if scan.Batches > len(batches) {
		n.add(b.node(fmt.Sprintf("… %d more batches", scan.Batches-len(batches)), kindDim))
	}
	if err != nil {
		n.add(b.node(fmt.Sprintf("after %d batches: %v", scan.Batches, err), kindBad))
	}
}

func (b *treeBuilder) batch(i int, bt *decode.Batch) *treeNode {
	n := b.node(fmt.Sprintf("batch %d: offsets %d..%d, %d records, %d bytes", i, bt.BaseOffset, bt.LastOffset(), bt.Records, len(bt.Raw)), kindPlain)
	crc := fmt.Sprintf("CRC %08x ok", bt.CRC)
	kind := kindGood
	if !bt.CRCOK {
		crc, kind = fmt.Sprintf("CRC %08x MISMATCH: the batch was corrupted", bt.CRC), kindBad
		n.Kind = kindBad
	}
	n.add(b.node(crc, kind))
	n.add(b.node(fmt.Sprintf("magic %d, codec %s", bt.Magic, bt.Codec()), kindPlain))
	if bt.Magic < 2 {
		b.recordNodes(n, bt)
		return n
	}
	n.add(b.node(fmt.Sprintf("partition leader epoch %d", bt.PartitionLeaderEpoch), kindPlain))
	n.add(b.node(fmt.Sprintf("producer id %d, epoch %d, base sequence %d", bt.ProducerID, bt.ProducerEpoch, bt.BaseSequence), kindPlain))
	ts := "create time"
	if bt.LogAppendTime() {
		ts = "log append time"
	}
	n.add(b.node(fmt.Sprintf("timestamps (%s) %s .. %s", ts, msTime(bt.FirstTimestamp), msTime(bt.MaxTimestamp)), kindPlain))
	var flags []string
	if bt.Transactional() {
		flags = append(flags, "transactional")
	}
	if bt.Control() {
		flags = append(flags, "control")
	}
	if len(flags) > 0 {
		n.add(b.node(strings.Join(flags, ", "), kindPlain))
	}
	b.recordNodes(n, bt)
	return n
}

// recordNodes lists a batch's records, decompressed: offset, timestamp,
// key, value and headers, text as text and other bytes in hex, as
// --records prints them.
func (b *treeBuilder) recordNodes(parent *treeNode, bt *decode.Batch) {
	if b.recs == nil {
		b.recs = decode.NewRecordHasher(recordDecompress)
	}
	n := parent.add(b.node("records", kindPlain))
	shown := 0
	err := b.recs.Records(bt, func(r *decode.Record) bool {
		if shown == maxRecords || b.full() {
			return false
		}
		shown++
		at := fmt.Sprintf("offset %d", r.Offset)
		if b.request {
			at = fmt.Sprintf("record %d", r.Offset-bt.BaseOffset) // the response gives the log's offsets
		}
		line := fmt.Sprintf("%s  %s  key %s  value %s", at, msTime(r.Timestamp),
			report.RecordBytes(r.Key, recordBytes, false), report.RecordBytes(r.Value, recordBytes, false))
		if bt.Control() {
			// A transaction marker, as --records shows it.
			line = fmt.Sprintf("%s  %s  producer id %d epoch %d", at, report.ControlType(r.Key), bt.ProducerID, bt.ProducerEpoch)
		}
		rn := n.add(b.node(line, kindPlain))
		for i, h := range r.Headers {
			if i == maxElems || b.full() {
				break
			}
			rn.add(b.node("header "+report.RecordBytes(h.Key, recordBytes, false)+" = "+report.RecordBytes(h.Value, recordBytes, false), kindPlain))
		}
		return true
	})
	n.Text = fmt.Sprintf("records (%d listed)", shown)
	if int(bt.Records) > shown && err == nil {
		n.add(b.node(fmt.Sprintf("… %d more records", int(bt.Records)-shown), kindDim))
	}
	if err != nil {
		n.add(b.node("records not listed: "+err.Error(), kindDim))
	}
}

func msTime(ms int64) string {
	if ms <= 0 {
		return strconv.FormatInt(ms, 10)
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000")
}

func quote(s string) string { return `"` + report.Clean(s) + `"` }

func uuidStr(id [16]byte) string {
	s := decode.TopicID(id)
	if id == decode.ClusterMetadataTopicID {
		s += " (" + flows.ClusterMetadataTopic + ")"
	}
	return s
}

func bytesPreview(b []byte) string {
	s := fmt.Sprintf("%d bytes", len(b))
	if len(b) == 0 {
		return s
	}
	n := min(len(b), hexPreview)
	s += fmt.Sprintf(" %x", b[:n])
	if n < len(b) {
		s += "…"
	}
	return s
}

func pktStr(file int, n uint64) string {
	if file > 0 {
		return fmt.Sprintf("%d:%d", file, n)
	}
	return strconv.FormatUint(n, 10)
}

func latencyStr(d time.Duration) string {
	return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000)
}

// hexDump renders a frame as Wireshark does: offset, 16 bytes in hex,
// and the printable ASCII, the 4-byte size prefix first. It shows at most
// limit bytes of the frame.
func hexDump(b *strings.Builder, frame []byte, size int, limit int) {
	full := make([]byte, 0, decode.SizeLen+min(len(frame), limit))
	full = binary.BigEndian.AppendUint32(full, uint32(size))
	full = append(full, frame[:min(len(frame), limit)]...)
	for off := 0; off < len(full); off += 16 {
		line := full[off:min(off+16, len(full))]
		fmt.Fprintf(b, "%04x  ", off)
		for i := 0; i < 16; i++ {
			if i < len(line) {
				fmt.Fprintf(b, "%02x ", line[i])
			} else {
				b.WriteString("   ")
			}
			if i == 7 {
				b.WriteByte(' ')
			}
		}
		b.WriteString(" |")
		for _, c := range line {
			if c >= 0x20 && c < 0x7f {
				b.WriteByte(c)
			} else {
				b.WriteByte('.')
			}
		}
		b.WriteString("|\n")
	}
	if kept := len(frame); kept > limit || kept < size {
		fmt.Fprintf(b, "… %d of %d bytes shown\n", min(kept, limit)+decode.SizeLen, size+decode.SizeLen)
	}
}
