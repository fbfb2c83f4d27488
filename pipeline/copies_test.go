package pipeline

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// TestRebatchedReplayFoundByRecords: a replay whose batches were rebuilt
// (other boundaries, gzip then lz4, a new producer id) is found only by
// comparing records, whose fingerprints flows makes while each Produce
// request's bytes are there and keeps until its response gives the
// offsets (flows.Keeper). On the real capture path, with one analyzer and
// with the sharded one whose events are delivered later, Produce requests
// pipelined so that a second is read before the first is answered.
func TestRebatchedReplayFoundByRecords(t *testing.T) {
	const topic, broker = "src.events", "172.31.20.2:9092"
	rebatch := func(codec *kgo.CompressionCodec, pid int64, sizes ...int) (batches [][]byte, bases []int64) {
		n := 0
		for _, k := range sizes {
			batches = append(batches, dt.BatchSpec{Codec: codec, ProducerID: pid, Sequence: int32(n), Records: dt.Records(n, k)}.Encode(t))
			bases = append(bases, int64(n))
			n += k
		}
		return batches, bases
	}
	orig, ob := rebatch(dt.Codec(kgo.GzipCompression()), -1, 25, 25, 25, 25)
	again, ab := rebatch(dt.Codec(kgo.Lz4Compression()), 9001, 40, 40, 20)
	var buf bytes.Buffer
	w, err := gen.NewWriter(&buf, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 7, 20, 3, 0, 0, 0, time.UTC)
	id := "mm2-producer"
	for i, run := range []struct {
		batches [][]byte
		bases   []int64
		shift   int64
	}{{orig, ob, 0}, {again, ab, 100}} {
		start := t0.Add(time.Duration(i) * 20 * time.Second)
		c := w.Conn(netip.MustParseAddrPort("172.31.0.100:5100"+string(rune('0'+i))), netip.MustParseAddrPort(broker), start, gen.ConnOptions{})
		for j, b := range run.batches {
			c.Request(start.Add(time.Duration(j)*time.Millisecond), int32(j+1), &id, dt.ProduceRaw(topic, 0, b))
		}
		for j := range run.batches {
			c.Response(start.Add(time.Duration(10+j)*time.Millisecond), int32(j+1), dt.ProducedAt(topic, 0, 0, run.bases[j]+run.shift))
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 2} {
		r := runBytesWithDetectors(t, "replay.pcap", buf.Bytes(), workers)
		var got []detectors.Finding
		for _, f := range r.Findings {
			if f.Detector == "duplicate-batches" {
				got = append(got, f)
			}
		}
		if len(got) != 1 || got[0].Counts["duplicate_batches_by_records"] != 3 || got[0].Counts["duplicate_records"] != 100 ||
			got[0].Fields["compared"] != "records" || got[0].Fields["offset_shift"] != int64(100) {
			t.Errorf("%d workers: duplicate-batches findings:%s", workers, describe(got))
		}
	}
}
