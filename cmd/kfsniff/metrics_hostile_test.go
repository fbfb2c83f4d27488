package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
)

// TestMetricsIdleConnectionsClosed: idle keep-alive connections to
// /metrics were never closed (3,000 still open after 30 s, up to the fd
// limit), nor were connections that never sent a request. The server
// closes both after its time-outs (shortened here).
func TestMetricsIdleConnectionsClosed(t *testing.T) {
	defer func(idle, header time.Duration) { metricsIdleTimeout, metricsHeaderTimeout = idle, header }(metricsIdleTimeout, metricsHeaderTimeout)
	metricsIdleTimeout, metricsHeaderTimeout = 300*time.Millisecond, 300*time.Millisecond
	set, err := detectors.NewSet(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	s, err := startMetrics("127.0.0.1:0", "file", 0, set, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	addr := regexp.MustCompile(`http://([^/]+)/metrics`).FindStringSubmatch(stderr.String())
	if addr == nil {
		t.Fatalf("no address on stderr: %s", stderr.String())
	}
	const n = 40
	var conns []net.Conn
	for i := range 2 * n {
		c, err := net.Dial("tcp", addr[1])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i < n { // a scrape, then idle with keep-alive
			if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: kfsniff\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		conns = append(conns, c)
	}
	time.Sleep(time.Second)
	open := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			open++
		}
	}
	if open > 0 {
		t.Errorf("%d of %d connections (half idle after a scrape, half silent) still open a second later; time-outs 300 ms", open, len(conns))
	}
}

// TestMetricsConnectionsBounded: 3,000 connections to the metrics port
// that send nothing held 3,000 of the process's file descriptors (up to
// its limit); the server takes maxMetricsConns at a time, the rest wait
// in the kernel's backlog.
func TestMetricsConnectionsBounded(t *testing.T) {
	const n = 3000
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < 2*n+500 {
		t.Skipf("needs %d file descriptors (ulimit -n %d)", 2*n+500, lim.Cur)
	}
	set, err := detectors.NewSet(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	s, err := startMetrics("127.0.0.1:0", "file", 0, set, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	addr := regexp.MustCompile(`http://([^/]+)/metrics`).FindStringSubmatch(stderr.String())
	fds := func() int { es, _ := os.ReadDir("/proc/self/fd"); return len(es) }
	before := fds()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("tcp", addr[1])
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	time.Sleep(500 * time.Millisecond)
	server := fds() - before - n
	t.Logf("%d silent connections: the server holds %d file descriptors for them", n, server)
	if server > maxMetricsConns+16 {
		t.Errorf("%d silent connections: the server holds %d file descriptors, want at most %d", n, server, maxMetricsConns)
	}
}
