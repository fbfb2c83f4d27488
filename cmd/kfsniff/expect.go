package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/expect"
	"github.com/kfsniff/kfsniff/report"
)

// exitExpect is the exit code of an expectation that does not hold
// (--expect, kfsniff check).
const exitExpect = 4

// ExpectConfig is what --expect and --write-expect ask for.
type ExpectConfig struct {
	// File is --expect: compare the analysis with this expectation.
	File string
	// Write is --write-expect: write the expectation of this analysis.
	Write string

	loaded *expect.File
}

// validateExpect checks that the expectation flags go with the rest.
func (c *Config) validateExpect() error {
	e := c.Expect
	if e.File == "" && e.Write == "" {
		return nil
	}
	flag := "--expect"
	if e.File == "" {
		flag = "--write-expect"
	}
	switch {
	case e.File != "" && e.Write != "":
		return errors.New("--expect and --write-expect: give one (write an expectation, then check captures against it)")
	case c.Live.Interface != "":
		return fmt.Errorf("%s reads captures: give -r FILE, not -i", flag)
	case c.Frames || c.TUI:
		return fmt.Errorf("%s compares or writes the report's findings: not with --frames or --tui", flag)
	case e.Write != "" && (c.Count > 0 || c.Duration > 0):
		// The expectation of a part of the capture: kfsniff check and
		// --expect analyse all of it, and it did not hold.
		return errors.New("--write-expect writes what the whole capture shows: not with -c or --duration")
	case e.Write == "-":
		return errors.New("--write-expect -: the report goes to standard output; give the expectation a file name (NAME.expect.json beside NAME.pcap)")
	case e.File != "" && c.JSON:
		return errors.New("--expect prints the comparison, not the report: run without --json (or without --expect for the report)")
	}
	if e.Write != "" {
		for _, name := range c.Files {
			if sameFile(name, e.Write) {
				return fmt.Errorf("--write-expect %s is the capture read by -r: give another file name (NAME.expect.json beside NAME.pcap)", e.Write)
			}
		}
	}
	return nil
}

// sameFile reports whether a and b are one existing file (a may be
// "-", standard input, which is none).
func sameFile(a, b string) bool {
	if a == "-" {
		return false
	}
	x, err1 := os.Stat(a)
	y, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(x, y)
}

// applyExpect loads the --expect file and applies its analysis settings
// to what the command line left at the defaults: its -o settings come
// before the command line's (which win), its filter is used when the
// command line gives none.
func (cmd *command) applyExpect() error {
	c, fs := &cmd.cfg, cmd.fs
	if c.Expect.File == "" {
		return nil
	}
	f, err := expect.Load(c.Expect.File)
	if err != nil {
		return fmt.Errorf("--expect %v", err)
	}
	c.Expect.loaded = f
	a := f.Analysis
	if a == nil {
		return nil
	}
	// The file's own settings are checked here, so that an error names
	// the file rather than reading as the command line's.
	// They are parsed into the command's settings, before -o's (which
	// win).
	for _, o := range a.Options {
		if err := detectors.ParseSetting(o, cmd.settings); err != nil {
			return fmt.Errorf("--expect %s: analysis.options: %v", c.Expect.File, err)
		}
	}
	if err := detectors.CheckSettings(all.Analyzers(), cmd.settings); err != nil {
		return fmt.Errorf("--expect %s: analysis.options: %v", c.Expect.File, err)
	}
	if _, err := capture.ParseFilter(a.Filter); err != nil {
		return fmt.Errorf("--expect %s: analysis.filter %q: %v", c.Expect.File, a.Filter, err)
	}
	if a.Ports != "" && !fs.Changed("ports") {
		c.Ports = a.Ports
	}
	if a.MaxFrame != 0 && !fs.Changed("max-frame") {
		c.MaxFrame = a.MaxFrame
	}
	if a.BufferBudget != nil && !fs.Changed("buffer-budget") {
		c.BufferBudget = *a.BufferBudget
	}
	if a.MaxWaiting != nil && !fs.Changed("max-waiting") {
		c.MaxWaiting = *a.MaxWaiting
	}
	c.Filter = cmp.Or(c.Filter, a.Filter)
	return nil
}

// analysisOf is the analysis settings the command line gave, as an
// expectation keeps them (nil when all are kfsniff's defaults).
func analysisOf(c *Config, fs *pflag.FlagSet) *expect.Analysis {
	a := &expect.Analysis{Options: c.Settings, Filter: c.Filter}
	if fs.Changed("ports") {
		a.Ports = c.Ports
	}
	if fs.Changed("max-frame") {
		a.MaxFrame = c.MaxFrame
	}
	if fs.Changed("buffer-budget") {
		a.BufferBudget = &c.BufferBudget
	}
	if fs.Changed("max-waiting") {
		a.MaxWaiting = &c.MaxWaiting
	}
	if len(a.Options) == 0 && a.Filter == "" && a.Ports == "" && a.MaxFrame == 0 && a.BufferBudget == nil && a.MaxWaiting == nil {
		return nil
	}
	return a
}

// expectReport is the report as an expectation reads it: through the
// JSON document, the public contract.
func expectReport(rep *report.Report) (*expect.Report, error) {
	var b bytes.Buffer
	if err := report.WriteJSON(&b, rep); err != nil {
		return nil, err
	}
	return expect.ReadReport(&b)
}

// compareExpect prints how the analysis compares with the --expect file
// and returns the exit code: code if the run already failed, else
// exitExpect if the expectation does not hold, else --fail-on's.
func compareExpect(c Config, rep *report.Report, code int, stdout, stderr io.Writer) int {
	got, err := expectReport(rep)
	if err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitFailure
	}
	res := expect.Check(c.Expect.loaded, got)
	what := strings.Join(c.Files, ", ")
	if res.Held() {
		fmt.Fprintf(stdout, "%s: holds for %s: %d expected finding(s) found, no other against the rule\n",
			report.Clean(c.Expect.File), report.Clean(what), res.Matched)
	} else {
		fmt.Fprintf(stdout, "%s: does not hold for %s: %d problem(s), %d of %d expected finding(s) found\n",
			report.Clean(c.Expect.File), report.Clean(what), len(res.Problems), res.Matched, res.Findings)
		for _, l := range res.Lines() {
			fmt.Fprintf(stdout, "  %s\n", report.CleanText(l))
		}
	}
	switch {
	case code != exitOK:
		return code
	case !res.Held():
		return exitExpect
	}
	return failOn(c.FailOn, rep, stderr)
}

// writeExpect writes the expectation of rep to the --write-expect file,
// through a temporary file beside it (writeAtomic) so that an
// interrupted run leaves the old one whole. An interrupted analysis writes none: it would
// expect a part of the capture.
func writeExpect(c Config, a *expect.Analysis, rep *report.Report, interrupted bool, stderr io.Writer) error {
	if interrupted {
		return fmt.Errorf("not written: the analysis was interrupted before the end of the capture")
	}
	got, err := expectReport(rep)
	if err != nil {
		return err
	}
	names := make([]string, len(c.Files))
	for i, f := range c.Files {
		names[i] = filepath.Base(f)
	}
	f := expect.FromReport(got, strings.Join(names, ", "), a)
	b, err := f.Marshal()
	if err != nil {
		return err
	}
	b = report.SafeJSON(b) // the findings' fields quote wire strings
	if err := writeAtomic(c.Expect.Write, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "kfsniff: wrote %s: %d finding(s); trim it to what must hold (docs/expect.md)\n", report.Clean(c.Expect.Write), len(f.Findings))
	return nil
}
