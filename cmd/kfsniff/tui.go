package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/tui"
)

// uiAdditions are what a front end adds to the analysis. Handlers and
// Sinks are called on the goroutine running analyse; Progress too, about 4
// times a second and once at the end (Done set); LiveFindings too, with
// the findings as they stand about every 2 seconds while the capture runs
// (not at the end: the final ones are in the result's report).
type uiAdditions struct {
	Handlers     []flows.Handler
	Sinks        []capture.Sink // e.g. a spool for the "save the capture so far" key
	Progress     func(pipeline.Progress)
	LiveFindings func([]detectors.Finding)
}

// runTUI runs the terminal UI until the user quits (the analysis goes on
// in the background meanwhile), and returns the analysis result, whose
// report the command prints after the UI closes. The analysis runs as
// planned, with the UI's model among the handlers and, with --ui-keep,
// the spool the w key saves from among the sinks.
func (c *command) runTUI(parent context.Context, p *plan) (*pipeline.Result, error) {
	cfg := &c.cfg
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	m := tui.NewModel(tui.ModelConfig{ShowSecrets: cfg.ShowSecrets})
	var sp *spool
	var sinks []capture.Sink
	if cfg.UIKeep > 0 {
		var err error
		if sp, err = newSpool(cfg.UIKeep, p.opt.Flows.TLSKeys); err != nil {
			return nil, err
		}
		defer sp.remove()
		sinks = append(sinks, sp)
	}
	exportDropped := p.xs.dropped()
	done := make(chan struct{})
	var res *pipeline.Result
	go func() {
		defer close(done)
		res = c.analyse(ctx, p, uiAdditions{
			Handlers: []flows.Handler{m},
			Sinks:    sinks,
			Progress: func(pr pipeline.Progress) {
				n := tui.Counters{Packets: pr.Packets, Bytes: pr.Bytes, Live: p.live != nil && !pr.Done}
				if pr.Live != nil {
					n.Drops = int64(pr.Live.Dropped)
				}
				if exportDropped != nil {
					n.Export, n.ExportDropped = true, exportDropped()
				}
				if sp != nil {
					n.SaveDropped, n.SaveKeepMB = sp.Dropped(), cfg.UIKeep
				}
				m.SetCounters(n)
				m.Sync() // Progress runs on the pipeline goroutine
			},
			LiveFindings: m.SetFindings, // a fresh list each time
		})
		m.Sync()
		m.SetFindings(res.Report.Findings)
		if part := res.Report.Capture.Partial; part != nil {
			m.SetPartial(part.String())
		}
	}()
	// The title names the input (the filter expression has its own place).
	title := strings.Join(cfg.Files, ", ")
	if p.live != nil {
		title = p.live.Name + " (live)"
	}
	opts := tui.Options{Title: title, Filter: cfg.Filter, Model: m, Done: done}
	if sp != nil {
		opts.SaveTo = func(path string) (string, error) {
			if err := refuseSave(path, cfg.Files, c.stdin); err != nil {
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
	if sp != nil {
		if n := sp.Dropped(); n > 0 {
			fmt.Fprintf(c.stderr, "kfsniff: the UI's w key kept only the last %d MB (--ui-keep): %d older packets were dropped from it\n", cfg.UIKeep, n)
		}
	}
	return res, err
}
