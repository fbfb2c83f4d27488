package main

import (
	"context"
	"fmt"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
)

// analyse runs the analysis as planned, with a front end's additions,
// and returns when the input ends, -c or --duration is reached, or ctx is
// cancelled.
func (c *command) analyse(ctx context.Context, p *plan, add uiAdditions) *pipeline.Result {
	o := p.opt
	o.Handlers = append(append([]flows.Handler{}, p.opt.Handlers...), add.Handlers...)
	o.Sinks = append(append([]capture.Sink{}, p.opt.Sinks...), add.Sinks...)
	o.Progress = add.Progress
	o.LiveFindings = add.LiveFindings
	p.ms.wrap(&o)
	p.xs.wrap(&o)
	if p.live != nil {
		return pipeline.RunSource(ctx, p.live, o)
	}
	if c.cr.on() {
		return c.cr.run(ctx, o)
	}
	return pipeline.Run(ctx, p.files, o)
}

// wantTUI: the terminal UI is asked for, or is the default for a live
// capture on a terminal when no other output was asked for.
func (c *command) wantTUI(p *plan) bool {
	cfg := &c.cfg
	return cfg.TUI || (p.live != nil && !cfg.NoTUI && !cfg.Frames && !cfg.JSON && isTerminal(c.out))
}

// execute runs the analysis: under the terminal UI, or printing frames
// or records as they are decoded, with the progress line.
func (c *command) execute(ctx context.Context, p *plan) (*pipeline.Result, error) {
	cfg, stderr := &c.cfg, c.stderr
	if c.wantTUI(p) {
		res, err := c.runTUI(ctx, p)
		if err != nil {
			return nil, failure(err)
		}
		cfg.Frames = false // the report follows the UI
		return res, nil
	}
	var handlers []flows.Handler
	var frames *report.FrameWriter
	if cfg.Frames {
		frames = report.NewFrameWriter(c.out, c.filterFrames, cfg.JSON, cfg.Verbose)
		frames.ShowSecrets = cfg.ShowSecrets
		frames.Warn = c.warnJSON.frame
		handlers = append(handlers, frames)
		if p.live != nil || c.cr.on() {
			// Stream: each line goes out as it is decoded.
			handlers = append(handlers, lineFlusher{frames})
		}
	}
	handlers = append(handlers, c.recs.handlers()...)
	if live := p.live; live != nil {
		fmt.Fprintf(stderr, "kfsniff: listening on %s, link-type %s, snapshot length %d bytes\n", live.Name, live.Links[0], live.Snaplen)
	}
	pl := newProgress(cfg, c.recs, p.files, c.out, stderr)
	p.opt.ProgressEvery, p.opt.Warn = c.progressEvery, pl.around(p.opt.Warn)
	res := c.analyse(ctx, p, uiAdditions{Handlers: handlers, Progress: pl.callback()})
	if frames != nil {
		if err := frames.Flush(); err != nil && !c.out.broken() {
			return nil, failure(fmt.Errorf("writing output: %v", err))
		}
	}
	return res, nil
}

// write ends the run: the exporter's, metrics' and correlator's last
// words, then the report (or the comparison with --expect, or the
// records of --finding), the files asked for, and the exit code.
func (c *command) write(ctx context.Context, p *plan, res *pipeline.Result) int {
	cfg, stderr := &c.cfg, c.stderr
	p.ms.finish(res)
	p.xs.finish(res)
	c.cr.say(res, stderr)
	if err := c.cr.failed(res); err != nil {
		return exitWith(stderr, err)
	}
	if cfg.Frames || c.recs.w != nil || cfg.Expect.File != "" {
		p.xs.say(res, stderr)
	}
	if res.Interrupted && p.live == nil && !c.out.broken() {
		fmt.Fprintln(stderr, "kfsniff: interrupted; reporting what was read")
	}
	for _, f := range p.files {
		if f.SecretsDropped > 0 {
			fmt.Fprintf(stderr, "kfsniff: warning: %s: %d pcapng Decryption Secrets Blocks skipped (not whole, or past the %d MiB of secrets kept from a file), the first at byte %d\n",
				f.Name, f.SecretsDropped, capture.MaxSecrets>>20, f.SecretsDroppedAt)
		}
	}
	code := exitOK
	if c.cr.uncovered(stderr) {
		code = exitFailure
	}
	if p.writer != nil {
		if err := p.writer.Close(); err != nil && res.Err == nil {
			res.Err = err
		}
	}
	if res.Err != nil {
		fmt.Fprintf(stderr, "kfsniff: writing the capture: %v; the report covers the packets before it\n", res.Err)
		code = exitFailure
	}
	rep := res.Report
	if cfg.Filter != "" {
		rep.Capture.Filter = &report.Filter{Expression: cfg.Filter}
	}
	switch {
	case c.out.broken():
		pipeClosed(stderr, *cfg, c.recs, res, p.writer, p.live != nil)
		return c.files(res, code)
	case c.recs.w != nil:
		return c.files(res, max(c.recs.finish(ctx, cfg, p.opt, res, stderr), code))
	case cfg.Expect.File != "":
		return c.files(res, compareExpect(*cfg, rep, code, c.out, stderr))
	}
	if !cfg.Frames {
		var err error
		if cfg.JSON {
			err = report.WriteJSONWarn(c.out, rep, c.warnJSON.report)
		} else {
			err = report.WriteText(c.out, rep)
		}
		if c.out.broken() {
			pipeClosed(stderr, *cfg, c.recs, res, p.writer, p.live != nil)
			return c.files(res, code)
		}
		if err != nil {
			return exitWith(stderr, failure(fmt.Errorf("writing output: %v", err)))
		}
	}
	if p.live != nil {
		liveSummary(stderr, res)
	}
	if code = c.files(res, code); code != exitOK {
		return code
	}
	return failOn(cfg.FailOn, rep, stderr)
}

// files writes the files asked for (--html, --write-expect), whatever
// became of standard output, and returns code, or exitFailure if one
// could not be written.
func (c *command) files(res *pipeline.Result, code int) int {
	cfg := &c.cfg
	if cfg.HTML != "" {
		if err := writeHTML(cfg.HTML, res.Report); err != nil {
			return exitWith(c.stderr, failure(fmt.Errorf("--html: %v", err)))
		}
	}
	if cfg.Expect.Write != "" && code == exitOK {
		if err := writeExpect(*cfg, analysisOf(cfg, c.fs), res.Report, res.Interrupted, c.stderr); err != nil {
			return exitWith(c.stderr, failure(fmt.Errorf("--write-expect: %v", err)))
		}
	}
	return code
}
