// Package internalerror reports connections kfsniff abandoned after an
// internal error (a recovered panic), so that a bug met by hostile input
// is visible rather than silently losing traffic: the pipeline marks the
// connection broken at the packet where it happened and goes on with the
// rest of the capture.
package internalerror

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:        "internal-error",
	NotRecorded: "it finds kfsniff's own bugs, not client behaviour; report/testdata/golden/vlan.pcap.internal-error.* shows it on a capture with a panic injected into the analysis.",
	Severity:    detectors.Error,
	Doc: "kfsniff hit an internal error (a recovered panic) while handling a connection, in its decoding or " +
		"in a rule: the connection was abandoned from that packet on, the rest of the capture was analysed. " +
		"One finding per abandoned connection, always an error: what that connection carried afterwards is " +
		"missing from every count and rule. This is a kfsniff bug: report it with the packet number. (A " +
		"panic before a connection is started, while its first bytes are held to tell client from server, " +
		"leaves no connection to name and is not reported here.)",
}, Params{}, New)

// Params: the rule has none.
type Params struct{}

// New makes the rule.
func New(Params) detectors.Rule { return rule{} }

type rule struct{}

// Findings implements detectors.Rule: one finding per abandoned
// connection, in connection order.
func (rule) Findings(p *detectors.Pass) []detectors.Finding {
	var broken []*flows.Conn
	for _, c := range p.Conns {
		if c.Broken {
			broken = append(broken, c)
		}
	}
	slices.SortFunc(broken, func(a, b *flows.Conn) int { return cmp.Compare(a.ID, b.ID) })
	out := make([]detectors.Finding, 0, len(broken))
	for _, c := range broken {
		out = append(out, detectors.Finding{
			Severity: detectors.Error,
			First:    c.FirstSeen,
			Last:     c.LastSeen,
			Conns:    []int{c.ID},
			Evidence: []detectors.Evidence{{File: c.BrokenFile, Packet: c.BrokenPacket, Conn: c.ID, What: "internal error: " + c.BrokenWhy}},
			Subject:  detectors.Subject{Clients: []netip.Addr{c.Client.Addr().Unmap()}, Servers: []netip.AddrPort{c.Server}},
			Detail: &Finding{Client: c.Client.String(), Server: c.Server.String(), Error: c.BrokenWhy,
				Conn: c.ID, Packet: c.BrokenPacket, RequestsBefore: int64(c.Requests)},
		})
	}
	return out
}
