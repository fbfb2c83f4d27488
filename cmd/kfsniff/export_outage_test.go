package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// outageFlag is how long TestLiveExportSpoolOutage keeps the sink down:
// 12 s in make test; `make test-outage` runs it with 3 minutes.
var outageFlag = flag.Duration("outage", 12*time.Second, "TestLiveExportSpoolOutage: how long the sink stays down")

// sinkOn is a kfake export sink on a fixed port whose listener can stop
// taking connections (closing those it has) while the test's own reader,
// dialling from 127.0.0.2, still gets in: to read what it holds before it
// is stopped for good.
type sinkOn struct {
	c    *kfake.Cluster
	gate *gate
}

func startSinkOn(t *testing.T, port int) *sinkOn {
	t.Helper()
	g := &gate{conns: map[net.Conn]bool{}, allow: "127.0.0.2"}
	var c *kfake.Cluster
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(4, "ship", "ship.findings"),
			kfake.ListenFn(func(network, addr string) (net.Listener, error) {
				l, err := net.Listen(network, addr)
				g.Listener = l
				return g, err
			}))
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return &sinkOn{c: c, gate: g}
}

// identities reads every record of the export topic from the sink,
// dialling from 127.0.0.2 (past the gate), as run/seq identities.
func (s *sinkOn) identities(t *testing.T) map[string]bool {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	got := map[string]bool{}
	for _, r := range consumeWith(t, s.c.ListenAddrs(), -1, []kgo.Opt{kgo.Dialer(d.DialContext)}, "ship") {
		if r.rec.Type == "exchange" || r.rec.Type == "conn" {
			got[fmt.Sprintf("%s/%d", r.rec.Run, r.rec.Seq)] = true
		}
	}
	return got
}

// TestLiveExportSpoolOutage: a live capture under steady load ships to a
// kfake sink that stops (its connections cut, then the process gone: the
// port refuses) for -outage (12 s; `make test-outage`: 3 minutes), and a
// new sink starts on the same port. With a buffer of 200 records and a
// spool, no record is lost: every record the agent made (seq 1..N of its
// run) is in one sink or the other, none dropped or failed. While the
// sink is down, stderr says so and the metrics show it (sink down,
// records waiting, their age, the spool); when it is back, stderr says
// so; the spool is read out and empty at the end.
func TestLiveExportSpoolOutage(t *testing.T) {
	needLive(t)
	outage := *outageFlag
	traffic, ports, filter := startKfake(t)
	port := freePort(t)
	sink := startSinkOn(t, port)
	spool := t.TempDir()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := []string{"-i", "lo", "--no-tui", "--json", "--ports", ports, "--metrics-addr", "127.0.0.1:0",
		"--export", fmt.Sprintf("kafka://127.0.0.1:%d/ship", port), "--export-buffer", "200", "--export-spool", spool,
		"--export-flush-timeout", "60s", "--agent-id", "lo-agent", filter}
	done, errw := startLive(t, ctx, nil, args...)
	url := metricsURL(t, errw.String())

	// Steady load: one Produce at a time, about 100 a second.
	var produced atomic.Int64
	lctx, lcancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(traffic.ListenAddrs()...), kgo.ClientID("load"), kgo.DefaultProduceTopic("live"), kgo.ProducerLinger(0))
		if err != nil {
			t.Error(err)
			return
		}
		defer cl.Close()
		for lctx.Err() == nil {
			if err := cl.ProduceSync(lctx, &kgo.Record{Value: []byte("load")}).FirstErr(); err == nil {
				produced.Add(1)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	time.Sleep(3 * time.Second)

	// Down: connections cut and refused, what it holds read, then gone.
	sink.gate.setDown(true)
	down := time.Now()
	first := sink.identities(t)
	sink.c.Close()
	var sawDown bool
	var waited, oldest, spooled float64
	for time.Since(down) < outage {
		time.Sleep(time.Second)
		s, _ := scrape(t, url)
		if s.Sum("kfsniff_export_sink_up", nil) == 0 {
			if !sawDown {
				dashboardMetricsOf(t, s, func(n string) bool { return strings.HasPrefix(n, "kfsniff_export_") })
			}
			sawDown = true
			waited = max(waited, s.Sum("kfsniff_export_pending_records", nil))
			oldest = max(oldest, s.Sum("kfsniff_export_oldest_pending_seconds", nil))
			spooled = max(spooled, s.Sum("kfsniff_export_spool_records", nil))
		}
	}
	sink = startSinkOn(t, port)
	defer sink.c.Close()
	back := time.Now()
	for deadline := time.Now().Add(outage + 30*time.Second); !strings.Contains(errw.String(), "is back after"); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			s, _ := scrape(t, url)
			t.Fatalf("no word of the sink's return: %v failed, %v dropped, %v records, %v waiting, the oldest %vs, %v in the spool, up %v\n%s",
				s.Sum("kfsniff_export_failed_total", nil), s.Sum("kfsniff_export_dropped_total", nil), s.Sum("kfsniff_export_records_total", nil), s.Sum("kfsniff_export_pending_records", nil), s.Sum("kfsniff_export_oldest_pending_seconds", nil),
				s.Sum("kfsniff_export_spool_records", nil), s.Sum("kfsniff_export_sink_up", nil), errw)
		}
	}
	t.Logf("sink back; stderr said so after %s", time.Since(back).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	lcancel()
	wg.Wait()
	cancel()
	r := wait(t, done, errw)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, errw)
	}
	var rep reportWithExport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("not the JSON report: %v\n%.300s", err, r.stdout)
	}
	second := sink.identities(t)
	run, maxSeq := "", 0
	for id := range first {
		var seq int
		fmt.Sscanf(id[strings.Index(id, "/")+1:], "%d", &seq)
		run, maxSeq = id[:strings.Index(id, "/")], max(maxSeq, seq)
	}
	for id := range second {
		var seq int
		fmt.Sscanf(id[strings.Index(id, "/")+1:], "%d", &seq)
		maxSeq = max(maxSeq, seq)
	}
	missing := 0
	for seq := 1; seq <= maxSeq; seq++ {
		id := fmt.Sprintf("%s/%d", run, seq)
		if !first[id] && !second[id] {
			missing++
		}
	}
	t.Logf("outage %s under load: %d Produce requests, %d records made (%d in the first sink, %d in the second), %d missing; while down: %v waiting at most, the oldest %vs, %v in the spool; report %+v",
		outage, produced.Load(), maxSeq, len(first), len(second), missing, waited, oldest, spooled, *rep.Export)
	if missing != 0 || rep.Export.Dropped != 0 || rep.Export.Failed != 0 {
		t.Errorf("%d of %d records lost, %d dropped, %d failed", missing, maxSeq, rep.Export.Dropped, rep.Export.Failed)
	}
	if len(second) < int(float64(maxSeq)/2) || maxSeq < int(produced.Load()) {
		t.Errorf("%d records of %d in the second sink, %d Produce requests: not the outage under load this test means", len(second), maxSeq, produced.Load())
	}
	if !sawDown || spooled == 0 || oldest < 10 || waited < 200 {
		t.Errorf("metrics while down: sink down seen %v, %v waiting, the oldest %vs, %v in the spool", sawDown, waited, oldest, spooled)
	}
	if !strings.Contains(errw.String(), "is not taking records") {
		t.Errorf("no word on stderr of the sink going down:\n%s", errw)
	}
	if ents, _ := os.ReadDir(spool); len(ents) > 1 { // the lock file
		t.Errorf("%d files left in the spool", len(ents))
	}
}
