package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// checkModes rejects, before anything is opened, the combinations of
// flags that would fail later or be silently ignored: the terminal UI
// with another output (--frames --tui failed with "open /dev/tty" after
// reading the input), the UI without a terminal, --frames' filters
// without --frames, the live capture's settings without -i.
func (c *command) checkModes() error {
	cfg, fs := &c.cfg, c.fs
	if cfg.TUI && (cfg.Frames || cfg.JSON) {
		other := "--json"
		if cfg.Frames {
			other = "--frames"
		}
		return seeHelp(fmt.Errorf("--tui and %s are two different outputs: give one (the UI shows frames and the report follows it)", other))
	}
	if cfg.TUI {
		if tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err != nil {
			return seeHelp(fmt.Errorf("--tui needs a terminal: %v", err))
		} else {
			tty.Close()
		}
	}
	if set := changed(fs, "verbose", "api", "client-id", "conn", "errors"); !cfg.Frames && len(set) > 0 {
		return seeHelp(fmt.Errorf("%s: only with --frames (selects and details its lines)", strings.Join(set, ", ")))
	}
	if set := changed(fs, "snapshot-length", "buffer-size", "no-promiscuous-mode"); cfg.Live.Interface == "" && len(set) > 0 {
		return seeHelp(fmt.Errorf("%s: only with -i (a setting of live capture)", strings.Join(set, ", ")))
	}
	return nil
}

// changed are the flags of names the command line gave, as written
// (flagName), in names' order.
func changed(fs *pflag.FlagSet, names ...string) []string {
	var set []string
	for _, name := range names {
		if fs.Changed(name) {
			set = append(set, flagName(fs, name))
		}
	}
	return set
}

// flagName is how a flag is written: "-v" for one with a shorthand.
func flagName(fs *pflag.FlagSet, name string) string {
	if f := fs.Lookup(name); f != nil && f.Shorthand != "" {
		return "-" + f.Shorthand
	}
	return "--" + name
}
