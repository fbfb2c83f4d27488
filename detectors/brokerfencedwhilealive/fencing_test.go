package brokerfencedwhilealive_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/brokerfencedwhilealive"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

const controller = "10.9.0.100:9093"

// node is a KRaft broker heartbeating to the controller as
// BrokerLifecycleManager does: the next heartbeat 2 s after the answer.
type node struct {
	h  *dt.Harness
	c  *flows.Conn
	id int32
	at time.Duration
	// waiting is a heartbeat never answered, delivered as such at the
	// end (giveUp), as the pipeline does.
	waiting *flows.Message
	// corr numbers its requests; gaps is the holes the capture has on
	// its connection so far.
	corr int32
	gaps int
}

func newNode(h *dt.Harness, host string, id int32) *node {
	return &node{h: h, c: h.Conn(host+":51000", controller), id: id, at: time.Second}
}

// beat sends a heartbeat answered after rtt (nil answer: never).
func (n *node) beat(rtt time.Duration, wantFence, wantShutdown bool, fenced, shutdown bool, code int16) {
	q := dt.BrokerHeartbeatAsking(n.id, wantFence, wantShutdown)
	id := strconv.Itoa(int(n.id))
	if rtt < 0 {
		n.corr++
		n.waiting = flowstest.MakeRequest(n.c, dt.At(n.at), n.corr, id, q)
		n.h.Request(n.waiting)
		return
	}
	n.corr++
	req := flowstest.MakeRequest(n.c, dt.At(n.at), n.corr, id, q)
	n.h.Request(req)
	resp := flowstest.MakeResponse(req, dt.At(n.at+rtt), dt.HeartbeatAnswer(fenced, true, shutdown, code))
	n.h.Exchange(&flows.Exchange{Conn: n.c, Req: req, Resp: resp, ConnGaps: n.gaps})
	n.at += rtt + 2*time.Second
}

// ok sends k healthy heartbeats (1 ms, unfenced).
func (n *node) ok(k int) {
	for range k {
		n.beat(time.Millisecond, false, false, false, false, 0)
	}
}

// fenced sends k heartbeats answered isFenced, not asking for it.
func (n *node) fenced(k int) {
	for range k {
		n.beat(time.Millisecond, false, false, true, false, 0)
	}
}

// fencedThenUnfenced is broker 2 unfenced twice, then fenced k times,
// then unfenced by an answer after rtt (negative: still fenced at the
// end).
func fencedThenUnfenced(k int, rtt time.Duration) func(h *dt.Harness) {
	return func(h *dt.Harness) {
		n := newNode(h, "10.9.0.2", 2)
		n.ok(2)
		n.fenced(k)
		if rtt >= 0 {
			n.beat(rtt, false, false, false, false, 0)
		}
	}
}

// paused is broker 4 heartbeating, pausing d more once before a
// heartbeat (a gap of d + 2 s).
func paused(d time.Duration) func(h *dt.Harness) {
	return func(h *dt.Harness) {
		n := newNode(h, "10.9.0.4", 4)
		n.ok(3)
		n.at += d
		n.ok(3)
	}
}

// giveUp delivers the heartbeat never answered.
func (n *node) giveUp() { n.h.Unanswered(n.c, n.waiting) }

func TestBrokerFencedWhileAlive(t *testing.T) {
	dt.Run(t, brokerfencedwhilealive.Analyzer, []dt.Case{
		{
			Name:    "healthy: a minute of heartbeats answered in a millisecond",
			Traffic: func(h *dt.Harness) { newNode(h, "10.9.0.1", 1).ok(30) },
		},
		{
			Name: "healthy: starting up, fenced while asking to be, then unfenced",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.1", 1)
				for range 3 {
					n.beat(time.Millisecond, true, false, true, false, 0)
				}
				n.fenced(2) // ready, not yet unfenced: catching up
				n.ok(10)
			},
		},
		{
			Name: "healthy: controlled shutdown, asked for",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.1", 1)
				n.ok(5)
				n.beat(time.Millisecond, true, true, true, false, 0)
				n.beat(time.Millisecond, true, true, true, true, 0)
			},
		},
		{
			Name: "fenced while alive for 10 s, then unfenced: warning",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.2", 2)
				n.ok(5)
				n.fenced(5)
				n.ok(3)
			},
			Want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &brokerfencedwhilealive.Finding{
					Heartbeats: 13, FencedResponses: 5, UnaskedShutdowns: 0, Broker: int32(2),
					FencedSeconds: 10.005, StillFenced: false, FencedEpisodes: 1,
					Controllers: []string{controller}, Clients: []string{"10.9.0.2"}, KnownIssue: "KAFKA-15019",
				}, Exact: []string{"UnaskedShutdowns", "StillFenced"},
				Summary:  []string{"broker 2 fenced by the controller while alive: 5 heartbeats answered with isFenced over 10.0 s while it kept heartbeating, then unfenced"},
				Evidence: []uint64{12, 20, 22},
			}},
		},
		{
			Name:    "near miss: fenced 29.9 s, then unfenced, stays a warning",
			Traffic: fencedThenUnfenced(14, 1900*time.Millisecond),
			Want:    []dt.Want{{Severity: detectors.Warning, Detail: &brokerfencedwhilealive.Finding{FencedSeconds: 29.913}}},
		},
		{
			Name:    "near miss the other way: fenced 30 s, then unfenced: error",
			Traffic: fencedThenUnfenced(14, 1989*time.Millisecond),
			Want:    []dt.Want{{Severity: detectors.Error, Detail: &brokerfencedwhilealive.Finding{FencedSeconds: 30.002}}},
		},
		{
			Name:    "still fenced at the end after 8 s: warning",
			Traffic: fencedThenUnfenced(5, -1),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &brokerfencedwhilealive.Finding{
				StillFenced: true, FencedSeconds: 8.004,
			}}},
		},
		{
			Name:    "still fenced at the end after 10 s: error",
			Traffic: fencedThenUnfenced(6, -1),
			Want: []dt.Want{{Severity: detectors.Error, Detail: &brokerfencedwhilealive.Finding{
				StillFenced: true, FencedSeconds: 10.005,
			}}},
		},
		{
			Name: "told to shut down without asking: error",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.3", 3)
				n.ok(3)
				n.beat(time.Millisecond, false, false, false, true, 0)
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &brokerfencedwhilealive.Finding{UnaskedShutdowns: 1},
				Summary: []string{"broker 3 told to shut down by the controller (shouldShutDown) without asking"}}},
		},
		{
			Name:    "near miss: a gap of 4.4 s between heartbeats (a broker pause)",
			Traffic: paused(2400 * time.Millisecond),
		},
		{
			Name:    "near miss the other way: a gap of 4.5 s",
			Traffic: paused(2499 * time.Millisecond),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &brokerfencedwhilealive.Finding{
				LongGaps: 1, SlowRoundTrips: 0, MaxGapMs: 4500.0,
			}, Exact: []string{"SlowRoundTrips"},
				Summary: []string{"broker 4's heartbeats come close to the session timeout: round trips up to 1 ms, gaps up to 4.5 s (session timeout 9.0 s)"}}},
		},
		{
			Name: "a gap of 6 s across segments the capture lost: not measured (heartbeats may be in them)",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.4", 4)
				n.ok(3)
				n.at += 4 * time.Second
				n.gaps = 1
				n.ok(3)
			},
		},
		{
			// Apache Kafka 4.1.1 (fixtures/pcaps/kafka/kraft-fenced-while-alive):
			// everything broker 3 sent to the controller dropped for 25 s; its
			// heartbeat waited 27.4 s, the controller fenced it, and at its
			// next heartbeat unfenced it at once: no answer says isFenced.
			Name: "a heartbeat unanswered past the session timeout: fenced though no answer says so",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.3", 3)
				n.ok(3)
				n.beat(12*time.Second, false, false, false, false, 0)
				n.ok(3)
			},
			Want: []dt.Want{{Severity: detectors.Warning,
				Summary: []string{"broker 3's session expired: two of its heartbeats 14.0 s apart, past the session timeout, so the controller fenced it"}}},
			Explanation: []string{"it fenced the broker then, though no answer in the capture says isFenced"},
		},
		{
			Name: "no heartbeat sent for 20 s, none waiting: the broker's own silence",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.3", 3)
				n.ok(3)
				n.at += 18 * time.Second
				n.ok(3)
			},
			Want: []dt.Want{{Severity: detectors.Warning,
				Summary: []string{"broker 3 sent no heartbeat for 20.0 s, past the session timeout, with no heartbeat of its own waiting"}}},
		},
		{
			Name: "near miss: a heartbeat answered after 6.9 s, its next 8.9 s after it",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.3", 3)
				n.ok(3)
				n.beat(6900*time.Millisecond, false, false, false, false, 0)
				n.ok(3)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Summary: []string{"broker 3's heartbeats come close to the session timeout"}}},
		},
		{
			Name: "slow answers: 5 s round trips (and 7 s gaps) from an overloaded controller",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.4", 4)
				n.ok(3)
				for range 3 {
					n.beat(5*time.Second, false, false, false, false, 0)
				}
				n.ok(2)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &brokerfencedwhilealive.Finding{
				SlowRoundTrips: 3, LongGaps: 3, MaxRoundTripMs: 5000.0,
			}}},
		},
		{
			Name: "near miss: the last heartbeat unanswered 4.4 s at the end",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.4", 4)
				n.ok(3)
				n.beat(-1, false, false, false, false, 0)
				o := newNode(h, "10.9.0.5", 5) // the capture goes on 4.4 s
				o.at = n.at + 4399*time.Millisecond
				o.ok(1)
				n.giveUp()
			},
		},
		{
			Name: "the last heartbeat unanswered 4.5 s at the end",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.4", 4)
				n.ok(3)
				n.beat(-1, false, false, false, false, 0)
				o := newNode(h, "10.9.0.5", 5)
				o.at = n.at + 4499*time.Millisecond
				o.ok(1)
				n.giveUp()
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &brokerfencedwhilealive.Finding{SlowRoundTrips: 1}}},
		},
		{
			Name: "heartbeats the controller timed out: warning",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.4", 4)
				n.ok(3)
				n.beat(time.Millisecond, false, false, false, false, 7)
				n.ok(3)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &brokerfencedwhilealive.Finding{
				TimedOut: 1, Errors: []string{"REQUEST_TIMED_OUT x1"},
			}}},
		},
		{
			Name: "kept fenced since the capture began for 8 s: quiet",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.6", 6)
				n.fenced(4)
				n.ok(2)
			},
		},
		{
			Name: "kept fenced since the capture began for 10 s: info",
			Traffic: func(h *dt.Harness) {
				n := newNode(h, "10.9.0.6", 6)
				n.fenced(5)
				n.ok(2)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &brokerfencedwhilealive.Finding{StartupFencedSeconds: 10.005}}},
		},
		{
			Name:     "session-timeout 18 s: a gap of 4.5 s is quiet",
			Settings: map[string]string{"session-timeout": "18000"},
			Traffic:  paused(2500 * time.Millisecond),
		},
	}, func(t *testing.T, f *detectors.Finding) {
		if !strings.Contains(f.Next, "kafka-metadata-quorum.sh") || !strings.Contains(f.Next, "FencedBrokerCount") {
			t.Errorf("check next names neither the command nor the metric: %s", f.Next)
		}
	})
}
