package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/metrics"
	"github.com/kfsniff/kfsniff/pipeline"
)

// metricsUsage is --metrics-addr's help.
const metricsUsage = "serve Prometheus metrics on `[HOST]:PORT` at /metrics while the analysis runs (:0 picks a free port; the address is printed on stderr)"

// validMetricsAddr checks --metrics-addr's form at parse time.
func validMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr %q: want [HOST]:PORT, e.g. :9464 or 127.0.0.1:9464", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--metrics-addr %q: port %q is not a number from 0 to 65535 (0: any free port)", addr, port)
	}
	return nil
}

// The metrics server's time-outs (variables for the tests).
var (
	metricsHeaderTimeout = 5 * time.Second
	metricsIdleTimeout   = 15 * time.Second
)

// maxMetricsConns bounds the connections the metrics server holds.
const maxMetricsConns = 256

// metricsServer is the /metrics endpoint and the handler feeding it.
type metricsServer struct {
	m   *metrics.Metrics
	srv *http.Server
	// scrapes counts the scrapes served; linger is --metrics-linger
	// (not live), stderr where finish says it lingers.
	scrapes atomic.Int64
	linger  time.Duration
	stderr  io.Writer
	// served is closed when the server's goroutine returns.
	served chan struct{}
}

// startMetrics listens on addr (nothing when addr is empty) before the
// analysis starts, so that a port in use is a usage error, and says where
// it serves on stderr. mode is this process's in kfsniff_build_info:
// agent (a live capture), correlator (-r kafka://) or file; a run that is
// not live serves its final metrics for up to linger (--metrics-linger).
func startMetrics(addr, mode string, linger time.Duration, dets *detectors.Set, stderr io.Writer) (*metricsServer, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %v", err)
	}
	live := mode == "agent"
	cfg := metrics.Config{Live: live}
	for _, a := range dets.Analyzers() {
		cfg.Detectors = append(cfg.Detectors, a.Name)
	}
	m := metrics.New(cfg)
	v, rev, gov := buildInfo()
	m.BuildInfo(v, rev, gov, mode)
	mux := http.NewServeMux()
	h := m.Handler()
	var s *metricsServer
	mux.Handle("/metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		s.scrapes.Add(1)
	}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, `kfsniff: metrics at /metrics`)
	})
	// A scraper is not trusted either: idle keep-alive connections and
	// slow requests are closed, a response has 30 s to go out, and at
	// most maxMetricsConns connections are taken at a time (the rest
	// wait in the kernel's backlog), so that nobody holds the process's
	// file descriptors.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: metricsHeaderTimeout, ReadTimeout: 2 * metricsHeaderTimeout,
		WriteTimeout: 30 * time.Second, IdleTimeout: metricsIdleTimeout, MaxHeaderBytes: 16 << 10}
	ln = netutil.LimitListener(ln, maxMetricsConns)
	s = &metricsServer{m: m, srv: srv, served: make(chan struct{}), stderr: stderr}
	if !live {
		s.linger = linger
	}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "kfsniff: metrics server: %v\n", err)
		}
	}()
	fmt.Fprintf(stderr, "kfsniff: serving metrics on http://%s/metrics\n", ln.Addr())
	return s, nil
}

// wrap adds the metrics to a run's options: the handler beside the
// others, the capture's counters on each progress call and the findings
// on each live snapshot, chained before the front end's own callbacks.
// Live findings make the analysis run on one worker, as with the TUI.
func (s *metricsServer) wrap(o *pipeline.Options) {
	if s == nil {
		return
	}
	o.Handlers = append(o.Handlers, flows.Handler(s.m))
	progress := o.Progress
	o.Progress = func(p pipeline.Progress) {
		s.m.Capture(p.Packets, p.Bytes, p.Live)
		if p.Tables != nil {
			s.m.Tables(p.Tables)
		}
		if progress != nil {
			progress(p)
		}
	}
	chainFindings(o, s.m.Findings)
}

// finish sets the final findings, waits --metrics-linger for a scrape to
// read them, and stops serving.
func (s *metricsServer) finish(res *pipeline.Result) {
	if s == nil {
		return
	}
	if res != nil && res.Report != nil {
		s.m.Findings(res.Report.Findings)
	}
	if s.linger > 0 {
		// A stream piped to -r - ends between two scrapes: the final
		// counts would never be read.
		fmt.Fprintf(s.stderr, "kfsniff: analysis done; serving the final metrics until they are scraped, at most %s (--metrics-linger; Ctrl-C to stop)\n", s.linger)
		abort, stop := interrupts()
		n := s.scrapes.Load()
		t := time.NewTicker(50 * time.Millisecond)
		deadline := time.After(s.linger)
	wait:
		for s.scrapes.Load() == n {
			select {
			case <-t.C:
			case <-deadline:
				break wait
			case <-abort:
				break wait
			}
		}
		t.Stop()
		stop()
	}
	s.close()
}

func (s *metricsServer) close() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		s.srv.Close()
	}
	<-s.served
}
