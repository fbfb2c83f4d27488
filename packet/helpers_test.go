package packet

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

var (
	bt0     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bBroker = netip.MustParseAddrPort("10.0.0.2:9092")
)

func bClient(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), uint16(40000+i))
}

// defaultBounds are the bounds the pipeline gives a Sharder with flows'
// default configuration.
func defaultBounds() Bounds {
	return Bounds{IdleTimeout: 10 * time.Minute, ReorderWindow: 2 * time.Second}
}

// scriptFile is the capture script writes, open for reading.
func scriptFile(t *testing.T, script func(w *gen.Writer)) *capture.File {
	t.Helper()
	b, err := gen.Script(script)
	if err != nil {
		t.Fatal(err)
	}
	f, err := capture.NewFile("test", 0, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// loadPackets reads a capture into memory (copies), so that reading the
// file is not what a benchmark measures.
func loadPackets(tb testing.TB, path string) []capture.Packet {
	tb.Helper()
	f, err := capture.Open(path, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var pkts []capture.Packet
	var p capture.Packet
	for f.Next(&p) == nil {
		q := p
		q.Data = append([]byte(nil), p.Data...)
		pkts = append(pkts, q)
	}
	return pkts
}
