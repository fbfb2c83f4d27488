package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kfsniff/kfsniff/capture"
)

// uiRun is the kfsniff binary running its terminal UI on a pseudo-terminal
// as its controlling terminal (tcell opens /dev/tty), stdout and stderr
// kept apart.
type uiRun struct {
	cmd            *exec.Cmd
	ctl            *os.File
	mu             sync.Mutex
	screen         bytes.Buffer
	stdout, stderr bytes.Buffer
	exited         chan error
}

func startUIRun(t *testing.T, bin, dir, tmp string, args ...string) *uiRun {
	t.Helper()
	ctl, term := openPty(t)
	if err := unix.IoctlSetWinsize(int(term.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 48, Col: 160}); err != nil {
		t.Fatal(err)
	}
	r := &uiRun{ctl: ctl, exited: make(chan error, 1)}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Dir = dir
	r.cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "TERM=xterm-256color")
	r.cmd.Stdin = term
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	term.Close()
	go func() {
		b := make([]byte, 1<<16)
		for {
			n, err := ctl.Read(b)
			r.mu.Lock()
			r.screen.Write(b[:n])
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { r.exited <- r.cmd.Wait() }()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		ctl.Close()
	})
	return r
}

func (r *uiRun) terminal() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.screen.String()
}

// waitScreen waits until the terminal has received s (escape sequences and
// spaces removed: tcell moves the cursor over cells that did not change).
func (r *uiRun) waitScreen(t *testing.T, s string, within time.Duration) {
	t.Helper()
	want := strings.ReplaceAll(s, " ", "")
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(flatScreen(r.terminal()), want) {
			return
		}
	}
	t.Fatalf("the UI never showed %q", s)
}

var csi = regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|[()][0-9A-Za-z]|[=>])`)

func flatScreen(s string) string {
	return strings.ReplaceAll(csi.ReplaceAllString(s, ""), " ", "")
}

// wait waits for the run to exit and returns its exit code.
func (r *uiRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-r.exited:
		if err == nil {
			return 0
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatalf("kfsniff did not exit; stderr:\n%s", r.stderr.String())
	}
	return -1
}

// dirSize is the bytes of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// TestUISpoolBoundedLive captures on lo with the UI on a pseudo-terminal
// and --ui-keep 1 while 8 MB cross a TCP connection: the UI's spool in
// $TMPDIR never holds more than 1 MiB (sampled while it runs), the UI says
// older packets were dropped, `w` saves the most recent packets (read back
// by kfsniff -r: the count and span its comment states, the connection's
// SYN gone, its last packets in), and Ctrl-C (SIGINT) ends the run as `q`
// does: the terminal restored, the report printed, exit 0, the dropped
// packets said on stderr. Before, the spool grew with every packet and
// SIGINT ended the run with "context canceled" and no report.
func TestUISpoolBoundedLive(t *testing.T) {
	needLive(t)
	if testing.Short() {
		t.Skip("builds the binary: skipped with -short")
	}
	bin := buildKfsniff(t)
	dir, tmp := t.TempDir(), t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	r := startUIRun(t, bin, dir, tmp, "-i", "lo", "--tui", "--ui-keep", "1", "port", port)
	r.waitScreen(t, "packets", 10*time.Second)
	time.Sleep(500 * time.Millisecond) // the capture is open before the UI draws

	// Sample the spool's size while the traffic runs.
	stopSampling := make(chan struct{})
	maxSize := make(chan int64)
	go func() {
		var m int64
		for {
			select {
			case <-stopSampling:
				maxSize <- max(m, dirSize(tmp))
				return
			default:
			}
			m = max(m, dirSize(tmp))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("kfsniff-ui-keep "), 4096) // 64 KiB
	for i := 0; i < 128; i++ {                              // 8 MiB
		if _, err := c.Write(chunk); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.Close()
	lastSent := time.Now()
	r.waitScreen(t, "older packets dropped", 10*time.Second)
	time.Sleep(500 * time.Millisecond) // the FIN and its ACKs
	close(stopSampling)
	m := <-maxSize
	t.Logf("the spool held at most %d bytes", m)
	// A sample reads the files one after the other while the spool's
	// goroutine writes (an old segment's size read before its removal,
	// the new one's after the writes that followed): it may count up to
	// one queued write (64 KiB) that never was on disk beside the other.
	if m > 1<<20+spoolWrite {
		t.Errorf("the spool held %d bytes, more than --ui-keep 1 (%d)", m, 1<<20)
	} else if m < 1<<19 {
		t.Errorf("the spool held at most %d bytes: the sampling or the traffic did not happen", m)
	}

	r.ctl.Write([]byte("w"))
	time.Sleep(300 * time.Millisecond)
	r.ctl.Write([]byte("\r"))
	r.waitScreen(t, "older packets dropped (--ui-keep 1 MB)", 10*time.Second)
	saved, _ := filepath.Glob(filepath.Join(dir, "kfsniff-*.pcapng"))
	if len(saved) != 1 {
		t.Fatalf("w saved %v", saved)
	}

	r.cmd.Process.Signal(syscall.SIGINT)
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGINT; stderr:\n%s", code, r.stderr.String())
	}
	if strings.Contains(r.stderr.String(), "context canceled") {
		t.Errorf("stderr: %s", r.stderr.String())
	}
	if !strings.Contains(r.stderr.String(), "older packets were dropped from it") {
		t.Errorf("stderr does not say the spool dropped packets:\n%s", r.stderr.String())
	}
	if !strings.Contains(r.stdout.String(), "packets") {
		t.Errorf("no report after SIGINT; stdout:\n%s", r.stdout.String())
	}
	if !strings.Contains(r.terminal(), "\x1b[?1049l") {
		t.Errorf("the terminal's alternate screen was not left")
	}
	if left := dirSize(tmp); left != 0 {
		t.Errorf("the spool left %d bytes in $TMPDIR", left)
	}

	// The saved file: its packets, span and comment.
	raw, err := os.ReadFile(saved[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 1<<20+4096 {
		t.Errorf("saved %d bytes for --ui-keep 1", len(raw))
	}
	f, err := capture.Open(saved[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	var p capture.Packet
	var n int
	var first, last time.Time
	syn := false
	for f.Next(&p) == nil {
		if n == 0 {
			first = p.Time
		}
		last = p.Time
		n++
		// Ethernet (lo) + IPv4 20 + TCP flags at byte 13.
		if len(p.Data) > 14+20+14 && p.Data[14+20+13]&0x02 != 0 {
			syn = true
		}
	}
	f.Close()
	t.Logf("saved %d packets, %s to %s (%d bytes); stderr: %s", n, first, last, len(raw), r.stderr.String())
	if n < 10 {
		t.Fatalf("saved %d packets", n)
	}
	if syn {
		t.Errorf("the saved capture holds the connection's SYN: its oldest packets were not dropped")
	}
	if last.Before(lastSent.Add(-time.Second)) || first.After(last) {
		t.Errorf("saved span %s to %s; the traffic ended at %s", first, last, lastSent)
	}
	comment := commentOf(n, first, last)
	if !bytes.Contains(raw, []byte(comment)) || !bytes.Contains(raw, []byte("older packets were dropped and are not in this file")) {
		t.Errorf("the saved file's comment does not say %q and that older packets were dropped", comment)
	}
	out, err := exec.Command(bin, "-r", saved[0], "--json").Output()
	if err != nil {
		t.Fatalf("kfsniff -r %s: %v", saved[0], err)
	}
	var doc struct {
		Capture struct {
			Packets     int64
			First, Last time.Time
		}
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Capture.Packets != int64(n) || !doc.Capture.First.Equal(first) || !doc.Capture.Last.Equal(last) {
		t.Errorf("kfsniff -r read %d packets %s to %s; the file holds %d, %s to %s",
			doc.Capture.Packets, doc.Capture.First, doc.Capture.Last, n, first, last)
	}
}

func commentOf(n int, first, last time.Time) string {
	return strconv.Itoa(n) + " packets from " + first.UTC().Format("2006-01-02 15:04:05.000") + " to " + last.UTC().Format("15:04:05.000 UTC")
}

// TestUIStopsWithReport: SIGTERM, SIGINT and the Ctrl-C key under the UI
// end the run as `q` does: the terminal restored, the report printed,
// exit 0.
func TestUIStopsWithReport(t *testing.T) {
	needLive(t)
	if testing.Short() {
		t.Skip("builds the binary: skipped with -short")
	}
	bin := buildKfsniff(t)
	for _, tc := range []struct {
		name string
		stop func(r *uiRun)
	}{
		{"SIGTERM", func(r *uiRun) { r.cmd.Process.Signal(syscall.SIGTERM) }},
		{"SIGINT", func(r *uiRun) { r.cmd.Process.Signal(syscall.SIGINT) }},
		{"Ctrl-C key", func(r *uiRun) { r.ctl.Write([]byte{3}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startUIRun(t, bin, t.TempDir(), t.TempDir(), "-i", "lo", "--tui", "port", "1")
			r.waitScreen(t, "packets", 10*time.Second)
			tc.stop(r)
			if code := r.wait(t); code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, r.stderr.String())
			}
			if !strings.Contains(r.stdout.String(), "packets") || strings.Contains(r.stderr.String(), "context canceled") {
				t.Errorf("stdout:\n%s\nstderr:\n%s", r.stdout.String(), r.stderr.String())
			}
			if !strings.Contains(r.terminal(), "\x1b[?1049l") {
				t.Errorf("the terminal's alternate screen was not left")
			}
		})
	}
}
