package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// refuseOverwrite refuses -w onto an input, before anything is opened for
// writing: the same file by inode, whatever the name (a hard link, a
// symbolic link, another path), and standard input when it is a file
// (kfsniff -r - -w x.pcap < x.pcap). Writing would truncate the capture
// being read (kfsniff -r X -w X turned a 25.7 MB capture into 1 MB, exit 0).
func (c *command) refuseOverwrite() error {
	cfg := &c.cfg
	if in, ok := inputAt(cfg.Write, cfg.Files, c.stdin); ok {
		return fmt.Errorf("-w %s: that file is the input %s; writing to it would destroy the capture: write to another file", cfg.Write, in)
	}
	return nil
}

// inputAt returns the input (as named on the command line) that path is,
// if it is one.
func inputAt(path string, files []string, stdin io.Reader) (string, bool) {
	if path == "" {
		return "", false
	}
	out, err := os.Stat(path)
	if err != nil {
		return "", false // a new file cannot be an input; creating it says what else is wrong
	}
	for _, name := range files {
		var in fs.FileInfo
		if name == "-" {
			f, ok := stdin.(interface{ Stat() (fs.FileInfo, error) })
			if !ok {
				continue
			}
			if in, err = f.Stat(); err != nil || !in.Mode().IsRegular() {
				continue
			}
			name = "- (standard input)"
		} else if in, err = os.Stat(name); err != nil {
			continue // opening it will say what is wrong
		}
		if os.SameFile(in, out) {
			return name, true
		}
	}
	return "", false
}

// refuseSave is the UI's save key's check: the capture so far is never
// saved onto an input.
func refuseSave(path string, files []string, stdin io.Reader) error {
	if in, ok := inputAt(path, files, stdin); ok {
		return fmt.Errorf("%s is the input %s: saving there would destroy it; choose another name", path, in)
	}
	return nil
}

// refuseSameOutput refuses two outputs into one file (-w, --html,
// --write-expect), or an output onto the --expect file read: the last
// written replaced the other, so that -w x --write-expect x left an
// expectation where the capture was asked for, with exit 0. The same
// name, or the same existing file by inode.
func (c *command) refuseSameOutput() error {
	cfg := &c.cfg
	outs := []struct{ flag, name string }{{"--expect", cfg.Expect.File}, {"-w", cfg.Write}, {"--html", cfg.HTML}, {"--write-expect", cfg.Expect.Write}}
	for i, a := range outs {
		for _, b := range outs[i+1:] {
			if a.name == "" || b.name == "" || a.name == "-" || b.name == "-" {
				continue
			}
			if filepath.Clean(a.name) == filepath.Clean(b.name) || sameFile(a.name, b.name) {
				return fmt.Errorf("%s %s and %s %s are one file: writing one would destroy the other; give each its own name", a.flag, a.name, b.flag, b.name)
			}
		}
	}
	return nil
}

// refuseMissingDir refuses, before the analysis, a --write-expect file
// whose directory does not exist: it is written at the end, and a long
// analysis ended in "no such file or directory", exit 1 (-w is created
// at the start and says so then; checkHTML checks --html's).
func (c *command) refuseMissingDir() error {
	name := c.cfg.Expect.Write
	if name == "" || name == "-" {
		return nil
	}
	dir := filepath.Dir(name)
	if st, err := os.Stat(dir); err != nil {
		return fmt.Errorf("--write-expect %s: %v", name, err)
	} else if !st.IsDir() {
		return fmt.Errorf("--write-expect %s: %s is not a directory", name, dir)
	}
	return nil
}
