package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// wireLog records through kgo's hooks every request kgo wrote (API key,
// when the write began and when it returned), every response it read, and
// the local address of every connection it opened.
type wireLog struct {
	mu     sync.Mutex
	writes []wireWrite
	reads  []time.Time
	locals map[string]bool // client ends of kgo's connections
}

type wireWrite struct {
	key int16
	// The kernel stamps a request's packets inside the write call:
	// between start and end (see the margins in TestLiveAttachMidTraffic).
	start, end time.Time
}

func (l *wireLog) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, conn net.Conn, err error) {
	if err != nil || conn == nil {
		return
	}
	l.mu.Lock()
	l.locals[conn.LocalAddr().String()] = true
	l.mu.Unlock()
}

func (l *wireLog) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, timeToWrite time.Duration, err error) {
	if err != nil {
		return
	}
	now := time.Now()
	l.mu.Lock()
	l.writes = append(l.writes, wireWrite{key, now.Add(-timeToWrite), now})
	l.mu.Unlock()
}

func (l *wireLog) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	now := time.Now()
	l.mu.Lock()
	l.reads = append(l.reads, now)
	l.mu.Unlock()
}

// steadyWorkload keeps every kind of kgo connection busy until ctx ends: an
// idempotent producer writing ~500 records/s to "live" (every 40th record
// 150 KB, so that Produce requests and Fetch responses span several
// segments and an attach can land inside a frame), a consumer group
// consuming them and committing after each poll (100ms heartbeats and
// fetch waits), a consumer long-polling the empty topic "quiet" (500ms
// waits, as idle consumers do), and a Metadata request every 150ms.
// consuming is closed when the group has consumed its first records: from
// then on every connection carries traffic. The clients are closed when
// ctx ends; the first error is returned.
func steadyWorkload(ctx context.Context, seeds []string, log *wireLog, consuming chan<- struct{}) error {
	common := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.WithHooks(log)}
	prod, err := kgo.NewClient(append(common, kgo.ClientID("kfsniff-attach-producer"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond), kgo.DefaultProduceTopic("live"))...)
	if err != nil {
		return err
	}
	defer prod.Close()
	group, err := kgo.NewClient(append(common, kgo.ClientID("kfsniff-attach-group"),
		kgo.ConsumerGroup("kfsniff-attach"), kgo.ConsumeTopics("live"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.HeartbeatInterval(100*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer group.Close()
	idle, err := kgo.NewClient(append(common, kgo.ClientID("kfsniff-attach-idle"),
		kgo.ConsumeTopics("quiet"), kgo.FetchMaxWait(500*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer idle.Close()

	var wg sync.WaitGroup
	errs := make(chan error, 1)
	fail := func(what string, err error) {
		if ctx.Err() == nil {
			select {
			case errs <- fmt.Errorf("%s: %w", what, err):
			default:
			}
		}
	}
	wg.Add(4)
	go func() { // producer
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Appendf(nil, "attach test record %d", i)
			if i%40 == 39 {
				v = bytes.Repeat(v[:1], 150<<10)
			}
			prod.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					fail("produce", err)
				}
			})
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	go func() { // consumer group
		defer wg.Done()
		first := true
		for ctx.Err() == nil {
			fs := group.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			if err := fs.Err0(); err != nil {
				fail("group poll", err)
				return
			}
			if first && fs.NumRecords() > 0 {
				first = false
				close(consuming)
			}
			if err := group.CommitUncommittedOffsets(ctx); err != nil {
				fail("commit", err)
				return
			}
		}
	}()
	go func() { // idle consumer: long polls answered empty
		defer wg.Done()
		for ctx.Err() == nil {
			idle.PollFetches(ctx)
		}
	}()
	go func() { // metadata
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := prod.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
				fail("metadata", err)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(150 * time.Millisecond):
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// frameLine is the part of a --frames --json line this test reads.
type frameLine struct {
	Type        string    `json:"type"`
	Packet      uint64    `json:"packet"`
	Time        time.Time `json:"time"`
	Conn        int       `json:"conn"`
	Client      string    `json:"client"`
	Server      string    `json:"server"`
	Key         int16     `json:"key"`
	API         string    `json:"api"`
	Version     int16     `json:"version"`
	Correlation int32     `json:"correlation"`
	RequestPkt  uint64    `json:"request_packet"`
	Unmatched   bool      `json:"unmatched"`
	DecodeError string    `json:"decode_error"`
}

type connRow struct {
	ID            int              `json:"id"`
	Client        string           `json:"client"`
	Server        string           `json:"server"`
	ClientBy      string           `json:"client_by"`
	MidStream     bool             `json:"mid_stream"`
	Requests      int              `json:"requests"`
	Responses     int              `json:"responses"`
	Unmatched     int              `json:"unmatched_responses"`
	FramingErrors int              `json:"framing_errors"`
	DecodeErrors  int              `json:"decode_errors"`
	SkippedBytes  map[string]int64 `json:"skipped_bytes"`
	Problems      []problem        `json:"problems"`
}

type problem struct {
	Packet uint64 `json:"packet"`
	What   string `json:"what"`
}

// TestLiveAttachMidTraffic attaches `kfsniff -i lo` to a kfake cluster
// while kgo clients are connected and busy, as an engineer does on a
// running cluster, and checks what it shows against what kgo wrote (its
// hooks): every request written while the capture ran is there under its
// API, none is invented, no broker is taken for a client, responses pair,
// and the -w file read back gives the same analysis.
func TestLiveAttachMidTraffic(t *testing.T) {
	needLive(t)
	c, ports, filter := startKfake(t, kfake.SeedTopics(1, "quiet"))
	brokerPorts := strings.Split(ports, ",")
	log := &wireLog{locals: map[string]bool{}}
	wctx, wstop := context.WithCancel(context.Background())
	defer wstop()
	consuming := make(chan struct{})
	werr := make(chan error, 1)
	go func() { werr <- steadyWorkload(wctx, c.ListenAddrs(), log, consuming) }()
	select {
	case <-consuming:
	case err := <-werr:
		t.Fatalf("workload ended before consuming: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer group consumed nothing within 10s")
	}
	time.Sleep(2 * time.Second) // every connection is open and busy

	dir := t.TempDir()
	if keep := os.Getenv("KFSNIFF_KEEP_CAPTURE"); keep != "" {
		dir = keep // to look at the capture after a failure
	}
	out := filepath.Join(dir, "attach.pcapng")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := append([]string{"-i", "lo", "--json", "--ports", ports, "-w", out, "--duration", "1m"}, strings.Fields(filter)...)
	called := time.Now() // the capture socket is opened after this
	done, errw := startLive(t, ctx, nil, args...)
	listening := time.Now() // and before this
	time.Sleep(3 * time.Second)
	stopped := time.Now()
	cancel()
	r := wait(t, done, errw)
	wstop()
	if err := <-werr; err != nil {
		t.Fatalf("workload: %v", err)
	}
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, errw)
	}

	var rep liveReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("live --json output is not the JSON report: %v\n%.500s", err, r.stdout)
	}
	var capt struct {
		Capture struct {
			First time.Time `json:"first"`
			Last  time.Time `json:"last"`
		} `json:"capture"`
	}
	json.Unmarshal([]byte(r.stdout), &capt)
	if rep.Capture.Drops == nil || *rep.Capture.Drops != 0 {
		t.Fatalf("the kernel dropped %v packets: the counts below cannot be compared", rep.Capture.Drops)
	}
	last := capt.Capture.Last
	// kfsniff stops at Ctrl-C without reading what the ring still holds
	// (up to a 50ms block, or more when it lags), so the window ends at
	// the last packet it analysed, not at the stop.
	if span := last.Sub(listening); span < 2*time.Second {
		t.Fatalf("the last packet analysed is %s after the capture began listening, %s before the stop: kfsniff fell behind the traffic", span, stopped.Sub(last))
	}

	// The -w file, analysed with -r, frame by frame and as a report.
	code, framesOut, errs := kfsniff(t, "-r", out, "--frames", "--json", "--ports", ports)
	if code != exitOK {
		t.Fatalf("-r %s --frames --json: exit %d: %s", out, code, errs)
	}
	var frames []frameLine
	for _, line := range strings.Split(strings.TrimSpace(framesOut), "\n") {
		var f frameLine
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("--frames --json line is not JSON: %v: %.300s", err, line)
		}
		frames = append(frames, f)
	}

	log.mu.Lock()
	writes := slices.Clone(log.writes)
	reads := slices.Clone(log.reads)
	locals := log.locals
	log.mu.Unlock()

	// Margins. The kernel stamps a request's packets inside kgo's write
	// call: between start (the hook's clock less the write's duration)
	// and end (the hook's clock). Measured here on Heartbeat and Metadata
	// (sparse enough to match each frame to its write), packets came at
	// most 0.1ms before start and never after end; the goroutine can be
	// descheduled around the write on a busy 2-core machine, and writes
	// took up to 59ms with two busy loops beside the test. 250ms is four
	// times that and still leaves a 2.5s window.
	const margin = 250 * time.Millisecond
	from, to := listening.Add(margin), last.Add(-margin)
	inWindow := func(tm time.Time) bool { return !tm.Before(from) && !tm.After(to) }

	// 1. Every request kgo wrote in the window is shown, under its API.
	kgoIn := map[int16]int{}   // written wholly inside the window
	kgoNear := map[int16]int{} // overlapping the window widened by the margin
	kgoAll := map[int16]int{}  // could have been captured at all
	for _, w := range writes {
		if !w.start.Before(from) && !w.end.After(to) {
			kgoIn[w.key]++
		}
		if !w.end.Before(from.Add(-margin)) && !w.start.After(to.Add(margin)) {
			kgoNear[w.key]++
		}
		if !w.end.Before(called.Add(-margin)) && !w.start.After(last.Add(margin)) {
			kgoAll[w.key]++
		}
	}
	shownIn, shownAll := map[int16]int{}, map[int16]int{}
	versions := map[int16]map[int16]int{}
	for _, f := range frames {
		if f.Type != "request" {
			continue
		}
		shownAll[f.Key]++
		if inWindow(f.Time) {
			shownIn[f.Key]++
		}
		if versions[f.Key] == nil {
			versions[f.Key] = map[int16]int{}
		}
		versions[f.Key][f.Version]++
	}
	for _, key := range []int16{0, 1, 3, 8, 12} {
		if kgoIn[key] == 0 {
			t.Errorf("kgo wrote no %s in the window: the workload no longer keeps its connections busy", kmsg.NameForKey(key))
		}
	}
	keys := map[int16]bool{}
	for k := range kgoNear {
		keys[k] = true
	}
	for k := range shownAll {
		keys[k] = true
	}
	sorted := make([]int16, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	window := fmt.Sprintf("%s..%s", from.UTC().Format("15:04:05.000"), to.UTC().Format("15:04:05.000"))
	for _, k := range sorted {
		name := kmsg.NameForKey(k)
		if name == "" {
			name = fmt.Sprintf("key %d", k)
		}
		if shownIn[k] < kgoIn[k] {
			t.Errorf("%s: kgo wrote %d requests within %s (the capture listening +%s to the last packet analysed -%s); kfsniff shows %d there: %d requests missing",
				name, kgoIn[k], window, margin, margin, shownIn[k], kgoIn[k]-shownIn[k])
		}
		// 2. Nothing invented.
		if shownIn[k] > kgoNear[k] {
			t.Errorf("%s: kfsniff shows %d requests within %s, kgo wrote at most %d there (±%s): %d requests kgo never sent; versions shown %v",
				name, shownIn[k], window, kgoNear[k], margin, shownIn[k]-kgoNear[k], versions[k])
		}
		if shownAll[k] > kgoAll[k] {
			t.Errorf("%s: kfsniff shows %d requests in the whole capture, kgo wrote at most %d while it ran: %d requests kgo never sent; versions shown %v",
				name, shownAll[k], kgoAll[k], shownAll[k]-kgoAll[k], versions[k])
		}
		if len(versions[k]) > 1 {
			t.Errorf("%s: kfsniff shows versions %v; kgo sends one version of an API to brokers that are all the same kfake", name, versions[k])
		}
	}

	// 3. Every connection has kgo's end as its client and a broker as
	// its server.
	var conns []connRow
	if err := json.Unmarshal(rep.Connections, &conns); err != nil {
		t.Fatal(err)
	}
	isBroker := func(ep string) bool {
		_, p, _ := net.SplitHostPort(ep)
		return slices.Contains(brokerPorts, p)
	}
	mid := 0
	for _, cn := range conns {
		if cn.MidStream {
			mid++
		}
		switch {
		case isBroker(cn.Client):
			t.Errorf("connection #%d shown as client %s -> server %s (client by %s, mid-stream %v, %d requests, %d responses): "+
				"%s is a kfake broker and %s kgo's end: kfsniff took the broker for the client and read its responses as requests",
				cn.ID, cn.Client, cn.Server, cn.ClientBy, cn.MidStream, cn.Requests, cn.Responses, cn.Client, cn.Server)
		case !locals[cn.Client] || !isBroker(cn.Server):
			t.Errorf("connection #%d shown as client %s -> server %s (client by %s): not one of kgo's connections to a broker",
				cn.ID, cn.Client, cn.Server, cn.ClientBy)
		}
		// Bytes kfsniff could not frame: on a capture with no drops only
		// those before a direction's first frame boundary (midstream),
		// the frames of unmatched responses, and frames cut by the stop.
		for why, n := range cn.SkippedBytes {
			if n > 0 && why != "midstream" && why != "unmatched" && why != "end" {
				t.Errorf("connection #%d (%s -> %s, client by %s): %d bytes skipped as %q on a capture with no drops",
					cn.ID, cn.Client, cn.Server, cn.ClientBy, n, why)
			}
		}
		if cn.FramingErrors != 0 || cn.DecodeErrors != 0 {
			t.Errorf("connection #%d (%s -> %s, client by %s): %d framing and %d decode errors: %+v",
				cn.ID, cn.Client, cn.Server, cn.ClientBy, cn.FramingErrors, cn.DecodeErrors, cn.Problems)
		}
	}
	if mid < 4 {
		t.Errorf("only %d connections joined mid-stream: the test no longer attaches to busy connections", mid)
	}
	var tot totals
	json.Unmarshal(rep.Totals, &tot)
	if tot.DecodeErrors != 0 || tot.FramingErrors != 0 || tot.Gaps != 0 {
		t.Errorf("totals %+v: want no decode or framing errors and no gaps on a capture with no drops", tot)
	}
	for _, f := range frames {
		if f.DecodeError != "" {
			t.Errorf("packet %d, connection #%d: %s %s v%d corr=%d did not decode: %s", f.Packet, f.Conn, f.Type, f.API, f.Version, f.Correlation, f.DecodeError)
		}
	}

	// 4. Responses pair. A response is unmatched only when its request
	// was written before the capture began: at most the requests kgo
	// had in flight then, and on each connection before every paired
	// response. kgo reads a response after the kernel has shown its
	// packet to the capture socket, so one read before the socket was
	// opened was not captured (no margin needed).
	inflight := 0
	for _, w := range writes {
		if w.start.Before(listening) {
			inflight++
		}
	}
	for _, rd := range reads {
		if rd.Before(called) {
			inflight--
		}
	}
	if tot.UnmatchedResponses > inflight {
		t.Errorf("%d unmatched responses; kgo had at most %d requests in flight when the capture began", tot.UnmatchedResponses, inflight)
	}
	pairedSeen := map[int]bool{}
	answered := map[[2]uint64]int{}
	for _, f := range frames {
		if f.Type != "response" {
			continue
		}
		if f.Unmatched {
			if pairedSeen[f.Conn] {
				t.Errorf("packet %d, connection #%d: response corr=%d unmatched after responses that paired: its request was captured but not recognised",
					f.Packet, f.Conn, f.Correlation)
			}
			continue
		}
		pairedSeen[f.Conn] = true
		answered[[2]uint64{uint64(f.Conn), f.RequestPkt}]++
	}
	// Requests older than the longest wait of the workload (500ms) plus
	// the margin have their response in the capture.
	answeredBy := last.Add(-500*time.Millisecond - margin)
	for _, f := range frames {
		if f.Type != "request" || f.Time.After(answeredBy) {
			continue
		}
		k := [2]uint64{uint64(f.Conn), f.Packet}
		if answered[k] == 0 {
			t.Errorf("packet %d, connection #%d: %s v%d corr=%d shown unanswered; kfake answers within 500ms and the capture ran %s longer",
				f.Packet, f.Conn, f.API, f.Version, f.Correlation, last.Sub(f.Time).Round(time.Millisecond))
			continue
		}
		answered[k]--
	}

	// 5. The -w file gives the same analysis as the live run.
	code, offline, errs := kfsniff(t, "-r", out, "--json", "--ports", ports)
	if code != exitOK {
		t.Fatalf("-r %s: exit %d: %s", out, code, errs)
	}
	var back liveReport
	if err := json.Unmarshal([]byte(offline), &back); err != nil {
		t.Fatal(err)
	}
	if back.Capture.Packets != rep.Capture.Packets {
		t.Errorf("-w file: %d packets; live analysed %d", back.Capture.Packets, rep.Capture.Packets)
	}
	for _, part := range []struct {
		name       string
		live, file json.RawMessage
	}{{"totals", rep.Totals, back.Totals}, {"apis", rep.APIs, back.APIs}, {"connections", rep.Connections, back.Connections}, {"findings", rep.Findings, back.Findings}} {
		if !bytes.Equal(part.live, part.file) {
			t.Errorf("%s differ between the live analysis and its -w file:\nlive %.600s\nfile %.600s", part.name, part.live, part.file)
		}
	}

	total := 0
	for _, n := range kgoIn {
		total += n
	}
	t.Logf("attached %s after traffic began; window %s: kgo wrote %d requests (%s), kfsniff %d packets, %d connections (%d mid-stream), %d requests, %d responses, %d unmatched (≤ %d in flight)",
		2*time.Second, window, total, countsString(kgoIn), rep.Capture.Packets, len(conns), mid, tot.Requests, tot.Responses, tot.UnmatchedResponses, inflight)
	t.Logf("kfsniff in the window: %s; listening %s after the start, last packet analysed %s before the stop",
		countsString(shownIn), listening.Sub(called).Round(time.Millisecond), stopped.Sub(last).Round(time.Millisecond))
}

// countsString lists per-API counts by name, in key order.
func countsString(m map[int16]int) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", kmsg.NameForKey(int16(k)), m[int16(k)]))
	}
	return strings.Join(parts, ", ")
}
