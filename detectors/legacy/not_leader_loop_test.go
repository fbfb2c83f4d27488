package legacy_test

import (
	"bytes"
	"math"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/report"
)

// nlTraffic scripts a capture from several actors: exchanges are scheduled
// with their times and written in time order when the capture is run.
type nlTraffic struct {
	t    *testing.T
	buf  bytes.Buffer
	w    *gen.Writer
	evs  []nlEvent
	corr map[*gen.Conn]int32
}

type nlEvent struct {
	at time.Time
	fn func()
}

func newNLTraffic(t *testing.T) *nlTraffic {
	t.Helper()
	tr := &nlTraffic{t: t, corr: map[*gen.Conn]int32{}}
	w, err := gen.NewWriter(&tr.buf, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr.w = w
	return tr
}

// conn opens a connection that began before the capture (no handshake, so
// nothing is written out of time order).
func (tr *nlTraffic) conn(client, server string) *gen.Conn {
	return tr.w.Conn(netip.MustParseAddrPort(client), netip.MustParseAddrPort(server), time.Time{}, gen.ConnOptions{NoHandshake: true})
}

// exchange schedules a request at at and its response rtt later (no
// response if resp is nil).
func (tr *nlTraffic) exchange(c *gen.Conn, clientID string, at time.Time, rtt time.Duration, req kmsg.Request, resp kmsg.Response) {
	corr := tr.corr[c]
	tr.corr[c]++
	id := clientID
	tr.evs = append(tr.evs, nlEvent{at, func() { c.Request(at, corr, &id, req) }})
	if resp != nil {
		tr.evs = append(tr.evs, nlEvent{at.Add(rtt), func() { c.Response(at.Add(rtt), corr, resp) }})
	}
}

// run writes the capture and analyses it with the detectors, thresholds
// changed by overrides.
func (tr *nlTraffic) run(overrides map[string]float64) *report.Report {
	tr.t.Helper()
	sort.SliceStable(tr.evs, func(i, j int) bool { return tr.evs[i].at.Before(tr.evs[j].at) })
	for _, e := range tr.evs {
		e.fn()
	}
	if err := tr.w.Close(); err != nil {
		tr.t.Fatal(err)
	}
	return analyseBytes(tr.t, tr.buf.Bytes(), overrides)
}

var nlT0 = time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)

func nlAt(d time.Duration) time.Time { return nlT0.Add(d) }

// Fetch and Produce bodies.

func nlRaftFetch(node int32, offset int64, epoch int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version = 17
	r.ClusterID = kmsg.StringPtr("test-cluster")
	r.ReplicaState.ID, r.ReplicaState.Epoch = node, -1
	r.MaxWaitMillis, r.MaxBytes, r.SessionEpoch = 500, 8388608, -1
	t := kmsg.NewFetchRequestTopic()
	t.TopicID = [16]byte{15: 1}
	p := kmsg.NewFetchRequestTopicPartition()
	p.CurrentLeaderEpoch, p.FetchOffset, p.LastFetchedEpoch = epoch, offset, epoch
	t.Partitions = []kmsg.FetchRequestTopicPartition{p}
	r.Topics = []kmsg.FetchRequestTopic{t}
	return r
}

// nlRaftFetched answers a raft fetch: code, high watermark, the leader named
// and its endpoint (none if host is ""), and records.
func nlRaftFetched(code int16, hw int64, leader, epoch int32, host string, port int32, records []byte) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version = 17
	t := kmsg.NewFetchResponseTopic()
	t.TopicID = [16]byte{15: 1}
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

// consumerFetch is a Fetch v12 (topic names) of one partition.
func nlConsumerFetch(topic string, part int32, offset int64, isolation int8) *kmsg.FetchRequest {
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

func nlConsumerFetched(topic string, part int32, code int16, hw, lso int64, leader, epoch int32, records []byte) *kmsg.FetchResponse {
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

func nlProduce(version int16, topic string, parts ...int32) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = version, -1, 30000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	for _, part := range parts {
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition = part
		p.Records = gen.RecordBatch(0, nlT0, []gen.Record{{Value: []byte("v")}})
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = []kmsg.ProduceRequestTopic{t}
	return r
}

// produced answers every partition with code; from v10 the leader hint
// (leader >= 0) and its endpoint are set.
func nlProduced(version int16, topic string, code int16, leader, epoch int32, host string, port int32, parts ...int32) *kmsg.ProduceResponse {
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

// metadata is a Metadata v12 exchange naming the brokers ("id@host:port")
// and leader of partitions of topic.
func nlMetadata(topic string, leader, epoch int32, brokers []string, parts ...int32) (*kmsg.MetadataRequest, *kmsg.MetadataResponse) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 12
	for _, b := range brokers {
		id, hp, _ := strings.Cut(b, "@")
		ap := netip.MustParseAddrPort(hp)
		mb := kmsg.NewMetadataResponseBroker()
		n := 0
		for _, ch := range id {
			n = n*10 + int(ch-'0')
		}
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

var nlBrokers = []string{"1@10.1.0.1:9092", "2@10.1.0.2:9092", "3@10.1.0.3:9092"}

// TestNotLeaderLoop builds each shape of the loop, the ways real clients
// retry, and the near misses a leadership change makes.
func TestNotLeaderLoop(t *testing.T) {
	type want struct {
		severity string
		summary  []string // substrings of the summary
		counts   map[string]int64
		fields   map[string]any
		nodes    []int32
		rate     float64 // rate_per_s within 1%, if set
	}
	cases := []struct {
		name      string
		overrides map[string]float64
		build     func(tr *nlTraffic)
		want      []want // nil: no finding
	}{
		{
			name: "KRaft observer ignores the leader named by two controllers (KAFKA-19354)",
			build: func(tr *nlTraffic) {
				a := tr.conn("10.2.0.7:40001", "10.2.0.11:9093")
				b := tr.conn("10.2.0.7:40002", "10.2.0.12:9093")
				for i := range 60 {
					c := a
					if i%3 == 2 {
						c = b
					}
					tr.exchange(c, "raft-client-7", nlAt(time.Duration(i)*250*time.Millisecond), time.Millisecond,
						nlRaftFetch(7, 9000, 12), nlRaftFetched(6, -1, 3000, 12, "10.2.0.13", 9093, nil))
				}
			},
			want: []want{{
				severity: "error",
				summary:  []string{"raft-client-7", "__cluster_metadata-0", "naming leader node 3000 (10.2.0.13:9093) epoch 12", "KAFKA-19354"},
				counts:   map[string]int64{"requests": 60, "not_leader_responses": 60, "requests_to_leader": 0},
				fields: map[string]any{
					"client": "10.2.0.7", "client_id": "raft-client-7", "topic": "__cluster_metadata", "partition": int32(0),
					"error": "NOT_LEADER_OR_FOLLOWER", "leader_id": int32(3000), "leader_epoch": int32(12),
					"leader_endpoint": "10.2.0.13:9093", "fetch_offset": int64(9000), "replica_id": int32(7),
					"replica_epoch": int64(-1), "known_issue": "KAFKA-19354", "shape": "leader-not-followed",
					"servers": []string{"10.2.0.11:9093", "10.2.0.12:9093"},
				},
				nodes: []int32{7, 3000},
			}},
		},
		{
			name: "consumer keeps fetching from a follower that names the leader (FENCED_LEADER_EPOCH)",
			build: func(tr *nlTraffic) {
				m := tr.conn("10.1.5.5:50000", "10.1.0.1:9092")
				req, resp := nlMetadata("orders", 2, 9, nlBrokers, 0)
				tr.exchange(m, "app-consumer", nlAt(0), time.Millisecond, req, resp)
				f := tr.conn("10.1.5.5:50001", "10.1.0.1:9092")
				for i := range 30 {
					tr.exchange(f, "app-consumer", nlAt(time.Second+time.Duration(i)*time.Second), time.Millisecond,
						nlConsumerFetch("orders", 0, 1234, 0), nlConsumerFetched("orders", 0, 74, -1, -1, 2, 9, nil))
				}
			},
			want: []want{{
				severity: "error",
				summary:  []string{"app-consumer", "orders-0", "none sent to the leader"},
				counts:   map[string]int64{"requests": 30, "not_leader_responses": 30, "requests_to_leader": 0, "fenced_leader_epoch": 30},
				fields: map[string]any{
					"error": "FENCED_LEADER_EPOCH", "leader_id": int32(2), "leader_epoch": int32(9),
					"leader_endpoint": "10.1.0.2:9092", "fetch_offset": int64(1234), "servers": []string{"10.1.0.1:9092"},
				},
				nodes: []int32{1, 2},
			}},
		},
		{
			name: "slow retrier (kafkajs-like, every 4 s for a minute): metadata names the refusing broker",
			build: func(tr *nlTraffic) {
				m := tr.conn("10.1.6.6:51000", "10.1.0.3:9092")
				p := tr.conn("10.1.6.6:51001", "10.1.0.1:9092")
				for i := range 15 {
					t := nlAt(time.Duration(i) * 4 * time.Second)
					req, resp := nlMetadata("events", 1, 4, nlBrokers, 0)
					tr.exchange(m, "kafkajs", t, 2*time.Millisecond, req, resp)
					tr.exchange(p, "kafkajs", t.Add(10*time.Millisecond), 2*time.Millisecond,
						nlProduce(7, "events", 0), nlProduced(7, "events", 6, -1, -1, "", 0, 0))
				}
			},
			want: []want{{
				severity: "error",
				summary:  []string{"metadata names broker 1 as leader of events-0 but it answers NOT_LEADER_OR_FOLLOWER", "kafkajs"},
				counts:   map[string]int64{"requests": 15, "not_leader_responses": 15, "requests_to_leader": 15},
				fields: map[string]any{
					"shape": "metadata-names-refuser", "leader_id": int32(1), "leader_source": "metadata",
					"leader_endpoint": "10.1.0.1:9092", "metadata_server": "10.1.0.3:9092",
				},
				nodes: []int32{1},
			}},
		},
		{
			name: "fast retrier (kgo-like, 200/s) gets v10 answers naming the refusing broker itself",
			build: func(tr *nlTraffic) {
				p := tr.conn("10.1.7.7:52000", "10.1.0.2:9092")
				for i := range 2400 {
					tr.exchange(p, "kgo", nlAt(time.Duration(i)*5*time.Millisecond), time.Millisecond,
						nlProduce(10, "events", 0), nlProduced(10, "events", 6, 2, 7, "10.1.0.2", 9092, 0))
				}
			},
			want: []want{{
				severity: "error",
				summary:  []string{"broker 2 answers NOT_LEADER_OR_FOLLOWER for events-0 while naming itself as leader (epoch 7)"},
				counts:   map[string]int64{"requests": 2400, "not_leader_responses": 2400, "requests_to_leader": 2400},
				fields:   map[string]any{"shape": "leader-names-itself", "leader_id": int32(2)},
				nodes:    []int32{2},
				rate:     200,
			}},
		},
		{
			name: "no-backoff retrier: 300 answers in 0.3 s are a loop however short",
			build: func(tr *nlTraffic) {
				m := tr.conn("10.1.7.8:52100", "10.1.0.3:9092")
				req, resp := nlMetadata("events", 2, 7, nlBrokers, 0)
				tr.exchange(m, "kgo-nobackoff", nlAt(0), time.Millisecond, req, resp)
				p := tr.conn("10.1.7.8:52101", "10.1.0.2:9092")
				for i := range 300 {
					tr.exchange(p, "kgo-nobackoff", nlAt(10*time.Millisecond+time.Duration(i)*time.Millisecond), 500*time.Microsecond,
						nlProduce(10, "events", 0), nlProduced(10, "events", 6, 2, 7, "10.1.0.2", 9092, 0))
				}
			},
			want: []want{{
				severity: "error",
				summary:  []string{"metadata names broker 2 as leader of events-0 but it answers NOT_LEADER_OR_FOLLOWER", "300 times in 300 ms"},
				counts:   map[string]int64{"not_leader_responses": 300, "metadata_refreshes": 0},
				fields:   map[string]any{"shape": "metadata-names-refuser", "leader_id": int32(2), "leader_epoch": int32(7)},
				rate:     1000,
			}},
		},
		{
			name:      "the no-backoff burst is not a loop when burst-responses is off",
			overrides: map[string]float64{"not-leader-loop.burst-responses": 0},
			build: func(tr *nlTraffic) {
				p := tr.conn("10.1.7.8:52101", "10.1.0.2:9092")
				for i := range 300 {
					tr.exchange(p, "kgo-nobackoff", nlAt(time.Duration(i)*time.Millisecond), 500*time.Microsecond,
						nlProduce(10, "events", 0), nlProduced(10, "events", 6, 2, 7, "10.1.0.2", 9092, 0))
				}
			},
		},
		{
			name: "one producer stuck on three partitions of a broker is one finding",
			build: func(tr *nlTraffic) {
				m := tr.conn("10.1.8.8:53000", "10.1.0.2:9092")
				p := tr.conn("10.1.8.8:53001", "10.1.0.3:9092")
				for i := range 20 {
					t := nlAt(time.Duration(i) * time.Second)
					req, resp := nlMetadata("logs", 3, 1, nlBrokers, 0, 1, 2)
					tr.exchange(m, "sarama", t, time.Millisecond, req, resp)
					tr.exchange(p, "sarama", t.Add(5*time.Millisecond), time.Millisecond,
						nlProduce(9, "logs", 0, 1, 2), nlProduced(9, "logs", 6, -1, -1, "", 0, 0, 1, 2))
				}
			},
			want: []want{{
				severity: "error",
				summary:  []string{"metadata names broker 3 as leader of logs-0", "3 partitions"},
				counts:   map[string]int64{"requests": 60, "not_leader_responses": 60},
				fields:   map[string]any{"partition": int32(0), "partitions": []int32{0, 1, 2}},
				nodes:    []int32{3},
			}},
		},
		{
			name: "nothing names the leader: a warning",
			build: func(tr *nlTraffic) {
				p := tr.conn("10.1.9.9:54000", "10.1.0.2:9092")
				for i := range 12 {
					tr.exchange(p, "legacy", nlAt(time.Duration(i)*time.Second), time.Millisecond,
						nlProduce(7, "t", 0), nlProduced(7, "t", 6, -1, -1, "", 0, 0))
				}
			},
			want: []want{{
				severity: "warning",
				summary:  []string{"nothing in the capture names the leader"},
				counts:   map[string]int64{"requests": 12, "not_leader_responses": 12},
				fields:   map[string]any{"shape": "leader-unknown", "leader_id": int32(-1)},
			}},
		},
		{
			name: "near miss: the leader moves and the client follows",
			build: func(tr *nlTraffic) {
				old := tr.conn("10.1.5.5:55000", "10.1.0.1:9092")
				nw := tr.conn("10.1.5.5:55001", "10.1.0.2:9092")
				for i := range 5 {
					tr.exchange(old, "follower-app", nlAt(time.Duration(i)*100*time.Millisecond), time.Millisecond,
						nlProduce(10, "orders", 0), nlProduced(10, "orders", 6, 2, 8, "10.1.0.2", 9092, 0))
				}
				for i := range 120 {
					tr.exchange(nw, "follower-app", nlAt(time.Second+time.Duration(i)*500*time.Millisecond), time.Millisecond,
						nlProduce(10, "orders", 0), nlProduced(10, "orders", 0, -1, -1, "", 0, 0))
				}
			},
		},
		{
			name: "near miss: each leadership change is short though the changes go on",
			build: func(tr *nlTraffic) {
				c := tr.conn("10.1.5.6:55100", "10.1.0.1:9092")
				for i := range 40 {
					epoch := int32(20 + i/4) // a new epoch every 4 answers
					tr.exchange(c, "flappy", nlAt(time.Duration(i)*time.Second), time.Millisecond,
						nlConsumerFetch("orders", 0, 77, 0), nlConsumerFetched("orders", 0, 6, -1, -1, 2, epoch, nil))
				}
			},
		},
		{
			name: "near miss: NOT_LEADER now and then, each time followed by a success",
			build: func(tr *nlTraffic) {
				c := tr.conn("10.1.5.8:55300", "10.1.0.1:9092")
				for i := range 60 {
					code := int16(0)
					if i%4 != 3 {
						code = 6
					}
					tr.exchange(c, "flaky", nlAt(time.Duration(i)*time.Second), time.Millisecond,
						nlProduce(9, "orders", 0), nlProduced(9, "orders", code, -1, -1, "", 0, 0))
				}
			},
		},
		{
			name: "near miss: a burst of NOT_LEADER during an election, then success",
			build: func(tr *nlTraffic) {
				c := tr.conn("10.1.5.7:55200", "10.1.0.1:9092")
				for i := range 40 {
					tr.exchange(c, "burst", nlAt(time.Duration(i)*50*time.Millisecond), time.Millisecond,
						nlProduce(9, "orders", 0), nlProduced(9, "orders", 6, -1, -1, "", 0, 0))
				}
				for i := range 40 {
					tr.exchange(c, "burst", nlAt(3*time.Second+time.Duration(i)*time.Second), time.Millisecond,
						nlProduce(9, "orders", 0), nlProduced(9, "orders", 0, -1, -1, "", 0, 0))
				}
			},
		},
		{
			name:      "the burst is a loop once min-duration is lowered",
			overrides: map[string]float64{"not-leader-loop.min-duration": 1},
			build: func(tr *nlTraffic) {
				c := tr.conn("10.1.5.7:55200", "10.1.0.1:9092")
				for i := range 40 {
					tr.exchange(c, "burst", nlAt(time.Duration(i)*50*time.Millisecond), time.Millisecond,
						nlProduce(9, "orders", 0), nlProduced(9, "orders", 6, -1, -1, "", 0, 0))
				}
			},
			want: []want{{severity: "warning", counts: map[string]int64{"not_leader_responses": 40}}},
		},
		{
			name:      "min-responses raised above the slow retrier's count",
			overrides: map[string]float64{"not-leader-loop.min-responses": 16},
			build: func(tr *nlTraffic) {
				m := tr.conn("10.1.6.6:51000", "10.1.0.3:9092")
				p := tr.conn("10.1.6.6:51001", "10.1.0.1:9092")
				for i := range 15 {
					t := nlAt(time.Duration(i) * 4 * time.Second)
					req, resp := nlMetadata("events", 1, 4, nlBrokers, 0)
					tr.exchange(m, "kafkajs", t, 2*time.Millisecond, req, resp)
					tr.exchange(p, "kafkajs", t.Add(10*time.Millisecond), 2*time.Millisecond,
						nlProduce(7, "events", 0), nlProduced(7, "events", 6, -1, -1, "", 0, 0))
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newNLTraffic(t)
			tc.build(tr)
			got := findingsOf(tr.run(tc.overrides), "not-leader-loop")
			if len(got) != len(tc.want) {
				t.Fatalf("%d findings, want %d:%s", len(got), len(tc.want), nlDescribe(got))
			}
			for i, w := range tc.want {
				nlCheck(t, got[i], w.severity, w.summary, w.counts, w.fields, w.nodes)
				if w.rate > 0 {
					r, _ := got[i].Fields["rate_per_s"].(float64)
					if math.Abs(r-w.rate) > 0.01*w.rate {
						t.Errorf("rate_per_s = %v, want about %v", r, w.rate)
					}
				}
			}
		})
	}
}

func nlDescribe(fs []detectors.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("\n  " + f.Severity.String() + " " + f.Summary)
	}
	return b.String()
}

// nlCheck compares a finding with what a user must see in it.
func nlCheck(t *testing.T, f detectors.Finding, severity string, summary []string, counts map[string]int64, fields map[string]any, nodes []int32) {
	t.Helper()
	if f.Severity.String() != severity {
		t.Errorf("severity %s, want %s (%s)", f.Severity, severity, f.Summary)
	}
	for _, s := range summary {
		if !strings.Contains(f.Summary, s) {
			t.Errorf("summary %q lacks %q", f.Summary, s)
		}
	}
	for k, v := range counts {
		if f.Counts[k] != v {
			t.Errorf("count %s = %d, want %d (counts %v)", k, f.Counts[k], v, f.Counts)
		}
	}
	for k, v := range fields {
		got, ok := f.Fields[k]
		if !ok {
			t.Errorf("no field %s (fields %v)", k, f.Fields)
			continue
		}
		if !nlEqual(got, v) {
			t.Errorf("field %s = %#v, want %#v", k, got, v)
		}
	}
	for _, n := range nodes {
		found := false
		for _, m := range f.Nodes {
			found = found || m == n
		}
		if !found {
			t.Errorf("nodes %v lack %d", f.Nodes, n)
		}
	}
	if f.Explanation == "" || f.Next == "" {
		t.Errorf("explanation %q, next %q: both must be set", f.Explanation, f.Next)
	}
	if len(f.Evidence) == 0 || f.First.IsZero() || f.Last.Before(f.First) {
		t.Errorf("evidence %v, first %v, last %v", f.Evidence, f.First, f.Last)
	}
}

func nlEqual(a, b any) bool {
	switch x := a.(type) {
	case []string:
		y, ok := b.([]string)
		return ok && strings.Join(x, "\x00") == strings.Join(y, "\x00") && len(x) == len(y)
	case []int32:
		y, ok := b.([]int32)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	return a == b
}
