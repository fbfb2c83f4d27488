package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// Validate checks the settings that flags cannot check by type.
func (c *Config) Validate() error {
	if c.FailOn != "" {
		if _, err := detectors.ParseSeverity(c.FailOn); err != nil {
			return fmt.Errorf("--fail-on: %v", err)
		}
	}
	if len(c.Files) > 0 && c.Live.Interface != "" {
		return errors.New("give -i IFACE to capture live or -r FILE to read a capture, not both")
	}
	if len(c.Files) == 0 && c.Live.Interface == "" {
		return errors.New("no input: capture live with -i IFACE (kfsniff -D lists interfaces) or read a capture with -r FILE (- for standard input)")
	}
	if c.Live.Snaplen < 0 {
		return fmt.Errorf("-s must not be negative, got %d", c.Live.Snaplen)
	}
	if c.Live.BufferKiB < 0 {
		return fmt.Errorf("-B must not be negative, got %d", c.Live.BufferKiB)
	}
	if c.Count < 0 {
		return fmt.Errorf("-c must not be negative, got %d", c.Count)
	}
	if c.Duration < 0 {
		return fmt.Errorf("--duration must not be negative, got %s", c.Duration)
	}
	if c.Write == "-" {
		return errors.New("-w -: writing the capture to standard output is not supported (the report goes there); give a file name")
	}
	limit, err := parseSize(c.MemoryLimit)
	if err != nil {
		return fmt.Errorf("--memory-limit %q: want a size (bytes, or with K, M, G), 0 for none", c.MemoryLimit)
	}
	c.memoryLimit = limit
	if c.UIKeep < 0 {
		return fmt.Errorf("--ui-keep must not be negative, got %d", c.UIKeep)
	}
	if c.TUI && c.NoTUI {
		return errors.New("--tui and --no-tui contradict each other")
	}
	if c.MaxFrame <= 0 {
		return fmt.Errorf("--max-frame must be positive, got %d", c.MaxFrame)
	}
	if c.Workers < 0 {
		return fmt.Errorf("--workers must not be negative, got %d", c.Workers)
	}
	if c.KeepClosed < 0 {
		return fmt.Errorf("--keep-closed must not be negative, got %v", c.KeepClosed)
	}
	if c.BufferBudget < 0 || c.MaxWaiting < 0 {
		return fmt.Errorf("--buffer-budget and --max-waiting must not be negative, got %d and %d", c.BufferBudget, c.MaxWaiting)
	}
	if i := slices.Index(c.Files, "-"); i >= 0 && slices.Contains(c.Files[i+1:], "-") {
		return errors.New("standard input (-r -) can be read only once")
	}
	if err := validMetricsAddr(c.MetricsAddr); err != nil {
		return err
	}
	if c.MetricsLinger < 0 {
		return fmt.Errorf("--metrics-linger must not be negative, got %s", c.MetricsLinger)
	}
	if c.MetricsLinger > 0 && c.MetricsAddr == "" {
		return errors.New("--metrics-linger needs --metrics-addr")
	}
	return c.validateExpect()
}

// validate checks the flags together, in the order a user meets the
// checks (the golden testdata/usage-errors.txt pins it), and turns the
// settings into typed values: the filter, the flows configuration, the
// frame filter, the detector settings (parsed once) and the Set. Every
// error is a usage error.
func (c *command) validate() error {
	cfg, fs := &c.cfg, c.fs
	cfg.Filter = strings.Join(fs.Args(), " ")
	if err := c.applyExpect(); err != nil {
		return usage(err)
	}
	filter, err := capture.ParseFilter(cfg.Filter)
	if err != nil {
		if fs.NArg() == 1 {
			if _, serr := os.Stat(fs.Arg(0)); serr == nil {
				return usagef("unexpected argument %q (capture files go after -r)", fs.Arg(0))
			}
		}
		return usagef("bad filter expression %q: %v", cfg.Filter, err)
	}
	c.filter = filter
	for _, check := range []func() error{cfg.Validate, c.checkHTML, c.checkModes, c.refuseOverwrite, c.refuseSameOutput, c.refuseMissingDir,
		func() error { return c.recs.validate(cfg, c.out) },
		func() error { return c.exp.validate(fs, c.stderr) },
		func() error { return c.cr.validate(cfg, fs, c.exp, c.stderr) },
	} {
		if err := check(); err != nil {
			return usage(err)
		}
	}
	return c.typed()
}

// defaultKeepClosed is --keep-closed's default: what the UI and the
// report of a live capture list of the connections already closed. At 50
// short-lived connections a second, 15,000 records (about 12 MB) instead
// of a table filling to its bound (100,000) for half an hour.
const defaultKeepClosed = 5 * time.Minute

// typed makes the typed settings the analysis runs with.
func (c *command) typed() error {
	cfg := &c.cfg
	c.flows = flows.DefaultConfig()
	ports, err := flows.ParsePorts(cfg.Ports)
	if err != nil {
		return usagef("--ports: %v", err)
	}
	c.flows.Ports = ports
	c.flows.MaxFrame = cfg.MaxFrame
	c.flows.BufferBudget, c.flows.MaxPendingTotal = cfg.BufferBudget, cfg.MaxWaiting
	if cfg.Live.Interface != "" || c.fs.Changed("keep-closed") {
		c.flows.KeepClosed = cfg.KeepClosed
	}
	if c.flows.TLSKeys, err = readKeyLogs(cfg.TLSKeyLogs, cfg.Live.Interface == "", c.stderr); err != nil {
		return usage(err)
	}
	if cfg.APIs != "" {
		if c.filterFrames.APIs, err = report.ParseAPIs(cfg.APIs); err != nil {
			return usagef("--api: %v", err)
		}
	}
	c.filterFrames.ClientID, c.filterFrames.Conns, c.filterFrames.Errors = cfg.ClientID, cfg.Conns, cfg.Errors
	for _, o := range cfg.Settings {
		if err := detectors.ParseSetting(o, c.settings); err != nil {
			return usagef("-o: %v", err)
		}
	}
	if c.dets, err = detectors.NewSet(all.Analyzers(), c.settings); err != nil {
		return usagef("-o: %v", err)
	}
	if err := c.limits.apply(c.dets); err != nil {
		return seeHelp(err)
	}
	c.cr.detectors(all.Analyzers(), c.settings, c.dets)
	return nil
}
