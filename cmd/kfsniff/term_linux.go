package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	if p, ok := w.(*pipeOut); ok {
		w = p.w // standard output watched for its reader going away
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
