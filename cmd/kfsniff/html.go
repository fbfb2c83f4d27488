package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kfsniff/kfsniff/report"
)

// checkHTML refuses an --html file that kfsniff could not write without
// harm: standard output (the report goes there), or one of the inputs or
// the -w capture, which writing the page would destroy.
func checkHTML(cfg Config) error {
	if cfg.HTML == "" {
		return nil
	}
	if cfg.HTML == "-" {
		return errors.New("--html -: the report goes to standard output; give the page a file name")
	}
	out, err := os.Stat(cfg.HTML)
	if err != nil {
		return nil // a new file
	}
	others := append([]string{cfg.Write}, cfg.Files...)
	for _, name := range others {
		if name == "" || name == "-" {
			continue
		}
		if in, err := os.Stat(name); err == nil && os.SameFile(in, out) {
			return fmt.Errorf("--html %s: that is %s, which writing the page would destroy; give another file name", cfg.HTML, name)
		}
	}
	return nil
}

// writeHTML writes the report as one self-contained HTML page to name:
// into a temporary file beside it, renamed over name once complete, so
// that a failure never leaves half a page (or destroys an older one).
func writeHTML(name string, rep *report.Report) error {
	dir := filepath.Dir(name)
	f, err := os.CreateTemp(dir, "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = report.WriteHTML(f, rep)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
