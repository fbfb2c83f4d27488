package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/tlsdec"
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
	// KeepMB is --ui-keep: the megabytes of most recent packets the `w`
	// key can save (0: saving is off).
	KeepMB int
	// Keys is the TLS key log (--tls-keylog, a file's secrets), written
	// into what `w` saves; nil without one.
	Keys *tlsdec.Keys
	// Stderr gets the line saying the spool dropped packets, after the UI.
	Stderr io.Writer
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
func runTUI(parent context.Context, s uiSession) (*pipeline.Result, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	m := tui.NewModel(tui.ModelConfig{ShowSecrets: s.ShowSecrets})
	var sp *spool
	var sinks []capture.Sink
	if s.KeepMB > 0 {
		var err error
		if sp, err = newSpool(s.KeepMB, s.Keys); err != nil {
			return nil, err
		}
		defer sp.remove()
		sinks = append(sinks, sp)
	}
	done := make(chan struct{})
	var res *pipeline.Result
	go func() {
		defer close(done)
		res = s.Start(ctx, uiAdditions{
			Handlers: []flows.Handler{m},
			Sinks:    sinks,
			Progress: func(p pipeline.Progress) {
				c := tui.Counters{Packets: p.Packets, Bytes: p.Bytes, Live: s.Live && !p.Done}
				if p.Live != nil {
					c.Drops = int64(p.Live.Dropped)
				}
				if s.ExportDropped != nil {
					c.Export, c.ExportDropped = true, s.ExportDropped()
				}
				if sp != nil {
					c.SaveDropped, c.SaveKeepMB = sp.Dropped(), s.KeepMB
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
	opts := tui.Options{Title: s.Source, Filter: s.Filter, Model: m, Done: done}
	if sp != nil {
		opts.SaveTo = func(path string) (string, error) {
			if err := refuseSave(path, s.Inputs, s.Stdin); err != nil {
				return "", err
			}
			return sp.save(path)
		}
	}
	err := tui.Run(ctx, opts)
	if err != nil && parent.Err() != nil && errors.Is(err, parent.Err()) {
		// Ctrl-C (SIGINT) or SIGTERM, main's signal context: the run
		// ends as with `q`, the report printed.
		err = nil
	}
	cancel()
	<-done
	if sp != nil && s.Stderr != nil {
		if n := sp.Dropped(); n > 0 {
			fmt.Fprintf(s.Stderr, "kfsniff: the UI's w key kept only the last %d MB (--ui-keep): %d older packets were dropped from it\n", s.KeepMB, n)
		}
	}
	return res, err
}
