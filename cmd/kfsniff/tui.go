package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/tui"
)

// uiSession is everything a terminal UI gets from the command: what is
// analysed, and a way to run the analysis with its own handlers.
type uiSession struct {
	// Source names the input for the status line: "eth0 (live) port
	// 9092" or "a.pcap, b.pcap".
	Source string
	// Filter is the filter expression, if any.
	Filter string
	Live   bool
	// ShowSecrets: --show-secrets.
	ShowSecrets bool
	// Inputs are the -r files (and Stdin, for "-"): the save key never
	// writes onto one.
	Inputs []string
	Stdin  io.Reader
	// Start runs the analysis as configured on the command line (-i or
	// -r, filter, -w, -c, --duration, detectors) with the front end's
	// additions, and returns when the input ends, -c or --duration is
	// reached, or ctx is cancelled (the UI's quit key), with the final
	// result, whose report the command prints after the UI closes.
	Start func(ctx context.Context, add uiAdditions) *pipeline.Result
	// ExportDropped, with --export, counts the records shipping lost.
	ExportDropped func() int64
}

// uiAdditions are what a front end adds to the analysis. Handlers and
// Sinks are called on the goroutine running Start; Progress too, about 4
// times a second and once at the end (Done set); LiveFindings too, with
// the findings as they stand about every 2 seconds while the capture runs
// (not at the end: the final ones are in the result's report).
type uiAdditions struct {
	Handlers     []flows.Handler
	Sinks        []capture.Sink // e.g. a spool for the "save the capture so far" key
	Progress     func(pipeline.Progress)
	LiveFindings func([]detectors.Finding)
}

// haveTUI reports whether this build has the terminal UI.
func haveTUI() bool { return true }

// runTUI runs the terminal UI until the user quits (the analysis goes on
// in the background meanwhile), and returns the analysis result.
func runTUI(ctx context.Context, s uiSession) (*pipeline.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := tui.NewModel(tui.ModelConfig{ShowSecrets: s.ShowSecrets})
	sp, err := newSpool()
	if err != nil {
		return nil, err
	}
	defer sp.remove()
	done := make(chan struct{})
	var res *pipeline.Result
	go func() {
		defer close(done)
		res = s.Start(ctx, uiAdditions{
			Handlers: []flows.Handler{m},
			Sinks:    []capture.Sink{sp},
			Progress: func(p pipeline.Progress) {
				c := tui.Counters{Packets: p.Packets, Bytes: p.Bytes, Live: s.Live && !p.Done}
				if p.Live != nil {
					c.Drops = int64(p.Live.Dropped)
				}
				if s.ExportDropped != nil {
					c.Export, c.ExportDropped = true, s.ExportDropped()
				}
				m.SetCounters(c)
				m.Sync() // Progress runs on the pipeline goroutine
			},
			LiveFindings: m.SetFindings, // a fresh list each time
		})
		m.Sync()
		m.SetFindings(res.Report.Findings)
		if p := res.Report.Capture.Partial; p != nil {
			m.SetPartial(p.String())
		}
	}()
	save := func(path string) error {
		if err := refuseSave(path, s.Inputs, s.Stdin); err != nil {
			return err
		}
		return sp.save(path)
	}
	err = tui.Run(ctx, tui.Options{Title: s.Source, Filter: s.Filter, Model: m, Save: save, Done: done})
	cancel()
	<-done
	return res, err
}

// spool keeps every packet analysed in a temporary pcapng file, so that
// the UI's `w` key can save the capture so far.
type spool struct {
	mu   sync.Mutex
	f    *os.File
	w    *capture.Writer
	name string
}

func newSpool() (*spool, error) {
	f, err := os.CreateTemp("", "kfsniff-spool-*.pcapng")
	if err != nil {
		return nil, fmt.Errorf("temporary capture for the UI: %w", err)
	}
	w, err := capture.NewWriter(f, true, capture.LinkEthernet, 0, "kfsniff")
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &spool{f: f, w: w, name: f.Name()}, nil
}

// WritePacket implements capture.Sink.
func (s *spool) WritePacket(p *capture.Packet) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.WritePacket(p)
}

// save copies the capture so far to path.
func (s *spool) save(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.w.Flush(); err != nil {
		return err
	}
	src, err := os.Open(s.name)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

func (s *spool) remove() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.f.Close()
	os.Remove(s.name)
}
