package tally

import (
	"net/netip"

	"github.com/kfsniff/kfsniff/flows"
)

// AddrStrings shows addresses as text, in their order (Conns.ServerAddrs:
// by address, so 10.0.0.9 comes before 10.0.0.10).
func AddrStrings(aps []netip.AddrPort) []string {
	out := make([]string, len(aps))
	for i, ap := range aps {
		out[i] = ap.String()
	}
	return out
}

// Labels shows server addresses with the node advertised at each, as
// flows.Nodes.Label does, in their order.
func Labels(n *flows.Nodes, aps []netip.AddrPort) []string {
	out := make([]string, len(aps))
	for i, ap := range aps {
		out[i] = ap.String()
		if n != nil {
			out[i] = n.Label(ap, true)
		}
	}
	return out
}
