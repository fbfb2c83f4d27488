package detectortest

import (
	"net/netip"

	"github.com/kfsniff/kfsniff/flows"
)

// Accepting records that server ("ip:port") was seen accepting a
// connection (a SYN-ACK), Kafka or not, as the pipeline's Pass.Listeners
// says.
func (h *Harness) Accepting(server string) {
	if h.listeners == nil {
		h.listeners = flows.NewListeners()
	}
	h.listeners.Learn(netip.MustParseAddrPort(server), 1)
}
