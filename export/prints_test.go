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
