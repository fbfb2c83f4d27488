package pipeline

import (
	"fmt"
	"testing"

	"github.com/kfsniff/kfsniff/internal/captest"
)

// TestOneSided: the real-client captures with one direction of every
// connection kept, as a mirror port that delivers one direction gives
// them.
//
// Requests only: every request is found as in the whole capture, none is
// called unanswered (a capture with no packet of the server's direction
// cannot know about responses), and the report says the connection is
// one-sided: "one_sided": "client->server" in connections[], and
// totals.one_sided_connections.
//
// Responses only: every response frame is counted (unmatched, their
// requests unknown), none is read as a request, and each connection is
// marked "one_sided": "server->client" with its client and server the
// right way round.
func TestOneSided(t *testing.T) {
	var all tally
	caps := realClientCaptures(t)
	for _, s := range caps {
		t.Run(s.id, func(t *testing.T) {
			for _, d := range []int{captest.ToServer, captest.ToClient} {
				keep := captest.OneSided(s.tr, d)
				what := "only " + captest.DirName(d) + " packets kept"
				a := analyseVariant(t, s, keep, 1)
				if s == caps[0] {
					sameOnWorkers(t, s, what, keep, a, 2)
				}
				problems, n := check(s, keep, a, checkOpts{})
				r := &a.rep
				if d == captest.ToServer && r.Totals.UnansweredRequests != 0 {
					problems.add(other, fmt.Sprintf("%d requests called unanswered (totals.unanswered_requests), though no packet of the server's direction is in the capture", r.Totals.UnansweredRequests))
				}
				if d == captest.ToClient {
					want := len(s.tr.Frames(captest.ToClient))
					if r.Totals.UnmatchedResponses != int64(want) {
						problems.add(other, fmt.Sprintf("totals.unmatched_responses = %d; the capture holds %d response frames", r.Totals.UnmatchedResponses, want))
					}
				}
				oneSided := 0
				for _, c := range r.Connections {
					switch {
					case c.OneSided == nil:
						problems.add(other, fmt.Sprintf("connection #%d %s -> %s: no \"one_sided\" field; want %q", c.ID, c.Client, c.Server, captest.DirName(d)))
					case *c.OneSided != captest.DirName(d):
						problems.add(other, fmt.Sprintf("connection #%d %s -> %s: \"one_sided\": %q; want %q", c.ID, c.Client, c.Server, *c.OneSided, captest.DirName(d)))
					default:
						oneSided++
					}
					if d == captest.ToServer && c.Unanswered != 0 {
						problems.add(other, fmt.Sprintf("connection #%d %s -> %s: %d requests called unanswered", c.ID, c.Client, c.Server, c.Unanswered))
					}
				}
				switch ts := r.Totals.OneSidedConnections; {
				case ts == nil:
					problems.add(other, fmt.Sprintf("no totals.one_sided_connections; want %d", len(r.Connections)))
				case *ts != len(r.Connections):
					problems.add(other, fmt.Sprintf("totals.one_sided_connections = %d; want %d (every connection)", *ts, len(r.Connections)))
				}
				// A connection whose kept direction carries no Kafka
				// byte (a broker closing it before answering) has
				// nothing that says Kafka: it is not reported.
				known := 0
				for _, c := range s.tr.Known() {
					if len(c.Frames[d]) > 0 {
						known++
					}
				}
				if len(r.Connections) != known {
					problems.add(other, fmt.Sprintf("%d Kafka connections reported; the capture has %d with Kafka bytes in that direction", len(r.Connections), known))
				}
				if problems.n > 0 {
					n.failed = 1
					t.Errorf("%s, %s: %s", s.name, what, &problems)
				}
				all.add(n)
			}
		})
	}
	t.Logf("one-sided variants of %d captures: %s", len(caps), all)
}
