package main

import (
	"io"
	"os"
	"path/filepath"
)

// writeAtomic writes a file kfsniff makes (--html, --write-expect, check
// --junit) to name: into a temporary file created exclusively (a fresh
// random name, O_EXCL) in name's directory, renamed over name once
// complete. So a failure never leaves half a file nor destroys an older
// one, and nothing placed beside name is written through: a link named
// NAME.tmp (or a capture so named) was followed by the plain write of
// NAME.tmp it replaces. Renaming over a link replaces the link, not what
// it points to. Whether name is an input is the caller's to refuse.
func writeAtomic(name string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = write(f)
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
