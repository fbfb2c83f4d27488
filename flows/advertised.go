package flows

import (
	"net/netip"
	"strconv"
)

// AdvertisedAs returns the endpoints, as brokers advertised them
// ("host:port"), that name ap: by its address, or as "localhost" for a
// loopback one (the endpoints whose node ids ServerIDs returns), sorted.
func (n *Nodes) AdvertisedAs(ap netip.AddrPort) []string {
	port := strconv.Itoa(int(ap.Port()))
	var out []string
	if ep := joinHostPort(ap.Addr().Unmap().String(), port); len(n.byEndpoint[ep]) > 0 {
		out = append(out, ep)
	}
	if ep := "localhost:" + port; ap.Addr().IsLoopback() && len(n.byEndpoint[ep]) > 0 {
		// "127.0.0.1:9092" < "[::1]:9092" < "localhost:9092": the
		// address sorts first.
		out = append(out, ep)
	}
	return out
}
