//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package export

import "syscall"

// bindFirst does nothing here: the connect hook alone tells the
// exporter's connections.
func bindFirst(syscall.RawConn, bool) (uint16, bool) { return 0, false }
