//go:build kfsniff_pprof

package main

// Built only with -tags kfsniff_pprof (bench/growth.sh with MEMLOG=1):
// every 500 ms, writes the runtime's memory classes (runtime/metrics
// /memory/classes/...), the GC count, the bytes and objects allocated
// so far (heap/allocs: their rate once the run is under way is its
// garbage a GB) and the process's RSS to the file
// named by $KFSNIFF_MEMLOG, one line a sample (with RssAnon and
// AnonHugePages), to show where the memory of a run goes over its life.

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"time"
)

func init() {
	path := os.Getenv("KFSNIFF_MEMLOG")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfsniff: memlog:", err)
		return
	}
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, "/memory/classes/") || d.Name == "/gc/cycles/total:gc-cycles" || d.Name == "/gc/heap/goal:bytes" ||
			d.Name == "/gc/heap/allocs:bytes" || d.Name == "/gc/heap/allocs:objects" {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	// $KFSNIFF_ALLOCS: the allocation profile, sampled every 4 KiB,
	// rewritten with every sample.
	allocs := os.Getenv("KFSNIFF_ALLOCS")
	if allocs != "" {
		runtime.MemProfileRate = 4096
	}
	start := time.Now()
	go func() {
		for {
			metrics.Read(samples)
			var b strings.Builder
			fmt.Fprintf(&b, "t=%.1f", time.Since(start).Seconds())
			for _, s := range samples {
				name := strings.TrimPrefix(strings.TrimPrefix(s.Name, "/memory/classes/"), "/gc/")
				name = name[:strings.IndexByte(name, ':')]
				if strings.HasSuffix(s.Name, ":objects") {
					name += "-objects"
				}
				v := s.Value.Uint64()
				if strings.HasSuffix(s.Name, ":bytes") {
					fmt.Fprintf(&b, " %s=%.1f", name, float64(v)/(1<<20))
				} else {
					fmt.Fprintf(&b, " %s=%d", name, v)
				}
			}
			if st, err := os.ReadFile("/proc/self/status"); err == nil {
				for _, l := range strings.Split(string(st), "\n") {
					if strings.HasPrefix(l, "VmRSS:") || strings.HasPrefix(l, "RssAnon:") {
						fmt.Fprintf(&b, " %s", strings.Join(strings.Fields(l), ""))
					}
				}
			}
			if sm, err := os.ReadFile("/proc/self/smaps_rollup"); err == nil {
				for _, l := range strings.Split(string(sm), "\n") {
					if strings.HasPrefix(l, "AnonHugePages:") {
						fmt.Fprintf(&b, " %s", strings.Join(strings.Fields(l), ""))
					}
				}
			}
			fmt.Fprintln(f, b.String())
			if allocs != "" {
				if p, err := os.Create(allocs); err == nil {
					pprof.Lookup("allocs").WriteTo(p, 0)
					p.Close()
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
}
