package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
)

// shifted writes a copy of a capture with every packet's time moved by d:
// the same traffic as a host whose clock is d ahead would capture it.
func shifted(t *testing.T, name string, d time.Duration) string {
	t.Helper()
	f, err := capture.Open(fixture(name), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := filepath.Join(t.TempDir(), "shifted.pcap")
	var w *capture.Writer
	var p capture.Packet
	for {
		if err := f.Next(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if w == nil {
			if w, err = capture.Create(out, p.Link, 262144, ""); err != nil {
				t.Fatal(err)
			}
		}
		p.Time = p.Time.Add(d)
		if err := w.WritePacket(&p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCorrelatorMetrics: two agents ship a real kgo capture, one the
// producers' connections, the other the rest, two connections seen by
// both, the second's
// clock 1.5 s ahead; a correlator with
// --metrics-addr (and --metrics-linger, to read the final values) serves
// the agents' clock offsets (1.5 s apart, a spread near 0), the records
// read and no lag left once --until-end has read everything, with
// kfsniff_build_info{mode="correlator"}. (This split gives the report no
// producer-to-consumer latency either: the histogram's series are
// checked by TestDashboard only.)
func TestCorrelatorMetrics(t *testing.T) {
	const capName = "clients/mm2-replay-kgo.pcap"
	url, _ := newSink(t, 4)
	// host-a: the producers' connections and two admin ones; host-b, its
	// clock 1.5 s ahead: all but the producers' (the admin ones shared:
	// the clock offset's samples).
	const producers = "port 40002 or port 40003 or port 40008 or port 40013"
	agent(t, url, capName, "host-a", producers+" or port 40001 or port 40004")
	if code, _, stderr := kfsniff(t, "-r", shifted(t, capName, 1500*time.Millisecond), "--json", "--agent-id", "host-b", "--export", url, "not ("+producers+")"); code != exitOK {
		t.Fatalf("agent host-b: exit %d: %s", code, stderr)
	}
	errw := newStderrWatch()
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"-r", url, "--until-end", "--json", "--metrics-addr", "127.0.0.1:0", "--metrics-linger", "60s"}, strings.NewReader(""), &out, errw)
	}()
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(errw.String(), "serving the final metrics"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the correlator did not finish: %s", errw)
		}
	}
	m := metricsAddrRE.FindStringSubmatch(errw.String())
	if m == nil {
		t.Fatalf("no metrics address: %s", errw)
	}
	s, body := scrape(t, "http://"+m[1]+"/metrics")
	if code := <-done; code != exitOK && code != exitFindings {
		t.Fatalf("correlator: exit %d: %s", code, errw)
	}
	offA := s.Sum("kfsniff_correlate_clock_offset_seconds", map[string]string{"agent": "host-a"})
	offB := s.Sum("kfsniff_correlate_clock_offset_seconds", map[string]string{"agent": "host-b"})
	spreadB := s.Sum("kfsniff_correlate_clock_spread_seconds", map[string]string{"agent": "host-b"})
	if d := (offB - offA) - 1.5; d < -0.001 || d > 0.001 || spreadB > 0.001 {
		t.Errorf("clock offsets: host-a %vs, host-b %vs (spread %vs); want host-b 1.5 s ahead of host-a\n%s", offA, offB, spreadB, body)
	}
	if s.Sum("kfsniff_correlate_records_total", nil) == 0 || s.Sum("kfsniff_correlate_lag_records", nil) != 0 ||
		s.Sum("kfsniff_build_info", map[string]string{"mode": "correlator"}) != 1 {
		t.Errorf("records read, lag left, build info:\n%s", body)
	}
	t.Logf("host-a %vs, host-b %vs (spread %vs), %v records", offA, offB, spreadB, s.Sum("kfsniff_correlate_records_total", nil))
}
