package flows

import "net/netip"

// AdvertisedAs returns the endpoints, as brokers advertised them
// ("host:port"), that name ap: by its address, or as "localhost" for a
// loopback one (the endpoints whose node ids ServerIDs returns), sorted.
func (n *Nodes) AdvertisedAs(ap netip.AddrPort) []string {
	addr, local := endpointsOf(ap)
	var out []string
	if len(n.byEndpoint[addr]) > 0 {
		out = append(out, addr)
	}
	if local != "" && len(n.byEndpoint[local]) > 0 {
		// "127.0.0.1:9092" < "[::1]:9092" < "localhost:9092": the
		// address sorts first.
		out = append(out, local)
	}
	return out
}
