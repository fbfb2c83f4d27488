package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kfsniff/kfsniff/internal/promtest"
)

// gate is a listener for kfake that can cut the sink off: while down,
// its connections are closed and new ones closed on accept, as a broker
// that died or a network partition would do to the client, while kfake's
// state (topics, producer ids) survives for when it comes back.
type gate struct {
	net.Listener
	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
	// allow is an IP address let in even while down (a test's reader).
	allow string
}

func (g *gate) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		if g.down && (g.allow == "" || !strings.HasPrefix(c.RemoteAddr().String(), g.allow+":")) {
			g.mu.Unlock()
			c.Close()
			continue
		}
		g.conns[c] = true
		g.mu.Unlock()
		return c, nil
	}
}

func (g *gate) setDown(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
	if down {
		for c := range g.conns {
			c.Close()
		}
		clear(g.conns)
	}
}

// produceAs writes n records one request at a time as client id.
func produceAs(ctx context.Context, seeds []string, id string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID(id), kgo.DefaultProduceTopic("live"), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s %d", id, i)}).FirstErr(); err != nil {
			return err
		}
	}
	return nil
}

// TestLiveExportSinkOutage captures kgo traffic on lo with --export to a
// kfake sink that goes down mid-capture and comes back: the capture goes
// on (every Produce kgo wrote is in the report), the records the buffer
// could not hold are dropped and counted (the Prometheus counter while it
// runs, in a scrape that passes promtool, and the report at the end),
// records of traffic after the sink's return reach it, and a finding is
// shipped as the live snapshot raises it., and records of traffic after the sink's
// return reach it.
func TestLiveExportSinkOutage(t *testing.T) {
	needLive(t)
	traffic, ports, filter := startKfake(t)
	g := &gate{conns: map[net.Conn]bool{}}
	sink, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "ship", "ship.findings"),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			l, err := net.Listen(network, addr)
			g.Listener = l
			return g, err
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sinkSeeds := sink.ListenAddrs()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := []string{"-i", "lo", "--no-tui", "--json", "--ports", ports, "--duration", "2m", "--metrics-addr", "127.0.0.1:0",
		"--export", "kafka://" + sinkSeeds[0] + "/ship", "--export-buffer", "50", "--export-flush-timeout", "5s", "--agent-id", "lo-agent", filter}
	done, errw := startLive(t, ctx, nil, args...)
	url := metricsURL(t, errw.String())

	wctx, wcancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer wcancel()
	seeds := traffic.ListenAddrs()
	shippedBy := func(id string) int {
		n := 0
		for _, s := range consumeAll(t, sinkSeeds, -1, "ship") {
			if s.rec.ClientID != nil && *s.rec.ClientID == id && s.rec.API == 0 {
				n++
			}
		}
		return n
	}
	waitShipped := func(id string, want int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			n := shippedBy(id)
			if n >= want {
				return
			}
			if time.Now().After(deadline) {
				s, _ := scrape(t, url)
				t.Fatalf("%d Produce records of %s shipped after 30 s, want %d; scraped: %v requests by client, export %v records, %v dropped, %v failed\n%s",
					n, id, want, s.By("kfsniff_client_requests_total", nil, "client_id"), s.Sum("kfsniff_export_records_total", nil),
					s.Sum("kfsniff_export_dropped_total", nil), s.Sum("kfsniff_export_failed_total", nil), errw)
			}
		}
	}
	if err := produceAs(wctx, seeds, "before-outage", 20); err != nil {
		t.Fatal(err)
	}
	waitShipped("before-outage", 20)

	g.setDown(true)
	outage := time.Now()
	if err := produceAs(wctx, seeds, "during-outage", 200); err != nil {
		t.Fatal(err)
	}
	// The exporter's buffer (50) is full: the rest dropped, and counted
	// while the capture runs.
	var dropped float64
	var body []byte
	for deadline := time.Now().Add(15 * time.Second); dropped == 0; time.Sleep(200 * time.Millisecond) {
		var s promtest.Scrape
		s, body = scrape(t, url)
		dropped = s.Sum("kfsniff_export_dropped_total", nil)
		if time.Now().After(deadline) {
			t.Fatalf("no shipping drops scraped with the sink down:\n%s", errw)
		}
	}
	t.Logf("sink down for %s, %v records dropped", time.Since(outage).Round(time.Millisecond), dropped)
	checkMetrics(t, promtool(t), body)

	// Back up: once kgo has reconnected and delivered what the buffer
	// held, traffic after the outage is shipped whole.
	s, _ := scrape(t, url)
	before := s.Sum("kfsniff_export_records_total", nil)
	g.setDown(false)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		s, _ := scrape(t, url)
		if s.Sum("kfsniff_export_records_total", nil) > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing delivered 30 s after the sink came back:\n%s", errw)
		}
	}
	time.Sleep(time.Second) // the rest of the buffer
	if err := produceAs(wctx, seeds, "after-outage", 20); err != nil {
		t.Fatal(err)
	}
	waitShipped("after-outage", 20)

	// A finding while the capture runs: versions Kafka 4.0 removed. It is
	// shipped when a snapshot raises it, before the capture ends.
	old, err := errorsAndOldVersions(wctx, seeds, &kafkaCounts{writes: map[int16]int{}, reads: map[int16]int{}})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		raised := false
		for _, s := range consumeAll(t, sinkSeeds, -1, "ship.findings") {
			raised = raised || (s.rec.State == "raised" && s.rec.Finding != nil && s.rec.Finding.Detector == "kafka40-removed-versions")
		}
		if raised {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no kafka40-removed-versions finding raised on the findings topic 20 s into the capture\n%s", errw)
		}
	}

	cancel()
	r := wait(t, done, errw)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, errw)
	}
	var rep struct {
		reportWithExport
		APIs []struct {
			Name     string `json:"name"`
			Requests int    `json:"requests"`
		} `json:"apis"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("not the JSON report: %v\n%.300s", err, r.stdout)
	}
	produce := 0
	for _, a := range rep.APIs {
		if a.Name == "Produce" {
			produce += a.Requests
		}
	}
	// The capture did not wait for the sink: every Produce request is in
	// the report (one per record: 240).
	if produce < 240 {
		t.Errorf("%d Produce requests in the report; 240 were sent", produce)
	}
	if rep.Export == nil || rep.Export.Dropped == 0 || float64(rep.Export.Dropped) < dropped || rep.Export.Records == 0 {
		t.Fatalf("export in the report %+v; want the %v drops scraped (or more) and records delivered", rep.Export, dropped)
	}
	// Everything is accounted for: what reached the sink plus what was
	// dropped or failed is what the capture made. The sink holds at least
	// what the report says was delivered.
	if got := len(consumeAll(t, sinkSeeds, -1, "ship", "ship.findings")); int64(got) < rep.Export.Records {
		t.Errorf("%d records in the sink, the report says %d delivered", got, rep.Export.Records)
	}
}

// TestLiveExportOwnConnections captures on lo both a kfake cluster's
// traffic and the agent's own shipping to its kfake sink: the own
// connections are in the report (the capture saw them) but none of their
// events, nor their exchanges, reach the sink; the other cluster's
// connections' events do.
func TestLiveExportOwnConnections(t *testing.T) {
	needLive(t)
	traffic, ports, filter := startKfake(t)
	sink, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "ship", "ship.findings"))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sinkAddr := sink.ListenAddrs()[0]
	_, sinkPort, _ := net.SplitHostPort(sinkAddr)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := []string{"-i", "lo", "--no-tui", "--json", "--ports", ports + "," + sinkPort, "--duration", "2m",
		"--export", "kafka://" + sinkAddr + "/ship", "--agent-id", "lo-agent", filter + " or port " + sinkPort}
	done, errw := startLive(t, ctx, nil, args...)
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer wcancel()
	if err := produceAs(wctx, traffic.ListenAddrs(), "app", 20); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		n := 0
		for _, s := range consumeWith(t, []string{sinkAddr}, -1, []kgo.Opt{kgo.ClientID("reader")}, "ship") {
			if s.rec.ClientID != nil && *s.rec.ClientID == "app" && s.rec.API == 0 {
				n++
			}
		}
		if n >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of app's 20 Produce records shipped after 30 s\n%s", n, errw)
		}
	}
	cancel()
	r := wait(t, done, errw)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, errw)
	}
	var rep struct {
		Connections []struct {
			Server string `json:"server"`
		} `json:"connections"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("not the JSON report: %v\n%.300s", err, r.stdout)
	}
	own := 0
	for _, c := range rep.Connections {
		if c.Server == sinkAddr {
			own++
		}
	}
	if own == 0 {
		t.Fatalf("the capture saw none of the agent's connections to %s: nothing tested\n%s", sinkAddr, errw)
	}
	// The test's reader (client id "reader") is captured too, and is
	// shipped: its connections are those of its exchanges.
	recs := consumeWith(t, []string{sinkAddr}, -1, []kgo.Opt{kgo.ClientID("reader")}, "ship")
	reader := map[int]bool{}
	for _, s := range recs {
		if s.rec.ClientID != nil && *s.rec.ClientID == "reader" {
			reader[s.rec.Conn] = true
		}
	}
	var others []string
	for _, s := range recs {
		switch {
		case s.rec.Server == sinkAddr && !reader[s.rec.Conn]:
			t.Errorf("the agent's own traffic shipped: %s %s connection %d from %s", s.rec.Type, s.rec.Event, s.rec.Conn, s.rec.Client)
		case s.rec.Type == "conn" && s.rec.Event != "end" && s.rec.Server != sinkAddr:
			others = append(others, s.rec.Event)
		}
	}
	if len(reader) == 0 {
		t.Error("none of the reader's connections to the sink shipped")
	}
	if !slices.Contains(others, "opened") {
		t.Errorf("the other cluster's connection events shipped: %v, want its openings among them", others)
	}
	t.Logf("%d own connections captured; the reader's %d and %d events of the other cluster's shipped", own, len(reader), len(others))
}
