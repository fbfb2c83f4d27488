package metadataquorumdown_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/metadataquorumdown"
	"github.com/kfsniff/kfsniff/flows"
)

// Brokers 1-3 (10.5.0.21-23) fetch the metadata log; controllers 1001-1003
// at 10.5.0.11-13:9093. fine answers a raft fetch from the leader 1001.
func fine() kmsg.Response { return dt.RaftFetched(0, 500, -1, -1, "", 0, nil) }

// refused answers NOT_LEADER_OR_FOLLOWER naming leader 1001 (the dead one).
func refused() kmsg.Response { return dt.RaftFetched(6, -1, 1001, 4, "10.5.0.11", 9093, nil) }

// traffic: brokers' raft fetches every 200 ms for span; before down and
// from up (if > 0) answered by the leader 1001, in between by 1003 naming
// 1001; connection attempts to 1001 and 1002 refused every second while
// down. fetchers: how many brokers fetch.
func traffic(h *dt.Harness, span, down, up time.Duration, fetchers int) {
	var s dt.Schedule
	lead := make([]*flows.Conn, fetchers)
	other := make([]*flows.Conn, fetchers)
	for b := range fetchers {
		lead[b] = h.Conn(fmt.Sprintf("10.5.0.2%d:4000%d", b+1, b), "10.5.0.11:9093")
		other[b] = h.Conn(fmt.Sprintf("10.5.0.2%d:4100%d", b+1, b), "10.5.0.13:9093")
	}
	for t := time.Duration(0); t < span; t += 200 * time.Millisecond {
		for b := range fetchers {
			id := fmt.Sprintf("raft-client-%d", b+1)
			req := dt.RaftFetch(int32(b+1), 500, 4)
			if t < down || up > 0 && t >= up {
				s.Add(t, lead[b], id, req, fine())
			} else {
				s.Add(t, other[b], id, req, refused())
			}
		}
	}
	s.Run(h)
	end := span
	if up > 0 {
		end = up
	}
	for t := down; t < end; t += time.Second {
		for i, srv := range []string{"10.5.0.11:9093", "10.5.0.12:9093"} {
			h.ConnEvent(&flows.ConnEvent{Kind: flows.ConnRefused, Client: netip.MustParseAddrPort(fmt.Sprintf("10.5.0.21:5%04d", int(t/time.Millisecond)%10000+i)),
				Server: netip.MustParseAddrPort(srv), Time: dt.At(t), Attempts: 1})
		}
	}
}

func TestQuorumDown(t *testing.T) {
	dt.Run(t, metadataquorumdown.Analyzer, []dt.Case{
		{
			Name:    "2 of 3 controllers gone for 40 s, then back",
			Traffic: func(h *dt.Harness) { traffic(h, 60*time.Second, 10*time.Second, 50*time.Second, 3) },
			Want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &metadataquorumdown.Finding{
					RaftFetches: 600, RefusedConnects: 80, Fetchers: []int32{1, 2, 3}, LeaderID: int32(1001),
					LeaderEndpoint: "10.5.0.11:9093", Answering: []string{"10.5.0.13:9093"},
					Down: []string{"10.5.0.11:9093", "10.5.0.12:9093"}, Error: "NOT_LEADER_OR_FOLLOWER",
					Ongoing: false, HeldS: 40.002,
				}, Exact: []string{"Ongoing"},
				Summary: []string{"the KRaft metadata quorum has no working leader: no raft fetch succeeded for 40.0 s while 3 nodes (1, 2, 3) kept fetching; " +
					"the answers name leader node 1001 (10.5.0.11:9093), which refuses connections; 2 controller endpoint(s) down (10.5.0.11:9093, 10.5.0.12:9093), 1 answering"},
			}},
			Explanation: []string{"A quorum needs a majority of the voters", "no ISR shrinks"},
			Next:        []string{"kafka-metadata-quorum.sh --bootstrap-controller 10.5.0.13:9093 describe --status"},
		},
		{
			Name:    "still down at the end after 12 s",
			Traffic: func(h *dt.Harness) { traffic(h, 20*time.Second, 8*time.Second, 0, 2) },
			Want:    []dt.Want{{Severity: detectors.Error, Detail: &metadataquorumdown.Finding{Ongoing: true}}},
		},
		{
			Name:    "down for 8 s: a warning",
			Traffic: func(h *dt.Harness) { traffic(h, 20*time.Second, 5*time.Second, 13*time.Second, 2) },
			Want:    []dt.Want{{Severity: detectors.Warning}},
		},
		{
			Name:    "near miss: a controller failover of 2 s",
			Traffic: func(h *dt.Harness) { traffic(h, 20*time.Second, 5*time.Second, 7*time.Second, 3) },
		},
		{
			Name:    "near miss: one node's raft fetches fail for 30 s (its own path, not the quorum)",
			Traffic: func(h *dt.Harness) { traffic(h, 40*time.Second, 5*time.Second, 35*time.Second, 1) },
		},
		{
			Name: "near miss: one node fails while another succeeds",
			Traffic: func(h *dt.Harness) {
				traffic(h, 40*time.Second, 5*time.Second, 35*time.Second, 1)
				ok := h.Conn("10.5.0.22:42000", "10.5.0.11:9093")
				dt.Every(h, ok, "raft-client-2", 150, 0, 250*time.Millisecond, time.Millisecond,
					func(int) (kmsg.Request, kmsg.Response) { return dt.RaftFetch(2, 500, 4), fine() })
			},
		},
	}, nil)
}
