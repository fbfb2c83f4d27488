package pipeline

import (
	"context"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/bench/workload"
	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
)

// TestGarbagePerGB pins what a long analysis allocates per GB once its
// buffers, pools and tables are made (issue 29, item 3: peak RSS flat from
// 1 GB to 16 GB). A run that ends after one collection, as kfsniff's do on
// bench's large shape, peaks at its live heap plus the garbage made since:
// every MB a GB left is 15 MB more heap at 16 GB than at 1. The test
// analyses bench/growth.sh's large shape (64 KB segments, Produce of four
// partitions, Fetch of two) at two sizes, on one worker and two, with
// every rule, with every allocation profiled, and divides the difference
// by the difference in bytes, by who allocated:
//   - kfsniff's own code (and the runtime and libraries on its behalf):
//     at most maxOwnPerGB. It was 0.46 MB a GB on two workers: a request
//     of more than two batches had its room allocated anew (flows'
//     reqBox), and the list of blocks a round retired was a new slice
//     every round (blockPool).
//   - kmsg's decoding, logged: kmsg decodes into a body given back (its
//     top level's room is kept) but clears the elements, so the arrays
//     inside (a Produce's or Fetch's partitions) are allocated again for
//     every body; kmsg stays the one source of layouts, so those remain.
//
// The generator, running beside it, is left out by its frames.
func TestGarbagePerGB(t *testing.T) {
	if testing.Short() {
		t.Skip("analyses 1 GB of generated capture")
	}
	const (
		size, warm = 500e6, 100e6 // bytes of capture, and those before the count begins
		// maxOwnPerGB is 1 MB over 16 GB: a few percent of the peak RSS.
		maxOwnPerGB = 64 << 10
	)
	rate := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = rate }()
	for _, workers := range []int{1, 2} {
		a, gb := garbageOf(t, size, warm, workers)
		t.Logf("%d workers, a GB past the first %d bytes: kfsniff %.0f bytes, kmsg %.0f, the rules' tables growing %.0f",
			workers, int64(warm), a.own/gb, a.kmsg/gb, a.tables/gb)
		if a.own/gb > maxOwnPerGB {
			t.Errorf("%d workers: kfsniff's own code allocated %.0f bytes a GB of capture past the first %d bytes, want at most %d", workers, a.own/gb, int64(warm), maxOwnPerGB)
		}
	}
}

// allocated are bytes allocated by whom (whose).
type allocated struct{ own, kmsg, tables float64 }

// garbageOf analyses size bytes of the large shape on workers with every
// rule and returns the bytes allocated from the reader's byte warm to the
// end of the capture (the report is left out), and how many GB that is.
func garbageOf(t *testing.T, size, warm int64, workers int) (allocated, float64) {
	t.Helper()
	set, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := workload.Large(size).Write(pw)
		pw.CloseWithError(err)
	}()
	r := &snapReader{r: pr, at: warm}
	f, err := capture.NewFile("-", 0, r)
	if err != nil {
		t.Fatal(err)
	}
	res := Run(context.Background(), []*capture.File{f}, Options{Flows: flows.DefaultConfig(), Detectors: set, Workers: workers})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Stop != StopEnd || !r.ended {
		t.Fatalf("stopped %v after %d bytes", res.Stop, r.n)
	}
	a := allocated{r.end.own - r.start.own, r.end.kmsg - r.start.kmsg, r.end.tables - r.start.tables}
	return a, float64(r.endN-r.startN) / 1e9
}

// snapReader reads r and takes allocatedBy once at bytes have been read
// and again at the end.
type snapReader struct {
	r              io.Reader
	n, at          int64
	started, ended bool
	startN, endN   int64
	start, end     allocated
}

func (s *snapReader) Read(p []byte) (int, error) {
	k, err := s.r.Read(p)
	s.n += int64(k)
	if !s.started && s.n >= s.at {
		s.started, s.startN, s.start = true, s.n, allocatedBy()
	}
	if err != nil && s.started && !s.ended {
		s.ended, s.endN, s.end = true, s.n, allocatedBy()
	}
	return k, err
}

// allocatedBy returns the bytes allocated so far (as the memory profile
// has them after a collection) on the analysis's behalf, by whom.
func allocatedBy() allocated {
	runtime.GC() // publishes the allocations made before it
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			recs = recs[:n]
			break
		}
	}
	var a allocated
	for i := range recs {
		r := &recs[i]
		switch whose(r.Stack()) {
		case "kfsniff":
			a.own += float64(r.AllocBytes)
		case "kmsg":
			a.kmsg += float64(r.AllocBytes)
		case "tables":
			a.tables += float64(r.AllocBytes)
		}
	}
	return a
}

// whose names who made an allocation of stack, by its innermost frame of
// this module: "" for the generator's and the test's counting; "kmsg" if
// kmsg's code is inside it; "tables" for the rules' bounded tables
// growing toward their bounds (table.Fifo: in the heap only up to 64 KiB,
// then mapped out of it; they fill with the batches seen, by design);
// else "kfsniff". "" if no frame of the module is on the stack (the
// runtime's own work).
func whose(stack []uintptr) string {
	frames := runtime.CallersFrames(stack)
	kmsg := false
	for {
		f, more := frames.Next()
		switch fn := f.Function; {
		case strings.Contains(fn, "franz-go/pkg/kmsg"):
			kmsg = true
		case strings.Contains(fn, "kfsniff/bench/workload") || strings.Contains(fn, "kfsniff/fixtures/gen") ||
			strings.Contains(fn, "pipeline.allocatedBy") || strings.Contains(fn, "pipeline.whose") || strings.Contains(fn, "pipeline.(*snapReader)"):
			return ""
		case strings.Contains(fn, "detectors/internal/table.makeSlice"):
			return "tables"
		case strings.Contains(fn, "github.com/kfsniff/kfsniff/"):
			if kmsg {
				return "kmsg"
			}
			return "kfsniff"
		}
		if !more {
			return ""
		}
	}
}
