package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/correlate"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/tui"
)

// The correlator's tests: real agents (kfsniff -r FILE --export) ship
// halves of a committed scenario, split by a capture filter as two hosts
// would have captured it, into kfake; kfsniff -r kafka://... reads them
// back.

// corrFinding is a finding of the JSON report, as these tests compare them.
type corrFinding struct {
	Detector string           `json:"detector"`
	Severity string           `json:"severity"`
	Summary  string           `json:"summary"`
	Fields   map[string]any   `json:"fields"`
	Counts   map[string]int64 `json:"counts"`
}

func (f corrFinding) String() string { return f.Severity + " " + f.Detector + ": " + f.Summary }

type corrReport struct {
	Capture struct {
		Packets  int64 `json:"packets"`
		Takeover *struct {
			Member     string `json:"member"`
			Partitions []struct {
				Partition int32 `json:"partition"`
				From      int64 `json:"from_offset"`
				To        int64 `json:"to_offset"`
			} `json:"partitions"`
		} `json:"takeover"`
	} `json:"capture"`
	Findings    []corrFinding `json:"findings"`
	Connections []struct {
		ID        int      `json:"id"`
		Agent     string   `json:"agent"`
		Client    string   `json:"client"`
		Server    string   `json:"server"`
		ClientIDs []string `json:"client_ids"`
		Requests  int      `json:"requests"`
	} `json:"connections"`
	Correlation *struct {
		Records    int64 `json:"records"`
		Unreadable struct {
			Version   int64 `json:"version"`
			Malformed int64 `json:"malformed"`
		} `json:"unreadable"`
		Agents []struct {
			Agent string `json:"agent"`
		} `json:"agents"`
	} `json:"correlation"`
}

// newSink starts a kfake cluster with the export topic in partitions
// partitions, and group sessions allowed down to 100 ms.
func newSink(t *testing.T, partitions int32) (url string, seeds []string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "corr", "corr.findings"),
		kfake.BrokerConfigs(map[string]string{"group.min.session.timeout.ms": "100"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	seeds = c.ListenAddrs()
	return "kafka://" + strings.Join(seeds, ",") + "/corr", seeds
}

// agent runs one agent: kfsniff -r capture --export url --agent-id name
// filter..., and returns its own report's findings.
func agent(t *testing.T, url, capture, name string, filter ...string) []corrFinding {
	t.Helper()
	return agentFile(t, url, fixture(capture), name, filter...)
}

// agentFile is agent of a capture file by its path.
func agentFile(t *testing.T, url, path, name string, filter ...string) []corrFinding {
	t.Helper()
	args := append([]string{"-r", path, "--json", "--agent-id", name, "--export", url}, filter...)
	code, stdout, stderr := kfsniff(t, args...)
	if code != exitOK {
		t.Fatalf("agent %s: exit %d: %s", name, code, stderr)
	}
	var rep struct {
		Findings []corrFinding `json:"findings"`
		Export   struct {
			Records, Dropped, Failed int64
		} `json:"export"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("agent %s: not the JSON report: %v", name, err)
	}
	if rep.Export.Records == 0 || rep.Export.Dropped+rep.Export.Failed > 0 {
		t.Fatalf("agent %s shipped %+v: want everything delivered", name, rep.Export)
	}
	return rep.Findings
}

// correlateJSON runs the correlator with --json and returns its report.
func correlateJSON(t *testing.T, args ...string) (corrReport, string) {
	t.Helper()
	code, stdout, stderr := kfsniff(t, append(args, "--json")...)
	if code != exitOK {
		t.Fatalf("kfsniff %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	var rep corrReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("not the JSON report: %v\n%.300s", err, stdout)
	}
	return rep, stderr
}

func findingsOf(fs []corrFinding, detector string, match func(corrFinding) bool) []corrFinding {
	var out []corrFinding
	for _, f := range fs {
		if f.Detector == detector && (match == nil || match(f)) {
			out = append(out, f)
		}
	}
	return out
}

// isMismatch is replica-divergence's finding of two copies differing at
// the scenario's offset 156 (one on the leader's side, one on broker
// 3's), as opposed to a copy failing its CRC, which one side shows alone.
func isMismatch(f corrFinding) bool {
	_, ok := f.Fields["crc_replica"]
	return ok && f.Fields["base_offset"] == float64(156)
}

func TestCorrelateReplicaDivergenceAcrossHosts(t *testing.T) {
	url, _ := newSink(t, 4)
	// The leader host's agent sees its clients (producer, consumer) and
	// broker 1's replica fetches; broker 3's host sees its own fetches.
	leader := agent(t, url, "scenarios/replica-divergence.pcap", "leader-host", "not", "host", "172.31.3.3")
	follower := agent(t, url, "scenarios/replica-divergence.pcap", "follower-host", "host", "172.31.3.3")
	if got := findingsOf(leader, "replica-divergence", isMismatch); len(got) > 0 {
		t.Fatalf("the leader host's half alone shows the divergence: %v", got)
	}
	if got := findingsOf(follower, "replica-divergence", isMismatch); len(got) > 0 {
		t.Fatalf("the follower host's half alone shows the divergence: %v", got)
	}
	rep, stderr := correlateJSON(t, "-r", url, "--until-end")
	got := findingsOf(rep.Findings, "replica-divergence", isMismatch)
	if len(got) != 1 || got[0].Severity != "error" {
		t.Fatalf("correlated: want one replica-divergence error at offset 156, got %v (all: %v)\n%s", got, rep.Findings, stderr)
	}
	f := got[0]
	if f.Fields["crc_leader"] == f.Fields["crc_replica"] || f.Fields["client_id"] != "broker-3-fetcher-0" {
		t.Errorf("divergence fields %v: want the leader's and broker 3's different CRCs", f.Fields)
	}
	// The copy failing its CRC, on the leader host's side, is still there.
	if bad := findingsOf(rep.Findings, "replica-divergence", func(f corrFinding) bool { return f.Fields["crc_valid"] == false }); len(bad) != 1 {
		t.Errorf("correlated: want broker 1's copy failing its CRC once, got %v", bad)
	}
	agents := map[string]int{}
	for _, c := range rep.Connections {
		agents[c.Agent]++
	}
	if agents["leader-host"] != 3 || agents["follower-host"] != 1 || len(agents) != 2 {
		t.Errorf("connections by agent %v: want the leader host's 3 and the follower host's 1", agents)
	}
	if rep.Correlation == nil || len(rep.Correlation.Agents) != 2 {
		t.Errorf("correlation section %+v: want the two agents", rep.Correlation)
	}
}

func TestCorrelateMirrorReplayAcrossHosts(t *testing.T) {
	url, _ := newSink(t, 3)
	// MirrorMaker 2 killed on one worker host (run 1) and its task
	// restarted on another (run 2), each host's agent seeing its own
	// worker's produces to the target.
	first := agent(t, url, "scenarios/mm2-replay.pcap", "worker-1", "port", "51000")
	second := agent(t, url, "scenarios/mm2-replay.pcap", "worker-2", "port", "51002")
	for name, fs := range map[string][]corrFinding{"worker-1": first, "worker-2": second} {
		if got := findingsOf(fs, "duplicate-batches", nil); len(got) > 0 {
			t.Fatalf("%s's half alone shows the replay: %v", name, got)
		}
	}
	rep, stderr := correlateJSON(t, "-r", url, "--until-end")
	got := findingsOf(rep.Findings, "duplicate-batches", nil)
	if len(got) != 1 || got[0].Severity != "error" {
		t.Fatalf("correlated: want one duplicate-batches error, got %v\n%s", rep.Findings, stderr)
	}
	if got[0].Fields["offset_shift"] != float64(20000) || got[0].Fields["client_id"] != "connector-producer-MirrorSourceConnector-0" {
		t.Errorf("replay fields %v: want MM2's producer writing the 20,000 records again 20,000 offsets on", got[0].Fields)
	}
}

// broker3Clients writes a capture of what broker 3's host also sees
// when it serves clients: a client's Metadata v12 naming
// replica-divergence.pcap's topic and its id, a second before the
// scenario. With it the follower host's agent ships the topic by name
// (without it, by id: its records are keyed by the id, and in a group
// they land in another partition than the leader host's).
func broker3Clients(t *testing.T) string {
	t.Helper()
	raw, _ := hex.DecodeString("5f3d3b9e00004000800000000000a001") // repTopicID
	var id [16]byte
	copy(id[:], raw)
	topic, cluster := "lifecycle_test", "tokyo-poc"
	at := time.Date(2026, 7, 20, 1, 10, 59, 0, time.UTC)
	pcap, err := gen.Script(func(w *gen.Writer) {
		c := w.Conn(netip.MustParseAddrPort("172.31.3.50:41000"), netip.MustParseAddrPort("172.31.3.3:9092"), at, gen.ConnOptions{})
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &topic
		req.Topics = append(req.Topics, rt)
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version, resp.ClusterID, resp.ControllerID = 12, &cluster, 101
		for _, b := range []struct {
			id   int32
			host string
		}{{1, "172.31.1.1"}, {2, "172.31.2.2"}, {3, "172.31.3.3"}} {
			mb := kmsg.NewMetadataResponseBroker()
			mb.NodeID, mb.Host, mb.Port = b.id, b.host, 9092
			resp.Brokers = append(resp.Brokers, mb)
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = &topic, id
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.Replicas, mp.ISR = 0, 2, []int32{2, 3, 1}, []int32{2, 3}
		mt.Partitions = append(mt.Partitions, mp)
		resp.Topics = append(resp.Topics, mt)
		clientID := "admin-1"
		c.Request(at.Add(time.Millisecond), 1, &clientID, req)
		c.Response(at.Add(2*time.Millisecond), 1, resp)
		c.Close(at.Add(10 * time.Millisecond))
	})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "broker3-clients.pcap")
	if err := os.WriteFile(p, pcap, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// shipAll ships both scenarios' halves, four agents, into one topic.
func shipAll(t *testing.T, url string) {
	t.Helper()
	agent(t, url, "scenarios/replica-divergence.pcap", "leader-host", "not", "host", "172.31.3.3")
	agent(t, url, "scenarios/replica-divergence.pcap", "follower-host", "-r", broker3Clients(t), "host", "172.31.3.3")
	agent(t, url, "scenarios/mm2-replay.pcap", "worker-1", "port", "51000")
	agent(t, url, "scenarios/mm2-replay.pcap", "worker-2", "port", "51002")
}

func summaries(fs []corrFinding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	slices.Sort(out)
	return out
}

// syncBuffer is a buffer written by one goroutine and read by another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits up to d for text in b.
func waitFor(t *testing.T, b *syncBuffer, text string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(b.String(), text) {
			return
		}
	}
	t.Fatalf("no %q within %s:\n%s", text, d, b.String())
}

// groupArgs are a group member's flags: short sessions, so that the test
// sees rebalances in seconds.
func groupArgs(url, group string) []string {
	return []string{"-r", url, "--group", group, "--until-end", "--group-session-timeout", "2s", "--json"}
}

func TestCorrelateGroupSharesPartitions(t *testing.T) {
	url, _ := newSink(t, 6)
	shipAll(t, url)
	solo, _ := correlateJSON(t, groupArgs(url, "solo")[:7]...)
	if len(findingsOf(solo.Findings, "replica-divergence", isMismatch)) != 1 || len(findingsOf(solo.Findings, "duplicate-batches", nil)) != 1 {
		t.Fatalf("one correlator alone: want the divergence and the replay, got %v", solo.Findings)
	}

	// Two correlators in group "pair": the second joins while the first
	// waits for a rebalance (--until-end waits a session timeout and 2 s).
	var outA, errA, outB, errB syncBuffer
	var wg sync.WaitGroup
	codes := make([]int, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		codes[0] = run(context.Background(), groupArgs(url, "pair"), strings.NewReader(""), &outA, &errA)
	}()
	waitFor(t, &errA, "reading partitions", 20*time.Second)
	go func() {
		defer wg.Done()
		codes[1] = run(context.Background(), groupArgs(url, "pair"), strings.NewReader(""), &outB, &errB)
	}()
	wg.Wait()
	if codes[0] != exitOK || codes[1] != exitOK {
		t.Fatalf("exit %v:\n%s\n%s", codes, errA.String(), errB.String())
	}
	if !strings.Contains(errB.String(), "reading partitions") || !strings.Contains(errA.String(), "went to another correlator") {
		t.Fatalf("the partitions were not shared:\nA: %s\nB: %s", errA.String(), errB.String())
	}
	var a, b corrReport
	if err := json.Unmarshal([]byte(outA.String()), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(outB.String()), &b); err != nil {
		t.Fatal(err)
	}
	union := summaries(append(append([]corrFinding{}, a.Findings...), b.Findings...))
	if want := summaries(solo.Findings); !slices.Equal(union, want) {
		t.Errorf("the two correlators' findings together:\n  %s\nwant one correlator's, each once:\n  %s", strings.Join(union, "\n  "), strings.Join(want, "\n  "))
	}
	// Both scenarios are about partition 0 of their topics: their
	// records share one partition of the export topic (keyed by the
	// partition's number, docs/export.md), so one correlator reports
	// them; the other read the rest (client ids, brokers' connection
	// events).
	if a.Capture.Packets == 0 || b.Capture.Packets == 0 {
		t.Errorf("records read %d and %d: want each correlator to read its partitions'", a.Capture.Packets, b.Capture.Packets)
	}
}

func TestCorrelateGroupSurvivesKill(t *testing.T) {
	url, _ := newSink(t, 6)
	shipAll(t, url)
	solo, _ := correlateJSON(t, groupArgs(url, "solo")[:7]...)

	// A, a process of its own, reads everything and never ends by
	// itself; B joins, takes half; A is killed (SIGKILL): its partitions,
	// never committed, go to B, which reads them again.
	bin := buildKfsniff(t)
	var errA syncBuffer
	a := exec.Command(bin, "-r", url, "--group", "kill", "--group-session-timeout", "2s", "--json", "--duration", "2m")
	a.Stderr = &errA
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Process.Kill()
	waitFor(t, &errA, "reading partitions", 20*time.Second)
	time.Sleep(500 * time.Millisecond) // A reads what it was given

	var outB, errB syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), groupArgs(url, "kill"), strings.NewReader(""), &outB, &errB)
	}()
	waitFor(t, &errA, "went to another correlator", 20*time.Second)
	waitFor(t, &errB, "reading partitions", 20*time.Second)
	time.Sleep(500 * time.Millisecond) // B reads its share
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.Wait()
	var code int
	select {
	case code = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("B did not end after A died:\n%s", errB.String())
	}
	if code != exitOK {
		t.Fatalf("B: exit %d: %s", code, errB.String())
	}
	if n := strings.Count(errB.String(), "reading partitions"); n < 2 {
		t.Errorf("B was given partitions %d times: want its share, then A's:\n%s", n, errB.String())
	}
	var b corrReport
	if err := json.Unmarshal([]byte(outB.String()), &b); err != nil {
		t.Fatal(err)
	}
	if got, want := summaries(b.Findings), summaries(solo.Findings); !slices.Equal(got, want) {
		t.Errorf("after A's death, B reports:\n  %s\nwant every finding:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestCorrelateFramesAndMalformed(t *testing.T) {
	url, seeds := newSink(t, 2)
	agent(t, url, "scenarios/replica-divergence.pcap", "follower-host", "host", "172.31.3.3")
	// Records that are not the schema: bad JSON, another version, and an
	// exchange whose endpoints do not parse.
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("corr"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{`{"v":1,"type":"exchange",`, `{"v":4,"type":"exchange","agent":"future"}`,
		`{"v":1,"type":"exchange","agent":"x","conn":1,"client":"nowhere","server":"1.2.3.4:9092","api":0,"ver":9,"status":"answered"}`} {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte("junk"), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()

	rep, stderr := correlateJSON(t, "-r", url, "--until-end")
	if rep.Correlation == nil || rep.Correlation.Unreadable.Malformed != 1 || rep.Correlation.Unreadable.Version != 1 {
		t.Errorf("correlation %+v: want 1 malformed and 1 of another version counted", rep.Correlation)
	}
	if strings.Count(stderr, "kfsniff: warning:") != 3 || !strings.Contains(stderr, "3 unusable") {
		t.Errorf("stderr: want a warning for each of the 3 unusable records and their count:\n%s", stderr)
	}
	if len(rep.Connections) != 1 || rep.Connections[0].Agent != "follower-host" || rep.Connections[0].Requests != 6 {
		t.Errorf("connections %+v: want broker 3's fetcher connection with its 6 requests, seen by follower-host", rep.Connections)
	}

	code, stdout, stderr := kfsniff(t, "-r", url, "--until-end", "--frames")
	if code != exitOK {
		t.Fatalf("--frames: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 12 {
		t.Errorf("--frames: %d lines, want the 6 Fetch requests and 6 responses:\n%s", len(lines), stdout)
	}
	for _, l := range lines {
		if !strings.Contains(l, `agent="follower-host"`) || !strings.Contains(l, "Fetch v16") {
			t.Errorf("--frames line without its agent or API: %s", l)
			break
		}
	}
	code, stdout, stderr = kfsniff(t, "-r", url, "--until-end", "--frames", "--json")
	if code != exitOK {
		t.Fatalf("--frames --json: exit %d: %s", code, stderr)
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var fl struct {
			Type    string `json:"type"`
			Agent   string `json:"agent"`
			API     string `json:"api"`
			Batches []struct {
				BaseOffset int64  `json:"base_offset"`
				CRC        string `json:"crc"`
			} `json:"batches"`
		}
		if err := json.Unmarshal([]byte(l), &fl); err != nil {
			t.Fatalf("--frames --json: not JSON Lines: %v: %s", err, l)
		}
		if fl.Agent != "follower-host" || fl.API != "Fetch" {
			t.Errorf("frame line %s: want agent follower-host, Fetch", l)
		}
		n += len(fl.Batches)
	}
	if n != 5 {
		t.Errorf("--frames --json: %d batches in the responses, want broker 3's 5", n)
	}

	// A topic nothing was shipped to yet: --until-end ends at once.
	code, _, stderr = kfsniff(t, "-r", strings.TrimSuffix(url, "/corr")+"/nothing-yet", "--until-end", "--json")
	if code != exitOK || !strings.Contains(stderr, "does not exist") {
		t.Errorf("a missing topic with --until-end: exit %d, want 0 and a warning:\n%s", code, stderr)
	}
}

// TestCorrelateSameAsFile: a capture shipped by one agent and read back
// gives the findings the file gives, for every capture whose rules the
// shipped records feed (docs/export.md, "Correlating": the rules that see
// less are listed there, with the captures showing it).
func TestCorrelateSameAsFile(t *testing.T) {
	for _, capture := range []string{
		"scenarios/follower-out-of-sync.pcap", "scenarios/healthy-group.pcap", "scenarios/mm2-replay.pcap",
		"scenarios/replica-divergence.pcap", "scenarios/replica-identity.pcap",
		"clients/kafka40-librdkafka.pcap", "clients/metadata-storm-kgo.pcap", "clients/mm2-replay-kgo.pcap",
		"clients/mm2-replay-sarama.pcap", "clients/not-enough-replicas-kgo.pcap", "clients/not-enough-replicas-sarama.pcap",
		"clients/producer-sequence-kgo.pcap", "clients/producer-sequence-librdkafka.pcap", "clients/reconnect-storm-kgo.pcap",
		"clients/refused-bootstrap-kgo.pcap", "clients/refused-bootstrap-librdkafka.pcap", "clients/refused-bootstrap-sarama.pcap",
		"clients/slow-kgo.pcap",
		"clients/slow-sarama.pcap", "clients/stalled-fetch-sarama.pcap", "clients/throttled-kgo.pcap", "clients/throttled-sarama.pcap",
		"clients/stalled-fetch-kgo.pcap", "clients/unanswered-kgo.pcap", "clients/unanswered-sarama.pcap",
		"real/lossy-midstream-tcpdump.pcap.gz", "fragments-lost.pcap", "reuse-pending.pcap",
	} {
		t.Run(capture, func(t *testing.T) {
			file, _ := correlateJSON(t, "-r", fixture(capture))
			url, _ := newSink(t, 3)
			agent(t, url, capture, "host-a")
			rep, _ := correlateJSON(t, "-r", url, "--until-end")
			if got, want := summaries(rep.Findings), summaries(file.Findings); !slices.Equal(got, want) {
				t.Errorf("read back from Kafka:\n  %s\nthe file:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			if len(rep.Connections) != len(file.Connections) {
				t.Errorf("%d connections read back, the file has %d", len(rep.Connections), len(file.Connections))
			}
		})
	}
}

// unansweredOf runs kfsniff -r path and returns its unanswered-requests
// findings.
func unansweredOf(t *testing.T, path string) []corrFinding {
	t.Helper()
	file, _ := correlateJSON(t, "-r", path)
	return findingsOf(file.Findings, "unanswered-requests", nil)
}

// waitingAtEnd writes a capture of a Produce never answered on a
// connection still open when the capture ends, 50 s later: its last
// packets are keep-alives, which no record shows.
func waitingAtEnd(t *testing.T) string {
	t.Helper()
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	pcap, err := gen.Script(func(w *gen.Writer) {
		c := w.Conn(netip.MustParseAddrPort("10.9.0.1:41000"), netip.MustParseAddrPort("10.9.0.2:9092"), at, gen.ConnOptions{})
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks = 9, -1
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "orders"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records, _ = detectortest.ZeroBatch(0, 2, 7, 0)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		clientID := "app-1"
		c.Request(at.Add(time.Millisecond), 1, &clientID, req)
		for i := 1; i <= 5; i++ {
			c.KeepAlive(gen.ClientToServer, at.Add(time.Duration(i)*10*time.Second), 0)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "waiting-at-end.pcap", pcap)
}

// fetchesUnanswered writes a capture of consumers' Fetches (MaxWaitMillis
// 500) never answered: on one connection a Fetch overtaken by the answer
// to the next, 30 s later; on another a Fetch still waiting when the
// capture ends, 50 s later (keep-alives). Both waited far past their
// max wait: neither is a long poll.
func fetchesUnanswered(t *testing.T) string {
	t.Helper()
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	fetch := func() *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 11, -1, 500, 1, 52428800, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "orders"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = 40, 1048576
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	pcap, err := gen.Script(func(w *gen.Writer) {
		clientID := "consumer-1"
		a := w.Conn(netip.MustParseAddrPort("10.9.0.1:41000"), netip.MustParseAddrPort("10.9.0.2:9092"), at, gen.ConnOptions{})
		a.Request(at.Add(time.Millisecond), 1, &clientID, fetch())
		a.Request(at.Add(30*time.Second), 2, &clientID, fetch())
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 11
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "orders"
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 40, 40, 0
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		a.Response(at.Add(30*time.Second+2*time.Millisecond), 2, resp)
		b := w.Conn(netip.MustParseAddrPort("10.9.0.1:41001"), netip.MustParseAddrPort("10.9.0.3:9092"), at, gen.ConnOptions{})
		b.Request(at.Add(time.Millisecond), 1, &clientID, fetch())
		for i := 1; i <= 5; i++ {
			b.KeepAlive(gen.ClientToServer, at.Add(time.Duration(i)*10*time.Second), 0)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "fetches-unanswered.pcap", pcap)
}

// TestCorrelateUnansweredAsFile: unanswered-requests read back from an
// agent's records says what the file says, to the counts, the fields and
// the wait: requests on a connection that lost segments may yet have been
// answered (the real lossy capture joined mid-stream: the agent ships
// each exchange's conn_gaps), a request split by partition is one
// request, requests on closed connections were never answered (the
// records say the server was captured), and a request still waiting when
// a capture ended waited until that agent's capture ended (end_ns), not
// until its last record, nor until the last record of another agent's,
// months later; a Fetch is allowed the max wait it asked for
// (max_wait_ms): one still waiting at the end past it is listed, not
// taken for a pending long poll, and one overtaken is graded by the
// time its client waited past it.
func TestCorrelateUnansweredAsFile(t *testing.T) {
	same := func(t *testing.T, got, want []corrFinding) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("read back from Kafka:\n  %v\nthe files:\n  %v", got, want)
		}
	}
	waiting := waitingAtEnd(t)
	for _, path := range []string{fixture("real/lossy-midstream-tcpdump.pcap.gz"), fixture("clients/unanswered-kgo.pcap"),
		fixture("clients/unanswered-sarama.pcap"), fixture("clients/kafka40-librdkafka.pcap"), waiting, fetchesUnanswered(t)} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want := unansweredOf(t, path)
			if len(want) == 0 {
				t.Fatalf("the file shows no unanswered-requests finding")
			}
			url, _ := newSink(t, 3)
			agentFile(t, url, path, "host-a")
			rep, _ := correlateJSON(t, "-r", url, "--until-end")
			same(t, findingsOf(rep.Findings, "unanswered-requests", nil), want)
		})
	}
	t.Run("two agents", func(t *testing.T) {
		// The Produce still waiting 50 s at the end of one capture (an
		// error); the lossy capture, 9 months later, whose 48 requests
		// on connections that lost segments may have been answered
		// (info). Read back together: the same two findings.
		early, late := unansweredOf(t, waiting), unansweredOf(t, fixture("real/lossy-midstream-tcpdump.pcap.gz"))
		if len(early) != 1 || early[0].Severity != "error" || len(late) != 1 || late[0].Severity != "info" {
			t.Fatalf("the files' findings: %v, %v: want an error and an info finding", early, late)
		}
		url, _ := newSink(t, 3)
		agentFile(t, url, waiting, "host-early")
		agent(t, url, "real/lossy-midstream-tcpdump.pcap.gz", "host-late")
		rep, _ := correlateJSON(t, "-r", url, "--until-end")
		same(t, findingsOf(rep.Findings, "unanswered-requests", nil), append(early, late...))
	})
}

// TestCorrelateSlowFetchAsFile: slow-responses judges a Fetch read back
// from an agent's records as in the file: by the time past the max wait
// its client asked for (max_wait_ms), not past the longest a Fetch may
// wait, so the Fetches the file finds slow are found, with the same
// counts, median and waits (the recorded kgo group against kfake, at
// TestSameAsReportGoldens' thresholds, where 4 Fetches are slow).
func TestCorrelateSlowFetchAsFile(t *testing.T) {
	slow := []string{"-o", "slow-responses.factor=2", "-o", "slow-responses.min-latency-s=0.001", "-o", "slow-responses.min-count=1"}
	path := fixture("recorded-kgo-kfake-group.pcap")
	file, _ := correlateJSON(t, append([]string{"-r", path}, slow...)...)
	want := findingsOf(file.Findings, "slow-responses", nil)
	if len(findingsOf(want, "slow-responses", func(f corrFinding) bool { return f.Fields["api"] == "Fetch" })) != 1 {
		t.Fatalf("the file's slow-responses findings %v: want one about Fetch", want)
	}
	url, _ := newSink(t, 3)
	agentFile(t, url, path, "host-a")
	rep, _ := correlateJSON(t, append([]string{"-r", url, "--until-end"}, slow...)...)
	if got := findingsOf(rep.Findings, "slow-responses", nil); !reflect.DeepEqual(got, want) {
		t.Errorf("read back from Kafka:\n  %v\nthe file:\n  %v", got, want)
	}
}

func TestCorrelateUsage(t *testing.T) {
	props := writeFile(t, "client.properties", []byte("security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/x.jks\n"))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"group without kafka input", []string{"-r", fixture("basic.pcap"), "--group", "g"}, "--group needs -r kafka://"},
		{"until-end without kafka input", []string{"-r", fixture("basic.pcap"), "--until-end"}, "--until-end needs -r kafka://"},
		{"a file beside the topic", []string{"-r", "kafka://127.0.0.1:1/t", "-r", fixture("basic.pcap")}, "no capture file beside it"},
		{"a filter", []string{"-r", "kafka://127.0.0.1:1/t", "port", "9092"}, "a packet filter"},
		{"-w", []string{"-r", "kafka://127.0.0.1:1/t", "-w", filepath.Join(t.TempDir(), "x.pcap")}, "no packets to write"},
		{"--export", []string{"-r", "kafka://127.0.0.1:1/t", "--export", "kafka://127.0.0.1:1/u"}, "ship the records back"},
		{"--records", []string{"-r", "kafka://127.0.0.1:1/t", "--records"}, "no payload"},
		{"no topic", []string{"-r", "kafka://127.0.0.1:1"}, "-r "},
		{"a JKS store", []string{"-r", "kafka://127.0.0.1:1/t", "--read-config", props}, "--read-config"},
		{"SASL without a user", []string{"-r", "kafka://127.0.0.1:1/t", "--read-sasl-mechanism", "PLAIN"}, "-r kafka://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := kfsniff(t, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q: want %d and %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
}

// TestCorrelateTUIModel: the terminal UI's model, fed by the correlator
// as the command feeds it, lists the agent's connection, its exchanges
// and the findings.
func TestCorrelateTUIModel(t *testing.T) {
	url, seeds := newSink(t, 2)
	agent(t, url, "scenarios/replica-divergence.pcap", "leader-host", "not", "host", "172.31.3.3")
	agent(t, url, "scenarios/replica-divergence.pcap", "follower-host", "host", "172.31.3.3")
	src, err := correlate.Open(correlate.SourceConfig{Brokers: seeds, Topic: "corr", UntilEnd: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dets, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := tui.NewModel(tui.ModelConfig{})
	res := pipeline.RunRemote(context.Background(), remoteSource{Source: src, fatal: new(error)}, false, nil,
		pipeline.Options{Handlers: []flows.Handler{m}, Detectors: dets, LiveFindings: m.SetFindings})
	m.Sync()
	m.SetFindings(res.Report.Findings)
	conns := m.Conns()
	if len(conns) != 4 {
		t.Fatalf("the TUI lists %d connections, want the 4 of both agents", len(conns))
	}
	n := 0
	for _, c := range conns {
		n += len(m.AppendExchanges(nil, c.ID, 0))
	}
	if n != 23 {
		t.Errorf("the TUI holds %d exchanges, want the 23 shipped", n)
	}
	if got := findingsOf(toCorr(m.Findings()), "replica-divergence", isMismatch); len(got) != 1 {
		t.Errorf("the TUI's findings: want the cross-host divergence, got %v", m.Findings())
	}
}

func toCorr(fs []detectors.Finding) []corrFinding {
	out := make([]corrFinding, len(fs))
	for i, f := range fs {
		b, _ := json.Marshal(f)
		json.Unmarshal(b, &out[i])
	}
	return out
}

// throttledHeld writes a capture of responses throttled by a quota,
// without the brokers' bodies the records ship: client app-1's Produce v5
// (before KIP-219: the broker held each throttled response back its
// throttle time, 2 s, so it is not slow), among 20 answered at once;
// then its Metadata v5, held back 1.5 s three times, and answered at once
// without throttling at the end (no longer throttled); client app-2's
// Metadata v9 (KIP-219: answered at once, the client then held 4 s),
// twice and still throttled at the end.
func throttledHeld(t *testing.T) string {
	t.Helper()
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	pcap, err := gen.Script(func(w *gen.Writer) {
		a := w.Conn(netip.MustParseAddrPort("10.9.0.1:41000"), netip.MustParseAddrPort("10.9.0.2:9092"), at, gen.ConnOptions{})
		app1, app2 := "app-1", "app-2"
		corr := int32(0)
		produce := func(sent time.Time, took time.Duration, throttle int32) {
			corr++
			req := kmsg.NewPtrProduceRequest()
			req.Version, req.Acks, req.TimeoutMillis = 5, -1, 30000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "orders"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records, _ = detectortest.ZeroBatch(0, 2, 7, corr)
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			a.Request(sent, corr, &app1, req)
			resp := kmsg.NewPtrProduceResponse()
			resp.Version, resp.ThrottleMillis = 5, throttle
			st := kmsg.NewProduceResponseTopic()
			st.Topic = "orders"
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.BaseOffset, sp.LogStartOffset = int64(corr)*2, 0
			st.Partitions = append(st.Partitions, sp)
			resp.Topics = append(resp.Topics, st)
			a.Response(sent.Add(took), corr, resp)
		}
		metadata := func(c *gen.Conn, clientID *string, version int16, sent time.Time, took time.Duration, throttle int32) {
			corr++
			req := kmsg.NewPtrMetadataRequest()
			req.Version = version
			c.Request(sent, corr, clientID, req)
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version, resp.ThrottleMillis = version, throttle
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = 0, "10.9.0.2", 9092
			resp.Brokers = append(resp.Brokers, b)
			c.Response(sent.Add(took), corr, resp)
		}
		for i := range 20 {
			produce(at.Add(time.Duration(i+1)*100*time.Millisecond), time.Millisecond, 0)
		}
		for i := range 5 {
			produce(at.Add(3*time.Second+time.Duration(i)*2100*time.Millisecond), 2001*time.Millisecond, 2000)
		}
		for i := range 3 {
			metadata(a, &app1, 5, at.Add(15*time.Second+time.Duration(i)*2*time.Second), 1501*time.Millisecond, 1500)
		}
		metadata(a, &app1, 5, at.Add(22*time.Second), time.Millisecond, 0)
		b := w.Conn(netip.MustParseAddrPort("10.9.0.5:42000"), netip.MustParseAddrPort("10.9.0.2:9092"), at, gen.ConnOptions{})
		metadata(b, &app2, 9, at.Add(500*time.Millisecond), time.Millisecond, 4000)
		metadata(b, &app2, 9, at.Add(time.Second), time.Millisecond, 4000)
	})
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "throttled-held.pcap", pcap)
}

// TestCorrelateThrottledAsFile: throttled and slow-responses read back
// from an agent's records say what the file says, to the severity,
// counts and fields, because the records carry each response's throttle
// time (throttle_time_ms): the recorded producers throttled on Produce,
// and a capture of Metadata throttled (whose body is not shipped: the
// throttle time alone reaches the rules), before and after KIP-219, one
// client no longer throttled at the end and one still; and a Produce the
// broker held back its throttle time is not slow, read back as in the
// file (without the throttle time it would be: 5 answered 2 s late).
func TestCorrelateThrottledAsFile(t *testing.T) {
	for _, path := range []string{fixture("clients/throttled-kgo.pcap"), fixture("clients/throttled-sarama.pcap"), throttledHeld(t)} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			file, _ := correlateJSON(t, "-r", path)
			want := findingsOf(file.Findings, "throttled", nil)
			if len(want) == 0 {
				t.Fatalf("the file has no throttled finding: %v", file.Findings)
			}
			url, _ := newSink(t, 3)
			agentFile(t, url, path, "host-a")
			rep, _ := correlateJSON(t, "-r", url, "--until-end")
			for _, rule := range []string{"throttled", "slow-responses"} {
				if got, want := findingsOf(rep.Findings, rule, nil), findingsOf(file.Findings, rule, nil); !reflect.DeepEqual(got, want) {
					t.Errorf("%s read back from Kafka:\n  %v\nthe file:\n  %v", rule, got, want)
				}
			}
		})
	}
}

// TestCorrelateRealMirrorMaker2AcrossClusters: a real MirrorMaker 2
// (Apache Kafka 4.1.1, fixtures/pcaps/kafka/mm2-replay.json) killed before
// committing its source offsets and restarted; each cluster's host shipped
// by its own agent (src: MirrorMaker 2's fetches; dst: its produces). The
// correlator finds the replays the span capture's analysis finds (topic,
// partition, offset shift): by CRC, and by records for the one whose
// batches were all cut differently the second time, from the record
// fingerprints the agents shipped (schema 3).
func TestCorrelateRealMirrorMaker2AcrossClusters(t *testing.T) {
	type run struct {
		topic       string
		part, shift float64
		producerID  float64
		replay      bool
	}
	runs := func(fs []corrFinding, byCRC bool) []run {
		var out []run
		for _, f := range findingsOf(fs, "duplicate-batches", func(f corrFinding) bool { return f.Severity == "error" }) {
			if byCRC && !strings.Contains(fmt.Sprint(f.Fields["compared"]), "crc") {
				continue
			}
			out = append(out, run{f.Fields["topic"].(string), f.Fields["partition"].(float64), f.Fields["offset_shift"].(float64),
				f.Fields["producer_id"].(float64), f.Fields["replay"] == true})
		}
		slices.SortFunc(out, func(a, b run) int { return cmp.Compare(a.part, b.part) })
		return out
	}
	code, stdout, stderr := kfsniff(t, "-r", fixture("kafka/mm2-replay.pcap.gz"), "--json")
	if code != exitOK && code != exitFindings {
		t.Fatalf("the span capture: exit %d: %s", code, stderr)
	}
	var file corrReport
	if err := json.Unmarshal([]byte(stdout), &file); err != nil {
		t.Fatal(err)
	}
	want := runs(file.Findings, false)
	if len(want) < 2 || len(runs(file.Findings, true)) == len(want) {
		t.Fatalf("the span capture shows no duplicate-batches errors found by CRC and by records alone: %v", file.Findings)
	}
	for _, r := range want {
		if r.topic != "src.orders" || !r.replay || r.shift <= 0 || r.producerID != -1 {
			t.Errorf("the span capture's replay %+v: want MirrorMaker 2's non-idempotent producer replaying src.orders", r)
		}
	}

	url, _ := newSink(t, 3)
	agentFile(t, url, fixture("kafka/mm2-replay-src.pcap.gz"), "src-host")
	agentFile(t, url, fixture("kafka/mm2-replay-dst.pcap.gz"), "dst-host")
	rep, stderr := correlateJSON(t, "-r", url, "--until-end")
	if got := runs(rep.Findings, false); !slices.Equal(got, want) {
		t.Errorf("correlated replays %+v, want the span capture's %+v\n%s", got, want, stderr)
	}
}
