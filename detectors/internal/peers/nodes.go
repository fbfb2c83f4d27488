package peers

import (
	"net/netip"

	"github.com/kfsniff/kfsniff/detectors"
)

// NodeOf is the node a client speaks for: fetcher (the node its requests
// declare, flows.Message.Fetcher) if known (>= 0), else the node its host is
// known as, else -1.
func NodeOf(p *detectors.Pass, fetcher int32, host netip.Addr) int32 {
	if fetcher >= 0 {
		return fetcher
	}
	if p.Nodes != nil {
		return p.Nodes.Host(host)
	}
	return -1
}

// IsNode says whether the server at ap is node id, and whether that is
// known: by an advertised endpoint equal to ap, or by the node id learned
// for ap. eps are the node's endpoints (Endpoints).
func IsNode(p *detectors.Pass, ap netip.AddrPort, id int32, eps []string) (is, known bool) {
	s := Addr(ap).String()
	for _, ep := range eps {
		if ep == s {
			return true, true
		}
	}
	if p.Nodes != nil {
		if n := p.Nodes.Server(ap); n >= 0 {
			return n == id, true
		}
	}
	if len(eps) == 0 {
		return false, false
	}
	for _, ep := range eps {
		if _, err := netip.ParseAddrPort(ep); err != nil {
			return false, false // a host name: cannot tell
		}
	}
	return false, true
}

// Endpoints are node id's endpoints: known first (one a response gave, if
// not ""), then those learned from the traffic.
func Endpoints(p *detectors.Pass, id int32, known string) []string {
	var eps []string
	if known != "" {
		eps = append(eps, known)
	}
	if p.Nodes != nil && id >= 0 {
		for _, ep := range p.Nodes.EndpointsOf(id) {
			if ep != known {
				eps = append(eps, ep)
			}
		}
	}
	return eps
}
