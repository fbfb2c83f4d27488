package flows_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/flows"
)

// exchangeCounter counts the exchanges delivered and the responses with a
// body, as a handler that reads every exchange would see them.
type exchangeCounter struct{ exchanges, bodies int }

func (h *exchangeCounter) OnExchange(x *flows.Exchange) {
	h.exchanges++
	if x.Resp != nil && x.Resp.Resp != nil {
		h.bodies++
	}
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

// BenchmarkStorm runs flows over real clients' retry storms recorded
// against kfake (fixtures/pcaps/clients): kgo retrying a refused Produce
// without backoff (1,200 Produce answered NOT_LEADER_OR_FOLLOWER, each
// answer the same bytes), kgo refreshing Metadata before every retry, and
// kafkajs. It reports allocations (less those of an analyzer that sees
// no traffic), bytes and time per exchange; KFSNIFF_STORM
// names a larger capture to add (e.g. bench/cmd/realgen's storm.pcap).
func BenchmarkStorm(b *testing.B) {
	caps := []string{"notleader-kgo-nobackoff", "metadata-storm-kgo", "notleader-kafkajs"}
	paths := map[string]string{}
	for _, c := range caps {
		paths[c] = filepath.Join("..", "fixtures", "pcaps", "clients", c+".pcap")
	}
	if p := os.Getenv("KFSNIFF_STORM"); p != "" {
		caps = append(caps, "env")
		paths["env"] = p
	}
	for _, name := range caps {
		b.Run(name, func(b *testing.B) {
			pkts := loadPackets(b, paths[name])
			var size int64
			for i := range pkts {
				size += int64(len(pkts[i].Data))
			}
			b.SetBytes(size)
			b.ReportAllocs()
			var h exchangeCounter
			// What an analyzer costs with no traffic is not the
			// exchanges' cost: measured apart and taken off.
			var empty exchangeCounter
			setup := testing.AllocsPerRun(5, func() { flows.New(flows.DefaultConfig(), &empty).Close() })
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				h = exchangeCounter{}
				a := flows.New(flows.DefaultConfig(), &h)
				for i := range pkts {
					a.Packet(&pkts[i])
				}
				a.Close()
			}
			runtime.ReadMemStats(&after)
			if h.exchanges == 0 || h.bodies == 0 {
				b.Fatalf("%d exchanges, %d with a decoded response", h.exchanges, h.bodies)
			}
			n := float64(b.N) * float64(h.exchanges)
			b.ReportMetric((float64(after.Mallocs-before.Mallocs)-setup*float64(b.N))/n, "allocs/exchange")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/exchange")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/exchange")
		})
	}
}
