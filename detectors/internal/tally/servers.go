package tally

import (
	"net/netip"

	"github.com/kfsniff/kfsniff/cluster"
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
// cluster.Nodes.Label does, in their order.
func Labels(n *cluster.Nodes, aps []netip.AddrPort) []string {
	out := make([]string, len(aps))
	for i, ap := range aps {
		out[i] = ap.String()
		if n != nil {
			out[i] = n.Label(ap, true)
		}
	}
	return out
}
