// Package fuzzing holds what kfsniff's fuzz targets share: a per-input
// watchdog with a true count of inputs run, and the committed captures as
// seeds. Test code only.
package fuzzing

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Deadline is how long one fuzz input may run.
const Deadline = 10 * time.Second

// Input is called at the start of every fuzz input and returns what to
// defer. It arms a watchdog that ends the process, printing every
// goroutine and the input, if the input runs longer than Deadline: Go's
// fuzzer has no per-input timeout, and a hang must show up as a failure
// with its input rather than stall the run. With $KFSNIFF_FUZZ_COUNTS set
// to a directory, it also writes the number of inputs this process has run
// to DIR/TARGET.PID every second, because the count the fuzzer prints lags
// far behind (ROBUSTNESS.md quotes these counts).
func Input(target string, in ...any) func() {
	tm := time.AfterFunc(Deadline, func() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		fmt.Fprintf(os.Stderr, "%s: input still running after %v: %q\n%s", target, Deadline, in, buf)
		os.Exit(3)
	})
	execs.count(target)
	return func() { tm.Stop() }
}

// execs counts the inputs a fuzz worker ran (see Input).
var execs execCounter

type execCounter struct {
	n     atomic.Int64
	once  sync.Once
	dir   string
	name  string
	timer *time.Timer
}

func (c *execCounter) count(target string) {
	c.once.Do(func() {
		c.dir = os.Getenv("KFSNIFF_FUZZ_COUNTS")
		c.name = filepath.Join(c.dir, fmt.Sprintf("%s.%d", target, os.Getpid()))
		if c.dir != "" {
			c.timer = time.AfterFunc(time.Second, c.flush)
		}
	})
	c.n.Add(1)
}

func (c *execCounter) flush() {
	os.WriteFile(c.name, []byte(fmt.Sprintln(c.n.Load())), 0o644)
	c.timer.Reset(time.Second)
}

// FixtureSeeds returns the committed captures under root (the repository's
// fixtures/pcaps) no larger than limit, the hostile ones included.
func FixtureSeeds(tb testing.TB, root string, limit int64) [][]byte {
	var out [][]byte
	for _, pattern := range []string{"*.pcap", "*.pcapng", "*.gz", "hostile/*"} {
		names, _ := filepath.Glob(filepath.Join(root, pattern))
		for _, name := range names {
			st, err := os.Stat(name)
			if err != nil || st.IsDir() || st.Size() > limit || strings.HasSuffix(name, ".md") {
				continue
			}
			b, err := os.ReadFile(name)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, b)
		}
	}
	if len(out) < 10 {
		tb.Fatalf("only %d fixture captures found under %s", len(out), root)
	}
	return out
}
