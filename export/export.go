// Package export ships what one host's capture sees to Kafka: each
// exchange as compact JSON records (one per partition it touches), each
// connection event and each finding, produced with franz-go's kgo
// (docs/export.md is the schema). It is a flows handler beside the
// report's collector; the capture never waits for the sink: records go
// through a bounded buffer and are dropped, and counted, when it is full.
//
// It imports flows, decode and detectors; nothing imports it but the
// command and the benchmarks.
package export

import (
	"cmp"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
)

// SchemaVersion is the "v" of every record (docs/export.md). Version 2
// added the bodies (req_body, resp_body) and keyed partition records by
// partition number and connection events by server; version 3 the
// batches' record fingerprints (fp, prints.go).
const SchemaVersion = 3

// DefaultBuffer is how many records may wait for the sink by default.
const DefaultBuffer = 65536

// DefaultSpoolSize bounds the spool on disk by default: 1 GiB.
const DefaultSpoolSize = 1 << 30

// maxBufferedBytes bounds the bytes waiting for the sink, whatever the
// record count: 64 MiB.
const maxBufferedBytes = 64 << 20

// Config says where and how to ship.
type Config struct {
	// Brokers are the sink's seed brokers (host:port).
	Brokers []string
	// Topic gets exchanges and connection events; FindingsTopic the
	// findings (Topic + ".findings" when empty).
	Topic, FindingsTopic string
	// Agent names this host in every record (the hostname by default,
	// chosen by the command).
	Agent string
	// Buffer is how many records may wait for the sink; past it records
	// are dropped (DefaultBuffer when 0).
	Buffer int
	// TLS, when set, is the sink connection's TLS configuration.
	TLS *tls.Config
	// SASL, when set, authenticates to the sink.
	SASL sasl.Mechanism
	// ClientID is the exporter's own Kafka client id; exchanges of this
	// client id are not shipped (the agent capturing its own shipping
	// would ship records about records). "kfsniff-export" when empty.
	ClientID string
	// Compression is the batches' codec: zstd (the default), lz4,
	// snappy, gzip or none.
	Compression string
	// FlushTimeout bounds the wait for the sink at Close (10 s when 0).
	FlushTimeout time.Duration
	// Waiting, if set, is told when Close has waited a second for the
	// sink and goes on waiting: how many records, for how much longer.
	Waiting func(pending int64, upTo time.Duration)
	// SpoolDir, when set, is where records past Buffer wait for the sink
	// on disk (spool.go), up to SpoolSize bytes (DefaultSpoolSize when
	// 0); without it they are dropped.
	SpoolDir  string
	SpoolSize int64
	// Notify, if set, is told in a sentence when the sink goes down, stays
	// down (every minute) and comes back, and of records an earlier run
	// left in the spool.
	Notify func(string)
	// NoPrints ships no record fingerprints (prints.go); PrintKey, when
	// set, is the key they are made with (HMAC-SHA256), shared by the
	// agents and their correlators.
	NoPrints bool
	PrintKey []byte
	// Opts are more kgo options (tests).
	Opts []kgo.Opt
}

// Stats are the shipping counts; the command copies them into the
// report's Export (report/export.go), whose JSON documents them.
type Stats struct {
	Sink          string
	Topic         string
	FindingsTopic string
	// Records were acknowledged by the sink (Findings of them findings).
	Records  int64
	Findings int64
	// Dropped never reached the sink's client: the buffer was full (the
	// sink slow or down). Failed were given to it and not delivered: the
	// sink refused them or was still unreachable when the run ended.
	Dropped int64
	Failed  int64
	// Pending are still waiting, in memory and in the spool (only while
	// the capture runs); Oldest is how long the oldest of them has.
	Pending int64
	Oldest  time.Duration
	// Spilled records went to the spool (SpoolDir) in all; Spooled are
	// in it now (at the end: left for the next run, Saved of them put
	// back by the end of the run), SpoolBytes its size on disk.
	SpoolDir          string
	Spilled, Spooled  int64
	Saved, SpoolBytes int64
	// Up is false while the sink is down (DownAfter).
	Up bool
	// LastError is the last delivery error, if any.
	LastError string
}

// Exporter is the flows handler that ships. Its On* methods run on the
// analysis goroutine; Stats and the delivery callbacks on any.
type Exporter struct {
	cfg  Config
	cl   *kgo.Client
	sink string

	inflight, limit atomic.Int64
	sent, findings  atomic.Int64
	dropped, failed atomic.Int64
	lastErr         atomic.Pointer[string]
	// connErr is the last failure to connect to the sink (dial, TLS,
	// SASL), cleared by a success: what "client closed" hides.
	connErr atomic.Pointer[string]
	delivery
	promise func(*kgo.Record, error)
	// send is ship, or a test's sink for the records as encoded.
	send      func(topic string, key, value []byte)
	recs      sync.Pool
	buf, head []byte
	parts     []part
	index     map[cluster.Partition]int
	clusters  map[netip.AddrPort]string
	clientIDs map[int]string
	// own are the exporter's own connections to the sink, as kgo's
	// connect hook tells them (its goroutines): an agent capturing its
	// own shipping must not ship their openings, told before any
	// exchange names the client id.
	own     ownConns
	batches []batchOut
	// printer makes the record fingerprints (nil: not shipped), fps
	// holds an exchange's, printFn names their function (fp_fn), cuts
	// the first batch of each record of its partitions (cut).
	printer *decode.RecordHasher
	prints  printCache // the fingerprints of batches seen, by place (printcache.go)
	fps     []decode.RecordHash
	printFn string
	cuts    []int
	// raised are the live findings shipped (LiveFindings).
	raised     map[string]bool
	closeOnce  sync.Once
	closeStats Stats
	// heads are the split APIs' bodies without their topics, reused
	// (body).
	heads heads
	// body is the scratch buffer a body is encoded into before base64.
	body []byte
	// run names this Exporter's records (random, 16 hex digits), seq
	// numbers them from 1 in the order built: with agent, a record's
	// identity, by which a correlator knows one shipped twice.
	run string
	seq int64
}

// part is what one exchange says of one partition.
type part struct {
	// key names the partition within one exchange: by name, and by id
	// only where the name is not known (a request may name a topic by
	// id, its batches by the name Metadata gave it).
	key  cluster.Partition
	name string
	// id is the topic's id when the wire named it by id (shipped as
	// topic_id, so that a reader can join the records of an agent that
	// never learned the name with those of one that did).
	id                    [16]byte
	fetchOffset           int64
	hasFetchOffset        bool
	answered              bool
	err                   int16
	leader, epoch         int32
	hw, lso, logStart     int64
	baseOffset            int64
	firstBatch, lastBatch int // range in Exporter.batches, lastBatch exclusive
	hasBatch              bool
	cutFrom, cutTo        int // its records' first batches: Exporter.cuts[cutFrom:cutTo]
	// ListOffsets: the timestamp asked, the offset answered and its
	// leader epoch; OffsetCommit: the offset committed and its epoch.
	timestamp, offset       int64
	offsetEpoch             int32
	hasTimestamp, hasOffset bool
	committed               bool
}

// batchOut is one batch header with the offset the log gave it.
type batchOut struct {
	b      *flows.BatchRef
	offset int64 // Produce: the offset the response gave, -1 if none; -2 a Fetch's
	i      int   // its index in its message's Batches
	// from and to place its record fingerprints in Exporter.fps; fpErr
	// says why it has none (fp_err), if it should have.
	from, to int32
	fpErr    string
}

// maxTracked bounds the cluster-id and client-id tables.
const maxTracked = 16384

// New makes an exporter and its kgo client. The client connects lazily:
// an unreachable sink is not an error here, its records are dropped or
// fail and are counted.
func New(cfg Config) (*Exporter, error) {
	if len(cfg.Brokers) == 0 || cfg.Topic == "" {
		return nil, errors.New("export: no brokers or no topic")
	}
	cfg.FindingsTopic = cmp.Or(cfg.FindingsTopic, cfg.Topic+".findings")
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	cfg.ClientID = cmp.Or(cfg.ClientID, "kfsniff-export")
	if cfg.FlushTimeout <= 0 {
		cfg.FlushTimeout = 10 * time.Second
	}
	if cfg.SpoolSize <= 0 {
		cfg.SpoolSize = DefaultSpoolSize
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.ProducerLinger(50 * time.Millisecond),
		// The limits are the exporter's own (limit, below); these are
		// kgo's, set above so that TryProduce never blocks: twice, for
		// the records of a recreated topic shipped again (deliver.go)
		// beside those of the capture.
		kgo.MaxBufferedRecords(2*cfg.Buffer + 1),
		kgo.MaxBufferedBytes(2 * maxBufferedBytes),
		// No delivery timeout: records wait in memory (and past it in
		// the spool) for as long as the sink is down; dropped past both.
		// Nor a limit on unknown-topic answers: a sink restarted empty,
		// or the topic recreated (a new topic id), is waited for; Reach
		// says at the start when the topic does not exist.
		kgo.UnknownTopicRetries(-1),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.AllowAutoTopicCreation(),
	}
	codec, err := Codec(cfg.Compression)
	if err != nil {
		return nil, err
	}
	// A sink too old for the codec gets the batches uncompressed.
	opts = append(opts, kgo.ProducerBatchCompression(codec, kgo.NoCompression()))
	e := &Exporter{}
	opts = append(opts, kgo.Dialer(dialer(&e.own, cfg.TLS)))
	if cfg.SASL != nil {
		opts = append(opts, kgo.SASL(cfg.SASL))
	}
	opts = append(opts, cfg.Opts...)
	opts = append(opts, kgo.WithHooks(connectHook{e}))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("export: %v", err)
	}
	e.cfg, e.cl = cfg, cl
	e.sink = "kafka://" + strings.Join(cfg.Brokers, ",") + "/" + cfg.Topic
	e.index, e.clusters, e.clientIDs = map[cluster.Partition]int{}, map[netip.AddrPort]string{}, map[int]string{}
	e.raised = map[string]bool{}
	e.limit.Store(int64(cfg.Buffer))
	e.promise = e.delivered
	e.send = e.ship
	e.recs.New = func() any { return new(kgo.Record) }
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, fmt.Errorf("export: %v", err)
	}
	e.run = hex.EncodeToString(r[:])
	if e.printer = newPrinter(&cfg); e.printer != nil {
		e.printFn = decode.PrintFunc(cfg.PrintKey)
	}
	if err := e.startDelivery(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("export: %v", err)
	}
	return e, nil
}

// Codec is the compression a --export-compression name stands for.
func Codec(name string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(name) {
	case "", "zstd":
		return kgo.ZstdCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "none":
		return kgo.NoCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression %q: want zstd, lz4, snappy, gzip or none", name)
}

// OnConnEvent ships a connection's opening, closing, refusal or
// unanswered SYNs, keyed by "@" and the server's address: every event of
// one broker lands in one partition of the export topic, so that a
// correlator in a group sees a broker's openings and closings together
// (reconnect-storm counts them per broker).
func (e *Exporter) OnConnEvent(ev *flows.ConnEvent) {
	id := 0
	if ev.Conn != nil {
		id = ev.Conn.ID
	}
	clientID, known := e.clientIDs[id]
	if id != 0 && ev.Kind == flows.ConnClosed {
		delete(e.clientIDs, id)
	}
	if known && clientID == e.cfg.ClientID {
		return
	}
	if !known && e.own.has(ev.Client, ev.Server, ev.Kind == flows.ConnClosed) {
		if id != 0 && ev.Kind != flows.ConnClosed && len(e.clientIDs) < maxTracked {
			e.clientIDs[id] = e.cfg.ClientID // its later events, by its id
		}
		return
	}
	b := append(e.buf[:0], '@')
	b = ev.Server.AppendTo(b)
	k := len(b)
	b = append(b, '{')
	b = appendInt(b, "v", SchemaVersion)
	b = appendStr(b, "type", "conn")
	b = appendStr(b, "agent", e.cfg.Agent)
	b = appendStr(b, "run", e.run)
	b = e.seqField(b)
	if c := e.clusters[ev.Server]; c != "" {
		b = appendStr(b, "cluster", c)
	}
	b = appendInt(b, "ts_ns", ev.Time.UnixNano())
	b = appendStr(b, "event", ev.Kind.String())
	if id != 0 {
		b = appendInt(b, "conn", int64(id))
	}
	b = appendAddr(b, "client", ev.Client)
	b = appendAddr(b, "server", ev.Server)
	if known {
		b = appendStr(b, "client_id", clientID)
	}
	if ev.Attempts > 0 {
		b = appendInt(b, "attempts", int64(ev.Attempts))
	}
	if ev.Kind == flows.ConnClosed && ev.Conn != nil && !ev.Conn.LastSeen.IsZero() {
		// The connection's last packet: a close is told when its
		// stream completes, later (the wait of a request it left
		// unanswered ends at its last packet).
		b = appendInt(b, "last_ns", ev.Conn.LastSeen.UnixNano())
	}
	if ev.Kind == flows.ConnOpened && ev.Conn != nil {
		// Whether the connection was seen opening (its SYN) or was
		// already open when the capture began: connection-refused
		// counts the former as a recovery, reconnect-storm leaves the
		// latter out.
		if ev.Conn.Handshake {
			b = appendBool(b, "handshake", true)
		}
		if ev.Conn.MidStream {
			b = appendBool(b, "midstream", true)
		}
	}
	b = appendInt(b, "pkt", int64(ev.Packet))
	if ev.File > 0 {
		b = appendInt(b, "file", int64(ev.File))
	}
	b = append(b, '}')
	e.buf = b
	e.send(e.cfg.Topic, b[:k], b[k:])
}

// End ships where the capture ended: a connection record of event "end"
// whose ts_ns is the capture's last packet, pkt its number (the packets
// read) and first_ns its first packet (of any protocol), keyed "@end". A correlator ends the agent's
// capture there, as an analysis of the file does, not at the latest time
// its other records show (an ACK or a FIN after the last answer). Not
// shipped for a capture without packets.
func (e *Exporter) End(first, last time.Time, packets int64) {
	if last.IsZero() {
		return
	}
	b := append(e.buf[:0], "@end"...)
	k := len(b)
	b = append(b, '{')
	b = appendInt(b, "v", SchemaVersion)
	b = appendStr(b, "type", "conn")
	b = appendStr(b, "agent", e.cfg.Agent)
	b = appendStr(b, "run", e.run)
	b = e.seqField(b)
	b = appendInt(b, "ts_ns", last.UnixNano())
	b = appendStr(b, "event", "end")
	if !first.IsZero() && !first.After(last) {
		b = appendInt(b, "first_ns", first.UnixNano())
	}
	b = appendInt(b, "pkt", packets)
	b = append(b, '}')
	e.buf = b
	e.send(e.cfg.Topic, b[:k], b[k:])
}

// OnExchange ships an exchange: one record per partition for Produce,
// Fetch, ListOffsets and OffsetCommit (keyed by the partition's number),
// one record keyed by client id for the rest.
func (e *Exporter) OnExchange(x *flows.Exchange) {
	m := x.Req
	if m == nil {
		m = x.Resp
	}
	if m == nil || x.Conn == nil {
		return
	}
	ci := &x.Conn.ConnInfo
	if m.Client.ID != "" && len(e.clientIDs) < maxTracked {
		if _, ok := e.clientIDs[ci.ID]; !ok {
			e.clientIDs[ci.ID] = m.Client.ID
		}
	}
	// Its own exchanges are not shipped, nor (by the id just kept) its
	// connection's later events.
	if m.Client.ID == e.cfg.ClientID {
		return
	}
	if x.Resp != nil {
		e.learnCluster(ci, x.Resp.Resp)
	}
	e.collect(x)
	if len(e.parts) == 0 {
		b := e.common(e.buf[:0], x, m)
		k := len(b)
		b = e.exchangeFields(b, x, m, 0)
		b = e.seqField(b)
		if x.Resp != nil && len(x.Resp.ErrorCodes) > 0 {
			b = appendField(b, "errors")
			b = append(b, '[')
			for i, c := range x.Resp.ErrorCodes {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, '[')
				b = appendIntRaw(b, int64(c.Code))
				b = append(b, ',')
				b = appendIntRaw(b, int64(c.Count))
				b = append(b, ']')
			}
			b = append(b, ']')
		}
		b = append(b, '}')
		e.buf = b
		e.send(e.cfg.Topic, b[:k], b[k:])
		return
	}
	e.fingerprint(x)
	e.cut()
	records := 0
	for i := range e.parts {
		records += chunks(&e.parts[i])
	}
	// The exchange's fields once, copied into each partition's record.
	e.head = e.exchangeFields(e.head[:0], x, m, records)
	for i := range e.parts {
		p := &e.parts[i]
		for c := range chunks(p) {
			// The partition's number alone: an agent that never saw a
			// Metadata answer names the topic by id, another by name,
			// and both must land in one partition of the export topic.
			b := appendIntRaw(e.buf[:0], int64(p.key.Num))
			k := len(b)
			b = append(b, e.head...)
			b = e.seqField(b) // each record its own, the head being shared
			b = e.partFields(b, p, c)
			b = append(b, '}')
			e.buf = b
			e.send(e.cfg.Topic, b[:k], b[k:])
		}
	}
}

// maxBatchesPerRecord splits a partition's batches over several records
// past it, so that a record stays far below the sink's default maximum
// message size (1 MiB; a batch takes about 330 bytes of JSON); so does
// MaxPrints.
const maxBatchesPerRecord = 512

// chunks is how many records a partition takes: one, or one per
// maxBatchesPerRecord batches or MaxPrints fingerprints (cut).
func chunks(p *part) int {
	return max(1, p.cutTo-p.cutFrom)
}

// common appends the key of a record without partitions: the client id,
// "@" and the client's address when the request has none.
func (e *Exporter) common(b []byte, x *flows.Exchange, m *flows.Message) []byte {
	if m.Client.ID != "" {
		return append(b, m.Client.ID...)
	}
	b = append(b, '@')
	return x.Conn.Client.Addr().AppendTo(b)
}

// seqField appends the record's number in the run: with agent and run,
// its identity. Every record built takes the next, the records of one
// exchange split by partition included.
func (e *Exporter) seqField(b []byte) []byte {
	e.seq++
	return appendInt(b, "seq", e.seq)
}

// exchangeFields opens the record and appends the exchange's own fields.
func (e *Exporter) exchangeFields(b []byte, x *flows.Exchange, m *flows.Message, parts int) []byte {
	ci := &x.Conn.ConnInfo
	b = append(b, '{')
	b = appendInt(b, "v", SchemaVersion)
	b = appendStr(b, "type", "exchange")
	b = appendStr(b, "agent", e.cfg.Agent)
	b = appendStr(b, "run", e.run)
	if c := e.clusters[ci.Server]; c != "" {
		b = appendStr(b, "cluster", c)
	}
	b = appendInt(b, "ts_ns", m.Time.UnixNano())
	if lat := x.Latency(); x.Req != nil && x.Resp != nil {
		b = appendInt(b, "latency_ns", int64(lat))
	}
	b = appendInt(b, "conn", int64(ci.ID))
	b = appendAddr(b, "client", ci.Client)
	b = appendAddr(b, "server", ci.Server)
	if n := ci.Nodes(); n != nil {
		if id := n.Server(ci.Server); id >= 0 {
			b = appendInt(b, "node", int64(id))
		}
	}
	b = appendStr(b, "client_id", m.Client.ID)
	b = appendInt(b, "api", int64(m.Key))
	b = appendInt(b, "ver", int64(m.Version))
	b = appendInt(b, "corr", int64(m.Correlation))
	if r := m.Role.String(); r != "" {
		b = appendStr(b, "role", r)
	}
	b = appendStr(b, "status", status(x))
	if x.AtEnd && x.Req != nil {
		// Where this agent's capture ended, which no other record says.
		b = appendInt(b, "end_ns", x.Req.Time.Add(x.Waited).UnixNano())
	}
	if x.ConnGaps > 0 {
		b = appendInt(b, "conn_gaps", int64(x.ConnGaps))
	}
	if x.Req != nil {
		b = appendInt(b, "req_pkt", int64(x.Req.Packet))
	}
	if x.Resp != nil {
		b = appendInt(b, "resp_pkt", int64(x.Resp.Packet))
	}
	if m.File > 0 {
		b = appendInt(b, "file", int64(m.File))
	}
	if x.Req != nil {
		switch r := x.Req.Req.(type) {
		case *kmsg.FetchRequest:
			id, _ := cluster.FetchReplica(r)
			b = appendInt(b, "replica", int64(id))
			// How long the broker may hold it (a long poll): what a
			// reader needs to tell a slow answer from a patient one.
			b = appendInt(b, "max_wait_ms", int64(r.MaxWaitMillis))
		case *kmsg.ProduceRequest:
			b = appendInt(b, "acks", int64(r.Acks))
			if r.TransactionID != nil {
				b = appendStr(b, "txn_id", *r.TransactionID)
			}
		case *kmsg.OffsetCommitRequest:
			b = appendStr(b, "group", r.Group)
		case *kmsg.ListOffsetsRequest:
			b = appendInt(b, "replica", int64(r.ReplicaID))
		}
	}
	if x.Resp != nil {
		// A quota's throttle time (omitted when 0): the throttled rule's
		// input, and what slow-responses takes off a response the broker
		// held back for it.
		if tr, ok := x.Resp.Resp.(kmsg.ThrottleResponse); ok {
			if ms, _ := tr.Throttle(); ms > 0 {
				b = appendInt(b, "throttle_time_ms", int64(ms))
			}
		}
	}
	if parts > 0 {
		b = appendInt(b, "parts", int64(parts))
	}
	if e.printFn != "" && (m.Key == int16(kmsg.Produce) || m.Key == int16(kmsg.Fetch)) {
		// How the batches' fingerprints were made: a correlator
		// compares only those made alike.
		b = appendStr(b, "fp_fn", e.printFn)
	}
	if x.Req != nil && x.Req.Req != nil {
		b = e.appendBody(b, "req_body", e.heads.head(x.Req.Req))
	}
	if x.Resp != nil && x.Resp.Resp != nil {
		b = e.appendBody(b, "resp_body", e.heads.head(x.Resp.Resp))
	}
	return b
}

func status(x *flows.Exchange) string {
	switch {
	case x.Req == nil:
		return "unmatched"
	case x.NoResponse:
		return "no_response"
	case x.OneSided:
		return "one_sided"
	case x.Unanswered:
		return "unanswered"
	case x.Resp == nil:
		return "unanswered"
	}
	return "answered"
}

// partFields appends one partition's fields and its batches.
func (e *Exporter) partFields(b []byte, p *part, chunk int) []byte {
	b = appendStr(b, "topic", p.name)
	if p.id != ([16]byte{}) {
		b = appendStr(b, "topic_id", cluster.TopicID(p.id))
	}
	b = appendInt(b, "partition", int64(p.key.Num))
	if p.hasFetchOffset {
		b = appendInt(b, "fetch_offset", p.fetchOffset)
	}
	if p.hasTimestamp {
		b = appendInt(b, "timestamp", p.timestamp)
	}
	if p.hasOffset {
		if p.committed {
			b = appendInt(b, "committed_offset", p.offset)
		} else {
			b = appendInt(b, "offset", p.offset)
		}
		if p.offsetEpoch >= 0 {
			b = appendInt(b, "offset_leader_epoch", int64(p.offsetEpoch))
		}
	}
	if p.answered {
		b = appendInt(b, "error", int64(p.err))
		if p.hw >= 0 {
			b = appendInt(b, "high_watermark", p.hw)
		}
		if p.lso >= 0 {
			b = appendInt(b, "last_stable_offset", p.lso)
		}
		if p.logStart >= 0 {
			b = appendInt(b, "log_start_offset", p.logStart)
		}
		if p.baseOffset >= 0 {
			b = appendInt(b, "base_offset", p.baseOffset)
		}
		if p.leader >= 0 {
			b = appendInt(b, "leader", int64(p.leader))
			b = appendInt(b, "leader_epoch", int64(p.epoch))
		}
	}
	if !p.hasBatch {
		return b
	}
	first, last := e.cuts[p.cutFrom+chunk], p.lastBatch
	if p.cutFrom+chunk+1 < p.cutTo {
		last = e.cuts[p.cutFrom+chunk+1]
	}
	if chunk > 0 || last < p.lastBatch {
		b = appendInt(b, "batch_index", int64(first-p.firstBatch))
	}
	b = appendField(b, "batches")
	b = append(b, '[')
	for i := first; i < last; i++ {
		bo := &e.batches[i]
		bt := &bo.b.Batch
		if i > first {
			b = append(b, ',')
		}
		b = append(b, '{')
		if bo.offset != -2 {
			// A Produce request's batch: the offset the log gave it.
			b = appendInt(b, "offset", bo.offset)
		} else {
			b = appendInt(b, "base_offset", bt.BaseOffset)
		}
		b = appendInt(b, "last_offset_delta", int64(bt.LastOffsetDelta))
		b = appendInt(b, "records", int64(bt.Records))
		b = appendUint(b, "crc", uint64(bt.CRC))
		if !bt.CRCOK {
			b = appendBool(b, "crc_ok", false)
			b = appendUint(b, "crc_computed", uint64(bt.ComputedCRC))
		}
		b = appendInt(b, "magic", int64(bt.Magic))
		b = appendInt(b, "leader_epoch", int64(bt.PartitionLeaderEpoch))
		b = appendInt(b, "producer_id", bt.ProducerID)
		b = appendInt(b, "producer_epoch", int64(bt.ProducerEpoch))
		b = appendInt(b, "base_sequence", int64(bt.BaseSequence))
		b = appendInt(b, "attributes", int64(bt.Attributes))
		b = appendInt(b, "bytes", int64(bt.Length))
		b = appendInt(b, "first_ts", bt.FirstTimestamp)
		b = appendInt(b, "max_ts", bt.MaxTimestamp)
		b = e.appendPrints(b, bo)
		b = append(b, '}')
	}
	return append(b, ']')
}

// collect gathers the exchange's partitions (Produce, Fetch, ListOffsets,
// OffsetCommit) into e.parts, in request order then response order, with
// their answers, offsets and batches. Nothing is allocated once the
// slices and map have grown.
func (e *Exporter) collect(x *flows.Exchange) {
	e.parts = e.parts[:0]
	e.batches = e.batches[:0]
	clear(e.index)
	var name *flows.Message = x.Req
	if name == nil {
		name = x.Resp
	}
	var keys cluster.Keyer
	if name.Conn != nil {
		keys.Names = name.Conn.Nodes()
	}
	add := func(p cluster.Partition) *part {
		k := keys.Key(p)
		if i, ok := e.index[k]; ok {
			if e.parts[i].id == ([16]byte{}) {
				e.parts[i].id = p.TopicID
			}
			return &e.parts[i]
		}
		e.index[k] = len(e.parts)
		e.parts = append(e.parts, part{key: k, name: name.TopicName(p.Topic, p.TopicID), id: p.TopicID, hw: -1, lso: -1, logStart: -1, baseOffset: -1, leader: -1})
		return &e.parts[len(e.parts)-1]
	}
	if x.Req != nil {
		switch r := x.Req.Req.(type) {
		case *kmsg.ProduceRequest:
			decode.RequestPartitions(r, func(p cluster.Partition) { add(p) })
		case *kmsg.FetchRequest:
			decode.FetchOffsets(r, func(p cluster.Partition, off int64) {
				pp := add(p)
				pp.fetchOffset, pp.hasFetchOffset = off, true
			})
		case *kmsg.ListOffsetsRequest:
			for i := range r.Topics {
				t := &r.Topics[i]
				for j := range t.Partitions {
					pp := add(cluster.Partition{Topic: t.Topic, Num: t.Partitions[j].Partition})
					pp.timestamp, pp.hasTimestamp = t.Partitions[j].Timestamp, true
				}
			}
		case *kmsg.OffsetCommitRequest:
			for i := range r.Topics {
				t := &r.Topics[i]
				for j := range t.Partitions {
					q := &t.Partitions[j]
					pp := add(cluster.Partition{Topic: t.Topic, TopicID: t.TopicID, Num: q.Partition})
					pp.offset, pp.offsetEpoch, pp.hasOffset, pp.committed = q.Offset, q.LeaderEpoch, true, true
				}
			}
		}
	}
	if x.Resp != nil {
		switch r := x.Resp.Resp.(type) {
		case *kmsg.ProduceResponse, *kmsg.FetchResponse:
			decode.PartitionAnswers(r, func(a decode.PartitionAnswer) {
				p := add(a.Partition)
				p.answered, p.err, p.hw, p.lso = true, a.ErrorCode, a.HighWatermark, a.LastStableOffset
				p.leader, p.epoch = a.Leader, a.Epoch
				switch r := r.(type) {
				case *kmsg.ProduceResponse:
					p.baseOffset = r.Topics[a.TopicIndex].Partitions[a.Index].BaseOffset
					p.logStart = r.Topics[a.TopicIndex].Partitions[a.Index].LogStartOffset
				case *kmsg.FetchResponse:
					p.logStart = r.Topics[a.TopicIndex].Partitions[a.Index].LogStartOffset
				}
			})
		case *kmsg.ListOffsetsResponse:
			for i := range r.Topics {
				t := &r.Topics[i]
				for j := range t.Partitions {
					q := &t.Partitions[j]
					pp := add(cluster.Partition{Topic: t.Topic, Num: q.Partition})
					pp.answered, pp.err = true, q.ErrorCode
					switch {
					case r.Version >= 1:
						pp.offset, pp.offsetEpoch, pp.hasOffset = q.Offset, q.LeaderEpoch, q.ErrorCode == 0
					case len(q.OldStyleOffsets) > 0:
						pp.offset, pp.offsetEpoch, pp.hasOffset = q.OldStyleOffsets[0], -1, q.ErrorCode == 0
					}
				}
			}
		case *kmsg.OffsetCommitResponse:
			for i := range r.Topics {
				t := &r.Topics[i]
				for j := range t.Partitions {
					pp := add(cluster.Partition{Topic: t.Topic, TopicID: t.TopicID, Num: t.Partitions[j].Partition})
					pp.answered, pp.err = true, t.Partitions[j].ErrorCode
				}
			}
		}
	}
	// Batches: a Produce request's, with the offsets the response gave
	// them, and a Fetch response's, each under its partition.
	if x.Req != nil && len(x.Req.Batches) > 0 {
		for i := range x.Req.Batches {
			e.batches = append(e.batches, batchOut{b: &x.Req.Batches[i], offset: -1, i: i})
		}
		flows.ProducedBatches(x.Req, x.Resp, func(i int, _ *flows.BatchRef, base int64, _ int16) {
			e.batches[i].offset = base
		})
	}
	if x.Resp != nil && len(x.Resp.Batches) > 0 {
		for i := range x.Resp.Batches {
			e.batches = append(e.batches, batchOut{b: &x.Resp.Batches[i], offset: -2, i: i})
		}
	}
	for i := range e.batches {
		bo := &e.batches[i]
		p := add(cluster.Partition{Topic: bo.b.Topic, TopicID: bo.b.TopicID, Num: bo.b.Partition})
		if !p.hasBatch {
			p.hasBatch, p.firstBatch = true, i
		}
		// A partition's batches are consecutive on the wire; a second
		// run of one (a malformed request) is not shipped.
		if p.lastBatch != 0 && p.lastBatch != i {
			continue
		}
		p.lastBatch = i + 1
	}
}

// learnCluster remembers the cluster id a Metadata or DescribeCluster
// response names, for its server and every broker it lists by address.
func (e *Exporter) learnCluster(ci *flows.ConnInfo, resp kmsg.Response) {
	var id string
	var brokers []kmsg.MetadataResponseBroker
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		if r.ClusterID == nil {
			return
		}
		id, brokers = *r.ClusterID, r.Brokers
	case *kmsg.DescribeClusterResponse:
		id = r.ClusterID
	default:
		return
	}
	if id == "" || e.clusters[ci.Server] == id || len(e.clusters) >= maxTracked {
		return
	}
	e.clusters[ci.Server] = id
	for _, b := range brokers {
		if a, err := netip.ParseAddr(b.Host); err == nil && b.Port > 0 && b.Port < 65536 && len(e.clusters) < maxTracked {
			e.clusters[netip.AddrPortFrom(a, uint16(b.Port))] = id
		}
	}
}

// findingRecord is a finding as shipped.
type findingRecord struct {
	V     int    `json:"v"`
	Type  string `json:"type"`
	Agent string `json:"agent"`
	// State is "raised" when a live capture's snapshot first shows the
	// finding, "final" for the report's findings at the end of the run.
	State   string             `json:"state"`
	Finding *detectors.Finding `json:"finding"`
}

// maxRaised bounds the live findings remembered as shipped.
const maxRaised = 4096

// LiveFindings ships the findings of a live capture's snapshot (every 2 s)
// that no earlier snapshot showed, as "raised": a finding is known by its
// detector, its start and its first connection or partition. Past 4096
// of them, only the final findings are shipped.
func (e *Exporter) LiveFindings(fs []detectors.Finding) {
	for i := range fs {
		f := &fs[i]
		id := f.Detector + "|" + strconv.FormatInt(f.First.UnixNano(), 10) + "|" + findingKey(f)
		if len(f.Conns) > 0 {
			id += "|" + strconv.Itoa(f.Conns[0])
		}
		if e.raised[id] || len(e.raised) >= maxRaised {
			continue
		}
		e.raised[id] = true
		e.shipFinding(f, "raised")
	}
}

// Findings ships each finding of the report at the end of a run, as
// "final".
func (e *Exporter) Findings(fs []detectors.Finding) {
	for i := range fs {
		e.shipFinding(&fs[i], "final")
	}
}

// shipFinding ships one finding keyed by its first partition
// (topic/partition) when it names one, else by its detector.
func (e *Exporter) shipFinding(f *detectors.Finding, state string) {
	v, err := json.Marshal(findingRecord{V: SchemaVersion, Type: "finding", Agent: e.cfg.Agent, State: state, Finding: f})
	if err != nil {
		e.failed.Add(1)
		return
	}
	e.send(e.cfg.FindingsTopic, []byte(findingKey(f)), v)
}

func findingKey(f *detectors.Finding) string {
	if len(f.Subject.Partitions) > 0 {
		p := f.Subject.Partitions[0]
		return p.Topic + "/" + strconv.Itoa(int(p.Num))
	}
	return f.Detector
}

func appendIntRaw(b []byte, v int64) []byte { return strconv.AppendInt(b, v, 10) }
