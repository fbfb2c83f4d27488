// Package workload generates the captures the end-to-end benchmarks
// analyse. They are written at benchmark time into a temporary directory
// and never committed: a gigabyte does not belong in git, and a generator
// that is deterministic gives the same bytes on every machine.
//
// Two shapes, after issue 4:
//
//   - Small: many client connections (2000 by default) to three brokers on
//     port 9092, MSS 1460, interleaved: producers with small batches,
//     consumers fetching small batches (and empty long polls), group members
//     heartbeating and committing, short-lived admin clients asking for
//     Metadata, and some error responses (NOT_LEADER_OR_FOLLOWER on Produce
//     and Fetch, followed by a Metadata refresh; REBALANCE_IN_PROGRESS on
//     Heartbeat). About a million packets, half of them pure ACKs.
//   - Large: a few loopback connections (127.0.0.1 -> 127.0.0.1:9092,
//     65483-byte segments, zero MACs, as `tcpdump -i lo` records) carrying
//     1 MB Produce requests and 1 MB Fetch responses of uncompressed record
//     batches with valid CRC-32C. About a gigabyte.
//
// Every frame is encoded once with kmsg (through fixtures/gen and decode)
// and patched in place before each send (correlation id, client id,
// partition, offsets, group and member ids, record contents and their
// CRC-32C), so generation costs little more than writing the packets. The
// traffic is what a healthy cluster would carry: offsets move forward, every
// offset holds its own records, and a batch is the same batch for every
// reader, so the detectors have nothing to report.
package workload

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// Shape is one kind of capture. Start from Small or Large.
type Shape struct {
	// Name is "small" or "large"; it selects the traffic generated.
	Name string
	// Conns is the number of long-lived client connections.
	Conns int
	// Packets (small shape) stops the traffic once about this many
	// packets are written; closing the connections adds a few more.
	Packets int
	// Bytes (large shape) stops the traffic once the file holds about
	// this many bytes.
	Bytes int64
	// MSS is the largest TCP payload per segment.
	MSS int
	// Versions are the message versions (default Current).
	Versions Versions
}

// Small is the small-packet shape: 2000 connections, MSS 1460, about
// packets packets.
func Small(packets int) Shape {
	return Shape{Name: "small", Conns: 2000, Packets: packets, MSS: 1460}
}

// Large is the large-segment shape: 8 loopback connections, MSS 65483,
// about bytes bytes.
func Large(bytes int64) Shape {
	return Shape{Name: "large", Conns: 8, Bytes: bytes, MSS: 65483}
}

// Default sizes: what issue 4 asks for.
const (
	DefaultPackets = 1_000_000
	DefaultBytes   = 1_000_000_000
)

func (s Shape) String() string {
	if s.Name == "large" {
		return fmt.Sprintf("large (%d conns, MSS %d, %d MB, %s versions)", s.Conns, s.MSS, s.Bytes/1e6, s.Versions)
	}
	return fmt.Sprintf("small (%d conns, MSS %d, %d packets, %s versions)", s.Conns, s.MSS, s.Packets, s.Versions)
}

// Stats describe a written capture.
type Stats struct {
	Packets   int
	Bytes     int64 // file size
	Conns     int   // TCP connections, long-lived and short-lived
	Exchanges int   // request/response pairs
}

// WriteFile writes the capture to path (created or truncated).
func (s Shape) WriteFile(path string) (Stats, error) {
	f, err := os.Create(path)
	if err != nil {
		return Stats{}, err
	}
	st, err := s.Write(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return st, fmt.Errorf("write %s: %w", path, err)
	}
	return st, nil
}

// Write writes the capture, a classic microsecond pcap of Ethernet frames,
// to w.
func (s Shape) Write(w io.Writer) (Stats, error) {
	if s.Conns <= 0 || s.MSS <= 0 {
		return Stats{}, fmt.Errorf("shape %s: Conns and MSS must be positive", s.Name)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countWriter{w: bw}
	pw, err := gen.NewWriter(cw, gen.Options{})
	if err != nil {
		return Stats{}, err
	}
	g := &run{shape: s, v: s.Versions.set(), w: pw, cw: cw, t: start()}
	switch s.Name {
	case "small":
		if s.Packets <= 0 {
			return Stats{}, fmt.Errorf("shape small: Packets must be positive")
		}
		g.small()
	case "large":
		if s.Bytes <= 0 {
			return Stats{}, fmt.Errorf("shape large: Bytes must be positive")
		}
		g.large()
	default:
		return Stats{}, fmt.Errorf("unknown shape %q: want small or large", s.Name)
	}
	if err := pw.Close(); err != nil {
		return g.st, err
	}
	if err := bw.Flush(); err != nil {
		return g.st, err
	}
	g.st.Packets = pw.Packets()
	g.st.Bytes = cw.n
	return g.st, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// start is when every capture starts: no clock, so the output is the same
// on every run.
func start() time.Time { return time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC) }

// Versions selects the message versions a capture uses.
type Versions int

const (
	// Current versions: what a Kafka 3.7 Java client sends to a 3.7
	// broker (Metadata v12, Produce v9, Fetch v15, FindCoordinator v4).
	Current Versions = iota
	// Tshark versions: the highest that tshark 4.0 (Debian 12) dissects
	// in full (Metadata v9, Produce v8, Fetch v11, FindCoordinator v3).
	// On Current traffic its Kafka dissector stops at the Produce and
	// Fetch headers ("Unsupported Produce version. Supports v0-8",
	// malformed), which would time it doing a fraction of its work.
	Tshark
)

// ParseVersions reads "current" or "tshark".
func ParseVersions(s string) (Versions, error) {
	switch s {
	case "current":
		return Current, nil
	case "tshark":
		return Tshark, nil
	}
	return 0, fmt.Errorf("unknown versions %q: want current or tshark", s)
}

func (v Versions) String() string {
	if v == Tshark {
		return "tshark"
	}
	return "current"
}

// versionSet is the version of each message a capture sends.
type versionSet struct {
	apiVersions, metadata, produce, fetch, findCoordinator, heartbeat, offsetCommit int16
}

func (v Versions) set() versionSet {
	if v == Tshark {
		return versionSet{apiVersions: 3, metadata: 9, produce: 8, fetch: 11, findCoordinator: 3, heartbeat: 4, offsetCommit: 8}
	}
	return versionSet{apiVersions: 3, metadata: 12, produce: 9, fetch: 15, findCoordinator: 4, heartbeat: 4, offsetCommit: 8}
}

// Error codes used by the error responses.
const (
	errNotLeader  = 6  // NOT_LEADER_OR_FOLLOWER
	errRebalance  = 27 // REBALANCE_IN_PROGRESS
	clientIDLen   = 13 // "producer-0042": every client id has this length
	groupLen      = 9  // "group-042"
	memberLen     = clientIDLen + 1 + 32
	logStartBase  = 1_000_000 // first offset of every partition's log
	logPreCapture = 6144      // records in each log before the capture starts
	kafkaPort     = 9092      // tshark dissects Kafka on 9092 only by default
	clientPortMin = 32768
)

// run is one capture being written.
type run struct {
	shape Shape
	v     versionSet
	w     *gen.Writer
	cw    *countWriter
	t     time.Time
	st    Stats
}

// after advances the clock by d and returns the new time.
func (g *run) after(d time.Duration) time.Time {
	g.t = g.t.Add(d)
	return g.t
}

func (g *run) dial(client, server netip.AddrPort) *gen.Conn {
	g.st.Conns++
	return g.w.Conn(client, server, g.after(20*time.Microsecond), gen.ConnOptions{MSS: g.shape.MSS})
}

func (g *run) request(c *gen.Conn, f *frame, corr int32, clientID string) {
	f.corr(corr)
	f.client(clientID)
	c.Send(gen.ClientToServer, g.t, f.b)
}

func (g *run) respond(c *gen.Conn, f *frame, corr int32) {
	f.corr(corr)
	c.Send(gen.ServerToClient, g.t, f.b)
	g.st.Exchanges++
}

// topicID derives a topic id from its name (fixed bytes, not random).
func topicID(name string) [16]byte {
	var id [16]byte
	copy(id[:], "kfsniff-bench-")
	for i, c := range []byte(name) {
		id[14+i%2] ^= c
	}
	return id
}

// recordTime is the timestamp of the record at offset off: records are
// written one per millisecond from the capture's start (offsets before
// that were written before it).
func recordTime(off int64) int64 { return start().UnixMilli() + off - logStartBase - logPreCapture }

// recordsOf returns n keyed records with values of about size bytes:
// JSON-like text naming the record (placeholders that frame.fill writes),
// as an application would produce. Records differ only in the placeholder,
// so that a record's bytes depend on its offset alone, not on where in a
// batch it travels.
func recordsOf(n, size int) []gen.Record {
	out := make([]gen.Record, n)
	for i := range out {
		key := "key-" + placeholder
		v := `{"id":"` + placeholder + `","status":"ok","note":"`
		v += strings.Repeat("x", max(size-len(v)-2, 0)) + `"}`
		out[i] = gen.Record{Key: []byte(key), Value: []byte(v)}
	}
	return out
}

// batches concatenates count batches of per records of about size bytes,
// to be filled in by frame.fill.
func batches(count, per, size int) records {
	var out []byte
	for range count {
		out = append(out, gen.RecordBatch(0, start(), recordsOf(per, size))...)
	}
	return out
}

// advertised is the broker's ApiVersions answer: every key kmsg knows, at
// versions 0 to its maximum.
func advertised() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		req := kmsg.RequestForKey(k)
		if req == nil {
			continue
		}
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MaxVersion = k, req.MaxVersion()
		keys = append(keys, ak)
	}
	return keys
}

func (vs versionSet) apiVersionsFrames() (req, resp *frame) {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = vs.apiVersions
	r.ClientSoftwareName, r.ClientSoftwareVersion = "apache-kafka-java", "3.7.1"
	a := kmsg.NewPtrApiVersionsResponse()
	a.Version = vs.apiVersions
	a.ApiKeys = advertised()
	return request(r), response(a)
}

// broker is one broker of the generated cluster.
type broker struct {
	id   int32
	host string
}

// metadata returns a Metadata request for topics (none: all topics) and
// the broker's answer, with partitions led by the brokers in turn.
func (vs versionSet) metadataFrames(cluster string, brokers []broker, topics []string, partitions int, asked bool) (req, resp *frame) {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = vs.metadata
	if asked {
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			r.Topics = append(r.Topics, rt)
		}
	} else {
		r.Topics = nil // all topics
	}
	r.AllowAutoTopicCreation = asked
	a := kmsg.NewPtrMetadataResponse()
	a.Version = vs.metadata
	a.ClusterID = kmsg.StringPtr(cluster)
	a.ControllerID = brokers[0].id
	for _, b := range brokers {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = b.id, b.host, kafkaPort
		a.Brokers = append(a.Brokers, mb)
	}
	for _, t := range topics {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = kmsg.StringPtr(t), topicID(t)
		for p := range partitions {
			mp := kmsg.NewMetadataResponseTopicPartition()
			n := len(brokers)
			leader := brokers[p%n].id
			mp.Partition, mp.Leader, mp.LeaderEpoch = int32(p), leader, 3
			for k := range min(3, n) {
				mp.Replicas = append(mp.Replicas, brokers[(p+k)%n].id)
			}
			mp.ISR = mp.Replicas
			mt.Partitions = append(mt.Partitions, mp)
		}
		a.Topics = append(a.Topics, mt)
	}
	return request(r), response(a)
}
