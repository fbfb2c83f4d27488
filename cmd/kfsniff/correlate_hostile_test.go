package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Issue 31: records written into the export topic by anyone with write
// access to it are hostile input (ROBUSTNESS.md, "The correlator's
// input").

// produceValues writes raw record values into the export topic.
func produceValues(t *testing.T, seeds []string, values ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("corr"), kgo.ProducerBatchMaxBytes(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs := make([]*kgo.Record, len(values))
	for i, v := range values {
		rs[i] = &kgo.Record{Key: []byte("forged"), Value: []byte(v)}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// runFor runs kfsniff with args, cancels it (Ctrl-C) after cancelAfter
// when positive, and fails if it has not returned within limit; it
// returns the exit code, outputs and the time taken.
func runFor(t *testing.T, cancelAfter, limit time.Duration, args ...string) (int, string, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	began := time.Now()
	go func() { done <- run(ctx, args, strings.NewReader(""), &out, &errb) }()
	var timer <-chan time.Time
	if cancelAfter > 0 {
		timer = time.After(cancelAfter)
	}
	deadline := time.After(limit)
	for {
		select {
		case code := <-done:
			return code, out.String(), errb.String(), time.Since(began)
		case <-timer:
			cancel()
			timer = nil
		case <-deadline:
			t.Fatalf("kfsniff %s: still running after %v (cancelled after %v)", strings.Join(args, " "), limit, cancelAfter)
		}
	}
}

// TestCorrelateForgedAttempts: a connection event claiming 2^31-1
// refused attempts made reconnect-storm loop over that count (52 s of
// CPU per record, Ctrl-C ignored). Three such records are read in well
// under a second of rules' time, and their attempts are counted whole.
func TestCorrelateForgedAttempts(t *testing.T) {
	url, seeds := newSink(t, 1)
	const forged = `{"v":1,"type":"conn","agent":"mallory","ts_ns":1767225600000000000,"client":"10.0.0.9:4000","server":"10.0.0.1:9092","event":"refused","attempts":2147483647,"pkt":1}`
	produceValues(t, seeds, forged, forged, forged)
	code, stdout, stderr, took := runFor(t, 0, 20*time.Second, "-r", url, "--until-end", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if took > 8*time.Second {
		t.Errorf("3 forged records took %v", took)
	}
	if !bytes.Contains([]byte(stdout), []byte(`"refused": 6442450941`)) {
		t.Errorf("the refused attempts are not counted whole (3 x 2^31-1):\n%.2000s", stdout)
	}
	t.Logf("3 records of 2^31-1 attempts: %v", took)
}

// readValues reads every record value of the export topic.
func readValues(t *testing.T, seeds []string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("corr"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	for empty := 0; empty < 2; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			empty++
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

// hostileReport is what these tests read of the correlator's report.
type hostileReport struct {
	Totals struct {
		Requests           int64            `json:"requests"`
		KafkaConnections   int              `json:"kafka_connections"`
		EvictedConnections int              `json:"evicted_connections"`
		BoundsReached      map[string]int64 `json:"bounds_reached"`
	} `json:"totals"`
	Connections []json.RawMessage `json:"connections"`
	Findings    []corrFinding     `json:"findings"`
}

func hostileJSON(t *testing.T, args ...string) (hostileReport, string) {
	t.Helper()
	code, stdout, stderr := kfsniff(t, append(args, "--json")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep hostileReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("not the JSON report: %v", err)
	}
	return rep, stderr
}

// TestCorrelateDuplicateRecords: the same agent's records shipped twice
// were counted twice without a word. Read again (agent, run and seq
// equal), they are skipped and counted: the report is the one of the
// records shipped once.
func TestCorrelateDuplicateRecords(t *testing.T) {
	url, seeds := newSink(t, 1)
	agent(t, url, "scenarios/replica-divergence.pcap", "follower-host", "host", "172.31.3.3")
	once, _ := hostileJSON(t, "-r", url, "--until-end")
	values := readValues(t, seeds)
	produceValues(t, seeds, values...)
	twice, stderr := hostileJSON(t, "-r", url, "--until-end")
	if twice.Totals.Requests != once.Totals.Requests || len(twice.Connections) != len(once.Connections) || len(twice.Findings) != len(once.Findings) {
		t.Errorf("shipped twice: %d requests, %d connections, %d findings; once: %d, %d, %d", twice.Totals.Requests, len(twice.Connections),
			len(twice.Findings), once.Totals.Requests, len(once.Connections), len(once.Findings))
	}
	if got := twice.Totals.BoundsReached["correlate_duplicate_records"]; got != int64(len(values)) {
		t.Errorf("bounds_reached %v: want the %d records read again counted", twice.Totals.BoundsReached, len(values))
	}
	if !strings.Contains(stderr, "read again") {
		t.Errorf("stderr says nothing of the records read again:\n%s", stderr)
	}
	t.Logf("%d records shipped twice: %d requests as once", len(values), twice.Totals.Requests)
}

// TestCorrelateConnectionsFolded: 120,000 records of one connection each
// were listed as 120,000 connections; past flows' 100,000 (a file's
// bound) the oldest are folded into the totals as a file's are.
func TestCorrelateConnectionsFolded(t *testing.T) {
	url, seeds := newSink(t, 1)
	const n = 120000
	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf(`{"v":1,"type":"conn","agent":"mallory","ts_ns":%d,"event":"opened","conn":%d,"client":"10.%d.%d.%d:4000","server":"10.0.0.1:9092","pkt":%d}`,
			1767225600000000000+int64(i)*1000, i+1, 100+i>>16, i>>8&255, i&255, i+1)
	}
	for i := 0; i < n; i += 20000 {
		produceValues(t, seeds, values[i:i+20000]...)
	}
	began := time.Now()
	rep, _ := hostileJSON(t, "-r", url, "--until-end")
	took := time.Since(began)
	if len(rep.Connections) != 100000 || rep.Totals.KafkaConnections != n || rep.Totals.EvictedConnections != n-100000 ||
		rep.Totals.BoundsReached["correlate_connections_folded"] != n-100000 {
		t.Errorf("%d connections listed, %d in all, %d folded, bounds %v: want 100000 listed of %d, the rest folded and counted",
			len(rep.Connections), rep.Totals.KafkaConnections, rep.Totals.EvictedConnections, rep.Totals.BoundsReached, n)
	}
	t.Logf("%d connections read back in %v", n, took)
}

// TestCorrelateHeldBytesBounded: records held by the merge (a reorder
// window of an hour holds them all) took their decoded size each, 200
// records of 10,000 batches far past 512 MB. Now a record holds at most
// 512 batches and the merge at most 64 MiB of records: 6,000 records of
// 512 batches (300 MB decoded) are released early past it, counted.
// A poll parsed whole went past the bound too: a fetch (1 MiB of
// compressed records) parsed to 1,000 records of 51 MiB at once, and the
// heap grew 180-257 MiB. A poll now takes a quarter of the bound's worth.
// The heap in use holds the merge's 64 MiB, a poll's 16 MiB, kgo's
// buffered fetch and the garbage the collector has not reclaimed yet
// (up to as much again at GOGC=100): 116-170 MiB measured.
func TestCorrelateHeldBytesBounded(t *testing.T) {
	url, seeds := newSink(t, 1)
	batches := `,"parts":1,"topic":"t","partition":0,"batches":[` + strings.Repeat(`{"crc":1,"records":1},`, 511) + `{"crc":1,"records":1}]`
	values := make([]string, 6000)
	for i := range values {
		values[i] = fmt.Sprintf(`{"v":1,"type":"exchange","agent":"mallory","ts_ns":%d,"conn":1,"client":"10.0.0.9:4000","server":"10.0.0.1:9092","api":1,"ver":12,"corr":%d,"status":"unanswered","req_pkt":1%s}`,
			1767225600000000000+int64(i)*1000, i, batches)
	}
	for i := 0; i < len(values); i += 500 {
		produceValues(t, seeds, values[i:i+500]...)
	}
	peak, stop := heapPeak()
	rep, _ := hostileJSON(t, "-r", url, "--until-end", "--reorder-window", "1h")
	grew := stop()
	if rep.Totals.BoundsReached["correlate_records_released_early"] == 0 {
		t.Errorf("bounds_reached %v: want records released early for the merge's bytes", rep.Totals.BoundsReached)
	}
	if grew > 256<<20 {
		t.Errorf("heap grew by %d MiB reading 6,000 records of 512 batches", grew>>20)
	}
	t.Logf("heap in use grew by %d MiB (baseline %d MiB); %v", grew>>20, peak>>20, rep.Totals.BoundsReached)
}

// heapPeak samples the heap in use every 10 ms until stop, which returns
// the peak's growth over the start.
func heapPeak() (base uint64, stop func() uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base = m.HeapInuse
	done := make(chan uint64)
	quit := make(chan struct{})
	go func() {
		peak := base
		for {
			select {
			case <-quit:
				done <- peak
				return
			case <-time.After(10 * time.Millisecond):
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapInuse)
			}
		}
	}()
	return base, func() uint64 { close(quit); return <-done - base }
}

// freePort is a local port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// TestCorrelateNoAnswer: -r kafka:// to a port nothing listens on with
// --until-end tried again forever, and Ctrl-C then reported 0 records
// with exit 0, so that --fail-on passed; a port out of range was
// accepted (exit 0, records counted failed). Now the port is checked at
// parse time, and a cluster that never answered is exit 2, after
// --read-timeout or at Ctrl-C.
func TestCorrelateNoAnswer(t *testing.T) {
	url := fmt.Sprintf("kafka://127.0.0.1:%d/corr", freePort(t))
	code, stdout, stderr, took := runFor(t, 0, 30*time.Second, "-r", url, "--until-end", "--read-timeout", "2s", "--json", "--fail-on", "error")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "no answer from 127.0.0.1:") {
		t.Errorf("nothing listening, --read-timeout 2s: exit %d, want 2 and why, no report:\n%s%s", code, stdout, stderr)
	}
	if took > 10*time.Second {
		t.Errorf("gave up after %v, --read-timeout 2s", took)
	}
	t.Logf("--read-timeout 2s: exit %d after %v", code, took)

	code, stdout, stderr, took = runFor(t, time.Second, 15*time.Second, "-r", url, "--until-end", "--json")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "no answer from 127.0.0.1:") || !strings.Contains(stderr, "interrupted") {
		t.Errorf("nothing listening, Ctrl-C after 1s: exit %d, want 2 and why:\n%s%s", code, stdout, stderr)
	}
	t.Logf("Ctrl-C after 1 s: exit %d after %v", code, took)

	for _, args := range [][]string{
		{"-r", "kafka://127.0.0.1:99999/corr"}, {"-r", "kafka://127.0.0.1:0/corr"},
		{"-r", fixture("basic.pcap"), "--export", "kafka://b1:65536/corr"}, {"-r", fixture("basic.pcap"), "--metrics-addr", "127.0.0.1:70000"},
		{"-r", fixture("basic.pcap"), "--metrics-addr", "127.0.0.1:http"},
	} {
		code, stdout, stderr, took := runFor(t, 0, 10*time.Second, args...)
		if code != exitUsage || stdout != "" || took > time.Second {
			t.Errorf("%v: exit %d after %v, want 2 at once:\n%s%s", args, code, took, stdout, stderr)
		}
	}
}
