package export

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"
)

// An agent capturing the interface it ships on sees its own connections
// to the sink. Their exchanges are known by the exporter's client id, but
// a connection's opening comes before any exchange: the exporter knows
// its connections by their ends instead. Its dialer binds each socket's
// local port before connecting (where the platform allows: bindFirst), so
// that the connection is known before its SYN can reach the capture;
// kgo's connect hook adds the two ends once connected (everywhere).

// maxOwn bounds the exporter's own connections remembered: one per sink
// broker, and those it opens again; the oldest go first.
const maxOwn = 256

// ownConns are the exporter's own connections to the sink by their ends
// (client, server), the newest maxOwn; a client address without an IP
// (bound before connecting) matches any IP with its port.
type ownConns struct {
	mu   sync.Mutex
	set  map[[2]netip.AddrPort]bool
	fifo [][2]netip.AddrPort
}

// add keeps a connection of the exporter's by its ends.
func (o *ownConns) add(client, server netip.AddrPort) {
	k := [2]netip.AddrPort{unmap(client), unmap(server)}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.set == nil {
		o.set = map[[2]netip.AddrPort]bool{}
	}
	if o.set[k] {
		return
	}
	if len(o.fifo) >= maxOwn {
		delete(o.set, o.fifo[0])
		o.fifo = o.fifo[1:]
	}
	o.set[k] = true
	o.fifo = append(o.fifo, k)
}

// addConn keeps a connected socket's ends.
func (o *ownConns) addConn(local, remote net.Addr) {
	l, ok1 := local.(*net.TCPAddr)
	r, ok2 := remote.(*net.TCPAddr)
	if ok1 && ok2 {
		o.add(l.AddrPort(), r.AddrPort())
	}
}

// has reports whether client-server is one of the exporter's connections;
// forget drops it (it closed).
func (o *ownConns) has(client, server netip.AddrPort, forget bool) bool {
	server = unmap(server)
	o.mu.Lock()
	defer o.mu.Unlock()
	found := false
	for _, k := range [2][2]netip.AddrPort{{unmap(client), server}, {netip.AddrPortFrom(netip.Addr{}, client.Port()), server}} {
		if !o.set[k] {
			continue
		}
		found = true
		if forget {
			delete(o.set, k)
			i := slices.Index(o.fifo, k)
			o.fifo = slices.Delete(o.fifo, i, i+1)
		}
	}
	return found
}

func unmap(ap netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()) }

// dialer is kgo's dial (a 10 s timeout; with TLS, as kgo.DialTLSConfig
// does it) with each socket's local port bound and kept in own before it
// connects.
func dialer(own *ownConns, tlsCfg *tls.Config) func(ctx context.Context, network, host string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, address string, c syscall.RawConn) error {
		server, err := netip.ParseAddrPort(address)
		if err != nil {
			return nil
		}
		if port, ok := bindFirst(c, server.Addr().Unmap().Is4()); ok {
			own.add(netip.AddrPortFrom(netip.Addr{}, port), server)
		}
		return nil // not bound: connect binds, the connect hook tells
	}}
	if tlsCfg == nil {
		return d.DialContext
	}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		c := tlsCfg.Clone()
		if c.ServerName == "" {
			server, _, err := net.SplitHostPort(host)
			if err != nil {
				return nil, fmt.Errorf("unable to split host:port for dialing: %w", err)
			}
			c.ServerName = server
		}
		return (&tls.Dialer{NetDialer: d, Config: c}).DialContext(ctx, network, host)
	}
}
