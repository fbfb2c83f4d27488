package workload

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// The small shape's cluster: three brokers, four topics of a hundred
// partitions.
var (
	smallBrokers = []broker{{1, "10.0.0.1"}, {2, "10.0.0.2"}, {3, "10.0.0.3"}}
	smallTopics  = []string{"orders", "payments", "clicks", "inventory"}
)

const (
	smallPartitions = 100
	smallWindow     = 25 // connections with a request in flight at once
	smallValue      = 100
)

// Every batch of a topic's log holds the same number of records, so that
// a batch at a given offset is the same batch for every reader, as in a
// real log (readers that saw different batches at one offset would be the
// replica divergence a detector reports), and Fetch responses can be
// encoded once per topic. The sizes divide logPreCapture, so batches are
// aligned from the log start.
var topicBatch = []int{1, 2, 8, 4}

// maxFetchBatches is the most batches a Fetch response holds: responses
// are encoded with 0 (an empty long poll) to maxFetchBatches batches,
// enough for a consumer to keep up with the two producers of its
// partition.
const maxFetchBatches = 3

// smallFrames are the small shape's frames, encoded once.
type smallFrames struct {
	apiReq, apiResp         *frame
	metaReq, metaResp       []*frame   // per topic
	metaAllReq, metaAllResp *frame     // all topics
	produce                 []*frame   // per topic; marks: partition, records
	produced, produceErr    []*frame   // per topic; marks: partition, base offset (ok only)
	fetch                   []*frame   // per topic; marks: partition, fetch offset
	fetched                 [][]*frame // [topic][batches, 0 to 3]; marks: partition, HW, LSO, records (not in 0)
	fetchErr                []*frame   // per topic; marks: partition
	findReq, findResp       *frame     // marks: group; (response) node id, host, group (v4+)
	beat, beatOK, beatErr   *frame     // marks: group, member (request)
	commit, committed       []*frame   // per topic; marks: group, member, partition, offset; partition
}

var (
	groupMark  = strings.Repeat("G", groupLen)
	memberMark = strings.Repeat("M", memberLen)
	hostMark   = strings.Repeat("H", len("10.0.0.1"))
)

func newSmallFrames(vs versionSet) *smallFrames {
	f := &smallFrames{}
	f.apiReq, f.apiResp = vs.apiVersionsFrames()
	f.metaAllReq, f.metaAllResp = vs.metadataFrames("kfsniff-bench-small", smallBrokers, smallTopics, smallPartitions, false)
	for ti, topic := range smallTopics {
		req, resp := vs.metadataFrames("kfsniff-bench-small", smallBrokers, []string{topic}, smallPartitions, true)
		f.metaReq, f.metaResp = append(f.metaReq, req), append(f.metaResp, resp)

		b := batches(1, topicBatch[ti], smallValue)
		f.produce = append(f.produce, request(vs.produceRequest(topic, b), m32(0), b))
		f.produced = append(f.produced, response(vs.produceResponse(topic, 0), m32(0), m64(0)))
		f.produceErr = append(f.produceErr, response(vs.produceResponse(topic, errNotLeader), m32(0)))

		f.fetch = append(f.fetch, request(vs.fetchRequest(topic), m32(0), m64(0)))
		var fv []*frame
		for n := range maxFetchBatches + 1 {
			b := batches(n, topicBatch[ti], smallValue)
			if len(b) == 0 {
				fv = append(fv, response(vs.fetchResponse(topic, 0, b), m32(0), m64(0), m64(1)))
			} else {
				fv = append(fv, response(vs.fetchResponse(topic, 0, b), m32(0), m64(0), m64(1), b))
			}
		}
		f.fetched = append(f.fetched, fv)
		f.fetchErr = append(f.fetchErr, response(vs.fetchResponse(topic, errNotLeader, nil), m32(0)))

		f.commit = append(f.commit, request(vs.commitRequest(topic), groupMark, memberMark, m32(0), m64(0)))
		f.committed = append(f.committed, response(vs.commitResponse(topic), m32(0)))
	}

	// FindCoordinator: one key up to v3, a batch of keys from v4.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType = vs.findCoordinator, 0
	fr := kmsg.NewPtrFindCoordinatorResponse()
	fr.Version = vs.findCoordinator
	if vs.findCoordinator < 4 {
		fc.CoordinatorKey = groupMark
		fr.NodeID, fr.Host, fr.Port = m32(0), hostMark, kafkaPort
		f.findResp = response(fr, m32(0), hostMark)
	} else {
		fc.CoordinatorKeys = []string{groupMark}
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key, co.NodeID, co.Host, co.Port = groupMark, m32(0), hostMark, kafkaPort
		fr.Coordinators = []kmsg.FindCoordinatorResponseCoordinator{co}
		f.findResp = response(fr, m32(0), hostMark, groupMark)
	}
	f.findReq = request(fc, groupMark)

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.Generation, hb.MemberID = vs.heartbeat, groupMark, 7, memberMark
	f.beat = request(hb, groupMark, memberMark)
	hr := kmsg.NewPtrHeartbeatResponse()
	hr.Version = vs.heartbeat
	f.beatOK = response(hr)
	hr = kmsg.NewPtrHeartbeatResponse()
	hr.Version, hr.ErrorCode = vs.heartbeat, errRebalance
	f.beatErr = response(hr)
	return f
}

func (vs versionSet) produceRequest(topic string, batch []byte) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = vs.produce, -1, 30000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition, p.Records = m32(0), batch
	t.Partitions = []kmsg.ProduceRequestTopicPartition{p}
	r.Topics = []kmsg.ProduceRequestTopic{t}
	return r
}

func (vs versionSet) produceResponse(topic string, errCode int16) *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	r.Version = vs.produce
	t := kmsg.NewProduceResponseTopic()
	t.Topic = topic
	p := kmsg.NewProduceResponseTopicPartition()
	p.Partition, p.ErrorCode, p.BaseOffset, p.LogAppendTime, p.LogStartOffset = m32(0), errCode, m64(0), -1, logStartBase
	if errCode != 0 {
		p.BaseOffset, p.LogStartOffset = -1, -1
	}
	t.Partitions = []kmsg.ProduceResponseTopicPartition{p}
	r.Topics = []kmsg.ProduceResponseTopic{t}
	return r
}

func (vs versionSet) fetchRequest(topic string) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.MaxWaitMillis, r.MinBytes, r.MaxBytes = vs.fetch, 500, 1, 52428800
	r.SessionID, r.SessionEpoch = 0, -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = topic, topicID(topic)
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.CurrentLeaderEpoch, p.FetchOffset, p.LastFetchedEpoch, p.LogStartOffset, p.PartitionMaxBytes = m32(0), 3, m64(0), -1, -1, 1048576
	t.Partitions = []kmsg.FetchRequestTopicPartition{p}
	r.Topics = []kmsg.FetchRequestTopic{t}
	return r
}

// fetchResponse answers one partition: with batches (marks: partition,
// HW, LSO), or with an error.
func (vs versionSet) fetchResponse(topic string, errCode int16, batches []byte) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version = vs.fetch
	t := kmsg.NewFetchResponseTopic()
	t.Topic, t.TopicID = topic, topicID(topic)
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition, p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.LogStartOffset = m32(0), errCode, m64(0), m64(1), logStartBase
	p.RecordBatches = batches
	if errCode != 0 {
		p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
	}
	if p.RecordBatches == nil {
		p.RecordBatches = []byte{}
	}
	t.Partitions = []kmsg.FetchResponseTopicPartition{p}
	r.Topics = []kmsg.FetchResponseTopic{t}
	return r
}

func (vs versionSet) commitRequest(topic string) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.Generation, r.MemberID = vs.offsetCommit, groupMark, 7, memberMark
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = m32(0), m64(0), 3, kmsg.StringPtr("")
	t.Partitions = []kmsg.OffsetCommitRequestTopicPartition{p}
	r.Topics = []kmsg.OffsetCommitRequestTopic{t}
	return r
}

func (vs versionSet) commitResponse(topic string) *kmsg.OffsetCommitResponse {
	r := kmsg.NewPtrOffsetCommitResponse()
	r.Version = vs.offsetCommit
	t := kmsg.NewOffsetCommitResponseTopic()
	t.Topic = topic
	p := kmsg.NewOffsetCommitResponseTopicPartition()
	p.Partition = m32(0)
	t.Partitions = []kmsg.OffsetCommitResponseTopicPartition{p}
	r.Topics = []kmsg.OffsetCommitResponseTopic{t}
	return r
}

type role int

const (
	producer role = iota
	consumer
	member // a consumer group member's coordinator connection
	admin  // a short-lived client asking for Metadata
)

type op int

const (
	opNone op = iota
	opAPIVersions
	opMetadata
	opFindCoordinator
	opProduce
	opFetch
	opHeartbeat
	opCommit
)

// client is one connection of the small shape and what its client has
// done so far.
type client struct {
	role          role
	idx           int
	addr, server  netip.AddrPort
	broker        broker
	id            string
	topic         int
	part          int32
	group, member string

	c       *gen.Conn
	corr    int32 // of the request in flight
	n       int   // requests sent
	beats   int   // group requests sent
	op      op    // the request in flight
	variant int   // Fetch: the response's batch count
	fail    bool  // its response is an error
	refresh bool  // a NOT_LEADER_OR_FOLLOWER asks for Metadata next
	pos     int64 // consumer: next offset to fetch; member: committed offset
	base    int64 // producer: the offset the broker gives the batch in flight
}

// small writes the small-packet shape.
func (g *run) small() {
	f := newSmallFrames(g.v)
	// The brokers' logs: the next offset of every partition, shared by
	// producers (who append) and consumers (who read up to it), so that
	// high watermarks never go back.
	logEnd := make([][]int64, len(smallTopics))
	for t := range logEnd {
		logEnd[t] = make([]int64, smallPartitions)
		for p := range logEnd[t] {
			logEnd[t][p] = logStartBase + logPreCapture
		}
	}
	s := &smallRun{run: g, f: f, logEnd: logEnd}

	clients := make([]*client, g.shape.Conns)
	for i := range clients {
		clients[i] = newClient(i)
	}
	churn := max(g.shape.Conns/200, 1)
	admins := 0
	for round := 0; g.w.Packets() < g.shape.Packets; round++ {
		for w := 0; w < len(clients) && g.w.Packets() < g.shape.Packets; w += smallWindow {
			cls := clients[w:min(w+smallWindow, len(clients))]
			for _, cl := range cls {
				if cl.c == nil {
					cl.c = g.dial(cl.addr, cl.server)
				}
			}
			s.window(cls, round)
		}
		// Short-lived admin clients: connect, ApiVersions, Metadata of
		// every topic, close.
		cls := make([]*client, churn)
		for i := range cls {
			cls[i] = newAdmin(admins)
			admins++
			cls[i].c = g.dial(cls[i].addr, cls[i].server)
		}
		s.window(cls, round)
		s.window(cls, round)
		for _, cl := range cls {
			cl.c.Close(g.after(30 * time.Microsecond))
		}
	}
	for _, cl := range clients {
		if cl.c != nil {
			cl.c.Close(g.after(20 * time.Microsecond))
		}
	}
}

func newClient(i int) *client {
	cl := &client{
		idx:    i,
		addr:   netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i / 250), byte(i%250 + 1)}), uint16(clientPortMin+i)),
		broker: smallBrokers[i%len(smallBrokers)],
		topic:  (i / 10) % len(smallTopics),
	}
	// Clients come in tens: four producers, three consumers, three group
	// members, each ten on one topic. Every partition has two producers
	// (of tens k and k+25 of its topic), and the consumers of a ten read
	// the partitions its first three producers write, so each consumer
	// keeps up with two producers' batches: the traffic of a healthy
	// cluster, where a consumer reading a fixed share of a busier
	// partition would be the falling-behind consumer a detector reports.
	ten, r := i/10/len(smallTopics), i%10
	cl.server = netip.AddrPortFrom(netip.MustParseAddr(cl.broker.host), kafkaPort)
	switch {
	case r < 4:
		cl.role, cl.id = producer, fmt.Sprintf("producer-%04d", i%10000)
		cl.part = int32(ten*4+r) % smallPartitions
	case r < 7:
		cl.role, cl.id = consumer, fmt.Sprintf("consumer-%04d", i%10000)
		cl.part = int32(ten*4+r-4) % smallPartitions
		cl.pos = logStartBase + logPreCapture // at the log's end: it keeps up
	default:
		cl.role, cl.id = member, fmt.Sprintf("consumer-%04d", i%10000)
		cl.part = int32(ten*4+r) % smallPartitions
		cl.group = fmt.Sprintf("group-%03d", (i/30)%1000)
		cl.member = fmt.Sprintf("%s-%016x%016x", cl.id, uint64(i)*0x9e3779b97f4a7c15, uint64(i)^0xdeadbeefcafe)
		cl.pos = logStartBase + logPreCapture
	}
	return cl
}

func newAdmin(a int) *client {
	cl := &client{
		role:   admin,
		idx:    a,
		addr:   netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, byte(a / 250 % 256), byte(a%250 + 1)}), uint16(clientPortMin+a%20000)),
		broker: smallBrokers[a%len(smallBrokers)],
		id:     fmt.Sprintf("adminapp-%04d", a%10000),
	}
	cl.server = netip.AddrPortFrom(netip.MustParseAddr(cl.broker.host), kafkaPort)
	return cl
}

// next picks the client's next request in round, or opNone.
func (cl *client) next(round int) op {
	if cl.n == 0 {
		return opAPIVersions
	}
	switch cl.role {
	case admin:
		if cl.n == 1 {
			return opMetadata
		}
		return opNone
	case producer, consumer:
		if cl.n == 1 || cl.refresh {
			cl.refresh = false
			return opMetadata
		}
		if cl.role == producer {
			return opProduce
		}
		return opFetch
	}
	if cl.n == 1 {
		return opFindCoordinator
	}
	if (round+cl.idx)%3 != 0 { // a heartbeat interval is three rounds
		return opNone
	}
	cl.beats++
	if cl.beats%5 == 0 {
		return opCommit
	}
	return opHeartbeat
}

type smallRun struct {
	*run
	f      *smallFrames
	logEnd [][]int64
}

// window sends one request from each client of cls that has one, then
// answers them in the same order, as brokers answer a burst.
func (s *smallRun) window(cls []*client, round int) {
	s.after(50 * time.Microsecond)
	for _, cl := range cls {
		cl.op = cl.next(round)
		if cl.op == opNone {
			continue
		}
		cl.corr = int32(cl.n)
		cl.n++
		s.sendRequest(cl)
		s.after(40 * time.Microsecond)
	}
	s.after(800 * time.Microsecond)
	for _, cl := range cls {
		if cl.op == opNone {
			continue
		}
		s.sendResponse(cl)
		s.after(40 * time.Microsecond)
	}
}

func (s *smallRun) sendRequest(cl *client) {
	f := s.f
	var fr *frame
	switch cl.op {
	case opAPIVersions:
		fr = f.apiReq
	case opMetadata:
		fr = f.metaReq[cl.topic]
		if cl.role == admin {
			fr = f.metaAllReq
		}
	case opFindCoordinator:
		fr = f.findReq
		fr.putString(0, cl.group)
	case opProduce:
		cl.fail = (cl.idx*7+cl.n)%50 == 0
		fr = f.produce[cl.topic]
		fr.put32(0, cl.part)
		// The broker appends requests in the order they arrive: the
		// offsets are known now; a refused batch is not appended.
		end := &s.logEnd[cl.topic][cl.part]
		cl.base = *end
		if next := fr.fill(1, cl.topic, cl.part, *end, true); !cl.fail {
			*end = next
		}
	case opFetch:
		// A healthy consumer keeps up: it reads what producers appended
		// since its last fetch, up to maxFetchBatches, and long polls
		// (an empty response) when it is at the log's end.
		per := int64(topicBatch[cl.topic])
		behind := (s.logEnd[cl.topic][cl.part] - cl.pos + per - 1) / per
		cl.variant = int(min(behind, maxFetchBatches))
		cl.fail = (cl.idx*11+cl.n)%80 == 0
		fr = f.fetch[cl.topic]
		fr.put32(0, cl.part)
		fr.put64(1, cl.pos)
	case opHeartbeat:
		cl.fail = (cl.idx*13+cl.beats)%40 == 0
		fr = f.beat
		fr.putString(0, cl.group)
		fr.putString(1, cl.member)
	case opCommit:
		cl.pos += 10
		fr = f.commit[cl.topic]
		fr.putString(0, cl.group)
		fr.putString(1, cl.member)
		fr.put32(2, cl.part)
		fr.put64(3, cl.pos)
	}
	s.request(cl.c, fr, cl.corr, cl.id)
}

func (s *smallRun) sendResponse(cl *client) {
	f := s.f
	var fr *frame
	switch cl.op {
	case opAPIVersions:
		fr = f.apiResp
	case opMetadata:
		fr = f.metaResp[cl.topic]
		if cl.role == admin {
			fr = f.metaAllResp
		}
	case opFindCoordinator:
		fr = f.findResp
		fr.put32(0, cl.broker.id)
		fr.putString(1, cl.broker.host)
		if len(fr.at) > 2 {
			fr.putString(2, cl.group)
		}
	case opProduce:
		if cl.fail {
			fr = f.produceErr[cl.topic]
			fr.put32(0, cl.part)
			cl.refresh = true
			break
		}
		fr = f.produced[cl.topic]
		fr.put32(0, cl.part)
		fr.put64(1, cl.base)
	case opFetch:
		if cl.fail {
			fr = f.fetchErr[cl.topic]
			fr.put32(0, cl.part)
			cl.refresh = true
			break
		}
		fr = f.fetched[cl.topic][cl.variant]
		fr.put32(0, cl.part)
		if cl.variant > 0 {
			cl.pos = fr.fill(3, cl.topic, cl.part, cl.pos, false)
		}
		end := &s.logEnd[cl.topic][cl.part]
		*end = max(*end, cl.pos) // records appended by producers not captured
		fr.put64(1, *end)
		fr.put64(2, *end)
	case opHeartbeat:
		fr = f.beatOK
		if cl.fail {
			fr = f.beatErr
		}
	case opCommit:
		fr = f.committed[cl.topic]
		fr.put32(0, cl.part)
	}
	s.respond(cl.c, fr, cl.corr)
}
