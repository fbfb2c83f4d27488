package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
)

// The live tests capture on lo and need CAP_NET_RAW: `make test` runs them
// as root. Without the privilege they fail, saying so, unless
// KFSNIFF_SKIP_LIVE=1 opts out.

func needLive(t *testing.T) {
	t.Helper()
	if os.Getenv("KFSNIFF_SKIP_LIVE") == "1" {
		t.Skip("KFSNIFF_SKIP_LIVE=1: live capture test skipped")
	}
	l, err := capture.OpenLive(capture.LiveConfig{Interface: "lo", BufferSize: 2 << 20})
	if err != nil {
		t.Fatalf("live capture tests cannot capture on lo: %v\n"+
			"run the tests as root (sudo make test), or set KFSNIFF_SKIP_LIVE=1 to skip the live capture tests", err)
	}
	l.Close()
}

// stderrWatch collects a concurrent run's stderr and says when the capture
// is listening.
type stderrWatch struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func newStderrWatch() *stderrWatch { return &stderrWatch{ready: make(chan struct{})} }

func (w *stderrWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), "listening on") {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

func (w *stderrWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

type runResult struct {
	code   int
	stdout string
}

// startLive runs kfsniff with args in the background and waits until it
// listens; cancel ctx to stop it (as Ctrl-C does).
func startLive(t *testing.T, ctx context.Context, stdout io.Writer, args ...string) (<-chan runResult, *stderrWatch) {
	t.Helper()
	errw := newStderrWatch()
	done := make(chan runResult, 1)
	var out bytes.Buffer
	w := stdout
	if w == nil {
		w = &out
	}
	go func() {
		code := run(ctx, args, strings.NewReader(""), w, errw)
		done <- runResult{code, out.String()}
	}()
	select {
	case <-errw.ready:
	case r := <-done:
		t.Fatalf("kfsniff %s ended before listening: exit %d\n%s", strings.Join(args, " "), r.code, errw)
	case <-time.After(10 * time.Second):
		t.Fatalf("kfsniff %s: not listening after 10s\n%s", strings.Join(args, " "), errw)
	}
	return done, errw
}

func wait(t *testing.T, done <-chan runResult, errw *stderrWatch) runResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("kfsniff did not stop\n%s", errw)
	}
	return runResult{}
}

// kafkaCounts counts, per API key, the requests kgo wrote and the responses
// it read: what a capture of the conversation must show.
type kafkaCounts struct {
	mu     sync.Mutex
	writes map[int16]int
	reads  map[int16]int
}

func (k *kafkaCounts) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		k.mu.Lock()
		k.writes[key]++
		k.mu.Unlock()
	}
}

func (k *kafkaCounts) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		k.mu.Lock()
		k.reads[key]++
		k.mu.Unlock()
	}
}

// startKfake starts a two-broker kfake cluster on 127.0.0.1 (free ports)
// with the topic "live" and opts, and returns it with its ports as a
// --ports list and a filter expression.
func startKfake(t *testing.T, opts ...kfake.Opt) (c *kfake.Cluster, ports, filter string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(2), kfake.SeedTopics(2, "live")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var ps, fs []string
	for _, a := range c.ListenAddrs() {
		_, p, _ := net.SplitHostPort(a)
		ps = append(ps, p)
		fs = append(fs, "port "+p)
	}
	return c, strings.Join(ps, ","), strings.Join(fs, " or ")
}

// workload produces records with an idempotent producer, consumes them in
// a consumer group committing offsets, lists groups, and closes every
// client (leaving the group).
func workload(ctx context.Context, seeds []string, counts *kafkaCounts, records int) error {
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.WithHooks(counts), kgo.ClientID("kfsniff-live-producer"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(2*time.Millisecond), kgo.DefaultProduceTopic("live"))
	if err != nil {
		return err
	}
	defer prod.Close()
	for i := range records {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "live capture test record %d", i)}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.WithHooks(counts), kgo.ClientID("kfsniff-live-consumer"),
		kgo.ConsumerGroup("kfsniff-live"), kgo.ConsumeTopics("live"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.HeartbeatInterval(100*time.Millisecond))
	if err != nil {
		return err
	}
	got := 0
	for got < records {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			cons.Close()
			return fmt.Errorf("consumed %d of %d records: %w", got, records, err)
		}
		got += fs.NumRecords()
		if err := cons.CommitUncommittedOffsets(ctx); err != nil {
			cons.Close()
			return fmt.Errorf("commit: %w", err)
		}
	}
	if _, err := prod.Request(ctx, kmsg.NewPtrListGroupsRequest()); err != nil {
		cons.Close()
		return fmt.Errorf("list groups: %w", err)
	}
	time.Sleep(350 * time.Millisecond) // a few heartbeats
	cons.Close()
	return nil
}

type liveReport struct {
	Capture struct {
		Files []struct {
			Name      string   `json:"name"`
			Format    string   `json:"format"`
			LinkTypes []string `json:"link_types"`
			Packets   int      `json:"packets"`
		} `json:"files"`
		Packets int     `json:"packets"`
		Drops   *uint64 `json:"drops"`
	} `json:"capture"`
	Totals      json.RawMessage `json:"totals"`
	APIs        json.RawMessage `json:"apis"`
	Connections json.RawMessage `json:"connections"`
	Findings    json.RawMessage `json:"findings"`
}

type apiRow struct {
	Key       int16 `json:"key"`
	Requests  int   `json:"requests"`
	Responses int   `json:"responses"`
}

type totals struct {
	KafkaConnections   int `json:"kafka_connections"`
	Requests           int `json:"requests"`
	Responses          int `json:"responses"`
	UnmatchedResponses int `json:"unmatched_responses"`
	DecodeErrors       int `json:"decode_errors"`
	FramingErrors      int `json:"framing_errors"`
	Gaps               int `json:"gaps"`
}

// TestLiveCaptureKfakeKgo captures kgo talking to kfake on lo, filtered to
// the brokers' ports, writing -w as it goes, and stops on cancellation as
// on Ctrl-C. Every request kgo wrote is in the report under its API, every
// response kgo read is matched to its request, and the -w file read back
// gives the same analysis.
func TestLiveCaptureKfakeKgo(t *testing.T) {
	needLive(t)
	c, ports, filter := startKfake(t)
	out := filepath.Join(t.TempDir(), "live.pcapng")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := append([]string{"-i", "lo", "--json", "--ports", ports, "-w", out, "--duration", "2m"}, strings.Fields(filter)...)
	done, errw := startLive(t, ctx, nil, args...)

	counts := &kafkaCounts{writes: map[int16]int{}, reads: map[int16]int{}}
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	err := workload(wctx, c.ListenAddrs(), counts, 40)
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the ring hands over partly filled blocks after 50ms
	cancel()
	r := wait(t, done, errw)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, errw)
	}
	var rep liveReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("live --json output is not the JSON report: %v\n%.500s", err, r.stdout)
	}
	if len(rep.Capture.Files) != 1 || rep.Capture.Files[0].Name != "lo" || rep.Capture.Files[0].LinkTypes[0] != "EN10MB" {
		t.Errorf("capture: %+v; want lo, EN10MB", rep.Capture.Files)
	}
	if rep.Capture.Drops == nil || *rep.Capture.Drops != 0 {
		t.Errorf("drops %v; want a count, 0", rep.Capture.Drops)
	}
	if !strings.Contains(errw.String(), "dropped by kernel") {
		t.Errorf("stderr lacks the closing counts: %s", errw)
	}

	var tot totals
	var apis []apiRow
	json.Unmarshal(rep.Totals, &tot)
	json.Unmarshal(rep.APIs, &apis)
	seen := map[int16][2]int{}
	for _, a := range apis {
		s := seen[a.Key]
		seen[a.Key] = [2]int{s[0] + a.Requests, s[1] + a.Responses}
	}
	counts.mu.Lock()
	defer counts.mu.Unlock()
	for _, key := range []int16{0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 16, 18, 22} {
		if counts.writes[key] == 0 {
			t.Errorf("the workload sent no %s: it no longer exercises what this test checks", kmsg.NameForKey(key))
		}
	}
	for key, n := range counts.writes {
		s := seen[key]
		if s[0] != n {
			t.Errorf("%s: %d requests captured, kgo wrote %d", kmsg.NameForKey(key), s[0], n)
		}
		// A response can be on the wire and not read (a long poll
		// answered as the client closed), never the reverse.
		if s[1] < counts.reads[key] || s[1] > n {
			t.Errorf("%s: %d responses captured, kgo read %d of %d requests", kmsg.NameForKey(key), s[1], counts.reads[key], n)
		}
	}
	for key := range seen {
		if counts.writes[key] == 0 {
			t.Errorf("%s captured but kgo sent none", kmsg.NameForKey(key))
		}
	}
	if tot.UnmatchedResponses != 0 || tot.DecodeErrors != 0 || tot.FramingErrors != 0 || tot.Gaps != 0 {
		t.Errorf("totals %+v: want no unmatched responses, decode or framing errors, gaps", tot)
	}
	if tot.KafkaConnections < 3 {
		t.Errorf("%d Kafka connections; want the producer's and the consumer's to both brokers", tot.KafkaConnections)
	}
	t.Logf("live: %d packets, %d connections, %d requests, %d responses", rep.Capture.Packets, tot.KafkaConnections, tot.Requests, tot.Responses)

	noDuplicates(t, out)
	// The -w file gives the same analysis.
	code, offline, errs := kfsniff(t, "-r", out, "--json", "--ports", ports)
	if code != exitOK {
		t.Fatalf("-r %s: exit %d: %s", out, code, errs)
	}
	var back liveReport
	if err := json.Unmarshal([]byte(offline), &back); err != nil {
		t.Fatal(err)
	}
	if back.Capture.Packets != rep.Capture.Packets || back.Capture.Files[0].LinkTypes[0] != "EN10MB" {
		t.Errorf("-w file: %d packets (%v); live analysed %d", back.Capture.Packets, back.Capture.Files[0].LinkTypes, rep.Capture.Packets)
	}
	for _, part := range []struct {
		name       string
		live, file json.RawMessage
	}{{"totals", rep.Totals, back.Totals}, {"apis", rep.APIs, back.APIs}, {"connections", rep.Connections, back.Connections}, {"findings", rep.Findings, back.Findings}} {
		if !bytes.Equal(part.live, part.file) {
			t.Errorf("%s differ between the live analysis and its -w file:\nlive %.600s\nfile %.600s", part.name, part.live, part.file)
		}
	}
}

// noDuplicates fails if a packet of the capture file appears twice: on lo
// the kernel shows every packet leaving and arriving, and a capture must
// keep one copy, as tcpdump does.
func noDuplicates(t *testing.T, path string) {
	t.Helper()
	f, err := capture.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]uint64{}
	var p capture.Packet
	for f.Next(&p) == nil {
		if n, dup := seen[string(p.Data)]; dup {
			t.Fatalf("%s: packet %d repeats packet %d", path, p.N, n)
		}
		seen[string(p.Data)] = p.N
	}
	if len(seen) == 0 {
		t.Fatalf("%s: no packets", path)
	}
}

// TestLiveFramesStream: with --frames --json and no terminal, each frame is
// a JSON line on stdout as soon as it is decoded, while the capture runs.
func TestLiveFramesStream(t *testing.T) {
	needLive(t)
	c, ports, filter := startKfake(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	first := make(chan struct{})
	readDone := make(chan []string)
	go func() {
		var bad []string
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		n := 0
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				bad = append(bad, sc.Text())
			}
			if n++; n == 1 {
				close(first)
			}
		}
		readDone <- bad
	}()
	args := append([]string{"-i", "lo", "--no-tui", "--frames", "--json", "--ports", ports}, strings.Fields(filter)...)
	done, errw := startLive(t, ctx, pw, args...)

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ClientID("kfsniff-stream"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// The capture is still running: lines must already be there.
	select {
	case <-first:
	case <-time.After(5 * time.Second):
		t.Errorf("no frame line within 5s of the traffic while capturing\n%s", errw)
	}
	cancel()
	r := wait(t, done, errw)
	pw.Close()
	if bad := <-readDone; len(bad) > 0 {
		t.Errorf("lines that are not JSON: %q", bad)
	}
	if r.code != exitOK {
		t.Errorf("exit %d\n%s", r.code, errw)
	}
}

// TestLiveCountAny captures on the "any" pseudo-device (cooked SLL2
// frames, the filter on the network header) and stops at -c.
func TestLiveCountAny(t *testing.T) {
	needLive(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.Copy(c, c)
			c.Close()
		}
	}()
	out := filepath.Join(t.TempDir(), "any.pcap")
	done, errw := startLive(t, context.Background(), nil, "-i", "any", "-c", "6", "--json", "-w", out, "tcp", "and", "dst", "port", port)
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("ping"))
		c.Read(make([]byte, 4))
		c.Close()
	}
	r := wait(t, done, errw)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, errw)
	}
	var rep liveReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Capture.Packets != 6 || rep.Capture.Files[0].Name != "any" || rep.Capture.Files[0].LinkTypes[0] != "LINUX_SLL2" {
		t.Errorf("capture %+v; want 6 LINUX_SLL2 packets on any", rep.Capture)
	}
	if !strings.Contains(errw.String(), "packet count reached") {
		t.Errorf("stderr: %s", errw)
	}
	noDuplicates(t, out)
	// Only packets to the port passed the kernel filter.
	code, txt, errs := kfsniff(t, "-r", out, "src", "port", port)
	if code != exitOK || !strings.Contains(txt, "0 packets") {
		t.Errorf("-r %s src port %s: exit %d, want no packet from the port:\n%s%s", out, port, code, txt, errs)
	}
}

// TestLiveDuration: --duration ends a capture with no traffic on time, with
// the report.
func TestLiveDuration(t *testing.T) {
	needLive(t)
	start := time.Now()
	done, errw := startLive(t, context.Background(), nil, "-i", "lo", "--duration", "400ms", "port", "1")
	r := wait(t, done, errw)
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("--duration 400ms took %s", el)
	}
	if r.code != exitOK || !strings.Contains(r.stdout, "kfsniff report") || !strings.Contains(errw.String(), "duration reached") {
		t.Errorf("exit %d, stdout %.200q, stderr %s", r.code, r.stdout, errw)
	}
}

// TestHelperKfsniff is not a test: TestLiveWithoutPrivilege runs the test
// binary as another user to run kfsniff there.
func TestHelperKfsniff(t *testing.T) {
	if os.Getenv("KFSNIFF_HELPER") != "1" {
		return
	}
	args := strings.Split(os.Getenv("KFSNIFF_ARGS"), "\x1f")
	os.Exit(run(context.Background(), args, os.Stdin, os.Stdout, os.Stderr))
}

// TestLiveWithoutPrivilege: without CAP_NET_RAW, one line says so and how
// to grant it, exit 2.
func TestLiveWithoutPrivilege(t *testing.T) {
	var stdout, stderr bytes.Buffer
	var code int
	if os.Geteuid() == 0 {
		// Run as nobody: a copy of the test binary it can execute.
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Dir(dir), 0o755)
		bin := filepath.Join(dir, "kfsniff.test")
		data, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-test.run=^TestHelperKfsniff$")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KFSNIFF_HELPER=1", "KFSNIFF_ARGS="+strings.Join([]string{"-i", "lo", "port", "9092"}, "\x1f"))
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		err = cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
	} else {
		code = run(context.Background(), []string{"-i", "lo", "--duration", "1ms"}, strings.NewReader(""), &stdout, &stderr)
		if code == exitOK {
			t.Skip("this user can capture: nothing to test")
		}
	}
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	if code != exitUsage || len(lines) != 1 || stdout.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"kfsniff: ", "CAP_NET_RAW", "as root", "setcap cap_net_raw,cap_net_admin+ep"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("message %q lacks %q", lines[0], want)
		}
	}
}

func TestListInterfaces(t *testing.T) {
	code, out, errs := kfsniff(t, "-D")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, ".lo [Up, Running, Loopback]") || !strings.Contains(out, "0.any (Pseudo-device that captures on all interfaces)") {
		t.Errorf("-D output:\n%s", out)
	}
}
