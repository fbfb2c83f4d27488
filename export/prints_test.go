package export

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

type shippedBatch struct {
	Records int32   `json:"records"`
	FP      string  `json:"fp"`
	Deltas  []int32 `json:"fp_deltas"`
	Err     string  `json:"fp_err"`
}

type shippedPart struct {
	API     int            `json:"api"`
	FPFn    string         `json:"fp_fn"`
	Index   int            `json:"batch_index"`
	Batches []shippedBatch `json:"batches"`
}

// printsOf decodes a batch's fp field into 128-bit prints.
func printsOf(t *testing.T, b shippedBatch) [][2]uint64 {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b.FP)
	if err != nil || len(raw)%16 != 0 {
		t.Fatalf("fp %q: %d bytes, %v", b.FP, len(raw), err)
	}
	var out [][2]uint64
	for i := 0; i < len(raw); i += 16 {
		out = append(out, [2]uint64{binary.BigEndian.Uint64(raw[i:]), binary.BigEndian.Uint64(raw[i+8:])})
	}
	return out
}

// shipThrough delivers a Produce and a Fetch exchange carrying the given
// batches to e through a flows Delivery (which keeps the Produce's
// fingerprints while its bytes are there, as in a capture), and returns
// the records shipped, decoded.
func shipThrough(t *testing.T, cfg Config, produced, fetched [][]byte) []shippedPart {
	t.Helper()
	cfg.Brokers, cfg.Topic, cfg.Agent = []string{"127.0.0.1:1"}, "ship", "host-a"
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cl.Close() })
	var out []shippedPart
	e.send = func(_ string, _, value []byte) {
		var p shippedPart
		if err := json.Unmarshal(value, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.1.0.1:9092"))
	d := flows.NewDelivery(e)
	id := [16]byte{1, 2, 3}
	var rs []*flows.Message
	var ws []kmsg.Response
	if produced != nil {
		rs = append(rs, flowstest.MakeRequest(c, at, 1, "mm2", detectortest.ProduceRaw("orders", 0, produced...)))
		ws = append(ws, detectortest.ProducedAt("orders", 0, 0, 100))
	}
	if fetched != nil {
		rs = append(rs, flowstest.MakeRequest(c, at, 2, "mm2", detectortest.FetchOf(id, 0, 0, -1)))
		ws = append(ws, detectortest.FetchedBatches(id, 0, 1000, fetched...))
	}
	for i, req := range rs {
		d.Deliver(&flows.Event{Req: req})
		d.Deliver(&flows.Event{X: &flows.Exchange{Conn: c, Req: req, Resp: flowstest.MakeResponse(req, at.Add(time.Millisecond), ws[i])}})
	}
	return out
}

// TestRecordPrintsShipped (issue 30 item 8): the batches of a Produce
// request (fingerprinted while its bytes were there) and of a Fetch
// response carry one fixed fingerprint per record, the printer's, the
// same for records re-batched and recompressed; fp_fn names the
// function; a key changes it; turned off, nothing is shipped.
func TestRecordPrintsShipped(t *testing.T) {
	recs := detectortest.Records(0, 30)
	whole := detectortest.BatchSpec{ProducerID: -1, Epoch: -1, Sequence: -1, Records: recs}.Encode(t)
	zstd := detectortest.Codec(kgo.ZstdCompression())
	a := detectortest.BatchSpec{Codec: zstd, ProducerID: 7, Records: recs[:10]}.Encode(t)
	b := detectortest.BatchSpec{Codec: zstd, ProducerID: 7, Sequence: 10, Records: recs[10:]}.Encode(t)
	var ref []decode.RecordHash
	if _, err := decode.ScanBatches(whole, func(bt *decode.Batch) {
		ref, _ = decode.NewRecordPrinter(1<<20, nil).Hashes(bt, nil)
	}); err != nil || len(ref) != 30 {
		t.Fatalf("reference: %d prints, %v", len(ref), err)
	}
	out := shipThrough(t, Config{}, [][]byte{whole}, [][]byte{detectortest.Stored(a, 100, 0), detectortest.Stored(b, 110, 0)})
	if len(out) != 2 {
		t.Fatalf("%d records, want 2", len(out))
	}
	var got [][2]uint64
	for _, p := range out {
		if p.FPFn != "sha256-128" {
			t.Errorf("api %d: fp_fn %q", p.API, p.FPFn)
		}
		for _, bt := range p.Batches {
			if bt.Err != "" || bt.Deltas != nil {
				t.Errorf("api %d: fp_err %q, fp_deltas %v", p.API, bt.Err, bt.Deltas)
			}
			ps := printsOf(t, bt)
			if len(ps) != int(bt.Records) {
				t.Errorf("api %d: %d prints for %d records", p.API, len(ps), bt.Records)
			}
			got = append(got, ps...)
		}
	}
	if len(got) != 60 {
		t.Fatalf("%d prints shipped, want 60", len(got))
	}
	for i := range 30 {
		want := [2]uint64{ref[i].Sum, ref[i].Hi}
		if got[i] != want || got[30+i] != want {
			t.Fatalf("record %d: produced %x, fetched %x, want %x", i, got[i], got[30+i], want)
		}
	}

	keyed := shipThrough(t, Config{PrintKey: []byte("a key of sixteen+ bytes")}, [][]byte{whole}, nil)
	if len(keyed) != 1 || keyed[0].FPFn != decode.PrintFunc([]byte("a key of sixteen+ bytes")) || printsOf(t, keyed[0].Batches[0])[0] == got[0] {
		t.Errorf("keyed: %+v", keyed)
	}
	off := shipThrough(t, Config{NoPrints: true}, [][]byte{whole}, [][]byte{a})
	for _, p := range off {
		if p.FPFn != "" || p.Batches[0].FP != "" || p.Batches[0].Err != "" {
			t.Errorf("fingerprints off: %+v", p)
		}
	}
}

// TestRecordPrintsBound: a batch of more than MaxPrints records ships
// none (fp_err "records"); a partition's batches whose prints would take
// one record past MaxPrints go on in the next record; a transactional
// batch, never compared by records, ships none and no error.
func TestRecordPrintsBound(t *testing.T) {
	big := detectortest.BatchSpec{ProducerID: -1, Epoch: -1, Sequence: -1, Records: detectortest.Records(0, MaxPrints+1)}.Encode(t)
	half := detectortest.BatchSpec{ProducerID: -1, Epoch: -1, Sequence: -1, Records: detectortest.Records(0, MaxPrints/2+1)}.Encode(t)
	txn := detectortest.BatchSpec{ProducerID: 5, Attrs: 0x10, Records: detectortest.Records(0, 3)}.Encode(t)
	out := shipThrough(t, Config{}, nil, [][]byte{big, detectortest.Stored(half, 20000, 0), detectortest.Stored(half, 30000, 0), detectortest.Stored(txn, 40000, 0)})
	if len(out) != 2 {
		t.Fatalf("%d records, want 2 (the second half-bound batch in a record of its own)", len(out))
	}
	if b := out[0].Batches; len(b) != 2 || b[0].Err != "records" || b[0].FP != "" || len(printsOf(t, b[1])) != MaxPrints/2+1 {
		t.Errorf("first record: %d batches, fp_err %q", len(b), b[0].Err)
	}
	if b := out[1].Batches; out[1].Index != 2 || len(b) != 2 || len(printsOf(t, b[0])) != MaxPrints/2+1 || b[1].FP != "" || b[1].Err != "" {
		t.Errorf("second record: batch_index %d, %d batches", out[1].Index, len(b))
	}
}

// TestRecordPrintsOncePerBatch (issue 29 item 1): a batch produced, then
// fetched by a follower and two consumer groups from the same broker, is
// decompressed and fingerprinted once, and every copy ships the same
// prints; a copy at the same place from another broker, or at the same
// place with other bytes (another CRC), is fingerprinted again.
func TestRecordPrintsOncePerBatch(t *testing.T) {
	zstd := detectortest.Codec(kgo.ZstdCompression())
	recs := detectortest.Records(0, 40)
	batch := detectortest.BatchSpec{Codec: zstd, ProducerID: 7, Records: recs}.Encode(t)
	stored := detectortest.Stored(batch, 100, 0)
	other := detectortest.Stored(detectortest.BatchSpec{Codec: zstd, ProducerID: 8, Records: detectortest.Records(40, 40)}.Encode(t), 100, 0)
	var ref, refOther []decode.RecordHash
	one := decode.NewRecordPrinter(1<<20, nil)
	decode.ScanBatches(stored, func(b *decode.Batch) { ref, _ = one.Hashes(b, nil) })
	perCopy := one.Counts().In
	decode.ScanBatches(other, func(b *decode.Batch) { refOther, _ = one.Hashes(b, nil) })
	otherCopy := one.Counts().In - perCopy
	if len(ref) != 40 || len(refOther) != 40 || perCopy == 0 || ref[39] == refOther[39] {
		t.Fatalf("reference: %d and %d prints, %d bytes a copy", len(ref), len(refOther), perCopy)
	}

	e, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Topic: "ship", Agent: "host-a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cl.Close() })
	var out []shippedPart
	e.send = func(_ string, _, value []byte) {
		var p shippedPart
		if err := json.Unmarshal(value, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	d := flows.NewDelivery(e)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	broker, elsewhere := netip.MustParseAddrPort("10.1.0.1:9092"), netip.MustParseAddrPort("10.1.0.3:9092")
	id := [16]byte{1, 2, 3}
	corr := int32(0)
	exchange := func(client string, server netip.AddrPort, req kmsg.Request, resp kmsg.Response) {
		c := flows.MakeConn(netip.MustParseAddrPort(client), server)
		d.Deliver(&flows.Event{Conn: &flows.ConnEvent{Kind: flows.ConnOpened, Conn: c, Client: c.Client, Server: c.Server, Time: at}})
		corr++
		m := flowstest.MakeRequest(c, at, corr, "app", req)
		d.Deliver(&flows.Event{Req: m})
		d.Deliver(&flows.Event{X: &flows.Exchange{Conn: c, Req: m, Resp: flowstest.MakeResponse(m, at.Add(time.Millisecond), resp)}})
	}
	mreq, mresp := detectortest.MetadataBrokers("orders", id, map[int32]string{1: broker.String()})
	exchange("10.0.0.1:40000", broker, mreq, mresp)
	exchange("10.0.0.1:40001", broker, detectortest.ProduceRaw("orders", 0, batch), detectortest.ProducedAt("orders", 0, 0, 100))
	exchange("10.1.0.2:50000", broker, detectortest.FetchOf(id, 0, 100, 2), detectortest.FetchedBatches(id, 0, 140, stored))
	exchange("10.0.0.2:40000", broker, detectortest.FetchOf(id, 0, 100, -1), detectortest.FetchedBatches(id, 0, 140, stored))
	exchange("10.0.0.3:40000", broker, detectortest.FetchOf(id, 0, 100, -1), detectortest.FetchedBatches(id, 0, 140, stored))
	if got := e.printer.Counts().In; got != perCopy {
		t.Errorf("produced and fetched 3 times: %d compressed bytes fingerprinted, want %d (once)", got, perCopy)
	}
	exchange("10.0.0.4:40000", elsewhere, detectortest.FetchOf(id, 0, 100, -1), detectortest.FetchedBatches(id, 0, 140, stored))
	exchange("10.0.0.5:40000", broker, detectortest.FetchOf(id, 0, 100, -1), detectortest.FetchedBatches(id, 0, 140, other))
	if got := e.printer.Counts().In; got != 2*perCopy+otherCopy {
		t.Errorf("another broker's copy and other bytes: %d compressed bytes fingerprinted, want %d", got, 2*perCopy+otherCopy)
	}

	var shipped [][][2]uint64
	for _, p := range out {
		for _, b := range p.Batches {
			shipped = append(shipped, printsOf(t, b))
		}
	}
	if len(shipped) != 6 {
		t.Fatalf("%d batches shipped, want 6", len(shipped))
	}
	for i, ps := range shipped {
		want := ref
		if i == 5 {
			want = refOther
		}
		if len(ps) != len(want) {
			t.Fatalf("copy %d: %d prints", i, len(ps))
		}
		for j, p := range ps {
			if p != [2]uint64{want[j].Sum, want[j].Hi} {
				t.Fatalf("copy %d record %d: %x, want %x", i, j, p, want[j])
			}
		}
	}
}

// TestPrintCacheBounded: the cache keeps the newest batches' prints
// within its bounds, never a batch's prints overwritten since, and
// forgets the oldest first.
func TestPrintCacheBounded(t *testing.T) {
	var c printCache
	key := func(i int) printKey {
		return printKey{part: cluster.Partition{Topic: "t"}, base: int64(i), length: 1, crc: uint32(i)}
	}
	prints := func(i, n int) []decode.RecordHash {
		hs := make([]decode.RecordHash, n)
		for j := range hs {
			hs[j] = decode.RecordHash{Sum: uint64(i), Hi: uint64(j), Delta: int32(j)}
		}
		return hs
	}
	// Batches of 1,000 prints: the ring holds 262 of them.
	const n = 1000
	for i := range 600 {
		c.put(key(i), prints(i, n))
		if i%50 == 0 || i == 599 {
			for j := 0; j <= i; j++ {
				hs, ok := c.get(key(j))
				if want := j > i-printCachePrints/n; ok != want {
					t.Fatalf("after %d batches: batch %d found %v, want %v", i+1, j, ok, want)
				}
				if ok && (len(hs) != n || hs[0].Sum != uint64(j) || hs[n-1].Hi != n-1) {
					t.Fatalf("after %d batches: batch %d's prints overwritten", i+1, j)
				}
			}
		}
	}
	if len(c.index) != c.size || c.size > printCachePrints/n || len(c.ring) > printCachePrints {
		t.Errorf("index %d, order %d, ring %d", len(c.index), c.size, len(c.ring))
	}
	// Small batches: at most printCacheBatches kept.
	for i := range printCacheBatches + 10 {
		c.put(key(1000+i), prints(i, 1))
	}
	if len(c.index) != printCacheBatches || c.size != printCacheBatches {
		t.Errorf("index %d, order %d, want %d", len(c.index), c.size, printCacheBatches)
	}
	if _, ok := c.get(key(1000)); ok {
		t.Error("the oldest small batch kept past the bound")
	}
	if _, ok := c.get(key(1000 + printCacheBatches + 9)); !ok {
		t.Error("the newest small batch not kept")
	}
}
