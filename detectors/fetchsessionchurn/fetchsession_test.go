package fetchsessionchurn_test

import (
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/fetchsessionchurn"
	"github.com/kfsniff/kfsniff/flows"
)

const (
	rule                     = "fetch-session-churn"
	ok, notFound, wrongEpoch = int16(0), int16(70), int16(71)
)

// consumer fetches in a session, as a client does: a full fetch (epoch 0)
// opens one, incremental fetches follow; on a session error it opens a new
// one with its next fetch.
type consumer struct {
	h             *dt.Harness
	c             *flows.Conn
	id            string
	session, next int32
	epoch         int32
	ids           *int32 // session ids handed out by the broker
}

func newConsumer(h *dt.Harness, client, id string, ids *int32) *consumer {
	return &consumer{h: h, c: h.Conn(client, "10.1.0.10:9092"), id: id, ids: ids}
}

// fetch fetches at at; an incremental fetch is answered code.
func (c *consumer) fetch(at time.Duration, code int16) {
	req := dt.SessionFetch(c.session, c.epoch)
	if c.epoch == 0 {
		*c.ids++
		c.h.Call(c.c, dt.At(at), time.Millisecond, c.id, req, dt.SessionFetched(ok, *c.ids))
		c.session, c.epoch = *c.ids, 1
		return
	}
	c.h.Call(c.c, dt.At(at), time.Millisecond, c.id, req, dt.SessionFetched(code, c.session))
	if code != ok {
		c.session, c.epoch = 0, 0
		return
	}
	c.epoch++
}

// every fetches every step in [from, to); incremental fetches are
// answered code.
func (c *consumer) every(from, to, step time.Duration, code int16) {
	for at := from; at < to; at += step {
		c.fetch(at, code)
	}
}

func TestFetchSessionChurn(t *testing.T) {
	dt.Run(t, fetchsessionchurn.Analyzer, []dt.Case{
		{
			Name: "healthy incremental fetches: nothing",
			Traffic: func(h *dt.Harness) {
				newConsumer(h, "10.2.0.7:40000", "orders-consumer", new(int32)).every(0, 10*time.Second, 500*time.Millisecond, ok)
			},
		},
		{
			Name: "near miss: one session evicted, a new one opened at once and used: nothing",
			Traffic: func(h *dt.Harness) {
				c := newConsumer(h, "10.2.0.7:40000", "orders-consumer", new(int32))
				c.every(0, 5*time.Second, 500*time.Millisecond, ok)
				c.fetch(5*time.Second, notFound)
				c.every(5010*time.Millisecond, 10*time.Second, 500*time.Millisecond, ok)
			},
		},
		{
			Name:     "the same eviction with min-errors 1: info",
			Settings: map[string]string{"min-errors": "1"},
			Traffic: func(h *dt.Harness) {
				c := newConsumer(h, "10.2.0.7:40000", "orders-consumer", new(int32))
				c.every(0, 5*time.Second, 500*time.Millisecond, ok)
				c.fetch(5*time.Second, notFound)
				c.every(5010*time.Millisecond, 10*time.Second, 500*time.Millisecond, ok)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &fetchsessionchurn.Finding{SessionErrors: 1, Storms: 1}}},
		},
		{
			Name: "two consumers evicting each other's session for 6 s, to the end: a warning each",
			Traffic: func(h *dt.Harness) {
				ids := new(int32)
				a := newConsumer(h, "10.2.0.7:40000", "consumer-a", ids)
				b := newConsumer(h, "10.2.0.8:40000", "consumer-b", ids)
				a.fetch(0, ok)
				b.fetch(5*time.Millisecond, ok)
				for at := 10 * time.Millisecond; at < 6*time.Second; at += 10 * time.Millisecond {
					a.fetch(at, notFound)
					b.fetch(at+5*time.Millisecond, notFound)
				}
			},
			Want: []dt.Want{
				{Severity: detectors.Warning,
					Detail: &fetchsessionchurn.Finding{
						SessionErrors: 300, Storms: 1, Fetches: 599, FullFetches: 299, IncrementalFetches: 300,
						SessionsCreated: 299, ClientID: "consumer-a", Fetcher: int32(-1), Ongoing: true,
						HeldS: 5.985, Errors: []string{"FETCH_SESSION_ID_NOT_FOUND x300"},
						Creators: []fetchsessionchurn.Creator{{ClientID: "consumer-a", Client: "10.2.0.7", Sessions: 299}, {ClientID: "consumer-b", Client: "10.2.0.8", Sessions: 299}},
					},
					Summary: []string{`consumer "consumer-a" (10.2.0.7) at 10.1.0.10:9092: FETCH_SESSION_ID_NOT_FOUND 300 times in 6.0 s (50.17/s)`, "299 of 599 fetches full", "still failing at the end (seen for 6.0 s)"}},
				{Severity: detectors.Warning, Detail: &fetchsessionchurn.Finding{ClientID: "consumer-b"}},
			},
		},
		{
			Name: "churning for 12 s to the end: error",
			Traffic: func(h *dt.Harness) {
				newConsumer(h, "10.2.0.7:40000", "orders-consumer", new(int32)).every(0, 12*time.Second+20*time.Millisecond, 20*time.Millisecond, notFound)
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &fetchsessionchurn.Finding{SessionErrors: 300, Ongoing: true}}},
		},
		{
			Name: "near miss: a storm of 2.9 s, then healthy fetches: info",
			Traffic: func(h *dt.Harness) {
				c := newConsumer(h, "10.2.0.7:40000", "orders-consumer", new(int32))
				c.every(0, 3*time.Second, 50*time.Millisecond, notFound) // errors every 100 ms, 50 ms to 2950 ms
				c.every(3*time.Second, 20*time.Second, 500*time.Millisecond, ok)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &fetchsessionchurn.Finding{
				Ongoing: false, HeldS: 2.9,
			}, Exact: []string{"Ongoing"}}},
		},
		{
			Name: "near miss the other way: 3.1 s is a warning",
			Traffic: func(h *dt.Harness) {
				c := newConsumer(h, "10.2.0.7:40000", "orders-consumer", new(int32))
				c.every(0, 3200*time.Millisecond, 50*time.Millisecond, notFound) // 50 ms to 3150 ms
				c.every(3200*time.Millisecond, 20*time.Second, 500*time.Millisecond, ok)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &fetchsessionchurn.Finding{
				Ongoing: false, HeldS: 3.1,
			}, Exact: []string{"Ongoing"}}},
		},
		{
			Name: "two short storms more than max-gap apart stay info, counted as two",
			Traffic: func(h *dt.Harness) {
				c := newConsumer(h, "10.2.0.7:40000", "orders-consumer", new(int32))
				c.every(0, 2*time.Second, 50*time.Millisecond, notFound)
				c.every(2*time.Second, 12*time.Second, 500*time.Millisecond, ok)
				c.every(12*time.Second, 14*time.Second, 50*time.Millisecond, notFound)
				c.every(14*time.Second, 24*time.Second, 500*time.Millisecond, ok)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &fetchsessionchurn.Finding{Storms: 2, SessionErrors: 40}}},
		},
		{
			Name: "a follower's replica fetcher out of step (INVALID_FETCH_SESSION_EPOCH)",
			Traffic: func(h *dt.Harness) {
				c := newConsumer(h, "10.1.0.12:50000", "broker-2-fetcher-0", new(int32))
				c.every(0, 4*time.Second, 100*time.Millisecond, wrongEpoch)
				c.every(4*time.Second, 8*time.Second, 500*time.Millisecond, ok)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &fetchsessionchurn.Finding{
				Fetcher: int32(2), Errors: []string{"INVALID_FETCH_SESSION_EPOCH x20"},
			},
				Summary: []string{`follower node 2 (client id "broker-2-fetcher-0", 10.1.0.12)`}}},
		},
	}, nil)
}

// TestFetchSessionChurnIntensity: issue 30's fetch-session storms, thousands
// of session resets a second seen for half a second and still raging at
// the end, were info ("held under 3 s"); a client fetching again faster
// than any backoff allows is a warning however short (detectors.Episode),
// with near misses on both sides of detectors.FastRate.
func TestFetchSessionChurnIntensity(t *testing.T) {
	storm := func(step, d time.Duration) func(h *dt.Harness) {
		return func(h *dt.Harness) {
			newConsumer(h, "10.2.0.7:40000", "orders-consumer", new(int32)).every(time.Second, time.Second+d, step, notFound)
		}
	}
	dt.Run(t, fetchsessionchurn.Analyzer, []dt.Case{
		{
			// Every other fetch fails: an error every 200 µs, 5,000 a
			// second, for 0.5 s, to the end.
			Name: "5,000 resets a second for 0.5 s, still going: warning", Traffic: storm(100*time.Microsecond, 500*time.Millisecond),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &fetchsessionchurn.Finding{Ongoing: true},
				Summary: []string{"still failing at the end (seen for 500 ms), retried 2500 times at 5000 a second"}}},
			Explanation: []string{"A warning however short: 2500 session errors at 5000 a second"},
		},
		{
			Name: "near miss: 99.9 resets a second for 1 s: info", Traffic: storm(5005*time.Microsecond, time.Second),
			Want: []dt.Want{{Severity: detectors.Info, Detail: &fetchsessionchurn.Finding{Ongoing: true}, Summary: []string{"still failing at the end (seen for"}}},
		},
		{
			Name: "near miss the other way: 100 resets a second for 1 s: warning", Traffic: storm(5*time.Millisecond, time.Second),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &fetchsessionchurn.Finding{Ongoing: true}}},
		},
	}, nil)
}
