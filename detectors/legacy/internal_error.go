package legacy

import (
	"fmt"
	"sort"
)

// internalErrorSpec reports connections kfsniff abandoned after an internal
// error (a recovered panic), so that a bug met by hostile input is visible
// rather than silently losing traffic.
func internalErrorSpec() Spec {
	return Spec{
		ID:       "internal-error",
		Severity: Error,
		Summary: "kfsniff hit an internal error (a recovered panic) while handling a connection: the connection " +
			"was abandoned from that packet on, the rest of the capture was analysed. This is a kfsniff bug: " +
			"report it with the packet number.",
		New: func(Params) Detector { return internalError{} },
	}
}

type internalError struct{}

// Findings implements Detector: one finding per abandoned connection.
func (internalError) Findings(env *Env) []Finding {
	var out []Finding
	for _, c := range env.Conns {
		if !c.Broken {
			continue
		}
		out = append(out, Finding{
			Severity: Error,
			Summary:  fmt.Sprintf("internal error on connection #%d %s -> %s at packet %d; the rest of that connection was not analysed", c.ID, c.Client, c.Server, c.BrokenPacket),
			First:    c.FirstSeen,
			Last:     c.LastSeen,
			Conns:    []int{c.ID},
			Counts:   map[string]int64{"requests_before": int64(c.Requests)},
			Fields:   map[string]any{"client": c.Client.String(), "server": c.Server.String(), "error": c.BrokenWhy},
			Evidence: []Evidence{{File: c.BrokenFile, Packet: c.BrokenPacket, Conn: c.ID, What: "internal error: " + c.BrokenWhy}},
			Explanation: "kfsniff recovered from a panic while decoding or analysing this connection. The connection's " +
				"counts stop at that packet; every other connection was analysed normally.",
			Next: fmt.Sprintf("Report the bug with the capture (or `kfsniff -r FILE -c %d -w excerpt.pcap` around packet %d).", c.BrokenPacket, c.BrokenPacket),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Conns[0] < out[j].Conns[0] })
	return out
}
