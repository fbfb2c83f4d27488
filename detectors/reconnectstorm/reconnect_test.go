package reconnectstorm_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/reconnectstorm"
)

const broker = "10.1.0.10:9092"

const ms = time.Millisecond

// churn: a client connecting n times every period from start, each
// connection sending ApiVersions and closing after life (0: staying open).
func churn(h *dt.Harness, host string, start time.Duration, n int, period, life time.Duration) {
	for i := range n {
		at := start + time.Duration(i)*period
		c := h.OpenAt(fmt.Sprintf("%s:%d", host, 40000+i), broker, dt.At(at))
		h.Call(c, dt.At(at+ms), ms, "app", dt.ApiVersions(), dt.ApiVersionsOK())
		if life > 0 {
			h.CloseAt(c, dt.At(at+life))
		}
	}
}

// working: like churn, but each connection goes on after ApiVersions
// with Metadata, ApiVersions again and Metadata again before it closes.
func working(h *dt.Harness, host string, start time.Duration, n int, period, life time.Duration) {
	for i := range n {
		at := start + time.Duration(i)*period
		c := h.OpenAt(fmt.Sprintf("%s:%d", host, 40000+i), broker, dt.At(at))
		for j := range 2 {
			h.Call(c, dt.At(at+time.Duration(4*j+1)*ms), ms, "app", dt.ApiVersions(), dt.ApiVersionsOK())
			req, resp := dt.Metadata(12, nil)
			h.Call(c, dt.At(at+time.Duration(4*j+3)*ms), ms, "app", req, resp)
		}
		h.CloseAt(c, dt.At(at+life))
	}
}

func TestReconnectStorm(t *testing.T) {
	dt.Run(t, reconnectstorm.Analyzer, []dt.Case{
		{
			Name: "healthy: three clients starting with six connections each give nothing",
			Traffic: func(h *dt.Harness) {
				for i := range 3 {
					churn(h, fmt.Sprintf("10.2.0.%d", i+1), time.Duration(i)*ms, 6, 10*ms, 0)
				}
			},
		},
		{
			Name: "a broker restart: 40 hosts reconnect within a second and stay: info",
			Traffic: func(h *dt.Harness) {
				for i := range 40 {
					churn(h, fmt.Sprintf("10.2.0.%d", i+1), time.Duration(i)*25*ms, 1, 0, 0)
				}
			},
			End: 30 * time.Second,
			Want: []dt.Want{{Severity: detectors.Info, Detail: &reconnectstorm.Finding{
				Attempts: 40, ClientHosts: 40, ShortLived: 0, Storm: false,
			}, Exact: []string{"ShortLived", "Storm"},
				Summary: []string{"burst of new connections to 10.1.0.10:9092: 40 connection attempts"}}},
		},
		{
			Name:    "a client reconnecting every 200 ms for 6 s, each connection dying after ApiVersions: a warning",
			Traffic: func(h *dt.Harness) { churn(h, "10.2.0.5", time.Second, 31, 200*ms, 50*ms) },
			End:     30 * time.Second,
			Want: []dt.Want{{Severity: detectors.Warning,
				Detail: &reconnectstorm.Finding{
					Attempts: 31, BurstAttempts: 31, ShortLived: 31, HandshakeOnly: 31, APIVersionsRequests: 31,
					Storm: true, ChurnShare: 1.0, BurstS: 6.0, MedianLifetimeS: 0.05,
					Clients: []reconnectstorm.HostCount{{Host: "10.2.0.5", Attempts: 31}},
				},
				Summary:  []string{"reconnect storm to 10.1.0.10:9092: 31 connection attempts in 6.0 s (peak 5/s) from 1 client host, 100% refused or short-lived"},
				Evidence: []uint64{1}}},
		},
		{
			// A connection's requests after its first beyond the
			// handshake are let go without a lookup (rule.beyond):
			// ApiVersions sent again must still be counted.
			Name:    "a client reconnecting every 200 ms for 6 s, each connection dying after Metadata: not handshake-only, every ApiVersions counted",
			Traffic: func(h *dt.Harness) { working(h, "10.2.0.5", time.Second, 31, 200*ms, 50*ms) },
			End:     30 * time.Second,
			Want: []dt.Want{{Severity: detectors.Warning,
				Detail: &reconnectstorm.Finding{
					Attempts: 31, ShortLived: 31, HandshakeOnly: 0, APIVersionsRequests: 62,
				}, Exact: []string{"HandshakeOnly"}}},
		},
		{
			Name:    "near miss: 19 attempts within 10 s give nothing",
			Traffic: func(h *dt.Harness) { churn(h, "10.2.0.5", time.Second, 19, 550*ms, 50*ms) },
		},
		{
			Name:    "near miss the other way: 20 within 10 s are a storm",
			Traffic: func(h *dt.Harness) { churn(h, "10.2.0.5", time.Second, 20, 520*ms, 50*ms) },
			End:     time.Minute,
			Want:    []dt.Want{{Severity: detectors.Warning, Detail: &reconnectstorm.Finding{BurstAttempts: 20}}},
		},
		{
			Name:    "near miss: a storm of 2.9 s is info",
			Traffic: func(h *dt.Harness) { churn(h, "10.2.0.5", time.Second, 30, 100*ms, 50*ms) },
			End:     time.Minute,
			Want:    []dt.Want{{Severity: detectors.Info, Detail: &reconnectstorm.Finding{Storm: true, BurstS: 2.9}}},
		},
		{
			Name:    "a storm of 3 s is a warning",
			Traffic: func(h *dt.Harness) { churn(h, "10.2.0.5", time.Second, 31, 100*ms, 50*ms) },
			End:     time.Minute,
			Want:    []dt.Want{{Severity: detectors.Warning, Detail: &reconnectstorm.Finding{BurstS: 3.0}}},
		},
		{
			Name: "near miss: 45% churned (9 of 20 short-lived), the burst is info",
			Traffic: func(h *dt.Harness) {
				churn(h, "10.2.0.5", time.Second, 9, 400*ms, 50*ms)
				churn(h, "10.2.0.6", 1200*ms, 11, 400*ms, 0)
			},
			End: time.Minute,
			Want: []dt.Want{{Severity: detectors.Info, Detail: &reconnectstorm.Finding{
				Storm: false, ChurnShare: 0.45,
			}, Exact: []string{"Storm"}}},
		},
		{
			Name: "half churned (10 of 20): a storm",
			Traffic: func(h *dt.Harness) {
				churn(h, "10.2.0.5", time.Second, 10, 400*ms, 50*ms)
				churn(h, "10.2.0.6", 1200*ms, 10, 400*ms, 0)
			},
			End:  time.Minute,
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &reconnectstorm.Finding{Storm: true, ChurnShare: 0.5}}},
		},
		{
			Name: "near miss: connections living 2 s (short-lived 2 s) do not churn",
			Traffic: func(h *dt.Harness) {
				churn(h, "10.2.0.5", time.Second, 31, 200*ms, 2*time.Second)
			},
			End:  time.Minute,
			Want: []dt.Want{{Severity: detectors.Info, Detail: &reconnectstorm.Finding{ShortLived: 0}, Exact: []string{"ShortLived"}}},
		},
		{
			Name: "SYNs refused by a restarting broker, 25 in 5 s: a warning",
			Traffic: func(h *dt.Harness) {
				for i := range 25 {
					h.RefusedAt(fmt.Sprintf("10.2.0.%d:40000", i%5+1), broker, dt.At(time.Second+time.Duration(i)*200*ms), 1)
				}
			},
			End: time.Minute,
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &reconnectstorm.Finding{
				Refused: 25, Opened: 0, ClientHosts: 5,
			}, Exact: []string{"Opened"}}},
		},
		{
			Name:    "still reconnecting at the end after 10 s: an error",
			Traffic: func(h *dt.Harness) { churn(h, "10.2.0.5", time.Second, 51, 200*ms, 50*ms) },
			Want:    []dt.Want{{Severity: detectors.Error, Detail: &reconnectstorm.Finding{Ongoing: true}, Summary: []string{"still going on at the end"}}},
		},
		{
			Name:     "min-churn raised to 1.1: the looping client is info",
			Settings: map[string]string{"min-churn": "1.1"},
			Traffic:  func(h *dt.Harness) { churn(h, "10.2.0.5", time.Second, 31, 200*ms, 50*ms) },
			End:      time.Minute,
			Want:     []dt.Want{{Severity: detectors.Info}},
		},
	}, nil)
}

// oneRequest: a client opening a connection per request, as kafka-go's
// consumer groups do (FindCoordinator, JoinGroup, LeaveGroup each on a
// connection of its own, no ApiVersions, closed at once; recorded:
// fixtures/heldout/group-churn-kafka-go), n connections period apart;
// versions: each sends ApiVersions first, as a client starting over does.
func oneRequest(h *dt.Harness, n int, period time.Duration, versions bool) {
	for i := range n {
		at := time.Second + time.Duration(i)*period
		c := h.OpenAt(fmt.Sprintf("10.2.0.5:%d", 40000+i), broker, dt.At(at))
		if versions {
			h.Call(c, dt.At(at+ms), ms, "billing-1", dt.ApiVersions(), dt.ApiVersionsOK())
		}
		req, resp := dt.Metadata(12, nil)
		h.Call(c, dt.At(at+3*ms), ms, "billing-1", req, resp)
		h.CloseAt(c, dt.At(at+5*ms))
	}
}

// TestReconnectOneRequestConnections: issue 30, healthy change stays
// quiet: a client that opens a connection per request by design is no
// storm (a burst, info); the same connections each opened with
// ApiVersions, a client starting over, still churn (near miss).
func TestReconnectOneRequestConnections(t *testing.T) {
	dt.Run(t, reconnectstorm.Analyzer, []dt.Case{
		{Name: "100 connections in 10 s, one request each, no ApiVersions: a burst, info",
			Traffic: func(h *dt.Harness) { oneRequest(h, 100, 100*ms, false) }, End: time.Minute,
			Want: []dt.Want{{Severity: detectors.Info, Detail: &reconnectstorm.Finding{
				Attempts: 100, ShortLived: 0,
			}, Exact: []string{"ShortLived"}}}},
		{Name: "near miss: the same with ApiVersions first: a storm",
			Traffic: func(h *dt.Harness) { oneRequest(h, 100, 100*ms, true) }, End: time.Minute,
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &reconnectstorm.Finding{Attempts: 100, ShortLived: 100}}}},
	}, nil)
}
