package flows_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

// keeper asks flows to keep some of each request, and records what it
// saw of each request when it was delivered (valid then) and at its
// exchange (kept).
type keeper struct {
	keep     []flows.Keep
	h        *decode.RecordHasher
	frames   map[*flows.Message][]byte // the whole frame, at the request
	hashes   map[*flows.Message][][]decode.RecordHash
	atX      map[*flows.Message][]byte // Message.Frame at the exchange
	printsX  map[*flows.Message][][]decode.RecordHash
	errsX    map[*flows.Message][]error
	exchange int
}

func newKeeper(frame int, h *decode.RecordHasher, records bool, batches func(*flows.BatchRef) bool) *keeper {
	k := &keeper{h: h, frames: map[*flows.Message][]byte{}, hashes: map[*flows.Message][][]decode.RecordHash{},
		atX: map[*flows.Message][]byte{}, printsX: map[*flows.Message][][]decode.RecordHash{}, errsX: map[*flows.Message][]error{}}
	if records {
		k.keep = []flows.Keep{{Frame: frame, Records: h, Batches: batches}}
	} else if frame > 0 {
		k.keep = []flows.Keep{{Frame: frame}}
	}
	return k
}

func (k *keeper) Keep() []flows.Keep { return k.keep }

func (k *keeper) OnRequest(m *flows.Message) {
	k.frames[m] = bytes.Clone(m.Frame)
	for i := range m.Batches {
		hs, _ := k.h.Hashes(&m.Batches[i].Batch, nil)
		k.hashes[m] = append(k.hashes[m], hs)
	}
}

func (k *keeper) OnExchange(x *flows.Exchange) {
	k.exchange++
	q := x.Req
	if q == nil {
		return
	}
	k.atX[q] = bytes.Clone(q.Frame)
	for i := range q.Batches {
		hs, err := q.RecordHashes(k.h, i)
		k.printsX[q] = append(k.printsX[q], slices.Clone(hs))
		k.errsX[q] = append(k.errsX[q], err)
	}
}

// produce is a Produce request of two batches to orders-0 and one to
// orders-1, records numbered from n.
func produce(n int) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = 9, -1, 30000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "orders"
	for part := range int32(2) {
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition = part
		for b := range 2 - int(part) {
			var recs []gen.Record
			for i := range 3 {
				recs = append(recs, gen.Record{Key: []byte(fmt.Sprint("k", n)), Value: []byte(fmt.Sprintf("v%d-%d-%d", n, b, i))})
			}
			p.Records = append(p.Records, gen.RecordBatch(0, t0, recs)...)
		}
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = []kmsg.ProduceRequestTopic{t}
	return r
}

func produced() *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	r.Version = 9
	t := kmsg.NewProduceResponseTopic()
	t.Topic = "orders"
	for part := range int32(2) {
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition, p.BaseOffset = part, 100
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = []kmsg.ProduceResponseTopic{t}
	return r
}

// TestKeepUntilTheExchange: what a handler asks to keep of a request is
// there when its exchange is delivered, after flows released the frame
// (a second request in between), with one analyzer and with a deferred
// one whose events a Delivery hands over later; and it is gone after.
func TestKeepUntilTheExchange(t *testing.T) {
	script := func(w *gen.Writer) {
		c := w.Conn(client, broker, t0, gen.ConnOptions{})
		c.Request(t0.Add(time.Millisecond), 1, kmsg.StringPtr("producer"), produce(1))
		c.Request(t0.Add(2*time.Millisecond), 2, kmsg.StringPtr("producer"), produce(2))
		c.Response(t0.Add(3*time.Millisecond), 1, produced())
		c.Response(t0.Add(4*time.Millisecond), 2, produced())
	}
	h := decode.NewRecordHasher(1 << 20)
	onlyPart0 := func(b *flows.BatchRef) bool { return b.Partition == 0 }
	for _, deferred := range []bool{false, true} {
		k := newKeeper(40, h, true, onlyPart0)
		runKeeper(t, script, deferred, k)
		if k.exchange != 2 || len(k.frames) != 2 {
			t.Fatalf("deferred %v: %d requests, %d exchanges", deferred, len(k.frames), k.exchange)
		}
		for m, frame := range k.frames {
			if len(frame) < 100 || !bytes.Equal(k.atX[m], frame[:40]) {
				t.Errorf("deferred %v: corr %d: frame at the exchange %x, want the first 40 bytes of %x", deferred, m.Correlation, k.atX[m], frame[:min(40, len(frame))])
			}
			if len(m.Batches) != 3 || len(k.printsX[m]) != 3 {
				t.Fatalf("deferred %v: %d batches", deferred, len(m.Batches))
			}
			for i, b := range m.Batches {
				got, err := k.printsX[m][i], k.errsX[m][i]
				switch {
				case b.Partition != 0:
					if !errors.Is(err, flows.ErrNotKept) || len(got) != 0 {
						t.Errorf("batch %d of orders-1: %v, %v; want not kept (not chosen)", i, got, err)
					}
				case err != nil || len(got) != 3 || !slices.Equal(got, k.hashes[m][i]):
					t.Errorf("batch %d: fingerprints at the exchange %v (%v), at the request %v", i, got, err, k.hashes[m][i])
				}
			}
			if _, err := m.RecordHashes(decode.NewRecordHasher(1<<20), 0); !errors.Is(err, flows.ErrNotKept) {
				t.Errorf("another hasher's fingerprints: %v, want ErrNotKept", err)
			}
			if m.Frame != nil {
				t.Errorf("the frame is still held after the exchange")
			}
			if _, err := m.RecordHashes(h, 0); !errors.Is(err, flows.ErrNotKept) {
				t.Errorf("fingerprints still held after the exchange: %v", err)
			}
		}
	}
	// Nobody asks: nothing is kept.
	k := newKeeper(0, h, false, nil)
	runKeeper(t, script, false, k)
	for m := range k.frames {
		if k.atX[m] != nil || !errors.Is(k.errsX[m][0], flows.ErrNotKept) {
			t.Errorf("kept without being asked: frame %x, %v", k.atX[m], k.errsX[m][0])
		}
	}
}

func runKeeper(t *testing.T, script func(w *gen.Writer), deferred bool, k *keeper) {
	t.Helper()
	b, err := gen.Script(script)
	if err != nil {
		t.Fatal(err)
	}
	cfg := flows.DefaultConfig()
	if !deferred {
		analysePcap(t, b, cfg, k)
		return
	}
	var evs []flows.Event
	analyseWith(t, b, flows.NewWorker(cfg, flows.Worker{Sink: func(ev flows.Event) { evs = append(evs, ev) }}))
	d := flows.NewDelivery(k)
	for i := range evs {
		d.Deliver(&evs[i])
	}
}

// TestKeepBounded: requests whose exchange never comes hold what was kept
// of them only until newer ones need the room: the oldest go first,
// counted, and the newest are still there.
func TestKeepBounded(t *testing.T) {
	c := flows.MakeConn(client, broker)
	for _, tc := range []struct {
		name      string
		requests  int
		frame     int
		wantDrops int64
	}{
		{name: "more requests than the bound", requests: 1<<14 + 100, frame: 16, wantDrops: 100},
		{name: "more bytes than the bound", requests: 600, frame: 64 << 10, wantDrops: 600 - 511},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKeeper(tc.frame, nil, false, nil)
			d := flows.NewDelivery(k)
			var reqs []*flows.Message
			frame := bytes.Repeat([]byte{7}, tc.frame)
			for i := range tc.requests {
				m := flowstest.MakeRequest(c, t0, int32(i), "id", kmsg.NewPtrMetadataRequest())
				m.Frame = frame
				d.Deliver(&flows.Event{Req: m})
				reqs = append(reqs, m)
			}
			if got := d.KeptDropped(); got != tc.wantDrops {
				t.Errorf("%d dropped, want %d", got, tc.wantDrops)
			}
			for i, m := range []*flows.Message{reqs[tc.wantDrops-1], reqs[tc.wantDrops], reqs[len(reqs)-1]} {
				d.Deliver(&flows.Event{X: &flows.Exchange{Conn: c, Req: m, Unanswered: true}})
				if kept := k.atX[m] != nil; kept != (i > 0) {
					t.Errorf("request %d: frame kept %v, want %v", m.Correlation, kept, i > 0)
				}
			}
		})
	}
}

// TestKeepDoesNotAllocate: once warmed up, keeping the fingerprints of a
// Produce request's batches until its exchange allocates nothing: the kept
// values and their buffers are reused.
func TestKeepDoesNotAllocate(t *testing.T) {
	c := flows.MakeConn(client, broker)
	c.ID = 1
	h := decode.NewRecordHasher(1 << 20)
	d := flows.NewDelivery(&quietKeeper{keep: []flows.Keep{{Records: h}}})
	req := produce(1)
	var raws [][]byte
	m := flowstest.MakeRequest(c, t0, 1, "producer", req)
	for _, b := range m.Batches {
		raws = append(raws, b.Raw)
	}
	resp := flowstest.MakeResponse(m, t0.Add(time.Millisecond), produced())
	x := &flows.Exchange{Conn: c, Req: m, Resp: resp}
	round := func() {
		for i := range m.Batches {
			m.Batches[i].Raw = raws[i] // released by the delivery
		}
		d.Deliver(&flows.Event{Req: m})
		d.Deliver(&flows.Event{X: x})
	}
	for range 10 {
		round()
	}
	if a := testing.AllocsPerRun(1000, round); a != 0 {
		t.Errorf("%.2f allocations per Produce exchange with its fingerprints kept, want 0", a)
	}
}

type quietKeeper struct{ keep []flows.Keep }

func (k *quietKeeper) Keep() []flows.Keep { return k.keep }
