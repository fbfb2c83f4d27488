package detectortest

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
)

// Builders for the rules of clients stuck on partitions (not-leader-loop,
// stalled-fetch, liveness-without-replication): raft and consumer
// fetches, produce requests of several partitions, the answers naming a
// leader (KIP-951), Metadata naming leaders, KRaft broker heartbeats; and
// the ways their tests make traffic (Every, Schedule) and run their cases
// (Run, cases.go).

// RaftFetch is a KRaft fetch (v17) of __cluster_metadata by node from
// offset at epoch, with the replica state of a KRaft observer.
func RaftFetch(node int32, offset int64, epoch int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version = 17
	r.ClusterID = kmsg.StringPtr("test-cluster")
	r.ReplicaState.ID, r.ReplicaState.Epoch = node, -1
	r.MaxWaitMillis, r.MaxBytes, r.SessionEpoch = 500, 8388608, -1
	t := kmsg.NewFetchRequestTopic()
	t.TopicID = cluster.ClusterMetadataTopicID
	p := kmsg.NewFetchRequestTopicPartition()
	p.CurrentLeaderEpoch, p.FetchOffset, p.LastFetchedEpoch = epoch, offset, epoch
	t.Partitions = []kmsg.FetchRequestTopicPartition{p}
	r.Topics = []kmsg.FetchRequestTopic{t}
	return r
}

// RaftFetched answers a raft fetch: code, high watermark, the leader named
// (-1: none) and its endpoint (none if host is ""), and records.
func RaftFetched(code int16, hw int64, leader, epoch int32, host string, port int32, records []byte) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version = 17
	t := kmsg.NewFetchResponseTopic()
	t.TopicID = cluster.ClusterMetadataTopicID
	p := kmsg.NewFetchResponseTopicPartition()
	p.ErrorCode, p.HighWatermark, p.LastStableOffset = code, hw, hw
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leader, epoch
	p.RecordBatches = records
	t.Partitions = []kmsg.FetchResponseTopicPartition{p}
	r.Topics = []kmsg.FetchResponseTopic{t}
	if host != "" {
		b := kmsg.NewFetchResponseBroker()
		b.NodeID, b.Host, b.Port = leader, host, port
		r.Brokers = []kmsg.FetchResponseBroker{b}
	}
	return r
}

// ConsumerFetch is a consumer's Fetch v12 (topics by name) of one
// partition from offset; isolation 1 is read_committed.
func ConsumerFetch(topic string, part int32, offset int64, isolation int8) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version = 12
	r.ReplicaID = -1
	r.MaxWaitMillis, r.MinBytes, r.MaxBytes, r.SessionEpoch = 500, 1, 52428800, -1
	r.IsolationLevel = isolation
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes = part, offset, 1048576
	t.Partitions = []kmsg.FetchRequestTopicPartition{p}
	r.Topics = []kmsg.FetchRequestTopic{t}
	return r
}

// ConsumerFetched answers ConsumerFetch: code, high watermark, last stable
// offset, the leader named (-1: none) and records.
func ConsumerFetched(topic string, part int32, code int16, hw, lso int64, leader, epoch int32, records []byte) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version = 12
	t := kmsg.NewFetchResponseTopic()
	t.Topic = topic
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition, p.ErrorCode, p.HighWatermark, p.LastStableOffset = part, code, hw, lso
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leader, epoch
	p.RecordBatches = records
	t.Partitions = []kmsg.FetchResponseTopicPartition{p}
	r.Topics = []kmsg.FetchResponseTopic{t}
	return r
}

// StoredBatch is the bytes of one stored batch of n records at base.
func StoredBatch(base int64, n int) []byte {
	recs := make([]gen.Record, n)
	for i := range recs {
		recs[i] = gen.Record{Value: []byte("value")}
	}
	return gen.RecordBatch(base, T0, recs)
}

// ProduceTo is a Produce request (acks=all) of one record to each of
// parts of topic.
func ProduceTo(version int16, topic string, parts ...int32) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = version, -1, 30000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	for _, part := range parts {
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition = part
		p.Records = gen.RecordBatch(0, T0, []gen.Record{{Value: []byte("v")}})
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = []kmsg.ProduceRequestTopic{t}
	return r
}

// ProducedTo answers every partition of ProduceTo with code; from v10 the
// leader hint (leader >= 0) and its endpoint (host not "") are set.
func ProducedTo(version int16, topic string, code int16, leader, epoch int32, host string, port int32, parts ...int32) *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	r.Version = version
	t := kmsg.NewProduceResponseTopic()
	t.Topic = topic
	for _, part := range parts {
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition, p.ErrorCode = part, code
		if code != 0 {
			p.BaseOffset = -1
		}
		if version >= 10 && leader >= 0 {
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leader, epoch
		}
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = []kmsg.ProduceResponseTopic{t}
	if version >= 10 && host != "" {
		b := kmsg.NewProduceResponseBroker()
		b.NodeID, b.Host, b.Port = leader, host, port
		r.Brokers = []kmsg.ProduceResponseBroker{b}
	}
	return r
}

// MetadataLeader is a Metadata v12 exchange naming the brokers
// ("id@host:port") and leader (at epoch) of parts of topic.
func MetadataLeader(topic string, leader, epoch int32, brokers []string, parts ...int32) (*kmsg.MetadataRequest, *kmsg.MetadataResponse) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.Topics = 12, []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 12
	for _, b := range brokers {
		id, hp, _ := strings.Cut(b, "@")
		ap := netip.MustParseAddrPort(hp)
		n, _ := strconv.Atoi(id)
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = int32(n), ap.Addr().String(), int32(ap.Port())
		resp.Brokers = append(resp.Brokers, mb)
	}
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr(topic)
	for _, part := range parts {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader, p.LeaderEpoch = part, leader, epoch
		p.Replicas, p.ISR = []int32{leader}, []int32{leader}
		t.Partitions = append(t.Partitions, p)
	}
	resp.Topics = []kmsg.MetadataResponseTopic{t}
	return req, resp
}

// BrokerHeartbeat is a KRaft BrokerHeartbeat v1 of broker id reporting
// metaOffset, answered with code (caught up, not fenced).
func BrokerHeartbeat(id int32, metaOffset int64, code int16) (*kmsg.BrokerHeartbeatRequest, *kmsg.BrokerHeartbeatResponse) {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.Version, req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset = 1, id, 100, metaOffset
	resp := kmsg.NewPtrBrokerHeartbeatResponse()
	resp.Version, resp.ErrorCode, resp.IsCaughtUp, resp.IsFenced = 1, code, true, false
	return req, resp
}

// Every makes n calls from c, step apart from start: call(i) is the
// request and its answer after rtt (nil: never answered).
func Every(h *Harness, c *flows.Conn, clientID string, n int, start, step, rtt time.Duration, call func(i int) (kmsg.Request, kmsg.Response)) {
	for i := range n {
		req, resp := call(i)
		h.Call(c, At(start+time.Duration(i)*step), rtt, clientID, req, resp)
	}
}

// Schedule collects calls on several connections and makes them in time
// order; the requests never answered end at the end, as flows ends them
// when the capture does.
type Schedule struct {
	calls []scheduled
}

type scheduled struct {
	at       time.Duration
	c        *flows.Conn
	clientID string
	req      kmsg.Request
	resp     kmsg.Response
}

// Add schedules a call at T0+at, answered 2 ms later by resp (nil: never).
func (s *Schedule) Add(at time.Duration, c *flows.Conn, clientID string, req kmsg.Request, resp kmsg.Response) {
	s.calls = append(s.calls, scheduled{at, c, clientID, req, resp})
}

// Run makes the calls.
func (s *Schedule) Run(h *Harness) {
	sort.SliceStable(s.calls, func(i, j int) bool { return s.calls[i].at < s.calls[j].at })
	var never []*flows.Exchange
	for _, c := range s.calls {
		q, _ := h.Call(c.c, At(c.at), 2*time.Millisecond, c.clientID, c.req, c.resp)
		if c.resp == nil {
			never = append(never, &flows.Exchange{Conn: c.c, Req: q, Unanswered: true})
		}
	}
	for _, x := range never {
		h.Exchange(x)
	}
}

// Edge is the two cases on either side of a threshold, with the rule's
// settings: at it, the traffic makes the finding want describes; just
// below it (the near miss), none.
func Edge(threshold string, settings map[string]string, want Want, at, below func(h *Harness)) []Case {
	return []Case{
		{Name: threshold + ": at it", Settings: settings, Traffic: at, Want: []Want{want}},
		{Name: threshold + ": near miss below it", Settings: settings, Traffic: below},
	}
}
