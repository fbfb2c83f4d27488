package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/pipeline"
)

// plan is what a run has opened and how it will analyse: the inputs (the
// files, or the live capture), the outputs opened before the analysis
// (-w, the metrics endpoint, the exporter, the correlator's consumer) and
// the pipeline's options.
type plan struct {
	opt    pipeline.Options
	files  []*capture.File
	live   *capture.Live
	writer *capture.Writer
	ms     *metricsServer
	xs     *exporter
	// closers run at close, the last opened first.
	closers []func()
}

// plan opens the inputs and the outputs; an input or output that cannot
// be opened is a usage error. The plan is closed (close) whatever the
// error.
func (c *command) plan(ctx context.Context) (*plan, error) {
	cfg, stderr := &c.cfg, c.stderr
	p := &plan{opt: pipeline.Options{
		Flows:     c.flows,
		Detectors: c.dets,
		Count:     cfg.Count,
		Duration:  cfg.Duration,
		Workers:   cfg.Workers,
		Warn:      c.warnBefore,
	}}
	if err := c.openInputs(ctx, p); err != nil {
		return p, err
	}
	if p.live != nil && c.flows.TLSKeys != nil {
		fctx, stopFollowing := context.WithCancel(ctx)
		p.onClose(stopFollowing)
		if err := followKeyLogs(fctx, c.flows.TLSKeys, cfg.TLSKeyLogs, 200*time.Millisecond, stderr); err != nil {
			return p, usage(err)
		}
	}
	// pcapng Decryption Secrets Blocks before the first packet decrypt
	// as --tls-keylog does.
	p.opt.Flows.TLSKeys = pipeline.FileKeys(p.files, c.flows.TLSKeys)
	var err error
	if cfg.Write != "" {
		if p.writer, err = createWriter(*cfg, p.live, p.links(), secretsBlock(cfg.Write, p.opt.Flows.TLSKeys)...); err != nil {
			return p, usagef("-w %v", err)
		}
		p.onClose(func() { p.writer.Close() })
		p.opt.Sinks = append(p.opt.Sinks, p.writer)
	}
	mode := "file"
	if p.live != nil {
		mode = "agent"
	} else if c.cr.on() {
		mode = "correlator"
	}
	if p.ms, err = startMetrics(cfg.MetricsAddr, mode, cfg.MetricsLinger, c.dets, stderr); err != nil {
		return p, usage(err)
	}
	p.onClose(p.ms.close)
	if p.xs, err = c.exp.start(p.live != nil, stderr); err != nil {
		return p, usage(err)
	}
	p.onClose(p.xs.close)
	p.xs.metrics(p.ms)
	if c.cr.on() {
		if err := c.cr.open(stderr); err != nil {
			return p, usage(err)
		}
		p.onClose(func() { c.cr.close(stderr) })
		c.cr.metrics(p.ms)
	}
	return p, nil
}

// warnBefore is the analysis' warning: an input that breaks off.
func (c *command) warnBefore(err error) {
	fmt.Fprintf(c.stderr, "kfsniff: warning: %v; analysed the packets before it\n", err)
}

// openInputs opens the live capture, or the capture files (none for a
// kafka:// input).
func (c *command) openInputs(ctx context.Context, p *plan) error {
	cfg := &c.cfg
	if cfg.Live.Interface != "" {
		live, err := openLive(cfg.Live, c.filter)
		if err != nil {
			return usage(err)
		}
		p.live = live
		p.onClose(func() { live.Close() })
		return nil
	}
	if c.cr.on() {
		return nil
	}
	p.opt.Filter = c.filter
	p.onClose(func() {
		for _, f := range p.files {
			f.Close()
		}
	})
	for i, name := range cfg.Files {
		var f *capture.File
		var err error
		if name == "-" {
			f, err = capture.NewFile("-", i, newInterruptible(ctx, c.stdin))
		} else {
			f, err = capture.Open(name, i)
		}
		if err != nil {
			return usage(unusable(err))
		}
		p.files = append(p.files, f)
	}
	return nil
}

// unusable is an input's error without the capture package's prefix.
func unusable(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), capture.ErrUnusable.Error()+": "))
}

// links are the link types of the inputs, each once.
func (p *plan) links() []capture.LinkType {
	if p.live != nil {
		return p.live.Links
	}
	var links []capture.LinkType
	for _, f := range p.files {
		for _, l := range f.Links {
			if !slices.Contains(links, l) {
				links = append(links, l)
			}
		}
	}
	return links
}

func (p *plan) onClose(f func()) { p.closers = append(p.closers, f) }

// close closes what plan opened, the last opened first.
func (p *plan) close() {
	if p == nil {
		return
	}
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
}
