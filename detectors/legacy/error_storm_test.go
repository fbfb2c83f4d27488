package legacy_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
)

// ---------------------------------------------------------------------------
// Traffic helpers shared by the error-storm, throttled, unanswered-requests
// and slow-responses tests: scripted connections written in time order by
// the fixture generator, analysed by the real pipeline.

var opsStart = time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)

func opsAt(d time.Duration) time.Time { return opsStart.Add(d) }

func opsMs(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// opsTimeline runs scheduled writes in time order (stable for equal
// times), so that each connection can be scripted on its own.
type opsTimeline struct {
	w   *gen.Writer
	evs []opsEvent
}

type opsEvent struct {
	t  time.Time
	fn func()
}

func (tl *opsTimeline) at(t time.Time, fn func()) { tl.evs = append(tl.evs, opsEvent{t, fn}) }

// opsPeer is one client connection with its client id.
type opsPeer struct {
	tl   *opsTimeline
	c    *gen.Conn
	id   string
	corr int32
}

// dial opens a connection (with a handshake) at the start of the capture.
func (tl *opsTimeline) dial(client, server, clientID string) *opsPeer {
	c := tl.w.Conn(netip.MustParseAddrPort(client), netip.MustParseAddrPort(server), opsStart, gen.ConnOptions{})
	return &opsPeer{tl: tl, c: c, id: clientID, corr: 1}
}

// call schedules a request at t and, unless resp is nil, its response lat
// later. It returns the correlation id.
func (p *opsPeer) call(t time.Time, lat time.Duration, req kmsg.Request, resp kmsg.Response) int32 {
	corr := p.corr
	p.corr++
	p.tl.at(t, func() { p.c.Request(t, corr, &p.id, req) })
	if resp != nil {
		p.tl.at(t.Add(lat), func() { p.c.Response(t.Add(lat), corr, resp) })
	}
	return corr
}

func (p *opsPeer) close(t time.Time) { p.tl.at(t, func() { p.c.Close(t) }) }

// opsCapture writes the scripted traffic into an in-memory pcap.
func opsCapture(t *testing.T, script func(tl *opsTimeline)) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := gen.NewWriter(&buf, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tl := &opsTimeline{w: w}
	script(tl)
	sort.SliceStable(tl.evs, func(i, j int) bool { return tl.evs[i].t.Before(tl.evs[j].t) })
	for _, e := range tl.evs {
		e.fn()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// opsAnalyse runs a capture through the pipeline with every detector.
func opsAnalyse(t *testing.T, overrides map[string]float64, pcap []byte) []detectors.Finding {
	t.Helper()
	f, err := capture.NewFile("test.pcap", 0, bytes.NewReader(pcap))
	if err != nil {
		t.Fatal(err)
	}
	return opsRunFiles(t, overrides, f)
}

func opsRunFiles(t *testing.T, overrides map[string]float64, files ...*capture.File) []detectors.Finding {
	t.Helper()
	set, err := detectors.NewSet(all.Analyzers(), settingsOf(overrides))
	if err != nil {
		t.Fatal(err)
	}
	res := pipeline.Run(context.Background(), files, pipeline.Options{
		Flows: flows.DefaultConfig(), Detectors: set,
		Warn: func(err error) { t.Errorf("input broke: %v", err) },
	})
	return res.Report.Findings
}

// opsOf returns the findings of one detector.
func opsOf(fs []detectors.Finding, id string) []detectors.Finding {
	var out []detectors.Finding
	for _, f := range fs {
		if f.Detector == id {
			out = append(out, f)
		}
	}
	return out
}

func opsDescribe(fs []detectors.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "\n  %s %s: %s counts=%v fields=%v", f.Severity, f.Detector, f.Summary, f.Counts, f.Fields)
	}
	if b.Len() == 0 {
		return " none"
	}
	return b.String()
}

// opsCheck compares the counts and fields named in want with a finding's.
func opsCheck(t *testing.T, f detectors.Finding, sev detectors.Severity, counts map[string]int64, fields map[string]any) {
	t.Helper()
	if f.Severity != sev {
		t.Errorf("severity %s, want %s: %s", f.Severity, sev, f.Summary)
	}
	for k, v := range counts {
		if got, ok := f.Counts[k]; !ok || got != v {
			t.Errorf("count %s = %d (present %v), want %d", k, got, ok, v)
		}
	}
	for k, v := range fields {
		if got := fmt.Sprint(f.Fields[k]); got != fmt.Sprint(v) {
			t.Errorf("field %s = %s, want %v", k, got, v)
		}
	}
	if f.Summary == "" || f.Explanation == "" || f.Next == "" {
		t.Errorf("summary, explanation and next must all be written: %+v", f)
	}
	if len(f.Evidence) == 0 || len(f.Conns) == 0 {
		t.Errorf("no evidence or connections: %+v", f)
	}
}

const (
	opsBroker  = "10.1.0.10:9092"
	opsBroker2 = "10.1.0.11:9092"
)

// opsFetch is a Fetch v12 for orders-0 with MaxWaitMillis maxWait.
func opsFetch(maxWait int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.ReplicaID, r.MaxWaitMillis, r.MinBytes, r.MaxBytes = 12, -1, maxWait, 1, 52428800
	t := kmsg.NewFetchRequestTopic()
	t.Topic = "orders"
	p := kmsg.NewFetchRequestTopicPartition()
	p.FetchOffset, p.PartitionMaxBytes = 100, 1048576
	t.Partitions = []kmsg.FetchRequestTopicPartition{p}
	r.Topics = []kmsg.FetchRequestTopic{t}
	return r
}

func opsFetched(errCode int16, throttle int32) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version, r.ThrottleMillis = 12, throttle
	t := kmsg.NewFetchResponseTopic()
	t.Topic = "orders"
	p := kmsg.NewFetchResponseTopicPartition()
	p.ErrorCode, p.HighWatermark, p.LastStableOffset = errCode, 100, 100
	if errCode != 0 {
		p.HighWatermark, p.LastStableOffset = -1, -1
	}
	p.RecordBatches = []byte{}
	t.Partitions = []kmsg.FetchResponseTopicPartition{p}
	r.Topics = []kmsg.FetchResponseTopic{t}
	return r
}

func opsProduce(version int16) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = version, -1, 30000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "orders"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = gen.RecordBatch(0, opsStart, []gen.Record{{Value: []byte("order")}})
	t.Partitions = []kmsg.ProduceRequestTopicPartition{p}
	r.Topics = []kmsg.ProduceRequestTopic{t}
	return r
}

func opsProduced(version int16, errCode int16, throttle int32) *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	r.Version, r.ThrottleMillis = version, throttle
	t := kmsg.NewProduceResponseTopic()
	t.Topic = "orders"
	p := kmsg.NewProduceResponseTopicPartition()
	p.ErrorCode, p.BaseOffset, p.LogAppendTime = errCode, 100, -1
	t.Partitions = []kmsg.ProduceResponseTopicPartition{p}
	r.Topics = []kmsg.ProduceResponseTopic{t}
	return r
}

// opsMetadata is a Metadata v12 exchange for orders with partition errors.
func opsMetadata(errCodes ...int16) (*kmsg.MetadataRequest, *kmsg.MetadataResponse) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("orders")
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 12
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 1, "10.1.0.10", 9092
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr("orders")
	for i, ec := range errCodes {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.ErrorCode, p.Leader = int32(i), ec, 1
		if ec != 0 {
			p.Leader = -1
		}
		p.Replicas, p.ISR = []int32{1}, []int32{1}
		t.Partitions = append(t.Partitions, p)
	}
	resp.Topics = []kmsg.MetadataResponseTopic{t}
	return req, resp
}

func opsHeartbeat(errCode int16) (*kmsg.HeartbeatRequest, *kmsg.HeartbeatResponse) {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version, req.Group, req.Generation, req.MemberID = 4, "orders-app", 3, "m"
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version, resp.ErrorCode = 4, errCode
	return req, resp
}

func opsJoin(member string, rebalanceMs int32) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 7, "orders-app", 45000, rebalanceMs
	r.MemberID, r.ProtocolType = member, "consumer"
	pr := kmsg.NewJoinGroupRequestProtocol()
	pr.Name, pr.Metadata = "range", []byte{0, 0, 0, 0, 0, 0}
	r.Protocols = []kmsg.JoinGroupRequestProtocol{pr}
	return r
}

func opsJoined(errCode int16, member string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version, r.ErrorCode, r.Generation, r.MemberID = 7, errCode, 1, member
	r.ProtocolType, r.Protocol, r.LeaderID = kmsg.StringPtr("consumer"), kmsg.StringPtr("range"), member
	if errCode != 0 {
		r.Generation = -1
	}
	return r
}

func opsCreateTopics(errCode int16) (*kmsg.CreateTopicsRequest, *kmsg.CreateTopicsResponse) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 7, 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "orders", 1, 1
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Version = 7
	t := kmsg.NewCreateTopicsResponseTopic()
	t.Topic, t.ErrorCode = "orders", errCode
	resp.Topics = []kmsg.CreateTopicsResponseTopic{t}
	return req, resp
}

// opsHealthyFiles are the recorded and scenario captures that must not
// yield a warning from these detectors.
var opsHealthyFiles = []string{
	"recorded-kgo-kfake-admin.pcap",
	"recorded-kgo-kfake-group.pcap",
	"scenarios/healthy-group.pcap",
	"scenarios/replica-identity.pcap",
	"scenarios/replica-divergence.pcap",
	"scenarios/mm2-replay.pcap",
}

// TestOpsDetectorsQuietOnHealthyCaptures runs the committed healthy
// captures and the public ones: none may get a warning from error-storm,
// throttled, unanswered-requests or slow-responses.
func TestOpsDetectorsQuietOnHealthyCaptures(t *testing.T) {
	paths := []string{}
	for _, f := range opsHealthyFiles {
		paths = append(paths, filepath.Join("..", "..", "fixtures", "pcaps", f))
	}
	catalogue, _ := filepath.Glob(filepath.Join("..", "..", "fixtures", "pcaps", "*.pcap*"))
	paths = append(paths, catalogue...)
	shared, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "captures", "*", "*.pcap*"))
	paths = append(paths, shared...)
	ids := map[string]bool{"error-storm": true, "throttled": true, "unanswered-requests": true, "slow-responses": true}
	seen := map[string]bool{}
	for _, p := range paths {
		if strings.HasSuffix(p, ".json") || seen[p] {
			continue
		}
		seen[p] = true
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := capture.Open(p, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, fd := range opsRunFiles(t, nil, f) {
				if ids[fd.Detector] && fd.Severity >= detectors.Warning {
					t.Errorf("%s %s: %s", fd.Severity, fd.Detector, fd.Summary)
				}
			}
		})
	}
}

// TestErrorStormOnScenarios: the two incident captures whose loops the
// detector must see; there the specific detectors explain them, so the
// storm finding is info and names the detector that explains it.
func TestErrorStormOnScenarios(t *testing.T) {
	for _, tc := range []struct {
		file      string
		api, err  string
		responses int64
		by        string
	}{
		{"observer-fetch-loop.pcap", "Fetch", "NOT_LEADER_OR_FOLLOWER", 2000, "not-leader-loop"},
		{"election-stall.pcap", "Metadata", "LEADER_NOT_AVAILABLE", 1206, "leader-election-stall"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := capture.Open(filepath.Join("..", "..", "fixtures", "pcaps", "scenarios", tc.file), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got := opsOf(opsRunFiles(t, nil, f), "error-storm")
			if len(got) != 1 {
				t.Fatalf("error-storm findings:%s", opsDescribe(got))
			}
			opsCheck(t, got[0], detectors.Info, map[string]int64{"responses": tc.responses, "storm_responses": tc.responses},
				map[string]any{"api": tc.api, "error": tc.err, "explained_by": tc.by})
		})
	}
}

func TestErrorStorm(t *testing.T) {
	type want struct {
		counts map[string]int64
		fields map[string]any
		// explained: a NOT_LEADER loop is also reported by
		// not-leader-loop, so the storm finding is info, pointing at it.
		explained bool
	}
	// every schedules n exchanges, one every step from at, on p.
	every := func(p *opsPeer, at time.Duration, step time.Duration, n int, mk func() (kmsg.Request, kmsg.Response)) {
		for i := range n {
			req, resp := mk()
			p.call(opsAt(at+time.Duration(i)*step), opsMs(1), req, resp)
		}
	}
	notLeader := func() (kmsg.Request, kmsg.Response) { return opsFetch(500), opsFetched(6, 0) }
	leaderless := func() (kmsg.Request, kmsg.Response) { return opsMetadata(5, 0, 5) }
	fine := func() (kmsg.Request, kmsg.Response) { return opsFetch(500), opsFetched(0, 0) }
	for _, tc := range []struct {
		name      string
		overrides map[string]float64
		script    func(tl *opsTimeline)
		want      []want
	}{
		{
			name: "fetch NOT_LEADER loop at 10/s for 15 s",
			script: func(tl *opsTimeline) {
				every(tl.dial("10.2.0.5:40000", opsBroker, "loop-client"), time.Second, 100*time.Millisecond, 150, notLeader)
			},
			want: []want{{
				counts: map[string]int64{"responses": 150, "storm_responses": 150, "error_codes": 150, "api_responses": 150, "clients": 1},
				fields: map[string]any{"api": "Fetch", "error": "NOT_LEADER_OR_FOLLOWER", "error_code": 6,
					"client_ids": []string{"loop-client"}, "clients": []string{"10.2.0.5"}, "servers": []string{opsBroker}},
				explained: true,
			}},
		},
		{
			name: "metadata refresh loop at 2/s among healthy traffic: only the error is counted",
			script: func(tl *opsTimeline) {
				every(tl.dial("10.2.0.5:40000", opsBroker, "kafkajs"), time.Second, 500*time.Millisecond, 60, leaderless)
				every(tl.dial("10.2.0.6:40000", opsBroker, "consumer"), time.Second, 100*time.Millisecond, 300, fine)
			},
			want: []want{{
				counts: map[string]int64{"responses": 60, "storm_responses": 60, "error_codes": 120, "api_responses": 60},
				fields: map[string]any{"api": "Metadata", "error": "LEADER_NOT_AVAILABLE", "duration_s": 29.5, "rate_per_s": 2.03},
			}},
		},
		{
			name: "near miss: 0.83/s, below the 1/s rate, for a minute",
			script: func(tl *opsTimeline) {
				every(tl.dial("10.2.0.5:40000", opsBroker, "slow-loop"), time.Second, 1200*time.Millisecond, 50, notLeader)
			},
		},
		{
			name:      "the same at 0.83/s with min-rate 0.5",
			overrides: map[string]float64{"error-storm.min-rate": 0.5},
			script: func(tl *opsTimeline) {
				every(tl.dial("10.2.0.5:40000", opsBroker, "slow-loop"), time.Second, 1200*time.Millisecond, 50, notLeader)
			},
			want: []want{{counts: map[string]int64{"responses": 50, "storm_responses": 50}, fields: map[string]any{}, explained: true}},
		},
		{
			name: "near miss: a burst of 19, one short of min-responses",
			script: func(tl *opsTimeline) {
				every(tl.dial("10.2.0.5:40000", opsBroker, "burst"), time.Second, 50*time.Millisecond, 19, notLeader)
			},
		},
		{
			name:      "min-responses raised above a real loop",
			overrides: map[string]float64{"error-storm.min-responses": 200},
			script: func(tl *opsTimeline) {
				every(tl.dial("10.2.0.5:40000", opsBroker, "loop-client"), time.Second, 100*time.Millisecond, 150, notLeader)
			},
		},
		{
			name: "near miss: a 40-member group rebalancing for 30 s, each heartbeat REBALANCE_IN_PROGRESS",
			script: func(tl *opsTimeline) {
				for m := range 40 {
					p := tl.dial(fmt.Sprintf("10.3.0.%d:41000", m+1), opsBroker, fmt.Sprintf("member-%d", m))
					every(p, time.Second+time.Duration(m)*75*time.Millisecond, 3*time.Second, 10,
						func() (kmsg.Request, kmsg.Response) { return opsHeartbeat(27) })
				}
			},
		},
		{
			name: "near miss: what healthy clients get (MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, TOPIC_ALREADY_EXISTS)",
			script: func(tl *opsTimeline) {
				g := tl.dial("10.2.0.7:40000", opsBroker, "consumer-1")
				g.call(opsAt(time.Second), opsMs(1), opsJoin("", 60000), opsJoined(79, "m-1"))
				g.call(opsAt(time.Second+opsMs(5)), opsMs(3000), opsJoin("m-1", 60000), opsJoined(0, "m-1"))
				for i := range 20 {
					ec := int16(0)
					if i == 3 || i == 4 {
						ec = 27
					}
					req, resp := opsHeartbeat(ec)
					g.call(opsAt(5*time.Second+time.Duration(i)*3*time.Second), opsMs(1), req, resp)
				}
				a := tl.dial("10.2.0.8:40000", opsBroker, "admin")
				req, resp := opsCreateTopics(36)
				a.call(opsAt(2*time.Second), opsMs(20), req, resp)
			},
		},
		{
			name: "two clients, one looping: only the looping one is a storm client",
			script: func(tl *opsTimeline) {
				every(tl.dial("10.2.0.5:40000", opsBroker, "loop-client"), time.Second, 100*time.Millisecond, 150, notLeader)
				every(tl.dial("10.2.0.9:40000", opsBroker2, "other"), time.Second, 5*time.Second, 5, notLeader)
			},
			want: []want{{
				counts:    map[string]int64{"responses": 155, "storm_responses": 150, "clients": 1},
				fields:    map[string]any{"client_ids": []string{"loop-client"}, "servers": []string{opsBroker}},
				explained: true,
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := opsOf(opsAnalyse(t, tc.overrides, opsCapture(t, tc.script)), "error-storm")
			if len(got) != len(tc.want) {
				t.Fatalf("%d error-storm findings, want %d:%s", len(got), len(tc.want), opsDescribe(got))
			}
			for i, w := range tc.want {
				sev := detectors.Warning
				if w.explained {
					sev = detectors.Info
					w.fields["explained_by"] = "not-leader-loop"
				}
				opsCheck(t, got[i], sev, w.counts, w.fields)
			}
		})
	}
}
