package errorstorm_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/errorstorm"
)

const broker, broker2 = "10.1.0.10:9092", "10.1.0.11:9092"

func notLeader() (kmsg.Request, kmsg.Response)  { return dt.Fetch(500), dt.Fetched(6, 0) }
func leaderless() (kmsg.Request, kmsg.Response) { return dt.MetadataErrors(5, 0, 5) }
func fine() (kmsg.Request, kmsg.Response)       { return dt.Fetch(500), dt.Fetched(0, 0) }
func rebalancing() (kmsg.Request, kmsg.Response) {
	return dt.Heartbeat(27) // REBALANCE_IN_PROGRESS
}

// every schedules n exchanges from client to server, one every step from
// at, each answered in 1 ms.
func every(h *dt.Harness, tl *dt.Timeline, client, server, clientID string, at, step time.Duration, n int,
	mk func() (kmsg.Request, kmsg.Response)) {
	tl.Every(h.Conn(client, server), dt.At(at), step, n, time.Millisecond, clientID, mk)
}

// loop is a Fetch NOT_LEADER_OR_FOLLOWER loop of loop-client at 10/s for
// 15 s, still failing when the capture ends.
func loop(h *dt.Harness, tl *dt.Timeline) {
	every(h, tl, "10.2.0.5:40000", broker, "loop-client", time.Second, 100*time.Millisecond, 150, notLeader)
}

// healedLoop is the loop, then a fetch that succeeds 100 ms after the last
// error (14.9 s + 0.1 s from the first: held 15 s), and a minute more of
// capture.
func healedLoop(h *dt.Harness, tl *dt.Timeline) {
	c := h.Conn("10.2.0.5:40000", broker)
	tl.Every(c, dt.At(time.Second), 100*time.Millisecond, 150, time.Millisecond, "loop-client", notLeader)
	tl.Call(c, dt.At(16*time.Second), time.Millisecond, "loop-client", dt.Fetch(500), dt.Fetched(0, 0))
	later(h, tl, 76*time.Second)
}

// failFor is loop-client getting NOT_LEADER_OR_FOLLOWER every 100 ms from
// 1 s on (the first answer at 1.001 s), then a successful fetch sent held
// after that first answer, then more capture until end.
func failFor(held, end time.Duration) func(h *dt.Harness) {
	return func(h *dt.Harness) {
		tl := dt.NewTimeline(h)
		c := h.Conn("10.2.0.5:40000", broker)
		n := int(held / (100 * time.Millisecond))
		tl.Every(c, dt.At(time.Second), 100*time.Millisecond, n, time.Millisecond, "loop-client", notLeader)
		tl.Call(c, dt.At(time.Second+time.Millisecond+held), time.Millisecond, "loop-client", dt.Fetch(500), dt.Fetched(0, 0))
		later(h, tl, end)
		tl.Run()
	}
}

// failingAtEnd is loop-client getting the error every 100 ms from 1 s on
// for d, the capture ending with the last one.
func failingAtEnd(d time.Duration) func(h *dt.Harness) {
	return func(h *dt.Harness) {
		tl := dt.NewTimeline(h)
		every(h, tl, "10.2.0.5:40000", broker, "loop-client", time.Second, 100*time.Millisecond, int(d/(100*time.Millisecond))+1, notLeader)
		tl.Run()
	}
}

// later is a healthy consumer's fetch at at: the capture goes on.
func later(h *dt.Harness, tl *dt.Timeline, at time.Duration) {
	every(h, tl, "10.2.0.6:40000", broker2, "consumer", at, time.Second, 1, fine)
}

// slowLoop is the same loop at 0.83/s for a minute.
func slowLoop(h *dt.Harness, tl *dt.Timeline) {
	every(h, tl, "10.2.0.5:40000", broker, "slow-loop", time.Second, 1200*time.Millisecond, 50, notLeader)
}

// timeline adapts a traffic on a timeline to a dt.Case's.
func timeline(traffic func(h *dt.Harness, tl *dt.Timeline)) func(h *dt.Harness) {
	return func(h *dt.Harness) {
		tl := dt.NewTimeline(h)
		traffic(h, tl)
		tl.Run()
	}
}

// TestErrorStormSeverity: the severity is what the storming client felt,
// the policy's (detectors.Grade): held up with no success in between for
// under 3 s info, from 3 s warning, from 30 s error, and error when still
// failing at the capture's end after 10 s; both sides of each boundary.
func TestErrorStormSeverity(t *testing.T) {
	held := func(sev detectors.Severity, s float64, ongoing bool) []dt.Want {
		return []dt.Want{{Severity: sev, Detail: &errorstorm.Finding{
			Held: s, Ongoing: ongoing,
		}, Exact: []string{"Held", "Ongoing"}}}
	}
	dt.Run(t, errorstorm.Analyzer, []dt.Case{
		{Name: "held 2.999 s, then a success: info", Traffic: failFor(2999*time.Millisecond, time.Minute),
			Want: held(detectors.Info, 2.999, false), Explanation: []string{"no client held up for 3.0 s"}},
		{Name: "near miss the other way: held 3.0 s: warning", Traffic: failFor(3*time.Second, time.Minute),
			Want: held(detectors.Warning, 3, false), Explanation: []string{"The longest a client kept getting it with no success in between was 3.0 s: a warning"}},
		{Name: "held 29.999 s, then a success: warning", Traffic: failFor(29999*time.Millisecond, 2*time.Minute),
			Want: held(detectors.Warning, 29.999, false)},
		{Name: "near miss the other way: held 30 s: error", Traffic: failFor(30*time.Second, 2*time.Minute),
			Want: held(detectors.Error, 30, false)},
		{Name: "still failing at the end after 9.9 s: warning", Traffic: failingAtEnd(9900 * time.Millisecond),
			Want: held(detectors.Warning, 9.9, true), Explanation: []string{"had been getting it for 9.9 s with no success in between and still was when the capture ended: a warning"}},
		{Name: "near miss the other way: still failing at the end after 10 s: error", Traffic: failingAtEnd(10 * time.Second),
			Want: held(detectors.Error, 10, true)},
		{Name: "the 15 s loop, healed: warning", Traffic: timeline(healedLoop),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &errorstorm.Finding{
				StormResponses: 150, Held: 14.999, Ongoing: false, Duration: 14.9,
			}, Exact: []string{"Ongoing"}}}},
		{
			// The second case: kgo retried a NOT_LEADER_OR_FOLLOWER
			// partition 8 times in 8.5 s, then wrote it. Not even info
			// under the old thresholds (10 within 10 s, 20 in all).
			Name: "8 refusals 1.06 s apart, then written: warning",
			Traffic: func(h *dt.Harness) {
				tl := dt.NewTimeline(h)
				c := h.Conn("10.2.0.5:40000", broker)
				for i := range 8 {
					tl.Call(c, dt.At(time.Second+time.Duration(i)*1060*time.Millisecond), 2*time.Millisecond, "kgo",
						dt.ProduceTo(13, "orders", 0), dt.ProducedTo(13, "orders", 6, 1, 1, "10.1.0.10", 9092, 0))
				}
				tl.Call(c, dt.At(9500*time.Millisecond), 2*time.Millisecond, "kgo", dt.ProduceTo(13, "orders", 0),
					dt.ProducedTo(13, "orders", 0, 1, 1, "10.1.0.10", 9092, 0))
				later(h, tl, time.Minute)
				tl.Run()
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &errorstorm.Finding{
				StormResponses: 8, API: "Produce", Held: 8.498,
			}}},
		},
		{
			Name: "an error every other fetch at 10/s for 20 s: the client is not held up, info",
			Traffic: func(h *dt.Harness) {
				tl := dt.NewTimeline(h)
				c := h.Conn("10.2.0.5:40000", broker)
				for i := range 200 {
					mk := fine
					if i%2 == 0 {
						mk = func() (kmsg.Request, kmsg.Response) { return dt.Fetch(500), dt.Fetched(70, 0) } // FETCH_SESSION_ID_NOT_FOUND
					}
					tl.Every(c, dt.At(time.Second+time.Duration(i)*100*time.Millisecond), 0, 1, time.Millisecond, "churner", mk)
				}
				tl.Run()
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &errorstorm.Finding{
				StormResponses: 100, Held: 0.099, Error: "FETCH_SESSION_ID_NOT_FOUND",
			}}},
			Explanation: []string{"The longest a client kept getting it with no success in between was 99 ms: info"},
		},
		{
			Name: "successes at another broker do not heal: 15 s refused by one, fetching fine from another",
			Traffic: func(h *dt.Harness) {
				tl := dt.NewTimeline(h)
				healedLoop(h, tl)
				every(h, tl, "10.2.0.5:40001", broker2, "loop-client", time.Second, 100*time.Millisecond, 150, fine)
				tl.Run()
			},
			Want: held(detectors.Warning, 14.999, false),
		},
		{
			Name: "a spell ends when the client goes quiet for a window: two 2 s bursts 20 s apart, no success, info",
			Traffic: func(h *dt.Harness) {
				tl := dt.NewTimeline(h)
				c := h.Conn("10.2.0.5:40000", broker)
				tl.Every(c, dt.At(time.Second), 100*time.Millisecond, 20, time.Millisecond, "loop-client", notLeader)
				tl.Every(c, dt.At(23*time.Second), 100*time.Millisecond, 20, time.Millisecond, "loop-client", notLeader)
				later(h, tl, time.Minute)
				tl.Run()
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &errorstorm.Finding{StormResponses: 40, Held: 1.9}}},
		},
		{
			Name: "near miss: the bursts 5 s apart (within the window) are one spell of 8 s: warning",
			Traffic: func(h *dt.Harness) {
				tl := dt.NewTimeline(h)
				c := h.Conn("10.2.0.5:40000", broker)
				tl.Every(c, dt.At(time.Second), 100*time.Millisecond, 20, time.Millisecond, "loop-client", notLeader)
				tl.Every(c, dt.At(7900*time.Millisecond), 100*time.Millisecond, 20, time.Millisecond, "loop-client", notLeader)
				later(h, tl, time.Minute)
				tl.Run()
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &errorstorm.Finding{Held: 8.8}}},
		},
		{
			// A client that keeps heartbeating every 300 ms through a
			// rebalance of 2 s, then carries on: felt less than 3 s.
			Name: "healthy: heartbeats answered REBALANCE_IN_PROGRESS through a 2 s rebalance the client finishes: info at most",
			Traffic: func(h *dt.Harness) {
				tl := dt.NewTimeline(h)
				c := h.Conn("10.2.0.7:40000", broker)
				tl.Every(c, dt.At(time.Second), 300*time.Millisecond, 7, time.Millisecond, "consumer-1", rebalancing)
				tl.Every(c, dt.At(3100*time.Millisecond), 300*time.Millisecond, 50, time.Millisecond, "consumer-1", func() (kmsg.Request, kmsg.Response) { return dt.Heartbeat(0) })
				tl.Run()
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &errorstorm.Finding{
				StormResponses: 7, Held: 2.099, Ongoing: false,
			}, Exact: []string{"Ongoing"}}},
		},
		{
			Name: "healthy: ten members of one application (one client id and host) each answered MEMBER_ID_REQUIRED, then joining: info at most",
			Traffic: func(h *dt.Harness) {
				tl := dt.NewTimeline(h)
				for m := range 10 {
					g := h.Conn(fmt.Sprintf("10.2.0.7:%d", 40000+m), broker)
					at := time.Second + time.Duration(m)*10*time.Millisecond
					tl.Call(g, dt.At(at), time.Millisecond, "orders-app", dt.Join("", 60000), dt.Joined(79, "m"))
					// The join with the member id waits for the rebalance.
					tl.Call(g, dt.At(at+5*time.Millisecond), 3*time.Second, "orders-app", dt.Join("m", 60000), dt.Joined(0, "m"))
				}
				later(h, tl, time.Minute)
				tl.Run()
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &errorstorm.Finding{
				StormResponses: 10, Error: "MEMBER_ID_REQUIRED",
			}}},
		},
	}, nil)
}

func TestErrorStorm(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		traffic  func(h *dt.Harness, tl *dt.Timeline)
		want     []dt.Want
	}{
		{
			name:    "a Fetch NOT_LEADER loop at 10/s for 15 s, failing to the end",
			traffic: loop,
			want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &errorstorm.Finding{
					Responses: 150, StormResponses: 150, ErrorCodes: 150, APIResponses: 150, StormClients: 1,
					API: "Fetch", Error: "NOT_LEADER_OR_FOLLOWER", ErrorCode: int16(6),
					ClientIDs: []string{"loop-client"}, Clients: []string{"10.2.0.5"}, Servers: []string{broker},
					Duration: 14.9, Rate: 10.07, Held: 14.9, Ongoing: true,
				},
				Summary: []string{`Fetch answered NOT_LEADER_OR_FOLLOWER 150 times in 14.9 s (10.1/s) to "loop-client" (10.2.0.5) from ` + broker},
			}},
		},
		{
			name: "a metadata refresh loop at 2/s among healthy traffic: only the error is counted",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				every(h, tl, "10.2.0.5:40000", broker, "kafkajs", time.Second, 500*time.Millisecond, 60, leaderless)
				every(h, tl, "10.2.0.6:40000", broker, "consumer", time.Second, 100*time.Millisecond, 300, fine)
			},
			want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &errorstorm.Finding{
					Responses: 60, StormResponses: 60, ErrorCodes: 120, APIResponses: 60, API: "Metadata",
					Error: "LEADER_NOT_AVAILABLE", Duration: 29.5, Rate: 2.03, Ongoing: true,
				},
			}},
		},
		{
			name: "near miss: 0.5/s, 5 errors take 8 s, over the window, for a minute",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				every(h, tl, "10.2.0.5:40000", broker, "slow", time.Second, 2*time.Second, 30, notLeader)
			},
		},
		{
			name:     "the same at 0.5/s with min-rate 0.5 (3 within 5 s)",
			settings: map[string]string{"min-rate": "0.5"},
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				every(h, tl, "10.2.0.5:40000", broker, "slow", time.Second, 2*time.Second, 30, notLeader)
			},
			want: []dt.Want{{Severity: detectors.Error, Detail: &errorstorm.Finding{Responses: 30, StormResponses: 30}}},
		},
		{
			name:     "the 0.83/s loop with a 10 s window: ten take 10.8 s, quiet",
			settings: map[string]string{"window": "10s"},
			traffic:  slowLoop,
		},
		{
			name:     "the old name window-s, in seconds, still works",
			settings: map[string]string{"window-s": "10"},
			traffic:  slowLoop,
		},
		{
			name: "near miss: 30 errors 1.26 s apart, five take 5.04 s, over the window",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				every(h, tl, "10.2.0.5:40000", broker, "edge", time.Second, 1260*time.Millisecond, 30, notLeader)
			},
		},
		{
			name: "near miss the other way: 30 errors 1.24 s apart, five within 4.96 s",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				every(h, tl, "10.2.0.5:40000", broker, "edge", time.Second, 1240*time.Millisecond, 30, notLeader)
			},
			want: []dt.Want{{Severity: detectors.Error, Detail: &errorstorm.Finding{Responses: 30, StormResponses: 30}}},
		},
		{
			name: "near miss: a burst of 4, one short of a full window (and of min-responses)",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				every(h, tl, "10.2.0.5:40000", broker, "burst", time.Second, 50*time.Millisecond, 4, notLeader)
			},
		},
		{
			name: "near miss the other way: a burst of 5, exactly min-responses, brief: info",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				every(h, tl, "10.2.0.5:40000", broker, "burst", time.Second, 50*time.Millisecond, 5, notLeader)
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &errorstorm.Finding{StormResponses: 5}}},
		},
		{
			name:     "min-responses raised above a real loop",
			settings: map[string]string{"min-responses": "200"},
			traffic:  loop,
		},
		{
			name: "near miss: a 40-member group rebalancing for 30 s, each heartbeat REBALANCE_IN_PROGRESS",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				for m := range 40 {
					every(h, tl, fmt.Sprintf("10.3.0.%d:41000", m+1), broker, fmt.Sprintf("member-%d", m),
						time.Second+time.Duration(m)*75*time.Millisecond, 3*time.Second, 10, rebalancing)
				}
			},
		},
		{
			name: "near miss: what healthy clients get (MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, TOPIC_ALREADY_EXISTS)",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				g := h.Conn("10.2.0.7:40000", broker)
				tl.Call(g, dt.At(time.Second), time.Millisecond, "consumer-1", dt.Join("", 60000), dt.Joined(79, "m-1"))
				tl.Call(g, dt.At(time.Second+5*time.Millisecond), 3*time.Second, "consumer-1", dt.Join("m-1", 60000), dt.Joined(0, "m-1"))
				for i := range 20 {
					ec := int16(0)
					if i == 3 || i == 4 {
						ec = 27
					}
					req, resp := dt.Heartbeat(ec)
					tl.Call(g, dt.At(5*time.Second+time.Duration(i)*3*time.Second), time.Millisecond, "consumer-1", req, resp)
				}
				req, resp := dt.CreateTopics(36)
				tl.Call(h.Conn("10.2.0.8:40000", broker), dt.At(2*time.Second), 20*time.Millisecond, "admin", req, resp)
			},
		},
		{
			// Kafka Streams on Apache Kafka 4.1.1 (fixtures/pcaps/kafka/
			// kraft-healthy-load): its consumer asks Metadata for its
			// repartition topic from the first poll, answered unknown for
			// 4.6 s until its group leader creates it. A wait for a topic
			// being created, not a failure: info.
			name: "Metadata unknown for a topic until a CreateTopics for it: info",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				c := h.Conn("10.2.0.5:40000", broker)
				tl.Every(c, dt.At(time.Second), 500*time.Millisecond, 10, time.Millisecond, "app-StreamThread-1-consumer",
					func() (kmsg.Request, kmsg.Response) {
						return dt.MetadataTopic("app-repartition"), dt.MetadataAnswer(1, "app-repartition", [16]byte{}, 3)
					})
				req, resp := dt.CreateTopics(0)
				req.Topics[0].Topic, resp.Topics[0].Topic = "app-repartition", "app-repartition"
				tl.Call(h.Conn("10.2.0.5:40001", broker), dt.At(6*time.Second), 20*time.Millisecond, "app-admin", req, resp)
				tl.Call(c, dt.At(6500*time.Millisecond), time.Millisecond, "app-StreamThread-1-consumer",
					dt.MetadataTopic("app-repartition"), dt.MetadataAnswer(1, "app-repartition", [16]byte{1}, 0))
			},
			want: []dt.Want{{
				Severity: detectors.Info,
				Detail: &errorstorm.Finding{
					Error: "UNKNOWN_TOPIC_OR_PARTITION", TopicsCreated: []string{"app-repartition"}, Held: 5.499,
				},
				Summary: []string{"while app-repartition was being created"},
			}},
		},
		{
			name: "near miss: Metadata unknown for a topic nobody creates: a warning",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				c := h.Conn("10.2.0.5:40000", broker)
				tl.Every(c, dt.At(time.Second), 500*time.Millisecond, 10, time.Millisecond, "producer-1",
					func() (kmsg.Request, kmsg.Response) {
						return dt.MetadataTopic("typo-topic"), dt.MetadataAnswer(1, "typo-topic", [16]byte{}, 3)
					})
				req, resp := dt.CreateTopics(0) // another topic created meanwhile
				tl.Call(h.Conn("10.2.0.5:40001", broker), dt.At(6*time.Second), 20*time.Millisecond, "admin", req, resp)
				tl.Call(c, dt.At(12*time.Second), time.Millisecond, "producer-1", dt.MetadataTopic("orders"), dt.MetadataAnswer(1, "orders", [16]byte{1}, 0))
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &errorstorm.Finding{Error: "UNKNOWN_TOPIC_OR_PARTITION"}}},
		},
		{
			// The capture runs on 5.1 s past the loop's last error:
			// quiet for more than a window, not ongoing.
			name: "two clients, one looping: only the looping one is a storm client",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				loop(h, tl)
				every(h, tl, "10.2.0.9:40000", broker2, "other", time.Second, 5*time.Second, 5, notLeader)
			},
			want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &errorstorm.Finding{
					Responses: 155, StormResponses: 150, StormClients: 1, ClientIDs: []string{"loop-client"},
					Servers: []string{broker},
				},
			}},
		},
		{
			name: "two clients looping on one host, and one without a client id",
			traffic: func(h *dt.Harness, tl *dt.Timeline) {
				every(h, tl, "10.2.0.5:40000", broker, "a", time.Second, 100*time.Millisecond, 30, notLeader)
				every(h, tl, "10.2.0.5:40001", broker2, "b", time.Second, 100*time.Millisecond, 30, notLeader)
				every(h, tl, "10.2.0.6:40000", broker, "", time.Second, 100*time.Millisecond, 30, notLeader)
			},
			// Three clients still failing at the end: a failure of
			// unknown length this broad is a warning (detectors.Episode).
			want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &errorstorm.Finding{
					Responses: 90, StormResponses: 90, StormClients: 3, ClientIDs: []string{"", "a", "b"},
					Clients: []string{"10.2.0.5", "10.2.0.6"}, Servers: []string{broker, broker2}, Held: 2.9,
					Ongoing: true,
				},
				Summary: []string{`to "a" (10.2.0.5), "b" (10.2.0.5), 10.2.0.6 (no client id) from`},
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, map[string]map[string]string{"error-storm": tc.settings}, errorstorm.Analyzer)
			tl := dt.NewTimeline(h)
			tc.traffic(h, tl)
			tl.Run()
			dt.Check(t, h.Findings(), "error-storm", tc.want...)
		})
	}
}

// TestErrorStormProse: what the finding says and suggests.
func TestErrorStormProse(t *testing.T) {
	h := dt.New(t, nil, errorstorm.Analyzer)
	tl := dt.NewTimeline(h)
	loop(h, tl)
	// Three more outside the storm, a minute later.
	every(h, tl, "10.2.0.5:40001", broker, "loop-client", 80*time.Second, 10*time.Second, 3, notLeader)
	// And ten healthy fetches.
	every(h, tl, "10.2.0.6:40000", broker, "consumer", time.Second, time.Second, 10, fine)
	tl.Run()
	fs := h.Findings()
	if len(fs) != 1 {
		t.Fatalf("findings:%s", dt.Describe(fs))
	}
	f := fs[0]
	for _, want := range []string{"153 of 163 Fetch responses carried NOT_LEADER_OR_FOLLOWER (error code 6, 153 occurrences",
		`1 client(s), "loop-client" (10.2.0.5), kept getting it at 10.1 per second for 14.9 s, from 00:00:01.001 to 00:00:15.901, at least 5 within 5.0 s`,
		"3 other response(s) carried it outside the storm."} {
		if !strings.Contains(f.Explanation, want) {
			t.Errorf("explanation %q lacks %q", f.Explanation, want)
		}
	}
	for _, want := range []string{"kfsniff -r <capture> --frames --errors --api Fetch --client-id loop-client shows",
		"(see not-leader-loop)"} {
		if !strings.Contains(f.Next, want) {
			t.Errorf("next %q lacks %q", f.Next, want)
		}
	}
	if len(f.Evidence) < 2 || f.Evidence[0].What != "Fetch response NOT_LEADER_OR_FOLLOWER" {
		t.Errorf("evidence %+v", f.Evidence)
	}
}

// analyzer returns a rule of the list by name: the specific rules that
// explain storms, wherever they live.
func analyzer(t *testing.T, name string) *detectors.Analyzer {
	for _, a := range all.Analyzers() {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no rule %s", name)
	return nil
}

// TestErrorStormExplainedByNotLeaderLoop: a NOT_LEADER loop is also what
// not-leader-loop reports, for the same client and error; the storm
// (a warning on its own: held 15 s, then healed) drops to info and names
// it when that finding is at least as severe, as the Set's explaining
// requires, and stays a warning otherwise.
func TestErrorStormExplainedByNotLeaderLoop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		traffic  func(h *dt.Harness, tl *dt.Timeline)
		want     dt.Want
	}{
		{name: "the 10/s loop", traffic: healedLoop,
			want: dt.Want{Detail: &errorstorm.Finding{StormResponses: 150}}},
		{name: "two clients, one looping", traffic: func(h *dt.Harness, tl *dt.Timeline) {
			healedLoop(h, tl)
			every(h, tl, "10.2.0.9:40000", broker2, "other", time.Second, 5*time.Second, 5, notLeader)
		}, want: dt.Want{Detail: &errorstorm.Finding{Responses: 155, StormResponses: 150}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, map[string]map[string]string{"error-storm": tc.settings},
				analyzer(t, "not-leader-loop"), errorstorm.Analyzer)
			tl := dt.NewTimeline(h)
			tc.traffic(h, tl)
			tl.Run()
			fs := h.Findings()
			nl := detectors.Severity(-1)
			for _, f := range fs {
				if f.Detector == "not-leader-loop" {
					nl = max(nl, f.Severity)
				}
			}
			if nl < 0 {
				t.Fatalf("no not-leader-loop finding:%s", dt.Describe(fs))
			}
			w := tc.want
			w.Severity = detectors.Warning
			if nl >= detectors.Warning {
				w.Severity, w.ExplainedBy = detectors.Info, "not-leader-loop"
				w.Summary = []string{" (explained by not-leader-loop)"}
			}
			dt.Check(t, fs, "error-storm", w)
		})
	}
}

// specific is a stand-in for a specific rule: one finding at sev about
// subject.
func specific(sev detectors.Severity, subject detectors.Subject) *detectors.Analyzer {
	return detectors.Define(detectors.Analyzer{Name: "specific", Severity: detectors.Error, Doc: "a stand-in"}, struct{}{},
		func(struct{}) detectors.Rule { return stub{detectors.Finding{Severity: sev, Subject: subject}} })
}

type stub struct{ f detectors.Finding }

func (s stub) Findings(*detectors.Pass) []detectors.Finding { return []detectors.Finding{s.f} }

// TestErrorStormSubject: the storm's subject is typed (client ids, client
// hosts, servers, the error code), and only a finding about the same
// error and one of them, at least as severe, explains it.
func TestErrorStormSubject(t *testing.T) {
	client, server := netip.MustParseAddr("10.2.0.5"), netip.MustParseAddrPort(broker)
	for _, tc := range []struct {
		name      string
		sev       detectors.Severity
		subject   detectors.Subject
		explained bool
	}{
		{"the same error and client id", detectors.Warning, detectors.Subject{Error: 6, ClientIDs: []string{"loop-client"}}, true},
		{"the same error and client host", detectors.Error, detectors.Subject{Error: 6, Clients: []netip.Addr{client}}, true},
		{"the same error and server", detectors.Warning, detectors.Subject{Error: 6, Servers: []netip.AddrPort{server}}, true},
		{"near miss: another error", detectors.Warning, detectors.Subject{Error: 5, ClientIDs: []string{"loop-client"}}, false},
		{"near miss: another client and server", detectors.Warning,
			detectors.Subject{Error: 6, ClientIDs: []string{"other"}, Clients: []netip.Addr{netip.MustParseAddr("10.2.0.9")},
				Servers: []netip.AddrPort{netip.MustParseAddrPort(broker2)}}, false},
		{"near miss: less severe than the storm", detectors.Info, detectors.Subject{Error: 6, ClientIDs: []string{"loop-client"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, nil, specific(tc.sev, tc.subject), errorstorm.Analyzer)
			tl := dt.NewTimeline(h)
			healedLoop(h, tl)
			tl.Run()
			w := dt.Want{Severity: detectors.Warning, Detail: &errorstorm.Finding{StormResponses: 150}}
			if tc.explained {
				w.Severity, w.ExplainedBy = detectors.Info, "specific"
			}
			fs := h.Findings()
			dt.Check(t, fs, "error-storm", w)
			for _, f := range fs {
				if _, ok := f.Fields["explained_by"]; f.Detector == "error-storm" && ok != tc.explained {
					t.Errorf("explained_by present %v, want %v", ok, tc.explained)
				}
			}
		})
	}
}

// TestErrorStormInfoNamesItsExplanation: a storm that is info on its own
// (no client held up) still names the specific finding that explains it,
// so that the reader is sent there; another error does not.
func TestErrorStormInfoNamesItsExplanation(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      int16
		explained bool
	}{{"the same error and client id", 6, true}, {"near miss: another error", 5, false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, nil, specific(detectors.Info, detectors.Subject{Error: tc.code, ClientIDs: []string{"burst"}}), errorstorm.Analyzer)
			tl := dt.NewTimeline(h)
			every(h, tl, "10.2.0.5:40000", broker, "burst", time.Second, 50*time.Millisecond, 5, notLeader)
			tl.Run()
			w := dt.Want{Severity: detectors.Info, Detail: &errorstorm.Finding{StormResponses: 5}}
			if tc.explained {
				w.ExplainedBy, w.Summary = "specific", []string{" (explained by specific)"}
			}
			fs := h.Findings()
			dt.Check(t, fs, "error-storm", w)
			for _, f := range fs {
				if _, ok := f.Fields["explained_by"]; f.Detector == "error-storm" && ok != tc.explained {
					t.Errorf("explained_by present %v, want %v", ok, tc.explained)
				}
			}
		})
	}
}

// timedOut is a Produce answered REQUEST_TIMED_OUT.
func timedOut() (kmsg.Request, kmsg.Response) { return dt.Produce(9), dt.Produced(9, 7, 0) }

// storm is loop-client getting REQUEST_TIMED_OUT n times, step apart,
// from 1 s; the capture ends with the last one unless healed, when a
// success follows 1 ms later and the capture goes on a minute.
func storm(n int, step time.Duration, healed bool) func(h *dt.Harness) {
	return func(h *dt.Harness) {
		tl := dt.NewTimeline(h)
		c := h.Conn("10.2.0.5:40000", broker)
		tl.Every(c, dt.At(time.Second), step, n, 100*time.Microsecond, "loop-client", timedOut)
		if healed {
			tl.Call(c, dt.At(time.Second+time.Duration(n)*step), 100*time.Microsecond, "loop-client", dt.Produce(9), dt.Produced(9, 0, 0))
			later(h, tl, time.Minute)
		}
		tl.Run()
	}
}

// TestErrorStormIntensity: issue 30's first item. A client retrying with no
// backoff is a warning however short the capture (the captures:
// 1,700-3,100 failing answers a second for 0.75-1.1 s, still failing at
// the end, were info "held under 3 s"), for any error code; a client with
// a backoff, or too few answers, stays info; near misses on both sides of
// detectors.FastRate and FastMin.
func TestErrorStormIntensity(t *testing.T) {
	fast := func(sev detectors.Severity, fast bool, ongoing bool) []dt.Want {
		w := dt.Want{Severity: sev, Detail: &errorstorm.Finding{
			Ongoing: ongoing, Error: "REQUEST_TIMED_OUT",
		}, Exact: []string{"Ongoing"}}
		if fast {
			w.Detail.(*errorstorm.Finding).Fast = true
		}
		return []dt.Want{w}
	}
	dt.Run(t, errorstorm.Analyzer, []dt.Case{
		{Name: "2,000 a second for 0.75 s, still failing at the end: warning", Traffic: storm(1500, 500*time.Microsecond, false),
			Want: withSummary(fast(detectors.Warning, true, true),
				"still failing at the end (seen for 750 ms), retried 1500 times at 2000 a second: faster than any client's backoff allows"),
			Explanation: []string{"a warning however short, since the client retried 1500 times at 2000 a second"}},
		{Name: "the same storm, healed within the capture: still a warning", Traffic: storm(1500, 500*time.Microsecond, true),
			Want: fast(detectors.Warning, true, false)},
		{Name: "near miss: 99.9 a second (a backoff of 10 ms): info", Traffic: storm(200, 10010*time.Microsecond, false),
			Want: fast(detectors.Info, false, true)},
		{Name: "near miss the other way: 100 a second: warning", Traffic: storm(200, 10*time.Millisecond, false),
			Want: fast(detectors.Warning, true, true)},
		{Name: "near miss: 49 answers at 2,000 a second: info", Traffic: storm(detectors.FastMin-1, 500*time.Microsecond, false),
			Want: fast(detectors.Info, false, true)},
		{Name: "near miss the other way: 50 answers at 2,000 a second: warning", Traffic: storm(detectors.FastMin, 500*time.Microsecond, false),
			Want: fast(detectors.Warning, true, true)},
		{Name: "a default backoff (100 ms) for 1 s, still failing at the end: info", Traffic: storm(10, 100*time.Millisecond, false),
			Want: withSummary(fast(detectors.Info, false, true), "still failing at the end (seen for 900 ms)")},
	}, func(t *testing.T, f *detectors.Finding) {
		if _, ok := f.Fields["fast"]; ok != (f.Severity == detectors.Warning) {
			t.Errorf("fast %v on a %s finding: %s", f.Fields["fast"], f.Severity, f.Summary)
		}
	})
}

func withSummary(w []dt.Want, s ...string) []dt.Want {
	w[0].Summary = s
	return w
}
