package tui

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/collect"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
	"github.com/kfsniff/kfsniff/tlsdec"
)

// ModelConfig bounds what a Model keeps. The zero value uses the defaults.
type ModelConfig struct {
	// History is how many recent exchanges are kept over all connections
	// (default 10000).
	History int
	// ConnHistory is how many recent exchanges are kept per connection
	// (default 500), so a quiet connection keeps its history while a busy
	// one rotates the global ring.
	ConnHistory int
	// MaxConns is how many connections are tracked (default 4096); beyond
	// it the longest idle ones are forgotten (the totals keep counting).
	MaxConns int
	// FrameBytes is the memory for copies of frames, for the detail and
	// hex views (default 64 MiB); older frames are overwritten.
	FrameBytes int
	// MaxFrame is how much of one frame is kept (default 1 MiB); a longer
	// frame is shown in hex up to there and not decoded.
	MaxFrame int
	// FrameRate is how many bytes of frames are copied per second of
	// capture time (default 16 MiB); past it a second's further frames
	// are not kept. A fast capture (1 GB/s) would otherwise copy every
	// frame on the capture's goroutine only to overwrite it 64 ms later:
	// within the rate the ring holds at least FrameBytes/FrameRate
	// seconds.
	FrameRate int
	// Timeline is how many seconds of per-second counts (requests, error
	// responses) are kept, overall, per API and per connection, for the
	// timeline (default 300): 16 bytes a second each, 4.7 KiB per
	// connection at the default, allocated at its first request.
	Timeline int
	// ShowSecrets shows credentials in the detail and hex views
	// (--show-secrets).
	ShowSecrets bool
}

// ShowSecrets reports whether the views show credentials.
func (m *Model) ShowSecrets() bool { return m.cfg.ShowSecrets }

// Defaults of ModelConfig.
const (
	DefaultHistory     = 10000
	DefaultConnHistory = 500
	DefaultMaxConns    = 4096
	DefaultFrameBytes  = 64 << 20
	DefaultMaxFrame    = 1 << 20
	DefaultFrameRate   = 16 << 20
)

func (c ModelConfig) withDefaults() ModelConfig {
	c.History = orDefault(c.History, DefaultHistory)
	c.ConnHistory = orDefault(c.ConnHistory, DefaultConnHistory)
	c.MaxConns = orDefault(c.MaxConns, DefaultMaxConns)
	c.FrameBytes = orDefault(c.FrameBytes, DefaultFrameBytes)
	c.MaxFrame = min(orDefault(c.MaxFrame, DefaultMaxFrame), c.FrameBytes)
	c.FrameRate = orDefault(c.FrameRate, DefaultFrameRate)
	c.Timeline = orDefault(c.Timeline, DefaultTimeline)
	return c
}

// orDefault is v, or def when v is not positive.
func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// ExchangeState says how an exchange ended.
type ExchangeState uint8

// Exchange states.
const (
	Answered    ExchangeState = iota // request and response
	Unanswered                       // no response by the end (or evicted)
	NoResponse                       // acks=0 Produce: none expected
	Unmatched                        // a response whose request was not captured
	NotCaptured                      // a request on a one-sided capture: its response direction was not captured
)

var stateNames = [...]string{
	Answered:    "answered",
	Unanswered:  "unanswered",
	NoResponse:  "no response",
	Unmatched:   "unmatched",
	NotCaptured: "response not captured",
}

func (s ExchangeState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "?"
}

// Exchange is what the model keeps of one flows.Exchange: plain values
// (no reference to the analyzer's objects) and where its frames' copies
// are. Strings hold wire data: sanitise before display.
type Exchange struct {
	// Seq numbers exchanges in the order they completed, from 1.
	Seq         uint64
	Conn        int
	File        int
	ReqPacket   uint64 // packet completing the request, 0 if none
	RespPacket  uint64 // packet completing the response, 0 if none
	Time        time.Time
	Latency     time.Duration
	Key         int16 // -1 for an unmatched response
	Version     int16
	Correlation int32
	ClientID    string
	Role        cluster.Role
	State       ExchangeState
	// ErrorCode is the most frequent non-zero error code of the response
	// (0 if none); Errors counts all non-zero error codes.
	ErrorCode int16
	Errors    int32
	// DecodeError is set if a side did not decode.
	DecodeError bool
	ReqSize     int32 // frame sizes including the size prefix
	RespSize    int32
	// Topic is the first topic the request names; Topics how many.
	Topic  string
	Topics int32
	// Batches counts record batches carried; BadCRC those whose CRC does
	// not verify.
	Batches int32
	BadCRC  int32

	req, resp frameRef
}

// API is the name of the exchange's API.
func (x *Exchange) API() string {
	if x.Key < 0 {
		return "?"
	}
	return decode.Name(x.Key)
}

// Conn is a snapshot of one connection.
type Conn struct {
	ID int
	// Client and Server are the ends with their node ids when known:
	// "node 1003 (10.30.7.85:8081)".
	Client, Server string
	Roles          []cluster.Role
	ClientIDs      []string
	Requests       int
	Responses      int
	Errors         int // responses carrying an error code
	Unanswered     int
	BytesToServer  int64
	BytesToClient  int64
	// Rate is requests per second over the last seconds of capture time.
	Rate      float64
	FirstSeen time.Time
	LastSeen  time.Time
	Closed    bool
	Reset     bool
	// Kept is how many of its exchanges the model still holds.
	Kept int
	// Software is the client's name and version from its ApiVersions
	// v3+ request (KIP-511), if it sent one; Removed40 the first request
	// version it sent that Apache Kafka 4.0 removed (KIP-896), if any.
	Software  string
	Removed40 string
	// TLS is the connection's TLS version when a key log was given
	// ("TLS 1.3", "TLS 1.2, not decrypted"), "" otherwise.
	TLS string
}

// APIStats are the counts of one API.
type APIStats struct {
	Key            int16
	Name           string
	Requests       int64
	Responses      int64
	ErrorResponses int64
	Unanswered     int64
	// Errors are the error codes by name, most frequent first.
	Errors []ErrorCount
	P50    time.Duration
	P99    time.Duration
	Max    time.Duration
}

// ErrorCount is an error name and how often it was seen.
type ErrorCount struct {
	Name  string
	Code  int16
	Count int64
}

// Counters are the capture's own counters, which the handlers do not see;
// the caller sets them (Model.SetCounters).
type Counters struct {
	Packets int64
	Bytes   int64
	// Drops are packets the kernel dropped (live capture).
	Drops int64
	// Live is true while a live capture runs.
	Live bool
	// Export is true with --export; ExportDropped counts the records
	// shipping dropped or failed to deliver.
	Export        bool
	ExportDropped int64
	// SaveDropped counts the packets the `w` key can no longer save:
	// older than what its buffer of SaveKeepMB megabytes keeps.
	SaveDropped int64
	SaveKeepMB  int
}

// Status is the model's totals for the status line.
type Status struct {
	Counters
	// Kafka connections seen, refused and unanswered connection attempts.
	Conns      int
	Refused    int
	SYNsLost   int
	Requests   int64
	Exchanges  uint64
	Errors     int64 // responses carrying an error code
	Rate       float64
	First      time.Time
	Last       time.Time
	Findings   int
	Kept       int // exchanges in the global ring
	MaxPacket  uint64
	FramesKept int64 // bytes of frame copies held
	// Partial says what the run left out of its input (SetPartial),
	// empty when nothing.
	Partial string
}

// Model is the TUI's plain-Go state: a flows handler (OnRequest,
// OnExchange, OnConnEvent) fed by the pipeline's goroutine, read by the
// UI's goroutine through snapshot methods that copy. It keeps bounded
// history, so it can run for hours.
type Model struct {
	cfg     ModelConfig
	version atomic.Uint64

	mu    sync.Mutex
	seq   uint64
	ring  history // global history
	conns map[int]*connState
	last  *connState
	arena arena
	// frameSec is the second of capture time frames are copied in, and
	// frameSpent the bytes copied in it (FrameRate).
	frameSec   int64
	frameSpent int
	apis       [kmsg.MaxKey + 1]*apiState
	findings   []detectors.Finding
	counters   Counters
	partial    string
	status     Status
	rate       window
	tl         secRing // per second, for the timeline
	// lag follows consumers' and followers' lag (lag.go).
	lag collect.LagCollector
	// unmatched is key -1's (responses whose request was not captured),
	// unknown every key kmsg does not know, from the wire: one entry for
	// all (each would cost a histogram).
	unmatched *apiState
	unknown   *apiState
}

type connState struct {
	c    *flows.Conn
	info Conn
	// roles and clientIDs as flows holds them; ClientIDs only grows, so
	// the elements below its length never change.
	roles     cluster.RoleSet
	clientIDs []string
	hist      history
	win       window
	tl        secRing
	labelDue  time.Time
}

// apiState is an API key's counts (as the report counts them) and its
// timeline.
type apiState struct {
	collect.APICounts
	tl secRing
}

// NewModel returns an empty model.
func NewModel(cfg ModelConfig) *Model {
	cfg = cfg.withDefaults()
	return &Model{
		cfg:   cfg,
		ring:  history{xs: make([]Exchange, 0, min(cfg.History, 1024))},
		conns: make(map[int]*connState),
		arena: arena{limit: cfg.FrameBytes},
	}
}

// Version changes whenever the model does; the UI skips a refresh when it
// has not changed.
func (m *Model) Version() uint64 { return m.version.Load() }

func (m *Model) conn(c *flows.Conn) *connState {
	if m.last != nil && m.last.c == c {
		return m.last
	}
	cs := m.conns[c.ID]
	if cs == nil || cs.c != c {
		cs = &connState{c: c, info: Conn{ID: c.ID}}
		m.conns[c.ID] = cs
		m.status.Conns++
		cs.refresh(time.Time{})
		if len(m.conns) > m.cfg.MaxConns+m.cfg.MaxConns/8 {
			m.evict()
		}
	}
	m.last = cs
	return cs
}

// evict forgets the longest idle connections, closed ones first, down to
// MaxConns (in batches, so the cost is amortised).
func (m *Model) evict() {
	all := make([]*connState, 0, len(m.conns))
	for _, cs := range m.conns {
		all = append(all, cs)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i].info, all[j].info
		if ca, cb := a.Closed || a.Reset, b.Closed || b.Reset; ca != cb {
			return ca
		}
		return a.LastSeen.Before(b.LastSeen)
	})
	for _, cs := range all[:len(all)-m.cfg.MaxConns] {
		delete(m.conns, cs.info.ID)
		if m.last == cs {
			m.last = nil
		}
	}
}

// refresh copies the connection's counters from flows; and, at most once
// a second of capture time (or when now is zero), its node labels, which
// allocate. Called only from the handler goroutine.
func (cs *connState) refresh(now time.Time) {
	c := cs.c
	in := &cs.info
	in.Requests, in.Responses, in.Errors = c.Requests, c.Responses, c.ErrorResponses
	in.Unanswered = c.Unanswered
	in.BytesToServer, in.BytesToClient = c.Bytes[flows.ToServer], c.Bytes[flows.ToClient]
	in.FirstSeen, in.LastSeen = c.FirstSeen, c.LastSeen
	in.Closed, in.Reset = c.Closed, c.Reset
	if t := c.TLSInfo; t != nil && in.TLS == "" {
		// Version and Decrypted are settled before the connection is
		// made (its first bytes decrypted, or none to be).
		in.TLS = "TLS"
		if t.Version != 0 {
			in.TLS = tlsdec.VersionName(t.Version)
		}
		if !t.Decrypted {
			in.TLS += ", not decrypted"
		}
	}
	cs.roles = c.Roles
	cs.clientIDs = c.ClientIDs
	if now.IsZero() || !now.Before(cs.labelDue) {
		in.Client, in.Server = labels(c)
		cs.labelDue = now.Add(time.Second)
	}
}

func labels(c *flows.Conn) (client, server string) {
	if n := c.Nodes(); n != nil {
		return n.Label(c.Client, false), n.Label(c.Server, true)
	}
	return c.Client.String(), c.Server.String()
}

// unknownKey is the Stats entry of every API key kmsg does not know.
const unknownKey int16 = -32768

func (m *Model) api(key int16) *apiState {
	if key >= 0 && int(key) < len(m.apis) && m.apis[key] != nil {
		return m.apis[key] // the common case, first
	}
	p := m.apiState(key)
	if *p == nil {
		*p = &apiState{}
	}
	return *p
}

// apiState is where the API's state is, nil if none was seen.
func (m *Model) apiState(key int16) **apiState {
	switch {
	case key >= 0 && int(key) < len(m.apis):
		return &m.apis[key]
	case key == -1:
		return &m.unmatched
	}
	return &m.unknown
}

// keep copies a frame of size bytes (b, its bytes captured) at t, within
// MaxFrame and FrameRate; a frame past the rate is not kept (a frameRef
// of no bytes: read as no longer kept).
func (m *Model) keep(b []byte, size int, t time.Time) frameRef {
	if len(b) > m.cfg.MaxFrame {
		b = b[:m.cfg.MaxFrame]
	}
	if s := t.Unix(); s != m.frameSec {
		m.frameSec, m.frameSpent = s, 0
	}
	if len(b) > 0 && m.frameSpent+len(b) > m.cfg.FrameRate {
		return frameRef{off: m.arena.head, size: uint32(max(size, 1))}
	}
	m.frameSpent += len(b)
	return m.arena.put(b, size)
}

// Keep implements flows.Keeper: flows keeps the first MaxFrame bytes of
// each request frame until its exchange, when the model copies them with
// the response's for the hex and detail views.
func (m *Model) Keep() []flows.Keep { return []flows.Keep{{Frame: m.cfg.MaxFrame}} }

// OnRequest counts the request.
func (m *Model) OnRequest(msg *flows.Message) {
	m.mu.Lock()
	// The connection's state, made when it opened (a message carries its
	// identity only); none if it was evicted since, in which case its
	// next exchange brings it back.
	if cs := m.conns[msg.Conn.ID]; cs != nil && &cs.c.ConnInfo == msg.Conn {
		cs.upgrade(msg)
		cs.win.add(msg.Time)
		cs.tl.add(msg.Time, m.cfg.Timeline, false)
		cs.refresh(msg.Time)
	}
	a := m.api(msg.Key)
	collect.CountRequest(a, msg)
	a.tl.add(msg.Time, m.cfg.Timeline, false)
	m.tl.add(msg.Time, m.cfg.Timeline, false)
	m.lag.OnRequest(msg)
	m.status.Requests++
	m.seen(msg)
	m.mu.Unlock()
	m.version.Add(1)
}

func (m *Model) seen(msg *flows.Message) {
	if msg.Packet > m.status.MaxPacket {
		m.status.MaxPacket = msg.Packet
	}
	if m.status.First.IsZero() || msg.Time.Before(m.status.First) {
		m.status.First = msg.Time
	}
	if msg.Time.After(m.status.Last) {
		m.status.Last = msg.Time
	}
}

// upgrade notes what a request says of the client's software and of its
// readiness for Kafka 4.0: once per connection, so it allocates only then.
func (cs *connState) upgrade(msg *flows.Message) {
	if q, ok := msg.Req.(*kmsg.ApiVersionsRequest); ok && q.Version >= 3 && cs.info.Software == "" {
		cs.info.Software = strings.TrimSpace(q.ClientSoftwareName + " " + q.ClientSoftwareVersion)
	}
	if _, ok := decode.RemovedIn40(msg.Key, msg.Version); ok && cs.info.Removed40 == "" {
		cs.info.Removed40 = decode.Name(msg.Key) + " v" + strconv.Itoa(int(msg.Version))
	}
}

// OnExchange records an exchange: a copy of its values and of its frames
// (the request's as flows kept it), in the global and the connection's
// history.
func (m *Model) OnExchange(x *flows.Exchange) {
	m.mu.Lock()
	cs := m.conn(x.Conn)
	m.seq++
	r := Exchange{Seq: m.seq, Conn: x.Conn.ID, Key: -1, Version: -1}
	now := time.Time{}
	if q := x.Req; q != nil {
		r.File, r.ReqPacket, r.Time = q.File, q.Packet, q.Time
		r.Key, r.Version, r.Correlation, r.ClientID, r.Role = q.Key, q.Version, q.Correlation, q.Client.ID, q.Role
		r.ReqSize = int32(q.Size)
		r.DecodeError = q.Err != nil
		if q.Frame != nil {
			r.req = m.keep(q.Frame, max(q.Size-4, len(q.Frame)), q.Time)
		}
		r.Topic, r.Topics = topicOf(q)
		r.Batches, r.BadCRC = batchCounts(q.Batches)
		now = q.Time
		m.seen(q)
	} else if p := x.Resp; p != nil && p.Inferred {
		r.Key, r.Version = p.Key, p.Version
	}
	switch {
	case x.Unanswered:
		r.State = Unanswered
	case x.NoResponse:
		r.State = NoResponse
	case x.OneSided:
		r.State = NotCaptured
	case x.Req == nil:
		r.State = Unmatched
	}
	if p := x.Resp; p != nil {
		r.RespPacket, r.RespSize = p.Packet, int32(p.Size)
		if x.Req == nil {
			r.File, r.Time, r.Correlation = p.File, p.Time, p.Correlation
		}
		r.DecodeError = r.DecodeError || p.Err != nil
		r.resp = m.keep(p.Frame, len(p.Frame), p.Time)
		n, bad := batchCounts(p.Batches)
		r.Batches += n
		r.BadCRC += bad
		var top int
		for _, e := range p.ErrorCodes {
			r.Errors += int32(e.Count)
			if e.Count > top {
				top, r.ErrorCode = e.Count, e.Code
			}
		}
		now = p.Time
		m.seen(p)
		if x.Req == nil {
			// Unmatched: in a row of its own (key -1), whatever API
			// its response was inferred to be, as the report and the
			// metrics count it apart from the APIs.
			m.api(-1).Responses++
		} else {
			r.Latency = x.Latency()
		}
	}
	// The request's API's counts, as the report and the metrics count
	// them.
	if x.Req != nil {
		if a := m.api(r.Key); collect.CountExchange(a, x) == collect.AnsweredErrors {
			m.status.Errors++
			for _, r := range [...]*secRing{&m.tl, &a.tl, &cs.tl} {
				r.add(x.Resp.Time, m.cfg.Timeline, true)
			}
		}
	}
	m.lag.OnExchange(x)
	m.ring.push(&r, m.cfg.History)
	cs.hist.push(&r, m.cfg.ConnHistory)
	m.rate.add(now)
	cs.refresh(now)
	m.status.Exchanges++
	m.mu.Unlock()
	m.version.Add(1)
}

// history is a ring of the last exchanges: in Seq order from head once
// full.
type history struct {
	xs   []Exchange
	head int
}

// push adds r, overwriting the oldest once limit are kept.
func (h *history) push(r *Exchange, limit int) {
	if len(h.xs) < limit {
		h.xs = append(h.xs, *r)
		return
	}
	h.xs[h.head] = *r
	h.head++
	if h.head == len(h.xs) {
		h.head = 0
	}
}

// appendSince appends to dst the exchanges with Seq above since, oldest
// first.
func (h *history) appendSince(dst []Exchange, since uint64) []Exchange {
	// Find the first newer than since by binary search on the two halves.
	for _, part := range [2][]Exchange{h.xs[h.head:], h.xs[:h.head]} {
		i := sort.Search(len(part), func(i int) bool { return part[i].Seq > since })
		dst = append(dst, part[i:]...)
	}
	return dst
}

func batchCounts(bs []flows.BatchRef) (n, bad int32) {
	for i := range bs {
		n++
		if !bs[i].CRCOK {
			bad++
		}
	}
	return n, bad
}

// topicOf returns the first topic a request names and how many it names,
// without allocating for topics named by name or by a known id.
func topicOf(m *flows.Message) (string, int32) {
	switch r := m.Req.(type) {
	case *kmsg.ProduceRequest:
		if len(r.Topics) > 0 {
			return m.TopicName(r.Topics[0].Topic, r.Topics[0].TopicID), int32(len(r.Topics))
		}
	case *kmsg.FetchRequest:
		if len(r.Topics) > 0 {
			return m.TopicName(r.Topics[0].Topic, r.Topics[0].TopicID), int32(len(r.Topics))
		}
	case *kmsg.ListOffsetsRequest:
		if len(r.Topics) > 0 {
			return r.Topics[0].Topic, int32(len(r.Topics))
		}
	case *kmsg.MetadataRequest:
		if len(r.Topics) > 0 {
			name := ""
			if r.Topics[0].Topic != nil {
				name = *r.Topics[0].Topic
			}
			return m.TopicName(name, r.Topics[0].TopicID), int32(len(r.Topics))
		}
	case *kmsg.OffsetCommitRequest:
		if len(r.Topics) > 0 {
			return r.Topics[0].Topic, int32(len(r.Topics))
		}
	case *kmsg.OffsetFetchRequest:
		if len(r.Topics) > 0 {
			return r.Topics[0].Topic, int32(len(r.Topics))
		}
		if len(r.Groups) > 0 && len(r.Groups[0].Topics) > 0 {
			return r.Groups[0].Topics[0].Topic, int32(len(r.Groups[0].Topics))
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		if len(r.Topics) > 0 {
			return r.Topics[0].Topic, int32(len(r.Topics))
		}
	case *kmsg.DeleteRecordsRequest:
		if len(r.Topics) > 0 {
			return r.Topics[0].Topic, int32(len(r.Topics))
		}
	case *kmsg.CreateTopicsRequest:
		if len(r.Topics) > 0 {
			return r.Topics[0].Topic, int32(len(r.Topics))
		}
	case *kmsg.DeleteTopicsRequest:
		if len(r.TopicNames) > 0 {
			return r.TopicNames[0], int32(len(r.TopicNames))
		}
		if len(r.Topics) > 0 && r.Topics[0].Topic != nil {
			return *r.Topics[0].Topic, int32(len(r.Topics))
		}
	case *kmsg.CreatePartitionsRequest:
		if len(r.Topics) > 0 {
			return r.Topics[0].Topic, int32(len(r.Topics))
		}
	case *kmsg.AddPartitionsToTxnRequest:
		if len(r.Topics) > 0 {
			return r.Topics[0].Topic, int32(len(r.Topics))
		}
	case *kmsg.TxnOffsetCommitRequest:
		if len(r.Topics) > 0 {
			return r.Topics[0].Topic, int32(len(r.Topics))
		}
	case *kmsg.DescribeProducersRequest:
		if len(r.Topics) > 0 {
			return r.Topics[0].Topic, int32(len(r.Topics))
		}
	}
	return "", 0
}

// OnConnEvent tracks connections opening and closing, and counts refused
// and unanswered connection attempts.
func (m *Model) OnConnEvent(e *flows.ConnEvent) {
	m.mu.Lock()
	switch e.Kind {
	case flows.ConnRefused:
		m.status.Refused++
	case flows.ConnUnanswered:
		m.status.SYNsLost++
	default:
		if e.Conn != nil {
			m.conn(e.Conn).refresh(time.Time{})
		}
	}
	m.mu.Unlock()
	m.version.Add(1)
}

// Sync takes a last look at every tracked connection: counters and node
// labels learned late (a Metadata response naming a broker after its
// connections opened). It reads the analyzer's state, so call it from the
// pipeline's goroutine or after the pipeline has returned, never
// concurrently with the handler calls.
func (m *Model) Sync() {
	m.mu.Lock()
	for _, cs := range m.conns {
		cs.refresh(time.Time{})
	}
	m.mu.Unlock()
	m.version.Add(1)
}

// SetFindings replaces the findings shown (detectors.Set.Findings returns
// the whole list each time). Safe from any goroutine; fs must not be
// modified afterwards.
func (m *Model) SetFindings(fs []detectors.Finding) {
	m.mu.Lock()
	m.findings = fs
	m.mu.Unlock()
	m.version.Add(1)
}

// SetCounters sets the capture's counters (packets, bytes, drops). Safe
// from any goroutine.
func (m *Model) SetCounters(c Counters) {
	m.mu.Lock()
	m.counters = c
	m.mu.Unlock()
	m.version.Add(1)
}

// SetPartial says what the run left out of its input (the report's
// Capture.Partial), for the status line. Any goroutine, any time.
func (m *Model) SetPartial(s string) {
	m.mu.Lock()
	m.partial = s
	m.mu.Unlock()
	m.version.Add(1)
}

// Findings returns the findings, most severe first (in the detectors'
// order within a severity).
func (m *Model) Findings() []detectors.Finding {
	fs, _ := m.FindingsByIncident()
	return fs
}

// FindingIncident is where a finding stands in the incidents
// (report.Incidents): its incident's number (0 for an informational
// finding, in none), whether it is the cause, and the incident's story
// when it has several findings.
type FindingIncident struct {
	N     int
	Of    int
	Cause bool
	Story string
}

// Label is the finding's INCIDENT cell: "2" for an incident of one
// finding, "1 cause" or "1 effect" in one of several, "" for none.
func (fi FindingIncident) Label() string {
	switch {
	case fi.N == 0:
		return ""
	case fi.Of == 1:
		return strconv.Itoa(fi.N)
	case fi.Cause:
		return strconv.Itoa(fi.N) + " cause"
	}
	return strconv.Itoa(fi.N) + " effect"
}

// FindingsByIncident returns the findings led by incidents, as the
// report lists them: each incident's findings, the cause first, the most
// severe incident first; then the informational findings. Beside each,
// its place in the incidents.
func (m *Model) FindingsByIncident() ([]detectors.Finding, []FindingIncident) {
	m.mu.Lock()
	fs := slices.Clone(m.findings)
	m.mu.Unlock()
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Severity > fs[j].Severity })
	out := make([]detectors.Finding, 0, len(fs))
	where := make([]FindingIncident, 0, len(fs))
	in := make([]bool, len(fs))
	for k, inc := range report.Incidents(fs) {
		for x, i := range inc.Findings {
			fi := FindingIncident{N: k + 1, Of: len(inc.Findings), Cause: x == 0}
			if fi.Of > 1 {
				fi.Story = inc.Story
			}
			out = append(out, fs[i])
			where = append(where, fi)
			in[i] = true
		}
	}
	for i := range fs {
		if !in[i] {
			out = append(out, fs[i])
			where = append(where, FindingIncident{})
		}
	}
	return out, where
}

// Status returns the totals.
func (m *Model) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.status
	s.Counters = m.counters
	s.Partial = m.partial
	if s.Packets == 0 {
		// No counters from the caller: the highest packet number that
		// completed a Kafka frame is a lower bound.
		s.Packets = int64(s.MaxPacket)
	}
	s.Findings = len(m.findings)
	s.Kept = len(m.ring.xs)
	s.FramesKept = int64(min(m.arena.head, uint64(m.arena.limit)))
	s.Rate = m.rate.rate(s.Last, s.First)
	return s
}

// Conns returns the tracked connections, by id.
func (m *Model) Conns() []Conn {
	m.mu.Lock()
	out := make([]Conn, 0, len(m.conns))
	now := m.status.Last
	for _, cs := range m.conns {
		c := cs.info
		c.Roles = cs.roles.List()
		c.ClientIDs = cs.clientIDs[:len(cs.clientIDs):len(cs.clientIDs)]
		c.Rate = cs.win.rate(now, c.FirstSeen)
		c.Kept = len(cs.hist.xs)
		out = append(out, c)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// AppendExchanges appends to dst the kept exchanges with Seq above since,
// oldest first: of connection conn, or of all connections if conn is 0.
func (m *Model) AppendExchanges(dst []Exchange, conn int, since uint64) []Exchange {
	m.mu.Lock()
	defer m.mu.Unlock()
	if conn == 0 {
		return m.ring.appendSince(dst, since)
	}
	cs := m.conns[conn]
	if cs == nil {
		return dst
	}
	return cs.hist.appendSince(dst, since)
}

// Evidence returns the kept exchanges whose request or response is one of
// the evidence packets, in order, and how many evidence packets were not
// found (their exchanges rotated out of the history).
func (m *Model) Evidence(ev []detectors.Evidence) (xs []Exchange, missing int) {
	type pkt struct {
		file int
		n    uint64
	}
	want := make(map[pkt]bool, len(ev))
	conns := map[int]bool{}
	for _, e := range ev {
		want[pkt{e.File, e.Packet}] = true
		if e.Conn != 0 {
			conns[e.Conn] = true
		}
	}
	found := map[pkt]bool{}
	seen := map[uint64]bool{}
	match := func(r *Exchange) {
		if seen[r.Seq] {
			return
		}
		hit := false
		for _, p := range [2]pkt{{r.File, r.ReqPacket}, {r.File, r.RespPacket}} {
			if p.n != 0 && want[p] {
				found[p] = true
				hit = true
			}
		}
		if hit {
			seen[r.Seq] = true
			xs = append(xs, *r)
		}
	}
	m.mu.Lock()
	for i := range m.ring.xs {
		match(&m.ring.xs[i])
	}
	for id := range conns {
		if cs := m.conns[id]; cs != nil {
			for i := range cs.hist.xs {
				match(&cs.hist.xs[i])
			}
		}
	}
	m.mu.Unlock()
	sort.Slice(xs, func(i, j int) bool { return xs[i].Seq < xs[j].Seq })
	return xs, len(want) - len(found)
}

// Frames returns copies of the exchange's request and response frames
// (after the size prefix) as far as they are kept; a side is nil if it
// was never captured or has been overwritten since.
func (m *Model) Frames(x *Exchange) (req, resp []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.frame(x.ReqPacket, x.req), m.frame(x.RespPacket, x.resp)
}

// frame is a copy of the frame at r of packet pkt, nil if none is kept.
func (m *Model) frame(pkt uint64, r frameRef) []byte {
	if pkt == 0 {
		return nil
	}
	b, ok := m.arena.get(r)
	if !ok {
		return nil
	}
	return append([]byte{}, b...)
}

// Stats returns the per-API counts, by API key.
func (m *Model) Stats() []APIStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []APIStats
	add := func(key int16, name string, a *apiState) {
		s := APIStats{
			Key: key, Name: name, Requests: a.Requests, Responses: a.Responses,
			ErrorResponses: a.ErrorResponses, Unanswered: a.Unanswered,
			P50: a.Latency.Quantile(0.5), P99: a.Latency.Quantile(0.99), Max: a.Latency.Max(),
		}
		for code, n := range a.Errors {
			s.Errors = append(s.Errors, ErrorCount{Name: collect.ErrorName(code), Code: code, Count: n})
		}
		slices.SortFunc(s.Errors, func(a, b ErrorCount) int {
			return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Code, b.Code))
		})
		out = append(out, s)
	}
	if m.unknown != nil {
		add(unknownKey, "unknown", m.unknown)
	}
	if m.unmatched != nil {
		add(-1, "unmatched", m.unmatched)
	}
	for k, a := range m.apis {
		if a != nil {
			add(int16(k), decode.Name(int16(k)), a)
		}
	}
	return out
}

// window counts events per second of capture time over the last 8
// seconds, for rates that do not depend on the wall clock (an offline
// capture shows the rates it had at its end).
type window struct {
	sec [8]int64
	n   [8]uint32
}

const rateSpan = 5 // seconds a rate is measured over

func (w *window) add(t time.Time) {
	if t.IsZero() {
		return
	}
	s := t.Unix()
	i := s & 7
	if w.sec[i] != s {
		w.sec[i], w.n[i] = s, 0
	}
	w.n[i]++
}

// rate is events per second over the rateSpan seconds up to now, or since
// first if that is later.
func (w *window) rate(now, first time.Time) float64 {
	if now.IsZero() {
		return 0
	}
	ns := now.Unix()
	var sum uint64
	for i := range w.sec {
		if w.sec[i] > ns-rateSpan && w.sec[i] <= ns {
			sum += uint64(w.n[i])
		}
	}
	start := time.Unix(ns-rateSpan+1, 0)
	if first.After(start) {
		start = first
	}
	span := now.Sub(start).Seconds()
	if span < 1 {
		span = 1
	}
	return float64(sum) / span
}
