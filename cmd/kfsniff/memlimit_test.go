package main

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

// TestMemoryLimit: --memory-limit sets the Go runtime's soft memory limit
// for the run; a size that is not one is a one-line error, exit 2, and
// changes nothing.
func TestMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	debug.SetMemoryLimit(math.MaxInt64)
	if code, _, stderr := kfsniff(t, "--memory-limit", "300M", "-r", fixture("basic.pcap"), "--json"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Errorf("memory limit %d after --memory-limit 300M, want %d", got, 300<<20)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	code, _, stderr := kfsniff(t, "--memory-limit", "lots", "-r", fixture("basic.pcap"))
	if code != 2 || !strings.Contains(stderr, `--memory-limit "lots"`) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("--memory-limit lots: exit %d, stderr %q: want exit 2 and one line naming the flag", code, stderr)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("a refused --memory-limit changed the limit to %d", got)
	}
}
