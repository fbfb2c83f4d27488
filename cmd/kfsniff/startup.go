package main

import (
	"os"
	"runtime/debug"
	"time"
)

// Start-up: a small capture is analysed in a few tens of milliseconds, so
// fixed costs count (BENCHMARKS.md, issue 14). One of them was the garbage
// collector: the heap passes Go's first goal (4 MB) within the first
// milliseconds (gopacket's reassembly pages, the capture's read buffer,
// the detectors' first tables), and that first collection scanned 5 MB of
// globals (gopacket/layers' tables) for little garbage. So for the first
// gcWarmup of the run the heap may grow five times its live size instead
// of twice (GOGC 400: the first collection at 16 MB), and the usual
// setting applies after that, while a long analysis has hardly begun. A GOGC in the environment is
// left alone.
const gcWarmup = 100 * time.Millisecond

func warmGC() {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	prev := debug.SetGCPercent(400)
	time.AfterFunc(gcWarmup, func() { debug.SetGCPercent(prev) })
}
