package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// refuseOverwrite refuses -w onto an input, before anything is opened for
// writing: the same file by inode, whatever the name (a hard link, a
// symbolic link, another path), and standard input when it is a file
// (kfsniff -r - -w x.pcap < x.pcap). Writing would truncate the capture
// being read (kfsniff -r X -w X turned a 25.7 MB capture into 1 MB, exit 0).
func refuseOverwrite(cfg Config, stdin io.Reader) error {
	if cfg.Write == "" {
		return nil
	}
	out, err := os.Stat(cfg.Write)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a new file cannot be an input
	}
	if err != nil {
		return nil // creating it will say what is wrong
	}
	for _, name := range cfg.Files {
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
			return fmt.Errorf("-w %s: that file is the input %s; writing to it would destroy the capture: write to another file", cfg.Write, name)
		}
	}
	return nil
}
