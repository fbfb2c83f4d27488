package packet

import (
	"os"
	"testing"
)

// BenchmarkSharderRoute is the reading goroutine's sharding of every
// packet of a capture (KFSNIFF_ROUTE, else the recorded kgo group) over
// two shards: ns per packet.
func BenchmarkSharderRoute(b *testing.B) {
	path := os.Getenv("KFSNIFF_ROUTE")
	if path == "" {
		path = "../fixtures/pcaps/recorded-kgo-kfake-group.pcap"
	}
	pkts := loadPackets(b, path)
	var sum int
	emit := func(shard int, w *Work) { sum += shard }
	b.ResetTimer()
	for range b.N {
		s := NewSharder(2, defaultBounds())
		for i := range pkts {
			s.Route(&pkts[i], emit)
		}
		s.End(emit)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pkts)), "ns/packet")
}
