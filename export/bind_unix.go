//go:build linux || darwin || freebsd || netbsd || openbsd

package export

import "syscall"

// bindFirst binds an unconnected socket to an ephemeral port of the
// wildcard address (of IPv4 or IPv6) and returns the port.
func bindFirst(c syscall.RawConn, v4 bool) (port uint16, ok bool) {
	c.Control(func(fd uintptr) {
		var sa syscall.Sockaddr = &syscall.SockaddrInet6{}
		if v4 {
			sa = &syscall.SockaddrInet4{}
		}
		if syscall.Bind(int(fd), sa) != nil {
			return
		}
		switch got, err := syscall.Getsockname(int(fd)); a := got.(type) {
		case *syscall.SockaddrInet4:
			port, ok = uint16(a.Port), err == nil
		case *syscall.SockaddrInet6:
			port, ok = uint16(a.Port), err == nil
		}
	})
	return port, ok
}
