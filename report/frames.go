package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
)

// FrameFilter selects frames for the one-line view. Empty fields match all.
type FrameFilter struct {
	APIs     map[int16]bool // by key
	ClientID string         // substring of the client id
	Conns    []string       // connection ids ("3") or endpoints ("10.0.0.1:9092", "10.0.0.1")
	Errors   bool           // only responses with error codes, and undecodable frames
}

// ParseAPIs parses a comma list of API names (case-insensitive) or keys.
func ParseAPIs(spec string) (map[int16]bool, error) {
	out := map[int16]bool{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if n, err := strconv.ParseInt(part, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			// A key kmsg knows: an int16 cast took 65537 for Fetch (1).
			if n < 0 || n > math.MaxInt16 || !decode.KnownKey(int16(n)) {
				return nil, fmt.Errorf("unknown API key %s (kfsniff decodes the keys kmsg knows, 0 to %d; or use a name such as Fetch)", part, maxKnownKey())
			}
			out[int16(n)] = true
			continue
		}
		found := false
		for k := int16(0); k < 1000; k++ {
			if decode.KnownKey(k) && strings.EqualFold(decode.Name(k), part) {
				out[k] = true
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown API %q (use a name such as Fetch, or a key number)", part)
		}
	}
	return out, nil
}

// maxKnownKey is the highest API key kmsg knows.
func maxKnownKey() int16 {
	k := int16(0)
	for i := int16(0); i < 1000; i++ {
		if decode.KnownKey(i) {
			k = i
		}
	}
	return k
}

func (f *FrameFilter) match(m *flows.Message) bool {
	if len(f.APIs) > 0 && !f.APIs[m.Key] {
		return false
	}
	if f.ClientID != "" && !strings.Contains(m.Client.ID, f.ClientID) {
		return false
	}
	c := m.Conn
	if len(f.Conns) > 0 && !slices.ContainsFunc(f.Conns, func(want string) bool {
		return want == strconv.Itoa(c.ID) || want == c.Client.String() || want == c.Server.String() ||
			want == c.Client.Addr().String() || want == c.Server.Addr().String()
	}) {
		return false
	}
	if f.Errors && len(m.ErrorCodes) == 0 && m.Err == nil {
		return false
	}
	return true
}

// FrameWriter prints one line per request and per response as they are
// decoded, as text or (JSON true) as JSON Lines.
type FrameWriter struct {
	// Warn, if set, is told of every value written otherwise than it is
	// (jsonsafe.go: a time outside years 0-9999, a value whose encoding
	// failed), with the frame's packet number; the line is still written.
	Warn func(error)
	// ShowSecrets shows the credentials of bodies (--show-secrets);
	// otherwise -v prints them redacted (decode.Redact).
	ShowSecrets bool

	w       *bufio.Writer
	filter  FrameFilter
	json    bool
	verbose bool
	enc     *json.Encoder
	line1   bytes.Buffer // the JSON line being encoded
	err     error        // the first write error: output stops there
}

// NewFrameWriter returns a FrameWriter; call Flush at the end.
func NewFrameWriter(w io.Writer, filter FrameFilter, asJSON, verbose bool) *FrameWriter {
	bw := bufio.NewWriterSize(w, 64<<10)
	fw := &FrameWriter{w: bw, filter: filter, json: asJSON, verbose: verbose}
	if asJSON {
		fw.enc = json.NewEncoder(&fw.line1)
		fw.enc.SetEscapeHTML(false)
	}
	return fw
}

// Flush writes what is buffered and returns the first write error.
func (fw *FrameWriter) Flush() error {
	if err := fw.w.Flush(); err != nil && fw.err == nil {
		fw.err = err
	}
	return fw.err
}

// OnRequest prints a request.
func (fw *FrameWriter) OnRequest(m *flows.Message) {
	if fw.filter.match(m) {
		fw.line(m, nil)
	}
}

// OnExchange prints a response (unanswered requests print nothing: they
// were printed when sent).
func (fw *FrameWriter) OnExchange(x *flows.Exchange) {
	if x.Resp == nil {
		return
	}
	m := x.Resp
	if x.Req == nil && !m.Inferred {
		// Unmatched response: only the correlation id is known.
		if len(fw.filter.APIs) > 0 || fw.filter.Errors || fw.filter.ClientID != "" || !fw.filter.match(m) {
			return
		}
	} else if !fw.filter.match(m) {
		return
	}
	fw.line(m, x)
}

// FrameLine is one frame in JSON Lines output.
type FrameLine struct {
	Type        string         `json:"type"` // "request" or "response"
	File        int            `json:"file"`
	Packet      uint64         `json:"packet"`
	FirstPacket uint64         `json:"first_packet"`
	Time        time.Time      `json:"time"`
	Conn        int            `json:"conn"`
	Agent       string         `json:"agent,omitempty"`
	Client      string         `json:"client"`
	Server      string         `json:"server"`
	Key         int16          `json:"key"`
	API         string         `json:"api"`
	Version     int16          `json:"version"`
	Layout      *int16         `json:"layout_version,omitempty"`
	Correlation int32          `json:"correlation"`
	ClientID    string         `json:"client_id"`
	Role        string         `json:"role,omitempty"`
	ClientNode  *int32         `json:"client_node,omitempty"`
	ServerNode  *int32         `json:"server_node,omitempty"`
	Size        int            `json:"size"`
	LatencyMs   *float64       `json:"latency_ms,omitempty"`
	RequestPkt  uint64         `json:"request_packet,omitempty"`
	Unmatched   bool           `json:"unmatched,omitempty"`
	APIInferred bool           `json:"api_inferred,omitempty"`
	Errors      map[string]int `json:"errors,omitempty"`
	Batches     []FrameBatch   `json:"batches,omitempty"`
	Summary     string         `json:"summary"`
	DecodeError string         `json:"decode_error,omitempty"`
	Body        any            `json:"body,omitempty"`
}

// FrameBatch is a record batch in JSON Lines output.
type FrameBatch struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	BaseOffset    int64  `json:"base_offset"`
	LastOffset    int64  `json:"last_offset"`
	Records       int32  `json:"records"`
	Magic         int8   `json:"magic"`
	CRC           string `json:"crc"`
	CRCOK         bool   `json:"crc_ok"`
	Codec         string `json:"codec"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
	BaseSequence  int32  `json:"base_sequence"`
	LeaderEpoch   int32  `json:"partition_leader_epoch"`
	Size          int    `json:"size"`
	Transactional bool   `json:"transactional,omitempty"`
	Control       bool   `json:"control,omitempty"`
}

func (fw *FrameWriter) line(m *flows.Message, x *flows.Exchange) {
	if fw.err != nil {
		return
	}
	c := m.Conn
	api := decode.Name(m.Key)
	if m.Key < 0 {
		api = "?"
	}
	if fw.json {
		l := FrameLine{
			Type: "request", File: m.File, Packet: m.Packet, FirstPacket: m.FirstPacket, Time: m.Time.UTC(),
			Conn: c.ID, Agent: m.Agent(), Client: c.Client.String(), Server: c.Server.String(),
			Key: m.Key, API: api, Version: m.Version, Correlation: m.Correlation, ClientID: m.Client.ID,
			Size: m.Size, Summary: Summary(m), Role: m.Role.String(),
		}
		if nodes := c.Nodes(); nodes != nil {
			if id := nodes.Host(c.Client.Addr()); id >= 0 {
				l.ClientNode = &id
			}
			if id := nodes.Server(c.Server); id >= 0 {
				l.ServerNode = &id
			}
		}
		if m.Response {
			l.Type = "response"
			if x != nil && x.Req != nil {
				lat := Millis(x.Latency())
				l.LatencyMs = &lat
				l.RequestPkt = x.Req.Packet
			} else {
				l.Unmatched, l.APIInferred = true, m.Inferred
			}
		}
		if len(m.ErrorCodes) > 0 {
			l.Errors = map[string]int{}
			for _, e := range m.ErrorCodes {
				l.Errors[decode.ErrorName(e.Code)] += e.Count
			}
		}
		for _, b := range m.Batches {
			l.Batches = append(l.Batches, FrameBatch{
				Topic: m.TopicName(b.Topic, b.TopicID), Partition: b.Partition, BaseOffset: b.BaseOffset,
				LastOffset: b.LastOffset(), Records: b.Records, Magic: b.Magic, CRC: fmt.Sprintf("%08x", b.CRC),
				CRCOK: b.CRCOK, Codec: b.Codec().String(), ProducerID: b.ProducerID, ProducerEpoch: b.ProducerEpoch,
				BaseSequence: b.BaseSequence, LeaderEpoch: b.PartitionLeaderEpoch, Size: int(b.Length) + 12,
				Transactional: b.Transactional(), Control: b.Control(),
			})
		}
		if m.Err != nil {
			l.DecodeError = m.Err.Error()
		}
		if m.Resp != nil && m.Resp.GetVersion() != m.Version {
			v := m.Resp.GetVersion()
			l.Layout = &v
		}
		if fw.verbose {
			tb := TreeBuilder{Secrets: fw.ShowSecrets}
			if m.Req != nil {
				l.Body = tb.Shown(m.Req)
			} else if m.Resp != nil {
				l.Body = tb.Shown(m.Resp)
			}
		}
		fw.line1.Reset()
		out := fw.line1.Bytes()
		if err := fw.enc.Encode(&l); err == nil {
			out = fw.line1.Bytes()
		} else {
			var issues []JSONIssue
			out, issues = marshalWalk(&l)
			fw.warn(m, issues)
		}
		if _, err := fw.w.Write(SafeJSON(out)); err != nil {
			fw.err = err
		}
		return
	}
	arrow, kind := "->", "req "
	if m.Response {
		arrow, kind = "<-", "resp"
	}
	ver := fmt.Sprintf("v%d", m.Version)
	if m.Key < 0 {
		ver = "v?"
	}
	client, server := c.Client.String(), c.Server.String()
	if nodes := c.Nodes(); nodes != nil {
		client, server = nodes.Label(c.Client, false), nodes.Label(c.Server, true)
	}
	fmt.Fprintf(fw.w, "%6s %s #%d %s %s %s %s %s %s corr=%d", pkt(m.File, m.Packet), m.Time.UTC().Format("15:04:05.000000"),
		c.ID, client, arrow, server, api, ver, kind, m.Correlation)
	if a := m.Agent(); a != "" {
		fmt.Fprintf(fw.w, " agent=%q", Clean(a))
	}
	if m.Client.ID != "" && !m.Response {
		fmt.Fprintf(fw.w, " client=%q", Clean(m.Client.ID))
	}
	if m.Response {
		if x != nil && x.Req != nil {
			fmt.Fprintf(fw.w, " latency=%.3fms", Millis(x.Latency()))
		} else {
			fmt.Fprintf(fw.w, " unmatched (request not captured)")
			if m.Inferred {
				fmt.Fprintf(fw.w, ", decoded as the connection's %s v%d requests", api, m.Version)
			}
		}
	}
	if s := Summary(m); s != "" {
		fw.w.WriteString(" " + s)
	}
	fw.w.WriteByte('\n')
	if fw.verbose {
		var body any
		switch {
		case m.Resp != nil:
			body = m.Resp
		case m.Req != nil:
			body = m.Req
		}
		if body != nil {
			fw.tree(body, !m.Response)
		}
	}
}

// tree prints a body as -v does, as tshark -V prints a packet's fields:
// the field tree (tree.go), indented under the frame's line, its secrets
// redacted unless ShowSecrets. A request's records are at offsets of its
// own (from 0), a response's at the log's.
func (fw *FrameWriter) tree(body any, request bool) {
	tb := &TreeBuilder{Secrets: fw.ShowSecrets, Request: request}
	root := tb.Node("", KindPlain)
	tb.Body(root, body)
	if tb.Cut() {
		root.Add(tb.Node(fmt.Sprintf("… tree cut at %d lines", MaxTreeNodes), KindDim))
	}
	for _, c := range root.Children {
		c.Walk(0, func(n *TreeNode, depth int) {
			fw.w.WriteString("        ")
			for range depth {
				fw.w.WriteString("  ")
			}
			fw.w.WriteString(n.Text)
			fw.w.WriteByte('\n')
		})
	}
}

// warn tells Warn of the values of m's line written otherwise.
func (fw *FrameWriter) warn(m *flows.Message, issues []JSONIssue) {
	if fw.Warn == nil {
		return
	}
	kind := "request"
	if m.Response {
		kind = "response"
	}
	for _, i := range issues {
		fw.Warn(fmt.Errorf("packet %s (%s v%d %s): %s: %s", pkt(m.File, m.Packet), Clean(decode.Name(m.Key)), m.Version, kind, i.Path, i.What))
	}
}
