//go:build !linux

package main

import (
	"io"
	"os"
)

// isTerminal reports whether w is a terminal (a character device other
// than /dev/null, approximately).
func isTerminal(w io.Writer) bool {
	if p, ok := w.(*pipeOut); ok {
		w = p.w // standard output watched for its reader going away
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && f.Name() != os.DevNull
}
