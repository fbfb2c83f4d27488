package pipeline

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// TestShardedViewsOutliveRounds: with several workers, frames that lie in
// one packet are handed to the merger as views of the reader's rounds of
// packets (flows.Config.StablePackets), so a round's bytes must stay until
// its events are delivered. Here Produce requests of 20 KB, one a segment,
// are pipelined 300 deep on each of three connections (about 18 MB: many
// rounds pass before the first response), the third replaying the first's
// batches; and a big Produce arrives in pieces. The report (with the
// replay found by comparing records) and --frames -v must be byte for byte
// those of one worker.
func TestShardedViewsOutliveRounds(t *testing.T) {
	const topic, n = "views", 300
	var buf bytes.Buffer
	w, err := gen.NewWriter(&buf, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	broker := netip.MustParseAddrPort("10.9.0.2:9092")
	batch := func(conn, i int) []byte {
		return dt.BatchSpec{ProducerID: -1, Records: dt.Records(conn*100_000+i*200, 200)}.Encode(t)
	}
	id := "views"
	for c := range 3 {
		client := netip.AddrPortFrom(netip.MustParseAddr("10.9.0.10"), uint16(40000+c))
		conn := w.Conn(client, broker, t0, gen.ConnOptions{MSS: 65000})
		src, part, shift := c, int32(c), 0
		if c == 2 {
			src, part, shift = 0, 0, n*200 // the replay, appended again
		}
		at := t0.Add(time.Duration(c) * time.Second)
		for i := range n {
			conn.Request(at.Add(time.Duration(i)*time.Millisecond), int32(i+1), &id, dt.ProduceRaw(topic, part, batch(src, i)))
		}
		for i := range n {
			conn.Response(at.Add(time.Duration(n+i)*time.Millisecond), int32(i+1), dt.ProducedAt(topic, part, 0, int64(shift+i*200)))
		}
	}
	big := netip.AddrPortFrom(netip.MustParseAddr("10.9.0.11"), 40100)
	conn := w.Conn(big, broker, t0.Add(5*time.Second), gen.ConnOptions{})
	var recs [][]byte
	for i := range 40 {
		recs = append(recs, batch(7, i))
	}
	conn.Request(t0.Add(5*time.Second), 1, &id, dt.ProduceRaw(topic, 9, recs...))
	conn.Response(t0.Add(6*time.Second), 1, dt.ProducedAt(topic, 9, 0, 0))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() < 16<<20 {
		t.Fatalf("capture of %d bytes: too small to span many rounds", buf.Len())
	}
	path := filepath.Join(t.TempDir(), "views.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rep1, fr1 := shardOutputs(t, path, 1)
	if !bytes.Contains(rep1, []byte(`"requests": 901`)) || !bytes.Contains(rep1, []byte("duplicate-batches")) || bytes.Contains(rep1, []byte(`"decode_errors": 1`)) {
		t.Fatalf("one worker's report does not show the 901 requests decoded and the replay found:\n%s", trunc(rep1))
	}
	for _, workers := range []int{2, 3} {
		rep, fr := shardOutputs(t, path, workers)
		if !bytes.Equal(rep, rep1) {
			t.Errorf("report with %d workers differs from one worker's:\n%s", workers, firstDiff(rep1, rep))
		}
		if !bytes.Equal(fr, fr1) {
			t.Errorf("--frames with %d workers differs from one worker's:\n%s", workers, firstDiff(fr1, fr))
		}
	}
}
