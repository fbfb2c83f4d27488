package bench_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kfsniff/kfsniff/bench/floor"
	"github.com/kfsniff/kfsniff/bench/workload"
	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/metrics"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
)

// The captures are generated once per test binary, on first use by a
// benchmark, into KFSNIFF_BENCH_DIR (kept, and reused when already there)
// or else a temporary directory removed when the benchmarks end. PACKETS
// and SIZE_MB change the shapes' sizes, as for bench/e2e.sh.
var captures struct {
	mu   sync.Mutex
	dir  string
	temp bool
	path map[string]string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if captures.temp {
		os.RemoveAll(captures.dir)
	}
	os.Exit(code)
}

func envInt(b *testing.B, name string, def int64) int64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// capturePath returns the capture of the named shape, generating it if
// needed.
func capturePath(b *testing.B, name string) string {
	captures.mu.Lock()
	defer captures.mu.Unlock()
	if p, ok := captures.path[name]; ok {
		return p
	}
	if captures.dir == "" {
		if d := os.Getenv("KFSNIFF_BENCH_DIR"); d != "" {
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
			captures.dir = d
		} else {
			d, err := os.MkdirTemp("", "kfsniff-bench-")
			if err != nil {
				b.Fatal(err)
			}
			captures.dir, captures.temp = d, true
		}
		captures.path = map[string]string{}
	}
	s := workload.Small(int(envInt(b, "PACKETS", workload.DefaultPackets)))
	if name == "large" {
		s = workload.Large(envInt(b, "SIZE_MB", workload.DefaultBytes/1e6) * 1e6)
	}
	p := filepath.Join(captures.dir, name+".pcap")
	if _, err := os.Stat(p); err != nil || captures.temp {
		st, err := s.WriteFile(p)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("E2E generated %s: %s, %d bytes, %d packets, %d connections, %d exchanges\n", p, s, st.Bytes, st.Packets, st.Conns, st.Exchanges)
	} else {
		fmt.Printf("E2E reusing %s (KFSNIFF_BENCH_DIR)\n", p)
	}
	captures.path[name] = p
	return p
}

// flowsOnly runs flows alone over path on one goroutine: reading, TCP
// reassembly, framing, decoding and pairing, with no handler (no
// detector, no report), and returns its counters. It is what the full
// analysis builds on: the difference is the detectors' and the report's.
func flowsOnly(path string) (*flows.Stats, error) {
	f, err := capture.Open(path, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := flows.New(flows.DefaultConfig())
	var p capture.Packet
	for {
		err := f.Next(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		a.Packet(&p)
	}
	a.Close()
	return a.Stats(), nil
}

// analyse does what `kfsniff -r path --json --workers N` does: default
// flows settings, every detector at its defaults, the JSON report encoded
// (to io.Discard). workers 0 is the default (one per CPU).
func analyse(path string, workers int) (*report.Report, error) {
	return analyseWith(path, workers, false)
}

// analyseWith is analyse, with the Prometheus metrics handler beside the
// report's collector (and fed the progress counters) when withMetrics is
// set, as `--metrics-addr` adds it.
func analyseWith(path string, workers int, withMetrics bool) (*report.Report, error) {
	f, err := capture.Open(path, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dets, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		return nil, err
	}
	var warn error
	opt := pipeline.Options{
		Flows:     flows.DefaultConfig(),
		Detectors: dets,
		Warn:      func(err error) { warn = err },
		Workers:   workers,
	}
	if withMetrics {
		m := metrics.New(metrics.Config{})
		opt.Handlers = []flows.Handler{m}
		opt.Progress = func(p pipeline.Progress) { m.Capture(p.Packets, p.Bytes, p.Live) }
	}
	res := pipeline.Run(context.Background(), []*capture.File{f}, opt)
	if warn != nil {
		return nil, warn
	}
	return res.Report, report.WriteJSON(io.Discard, res.Report)
}

// check fails the benchmark unless the whole capture was analysed
// cleanly: a benchmark over traffic that is not decoded measures nothing.
func check(b *testing.B, r *report.Report, packets int64) {
	t := r.Totals
	if r.Capture.Packets != packets || t.Requests == 0 || t.Requests != t.Responses ||
		t.DecodeErrors != 0 || t.FramingErrors != 0 || t.Gaps != 0 || t.UnmatchedResponses != 0 {
		b.Fatalf("analysis of the generated capture is not clean: %d of %d packets, totals %+v", r.Capture.Packets, packets, t)
	}
}

// load returns the load average, for the reader to judge the figures by: on a
// busy machine they are not comparable with a quiet run's.
func load() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return "; load average " + strings.Join(f[:3], " ")
}

// rate adds up what the runs of one sub-benchmark read and how long they
// took, over every run of this process (b.N ramp-up and -count repeats), so
// that the ratio printed is not one run's noise.
type rate struct{ bytes, packets, secs float64 }

func (r *rate) add(b *testing.B, size, packets int64) {
	r.bytes += float64(size) * float64(b.N)
	r.packets += float64(packets) * float64(b.N)
	r.secs += b.Elapsed().Seconds()
}

func (r *rate) mbs() float64 { return r.bytes / r.secs / 1e6 }
func (r *rate) pps() float64 { return r.packets / r.secs }

// BenchmarkE2E runs, per shape, the floor and then the full analysis on the
// same file. Besides MB/s (from SetBytes) and allocations it reports
// packets/s, allocations and bytes allocated per packet, and kfsniff's
// throughput as a fraction of the floor's (floor-ratio: 1 would be as fast
// as only reading the packets), then prints a summary line per shape.
func BenchmarkE2E(b *testing.B) {
	for _, shape := range []string{"small", "large"} {
		b.Run(shape, func(b *testing.B) {
			path := capturePath(b, shape)
			st, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			size := st.Size()
			base, err := floor.Read(path) // warms the page cache, counts packets
			if err != nil {
				b.Fatal(err)
			}
			packets := base.Packets
			var fl, kf rate
			var last *report.Report

			b.Run("floor", func(b *testing.B) {
				b.SetBytes(size)
				b.ReportAllocs()
				for b.Loop() {
					r, err := floor.Read(path)
					if err != nil {
						b.Fatal(err)
					}
					if r != base {
						b.Fatalf("floor read %+v, then %+v", base, r)
					}
				}
				b.ReportMetric(float64(packets)*float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
				fl.add(b, size, packets)
			})

			// flows-1: flows alone, on one goroutine.
			b.Run("flows-1", func(b *testing.B) {
				b.SetBytes(size)
				b.ReportAllocs()
				for b.Loop() {
					st, err := flowsOnly(path)
					if err != nil {
						b.Fatal(err)
					}
					if st.Packets != packets {
						b.Fatalf("flows read %d packets, the floor %d", st.Packets, packets)
					}
				}
				secs := b.Elapsed().Seconds()
				b.ReportMetric(float64(packets)*float64(b.N)/secs, "pkts/s")
				if fl.secs > 0 {
					b.ReportMetric(float64(size)*float64(b.N)/secs/1e6/fl.mbs(), "floor-ratio")
				}
			})

			// kfsniff-1: one worker; kfsniff: the default, one per CPU;
			// kfsniff-1-metrics: one worker and the metrics handler
			// (--metrics-addr), to compare with kfsniff-1.
			var one, withMetrics rate
			for _, v := range []struct {
				name    string
				workers int
				r       *rate
				metrics bool
			}{{"kfsniff-1", 1, &one, false}, {"kfsniff-1-metrics", 1, &withMetrics, true}, {"kfsniff", 0, &kf, false}} {
				b.Run(v.name, func(b *testing.B) {
					b.SetBytes(size)
					b.ReportAllocs()
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					for b.Loop() {
						r, err := analyseWith(path, v.workers, v.metrics)
						if err != nil {
							b.Fatal(err)
						}
						check(b, r, packets)
						last = r
					}
					runtime.ReadMemStats(&after)
					secs := b.Elapsed().Seconds()
					b.ReportMetric(float64(packets)*float64(b.N)/secs, "pkts/s")
					n := float64(b.N) * float64(packets)
					b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/pkt")
					b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/pkt")
					if fl.secs > 0 {
						b.ReportMetric(float64(size)*float64(b.N)/secs/1e6/fl.mbs(), "floor-ratio")
					}
					v.r.add(b, size, packets)
				})
			}

			// Printed, not logged: the testing package shows a parent
			// benchmark's log only with -v.
			if fl.secs > 0 && kf.secs > 0 && last != nil {
				fmt.Printf("E2E %s: %d bytes, %d packets, %d exchanges, %d findings; over all runs: kfsniff (%d workers) %.1f MB/s %.0f pkts/s, floor %.1f MB/s %.0f pkts/s: kfsniff at %.3f of the floor (%.1fx slower)%s\n",
					shape, size, packets, last.Totals.Requests, len(last.Findings), min(runtime.GOMAXPROCS(0), 8), kf.mbs(), kf.pps(), fl.mbs(), fl.pps(), kf.mbs()/fl.mbs(), fl.mbs()/kf.mbs(), load())
				if one.secs > 0 {
					fmt.Printf("E2E %s one worker: %.1f MB/s %.0f pkts/s, %.3f of the floor; the default is %.2fx one worker\n",
						shape, one.mbs(), one.pps(), one.mbs()/fl.mbs(), kf.mbs()/one.mbs())
					if withMetrics.secs > 0 {
						fmt.Printf("E2E %s one worker with metrics: %.1f MB/s %.0f pkts/s, %.3f of one worker without%s\n",
							shape, withMetrics.mbs(), withMetrics.pps(), withMetrics.mbs()/one.mbs(), load())
					}
				}
			}
		})
	}
}

// BenchmarkWriteJSON times `--json` alone: encoding and indenting the
// report of the small capture (several MB), analysed once before.
func BenchmarkWriteJSON(b *testing.B) {
	r, err := analyse(capturePath(b, "small"), 1)
	if err != nil {
		b.Fatal(err)
	}
	var n countWriter
	if err := report.WriteJSON(&n, r); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		if err := report.WriteJSON(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
