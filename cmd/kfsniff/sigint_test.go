package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// After SIGINT kfsniff must print its report and exit within a second on
// an idle machine (ROBUSTNESS.md). Wall time stretches with the machine's
// load, so the tests bound what load does not stretch: the CPU time the
// process spends after the signal (stopCPU; before the fix, api-pairs
// spent 20 s of it building a report), and only loosely the wall time
// (stopWall), which catches a run that waits instead of working: waiting
// on an open pipe or on a sink costs no CPU, and without the fix it lasts
// until the pipe closes (never, here) or the 60 s flush timeout.
const (
	stopCPU  = time.Second
	stopWall = 10 * time.Second
)

// firstError passes writes to w and keeps the first error w returned.
type firstError struct {
	w   io.Writer
	err error
}

func (f *firstError) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil && f.err == nil {
		f.err = err
	}
	return n, err
}

// cpuTime is the CPU time (user and system) the running process pid has
// spent so far, from /proc/PID/stat, in clock ticks of 10 ms.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields from the state on follow its last ')'; utime and stime are
	// fields 14 and 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/stat: %q", pid, b)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// cpuAfter is the CPU time a process that has exited spent after it had
// spent before.
func cpuAfter(cmd *exec.Cmd, before time.Duration) time.Duration {
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime() - before
}

// TestSIGINTStops runs the kfsniff binary on large hostile inputs, fed
// through its standard input as they are built and the pipe left open,
// interrupts it with SIGINT while it is busy or waiting for more input,
// and checks that it stops soon with exit 0, the interruption said on
// stderr and the report of what it analysed on stdout. Before, api-pairs
// took 20 s to stop (building a report of 300,000 API rows), and a run
// waiting on a pipe did not stop until the pipe closed.
func TestSIGINTStops(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and large inputs: skipped with -short")
	}
	bin := buildKfsniff(t)
	for _, tc := range []struct {
		input string
		args  []string
	}{
		{"notleader-topics.pcap", nil},
		{"api-pairs.pcap", []string{"--json"}},
	} {
		t.Run(tc.input, func(t *testing.T) {
			h, ok := gen.FindHostile(tc.input)
			if !ok {
				t.Fatalf("no hostile input %s", tc.input)
			}
			cmd := exec.Command(bin, append([]string{"-r", "-", "--no-tui"}, tc.args...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The input is written, and standard input left open: by the
			// time of the signal kfsniff is either still busy with it or
			// waiting on the pipe for more, and must stop either way.
			built := make(chan error, 1)
			pipe := &firstError{w: in}
			go func() {
				w := bufio.NewWriterSize(pipe, 1<<20)
				err := h.Build(w)
				if err == nil {
					err = w.Flush()
				}
				built <- err
			}()
			defer in.Close()
			time.Sleep(1500 * time.Millisecond)
			spent := cpuTime(t, cmd.Process.Pid)
			sent := time.Now()
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			took := time.Since(sent)
			in.Close()
			// kfsniff gone, the pipe refuses the rest of the input: that
			// error is the pipe's own (gopacket's pcap writer keeps only
			// its text), anything else is the builder's.
			if err := <-built; err != nil && !errors.Is(pipe.err, syscall.EPIPE) && !errors.Is(pipe.err, os.ErrClosed) {
				t.Fatalf("building the input: %v", err)
			}
			if err != nil {
				t.Fatalf("exit: %v; stderr:\n%s", err, stderr.String())
			}
			cpu := cpuAfter(cmd, spent)
			t.Logf("stopped %v after SIGINT, %v of CPU; %d bytes of report", took.Round(time.Millisecond), cpu, stdout.Len())
			if cpu > stopCPU {
				t.Errorf("spent %v of CPU after SIGINT, more than %v", cpu, stopCPU)
			}
			if took > stopWall {
				t.Errorf("took %v to stop after SIGINT, more than %v", took, stopWall)
			}
			if !strings.Contains(stderr.String(), "interrupted; reporting what was read") {
				t.Errorf("stderr does not say it was interrupted (was it still busy?):\n%s", stderr.String())
			}
			if len(tc.args) > 0 {
				var r struct {
					Totals struct{ Requests int64 }
				}
				if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || r.Totals.Requests == 0 {
					t.Errorf("JSON report: %v, %d requests; want the requests analysed", err, r.Totals.Requests)
				}
			} else if !strings.HasPrefix(stdout.String(), "kfsniff report") || !strings.Contains(stdout.String(), "Fetch") {
				t.Errorf("no report of what was analysed:\n%.500s", stdout.String())
			}
		})
	}
}

// TestSIGINTStopsExportWait: at the end of a run whose --export sink
// takes nothing, kfsniff waits up to --export-flush-timeout for it, and says
// so; Ctrl-C then stops the wait at once (main's signal context had
// swallowed it: the wait ran its whole timeout), the records not taken
// are counted failed and the report says why.
func TestSIGINTStopsExportWait(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary: skipped with -short")
	}
	bin := buildKfsniff(t)
	addr := deafSink(t)
	cmd := exec.Command(bin, "-r", fixture("scenarios/mm2-replay.pcap"), "--no-tui",
		"--export", "kafka://"+addr+"/ship", "--export-flush-timeout", "60s")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(errPipe)
	var waiting bool
	for sc.Scan() {
		if strings.Contains(sc.Text(), "waiting up to") && strings.Contains(sc.Text(), "Ctrl-C to stop waiting") {
			waiting = true
			break
		}
	}
	if !waiting {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("no word of the wait for the sink on stderr")
	}
	spent := cpuTime(t, cmd.Process.Pid)
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	go io.Copy(io.Discard, errPipe)
	err = cmd.Wait()
	took := time.Since(sent)
	if err != nil {
		t.Errorf("exit: %v; want 0", err)
	}
	if took > stopWall {
		t.Errorf("stopped %s after SIGINT; want within %s (the flush timeout was 60 s)", took.Round(time.Millisecond), stopWall)
	}
	if cpu := cpuAfter(cmd, spent); cpu > stopCPU {
		t.Errorf("spent %v of CPU after SIGINT, more than %v", cpu, stopCPU)
	}
	if !strings.Contains(stdout.String(), "last error: flush cut short by Ctrl-C") {
		t.Errorf("the report's export line does not say the wait was cut short:\n%s", stdout.String())
	}
}

// buildKfsniff builds the binary into a temporary directory, for the tests
// that signal a process of its own.
func buildKfsniff(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kfsniff")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
