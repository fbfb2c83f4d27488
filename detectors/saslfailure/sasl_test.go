package saslfailure_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/saslfailure"
	"github.com/kfsniff/kfsniff/flows"
)

const broker = "10.1.0.10:9092"

const ms = time.Millisecond

const badPassword = "Authentication failed: Invalid username or password"

// login authenticates with SCRAM on c at at (two round trips), the last
// answered with lifetime (ms), and returns when it ended.
func login(h *dt.Harness, c *flows.Conn, at time.Duration, lifetime int64) time.Duration {
	h.Call(c, dt.At(at), ms, "app", dt.SaslHandshake("SCRAM-SHA-256"), dt.SaslHandshaked(0, "SCRAM-SHA-256"))
	h.Call(c, dt.At(at+2*ms), ms, "app", dt.SaslAuthenticate("n,,n=app,r=nonce"), dt.SaslAuthenticated(0, "", 0))
	h.Call(c, dt.At(at+4*ms), ms, "app", dt.SaslAuthenticate("c=biws,r=nonce,p=proof"), dt.SaslAuthenticated(0, "", lifetime))
	return at + 5*ms
}

// expire sends a request on c at at that the broker answers by closing
// the connection: the close, and the request found unanswered (flows
// reports those at the end of the capture; closeFirst orders them so).
func expire(h *dt.Harness, c *flows.Conn, at time.Duration, closeFirst bool) {
	q, _ := h.Call(c, dt.At(at), 0, "app", dt.Fetch(500), nil)
	if closeFirst {
		h.CloseAt(c, dt.At(at+ms))
		h.Unanswered(c, q)
		return
	}
	h.Unanswered(c, q)
	h.CloseAt(c, dt.At(at+ms))
}

// badLogin fails with PLAIN and a wrong password on a new connection.
func badLogin(h *dt.Harness, port int, at time.Duration) {
	c := h.Conn(fmt.Sprintf("10.2.0.5:%d", port), broker)
	h.Call(c, dt.At(at), ms, "app", dt.SaslHandshake("PLAIN"), dt.SaslHandshaked(0, "PLAIN", "SCRAM-SHA-256"))
	h.Call(c, dt.At(at+2*ms), ms, "app", dt.SaslAuthenticate("\x00app\x00wrong"), dt.SaslAuthenticated(58, badPassword, 0))
}

// failFor: bad logins every second for d from start, then a good one if
// heal.
func failFor(h *dt.Harness, start, d time.Duration, heal bool) {
	n := int(d / time.Second)
	for i := 0; i <= n; i++ {
		badLogin(h, 40000+i, start+time.Duration(i)*d/time.Duration(max(n, 1)))
	}
	if heal {
		login(h, h.Conn("10.2.0.5:41000", broker), start+d+time.Second, 0)
	}
}

func TestSaslFailure(t *testing.T) {
	dt.Run(t, saslfailure.Analyzer, []dt.Case{
		{
			Name: "healthy: SCRAM logins, and re-authentications before the session lifetime, give nothing",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.2.0.5:40000", broker)
				at := login(h, c, time.Second, 10000)
				at = login(h, c, at+9*time.Second, 10000)
				login(h, c, at+9*time.Second, 10000)
				h.CloseAt(c, dt.At(25*time.Second))
				login(h, h.Conn("10.2.0.6:40000", broker), time.Second, 0)
			},
		},
		{
			Name: "an unsupported mechanism, three tries, never authenticated: a warning naming both sides' mechanisms",
			Traffic: func(h *dt.Harness) {
				for i := range 3 {
					c := h.Conn(fmt.Sprintf("10.2.0.5:%d", 40000+i), broker)
					h.Call(c, dt.At(time.Second+time.Duration(i)*300*ms), ms, "app", dt.SaslHandshake("OAUTHBEARER"),
						dt.SaslHandshaked(33, "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
				}
			},
			End: time.Minute,
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &saslfailure.Finding{
				Failures: 3, Mechanisms: []string{"OAUTHBEARER"},
				Enabled: []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"},
				Errors:  []string{"UNSUPPORTED_SASL_MECHANISM x3"}, Healed: false, ClientHost: "10.2.0.5",
				ClientID: "app",
			}, Exact: []string{"Healed"},
				Summary:  []string{`client "app" on 10.2.0.5 failed SASL authentication 3 times (OAUTHBEARER): UNSUPPORTED_SASL_MECHANISM x3, never authenticated after`},
				Evidence: []uint64{2}}},
		},
		{
			Name:    "a wrong password, failing for 10 s to the end of the capture: an error",
			Traffic: func(h *dt.Harness) { failFor(h, time.Second, 10*time.Second, false) },
			Want: []dt.Want{{Severity: detectors.Error, Detail: &saslfailure.Finding{
				Failures: 11, Messages: []string{badPassword},
				Errors: []string{"SASL_AUTHENTICATION_FAILED x11"},
			}}},
		},
		{
			Name:    "near miss: failing for 9.9 s to the end: a warning",
			Traffic: func(h *dt.Harness) { failFor(h, time.Second, 9900*ms, false) },
			Want:    []dt.Want{{Severity: detectors.Warning}},
		},
		{
			Name:    "failing for 30 s, then the capture goes on without the client: an error",
			Traffic: func(h *dt.Harness) { failFor(h, time.Second, 30*time.Second, false) },
			End:     5 * time.Minute,
			Want:    []dt.Want{{Severity: detectors.Error}},
		},
		{
			Name:    "healed: failing for 2.9 s, then authenticated: info",
			Traffic: func(h *dt.Harness) { failFor(h, time.Second, 2900*ms, true) },
			Want:    []dt.Want{{Severity: detectors.Info, Detail: &saslfailure.Finding{Healed: true}, Summary: []string{"then authenticated"}}},
		},
		{
			Name:    "healed after 3 s of failures: a warning",
			Traffic: func(h *dt.Harness) { failFor(h, time.Second, 3*time.Second, true) },
			Want:    []dt.Want{{Severity: detectors.Warning, Detail: &saslfailure.Finding{Healed: true}}},
		},
		{
			Name: "the broker closing the connection instead of answering SaslAuthenticate",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.2.0.5:40000", broker)
				h.Call(c, dt.At(time.Second), ms, "app", dt.SaslHandshake("PLAIN"), dt.SaslHandshaked(0, "PLAIN"))
				q, _ := h.Call(c, dt.At(time.Second+2*ms), 0, "app", dt.SaslAuthenticate("\x00app\x00wrong"), nil)
				h.Unanswered(c, q)
			},
			End: time.Minute,
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &saslfailure.Finding{
				Closed: 1, Failures: 1,
			}, Summary: []string{"connection closed unanswered x1"}}},
		},
		{
			Name: "ILLEGAL_SASL_STATE: a handshake on an authenticated connection without a session lifetime",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.2.0.5:40000", broker)
				at := login(h, c, time.Second, 0)
				h.Call(c, dt.At(at+time.Second), ms, "app", dt.SaslHandshake("SCRAM-SHA-256"), dt.SaslHandshaked(34))
			},
			End:  time.Minute,
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &saslfailure.Finding{Errors: []string{"ILLEGAL_SASL_STATE x1"}}}},
		},
		{
			Name: "two connections closed by the broker at a request after their 5 s session lifetime: a warning",
			Traffic: func(h *dt.Harness) {
				for i := range 2 {
					c := h.Conn(fmt.Sprintf("10.2.0.5:%d", 40000+i), broker)
					at := login(h, c, time.Second+time.Duration(i)*ms*10, 5000)
					expire(h, c, at+5200*ms, i == 0)
				}
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &saslfailure.Finding{
				ReauthCloses: 2, Failures: 0, SessionLifetimeMs: int64(5000),
			}, Exact: []string{"Failures"},
				Summary:  []string{`client "app" on 10.2.0.5: 2 connections closed at re-authentication time (session lifetime 5.0 s)`},
				Evidence: []uint64{7, 8}}},
		},
		{
			Name: "near miss: one such connection is info",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.2.0.5:40000", broker)
				expire(h, c, login(h, c, time.Second, 5000)+5200*ms, false)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &saslfailure.Finding{ReauthCloses: 1}}},
		},
		{
			Name: "near miss: a request 3.9 s into a 5 s session (reauth-slack 1 s) is not at re-authentication time",
			Traffic: func(h *dt.Harness) {
				for i := range 2 {
					c := h.Conn(fmt.Sprintf("10.2.0.5:%d", 40000+i), broker)
					expire(h, c, login(h, c, time.Second, 5000)+3900*ms, false)
				}
			},
		},
		{
			Name: "a request 4 s into a 5 s session is",
			Traffic: func(h *dt.Harness) {
				for i := range 2 {
					c := h.Conn(fmt.Sprintf("10.2.0.5:%d", 40000+i), broker)
					expire(h, c, login(h, c, time.Second, 5000)+4000*ms, false)
				}
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &saslfailure.Finding{ReauthCloses: 2}}},
		},
		{
			Name: "near miss: connections the client closes while idle after their lifetime, or whose late requests are answered, give nothing",
			Traffic: func(h *dt.Harness) {
				for i := range 3 {
					c := h.Conn(fmt.Sprintf("10.2.0.5:%d", 40000+i), broker)
					at := login(h, c, time.Second, 5000)
					if i == 0 {
						h.Call(c, dt.At(at+6*time.Second), ms, "app", dt.Fetch(500), dt.Fetched(0, 0))
					}
					h.CloseAt(c, dt.At(at+7*time.Second))
				}
			},
		},
		{
			Name:     "min-reauth-closes raised: two closes are info",
			Settings: map[string]string{"min-reauth-closes": "3"},
			Traffic: func(h *dt.Harness) {
				for i := range 2 {
					c := h.Conn(fmt.Sprintf("10.2.0.5:%d", 40000+i), broker)
					expire(h, c, login(h, c, time.Second, 5000)+6*time.Second, true)
				}
			},
			Want: []dt.Want{{Severity: detectors.Info}},
		},
	}, nil)
}
