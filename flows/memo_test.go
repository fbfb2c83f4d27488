package flows_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/kmsgtest"
	"github.com/kfsniff/kfsniff/metrics"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
	"github.com/kfsniff/kfsniff/tui"
)

// memoCounts is what the memo's check saw, by capture.
type memoCounts struct {
	mu      sync.Mutex
	hits    int
	changed map[string]int // "Metadata response": reuses of a changed body
}

func (c *memoCounts) check(key int16, response, changed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hits++
	if changed {
		what := decode.Name(key) + " request"
		if response {
			what = decode.Name(key) + " response"
		}
		c.changed[what]++
	}
}

// TestMemoUnchanged runs every committed capture through every handler
// that reads bodies (all detectors, the report, the metrics, the frames
// printer in text -v and JSON, the terminal UI's model), on two workers
// so that events cross goroutines, and checks at every reuse of a
// remembered body that it still encodes as when it was decoded: a handler
// writing to a body handed to many messages would show wrong fields in
// later exchanges. The retry storms of real clients must reuse bodies.
func TestMemoUnchanged(t *testing.T) {
	if testing.Short() {
		t.Skip("every committed capture through every handler")
	}
	var caps []string
	root := filepath.Join("..", "fixtures", "pcaps")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
		case strings.HasSuffix(p, ".pcap"), strings.HasSuffix(p, ".pcapng"), strings.HasSuffix(p, ".gz"):
			caps = append(caps, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(caps) < 50 {
		t.Fatalf("%d captures under %s", len(caps), root)
	}
	var c memoCounts
	flows.SetMemoCheck(c.check)
	defer flows.SetMemoCheck(nil)
	hits := map[string]int{}
	for _, p := range caps {
		c.mu.Lock()
		c.hits, c.changed = 0, map[string]int{}
		c.mu.Unlock()
		f, err := capture.Open(p, 0)
		if err != nil {
			continue // the hostile corpus's unusable files
		}
		dets, err := detectors.NewSet(all.Analyzers(), nil)
		if err != nil {
			t.Fatal(err)
		}
		text := report.NewFrameWriter(io.Discard, report.FrameFilter{}, false, true)
		lines := report.NewFrameWriter(io.Discard, report.FrameFilter{}, true, false)
		opt := pipeline.Options{
			Flows:     flows.DefaultConfig(),
			Detectors: dets,
			Handlers:  []flows.Handler{metrics.New(metrics.Config{}), text, lines, tui.NewModel(tui.ModelConfig{})},
			Workers:   2,
		}
		res := pipeline.Run(context.Background(), []*capture.File{f}, opt)
		f.Close()
		if res.Report == nil {
			t.Fatalf("%s: no report", p)
		}
		if len(c.changed) > 0 {
			t.Errorf("%s: bodies changed after they were handed out, reused: %v", p, c.changed)
		}
		hits[filepath.Base(p)] = c.hits
	}
	// kgo retrying without backoff: 1,200 identical Produce answers.
	if h := hits["notleader-kgo-nobackoff.pcap"]; h < 1000 {
		t.Errorf("notleader-kgo-nobackoff.pcap: %d bodies reused, want the Produce answers' (over 1000)", h)
	}
	// kgo refreshing Metadata before every retry.
	if h := hits["metadata-storm-kgo.pcap"]; h < 100 {
		t.Errorf("metadata-storm-kgo.pcap: %d bodies reused, want over 100", h)
	}
}

// TestMemoSameAsDecoding checks, on real clients' retry storms, that every
// request and response handed to a handler, reused or not, is what kmsg
// decodes from its own frame (records included), with the same error
// counts.
func TestMemoSameAsDecoding(t *testing.T) {
	for _, name := range []string{"notleader-kgo-nobackoff", "metadata-storm-kgo", "notleader-kafkajs", "notleader-sarama"} {
		t.Run(name, func(t *testing.T) {
			pkts := loadPackets(t, filepath.Join("..", "fixtures", "pcaps", "clients", name+".pcap"))
			h := &freshDecoder{t: t}
			a := flows.New(flows.DefaultConfig(), h)
			for i := range pkts {
				a.Packet(&pkts[i])
			}
			a.Close()
			if h.compared < 10 || h.requests < 10 {
				t.Fatalf("only %d responses and %d requests compared", h.compared, h.requests)
			}
		})
	}
}

// freshDecoder decodes each response's frame again and compares.
type freshDecoder struct {
	t                  *testing.T
	compared, requests int
}

func (h *freshDecoder) OnRequest(m *flows.Message) {
	if m.Req == nil {
		return
	}
	hd, err := decode.ParseRequestHeader(m.Frame)
	if err != nil {
		h.t.Fatalf("packet %d: %v", m.Packet, err)
	}
	want, err := decode.DecodeRequest(hd.Key, hd.Version, m.Frame[hd.Len:])
	if err != nil {
		h.t.Fatalf("packet %d: %v", m.Packet, err)
	}
	if a, b := reflect.ValueOf(want), reflect.ValueOf(m.Req); !kmsgtest.Same(a, b) {
		h.t.Errorf("packet %d %s v%d corr %d: handed a body that differs from its frame's at %s", m.Packet, m.Name(), m.Version, m.Correlation, kmsgtest.FirstDiff(a, b, "req"))
	}
	h.requests++
}

func (h *freshDecoder) OnExchange(x *flows.Exchange) {
	m := x.Resp
	if m == nil || m.Resp == nil || x.Req == nil {
		return
	}
	hl, err := decode.ResponseHeaderLen(m.Frame, m.Key, m.Version)
	if err != nil {
		h.t.Fatalf("packet %d: %v", m.Packet, err)
	}
	want := kmsg.ResponseForKey(m.Key)
	want.SetVersion(m.Version)
	if err := want.ReadFrom(m.Frame[hl:]); err != nil {
		h.t.Fatalf("packet %d: %v", m.Packet, err)
	}
	if a, b := reflect.ValueOf(want), reflect.ValueOf(m.Resp); !kmsgtest.Same(a, b) {
		h.t.Errorf("packet %d %s v%d corr %d: handed a body that differs from its frame's at %s", m.Packet, m.Name(), m.Version, m.Correlation, kmsgtest.FirstDiff(a, b, "resp"))
	}
	var codes []flows.ErrorCount
	decode.ErrorCodes(want, func(code int16) {
		for i := range codes {
			if codes[i].Code == code {
				codes[i].Count++
				return
			}
		}
		codes = append(codes, flows.ErrorCount{Code: code, Count: 1})
	})
	if len(codes) != len(m.ErrorCodes) {
		h.t.Errorf("packet %d: error counts %v, decoded afresh %v", m.Packet, m.ErrorCodes, codes)
	}
	for i := range codes {
		if i < len(m.ErrorCodes) && codes[i] != m.ErrorCodes[i] {
			h.t.Errorf("packet %d: error counts %v, decoded afresh %v", m.Packet, m.ErrorCodes, codes)
		}
	}
	h.compared++
}

// TestMemoBounded: 64 connections, each answered twice with its own
// 200 KB Metadata answer (a large cluster's), remember no more than the
// analyzer's budget together (8 MiB), and what they held is given back
// when the connections end; every answer is what its frame decodes to.
func TestMemoBounded(t *testing.T) {
	var buf bytes.Buffer
	w, err := gen.NewWriter(&buf, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	tick := func() time.Time { now = now.Add(time.Millisecond); return now }
	for i := range 64 {
		c := w.Conn(netip.AddrPortFrom(client.Addr(), uint16(40000+i)), broker, tick(), gen.ConnOptions{})
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 12
		for j := range 2000 {
			tp := kmsg.NewMetadataResponseTopic()
			tp.Topic = kmsg.StringPtr(fmt.Sprintf("conn-%d-topic-%d-%s", i, j, strings.Repeat("x", 60)))
			resp.Topics = append(resp.Topics, tp)
		}
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		for corr := int32(1); corr <= 2; corr++ {
			c.Request(tick(), corr, kmsg.StringPtr("big"), req)
			if n := len(c.Response(tick(), corr, resp)); n < 150<<10 || n > 256<<10 {
				t.Fatalf("a %d-byte answer, want 150-256 KB", n)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := capture.NewFile("t", 0, &buf)
	if err != nil {
		t.Fatal(err)
	}
	h := &freshDecoder{t: t}
	a := flows.New(flows.DefaultConfig(), h)
	var p capture.Packet
	for f.Next(&p) == nil {
		a.Packet(&p)
	}
	if held := a.MemoHeld(); held > flows.MemoBudget || held < flows.MemoBudget/2 {
		t.Errorf("the memos hold %d bytes, want at most the budget, %d (and at least half of it used)", held, flows.MemoBudget)
	}
	a.Close()
	if held := a.MemoHeld(); held != 0 {
		t.Errorf("the memos hold %d bytes after every connection ended", held)
	}
	if h.compared != 128 {
		t.Errorf("%d answers compared, want 128", h.compared)
	}
}

// TestMemoAcrossConnections: 40 short-lived clients, each on its own
// connection, ask once for the same cluster's Metadata (300 partitions);
// the answer is decoded once and the body handed to the others, each
// body what its own frame decodes to; when the analysis ends the bodies
// remembered leave the budget.
func TestMemoAcrossConnections(t *testing.T) {
	var buf bytes.Buffer
	w, err := gen.NewWriter(&buf, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	tick := func() time.Time { now = now.Add(time.Millisecond); return now }
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 9
	for _, id := range []int32{1, 2, 3} {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = id, fmt.Sprintf("broker-%d", id), 9092
		resp.Brokers = append(resp.Brokers, b)
	}
	for ti := range 3 {
		tp := kmsg.NewMetadataResponseTopic()
		tp.Topic = kmsg.StringPtr(fmt.Sprintf("topic-%d", ti))
		for p := range 100 {
			pt := kmsg.NewMetadataResponseTopicPartition()
			pt.Partition, pt.Leader, pt.Replicas, pt.ISR = int32(p), int32(1+p%3), []int32{1, 2, 3}, []int32{1, 2, 3}
			tp.Partitions = append(tp.Partitions, pt)
		}
		resp.Topics = append(resp.Topics, tp)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	for i := range 40 {
		c := w.Conn(netip.AddrPortFrom(client.Addr(), uint16(40000+i)), broker, tick(), gen.ConnOptions{})
		c.Request(tick(), int32(i+1), kmsg.StringPtr("admin"), req)
		c.Response(tick(), int32(i+1), resp)
		c.Close(tick())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := capture.NewFile("t", 0, &buf)
	if err != nil {
		t.Fatal(err)
	}
	var c memoCounts
	c.changed = map[string]int{}
	flows.SetMemoCheck(c.check)
	defer flows.SetMemoCheck(nil)
	h := &freshDecoder{t: t}
	a := flows.New(flows.DefaultConfig(), h)
	var p capture.Packet
	for f.Next(&p) == nil {
		a.Packet(&p)
	}
	if a.MemoHeld() == 0 {
		t.Errorf("nothing remembered after 40 connections asked for the same Metadata")
	}
	a.Close()
	if h.compared != 40 {
		t.Errorf("%d answers compared, want 40", h.compared)
	}
	if c.hits != 39 {
		t.Errorf("%d answers recalled, want 39 (the same answer on 40 connections)", c.hits)
	}
	if len(c.changed) > 0 {
		t.Errorf("bodies changed after they were handed out: %v", c.changed)
	}
	if held := a.MemoHeld(); held != 0 {
		t.Errorf("the memos hold %d bytes after the analysis ended", held)
	}
}
