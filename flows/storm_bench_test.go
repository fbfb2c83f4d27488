package flows_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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
	return loadFirstPackets(tb, path, -1)
}

// loadFirstPackets is loadPackets of the first n packets (all if n < 0).
func loadFirstPackets(tb testing.TB, path string, n int) []capture.Packet {
	tb.Helper()
	f, err := capture.Open(path, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var pkts []capture.Packet
	var p capture.Packet
	for len(pkts) != n && f.Next(&p) == nil {
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
	benchExchanges(b, caps, paths, -1)
}

// BenchmarkBulk is BenchmarkStorm on the bulk path, Produce requests and
// Fetch responses carrying records: real clients recorded against kfake
// (fixtures/pcaps/clients: kgo producing and consuming what MirrorMaker 2
// replays). KFSNIFF_BULK names a larger capture to add, of which the
// first KFSNIFF_BULK_PACKETS packets (default 40,000) are read (e.g.
// bench/cmd/realgen's bulk.pcap: about 190 MB).
func BenchmarkBulk(b *testing.B) {
	caps := []string{"mm2-replay-kgo", "mm2-replay-sarama"}
	paths := map[string]string{}
	for _, c := range caps {
		paths[c] = filepath.Join("..", "fixtures", "pcaps", "clients", c+".pcap")
	}
	n := -1
	if p := os.Getenv("KFSNIFF_BULK"); p != "" {
		caps = append(caps, "env")
		paths["env"] = p
		n = 40000
		if v, err := strconv.Atoi(os.Getenv("KFSNIFF_BULK_PACKETS")); err == nil {
			n = v
		}
	}
	benchExchanges(b, caps, paths, n)
}

// BenchmarkSmall is BenchmarkStorm on the generated small shape's mix
// (bench/workload: many clients, short-lived admin clients each asking
// for the Metadata of 400 partitions, and the same answers again after
// NOT_LEADER_OR_FOLLOWER): the first KFSNIFF_SMALL_PACKETS packets
// (default 200,000) of the capture KFSNIFF_SMALL names; skipped without.
func BenchmarkSmall(b *testing.B) {
	p := os.Getenv("KFSNIFF_SMALL")
	if p == "" {
		b.Skip("KFSNIFF_SMALL names no capture of the small shape")
	}
	n := 200000
	if v, err := strconv.Atoi(os.Getenv("KFSNIFF_SMALL_PACKETS")); err == nil {
		n = v
	}
	benchExchanges(b, []string{"env"}, map[string]string{"env": p}, n)
}

// benchExchanges runs flows over each capture (its first n packets for
// "env", all if n < 0) and reports allocations, bytes and time per
// exchange.
func benchExchanges(b *testing.B, caps []string, paths map[string]string, n int) {
	for _, name := range caps {
		b.Run(name, func(b *testing.B) {
			limit := -1
			if name == "env" {
				limit = n
			}
			pkts := loadFirstPackets(b, paths[name], limit)
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
