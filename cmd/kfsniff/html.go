package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kfsniff/kfsniff/expect"
	"github.com/kfsniff/kfsniff/report"
)

// checkHTML refuses an --html file that kfsniff could not write without
// harm: standard output (the report goes there), or one of the inputs or
// the -w capture, which writing the page would destroy.
func (c *command) checkHTML() error {
	cfg := &c.cfg
	if cfg.HTML == "" {
		return nil
	}
	if cfg.HTML == "-" {
		return errors.New("--html -: the report goes to standard output; give the page a file name")
	}
	if st, err := os.Stat(filepath.Dir(cfg.HTML)); err != nil || !st.IsDir() {
		return fmt.Errorf("--html %s: no directory %s to write the page in", cfg.HTML, filepath.Dir(cfg.HTML))
	}
	out, err := os.Stat(cfg.HTML)
	if err != nil {
		return nil // a new file
	}
	if !out.Mode().IsRegular() {
		return fmt.Errorf("--html %s: that is not a file (%s); give the page a file name", cfg.HTML, expect.FileKind(out.Mode()))
	}
	for _, name := range append([]string{cfg.Write}, cfg.Files...) {
		if sameFile(name, cfg.HTML) {
			return fmt.Errorf("--html %s: that is %s, which writing the page would destroy; give another file name", cfg.HTML, name)
		}
	}
	return nil
}

// writeHTML writes the report as one self-contained HTML page to name
// (writeAtomic).
func writeHTML(name string, rep *report.Report) error {
	return writeAtomic(name, func(w io.Writer) error { return report.WriteHTML(w, rep) })
}
