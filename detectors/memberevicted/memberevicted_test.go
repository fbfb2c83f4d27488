package memberevicted_test

import (
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/memberevicted"
	"github.com/kfsniff/kfsniff/detectors/rebalanceloop"
)

const broker = "10.1.0.10:9092"

func join(h *dt.Harness, at time.Duration, client, id, member string, gen int32, timeoutMs int32, code int16) {
	req := dt.JoinGroup("audit", member)
	req.SessionTimeoutMillis = timeoutMs
	resp := dt.GroupJoined(code, gen, member)
	resp.MemberID = member
	h.Call(h.Conn(client, broker), dt.At(at), time.Millisecond, id, req, resp)
}

func beat(h *dt.Harness, at time.Duration, client, id, member string, gen int32, code int16) {
	h.Call(h.Conn(client, broker), dt.At(at), time.Millisecond, id, dt.ClassicHeartbeat("audit", gen, member), dt.Beat(code))
}

// group is two members beating every second; b is silent from silentFrom
// for silentFor, then beats once more answered code.
func group(h *dt.Harness, timeoutMs int32, silentFrom, silentFor time.Duration, code int16, end time.Duration) {
	join(h, 0, "10.2.0.5:40000", "audit-1", "m-a", 1, timeoutMs, 0)
	join(h, 10*time.Millisecond, "10.2.0.6:40000", "audit-2", "m-b", 1, timeoutMs, 0)
	gen := int32(1)
	for t := time.Second; t < end; t += time.Second {
		if t > silentFrom+time.Duration(timeoutMs)*time.Millisecond && gen == 1 && code != 0 {
			gen = 2
			join(h, t, "10.2.0.5:40000", "audit-1", "m-a", gen, timeoutMs, 0) // the group without b
		}
		beat(h, t, "10.2.0.5:40000", "audit-1", "m-a", gen, 0)
		if t < silentFrom || t >= silentFrom+silentFor {
			c := int16(0)
			if t >= silentFrom+silentFor && t < silentFrom+silentFor+time.Second {
				c = code
			}
			if c == 0 || c != 0 {
				beat(h, t+5*time.Millisecond, "10.2.0.6:40000", "audit-2", "m-b", 1, c)
			}
			if c != 0 {
				return
			}
		}
	}
}

func TestMemberEvicted(t *testing.T) {
	dt.Run(t, memberevicted.Analyzer, []dt.Case{
		{
			Name:    "silent 12 s past a 6 s session timeout, back to UNKNOWN_MEMBER_ID: a warning",
			Traffic: func(h *dt.Harness) { group(h, 6000, 2500*time.Millisecond, 11*time.Second, 25, 20*time.Second) },
			Want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &memberevicted.Finding{
					SilentMs: 12000, SessionTimeoutMs: 6000, Group: "audit", Member: "m-b", ClientID: "audit-2",
					Host: "10.2.0.6", Back: true, Answer: "UNKNOWN_MEMBER_ID",
				},
				Summary: []string{`member "m-b" of group "audit" (client "audit-2" on 10.2.0.6) evicted: silent for 12.0 s, past its session timeout of 6.0 s; back, answered UNKNOWN_MEMBER_ID`},
			}},
			Explanation: []string{"longer than the session timeout of 6000 ms", "not a rebalance loop"},
			Next:        []string{"--group audit --members"},
		},
		{
			Name: "near miss: silent 5.9 s under a 6 s timeout, even answered UNKNOWN_MEMBER_ID: nothing",
			Traffic: func(h *dt.Harness) {
				join(h, 0, "10.2.0.5:40000", "audit-1", "m-a", 1, 6000, 0)
				join(h, 0, "10.2.0.6:40000", "audit-2", "m-b", 1, 6000, 0)
				beat(h, 2*time.Second, "10.2.0.6:40000", "audit-2", "m-b", 1, 0)
				beat(h, 7900*time.Millisecond, "10.2.0.6:40000", "audit-2", "m-b", 1, 25)
			},
		},
		{
			Name: "silent 6 s, the timeout itself, answered UNKNOWN_MEMBER_ID: evicted",
			Traffic: func(h *dt.Harness) {
				join(h, 0, "10.2.0.5:40000", "audit-1", "m-a", 1, 6000, 0)
				join(h, 0, "10.2.0.6:40000", "audit-2", "m-b", 1, 6000, 0)
				beat(h, 2*time.Second, "10.2.0.6:40000", "audit-2", "m-b", 1, 0)
				beat(h, 8*time.Second, "10.2.0.6:40000", "audit-2", "m-b", 1, 25)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &memberevicted.Finding{SilentMs: 6000}}},
		},
		{
			Name:    "near miss: back after a silence past the timeout but answered without error: nothing",
			Traffic: func(h *dt.Harness) { group(h, 6000, 2500*time.Millisecond, 8*time.Second, 0, 14*time.Second) },
		},
		{
			Name:    "silent 35 s: an error",
			Traffic: func(h *dt.Harness) { group(h, 10000, 2500*time.Millisecond, 35*time.Second, 25, 40*time.Second) },
			Want:    []dt.Want{{Severity: detectors.Error, Detail: &memberevicted.Finding{Back: true}}},
		},
		{
			Name: "never back while the group goes on: silent at the end",
			Traffic: func(h *dt.Harness) {
				group(h, 6000, 2500*time.Millisecond, time.Hour, 25, 20*time.Second)
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &memberevicted.Finding{Back: false}, Exact: []string{"Back"}}},
		},
	}, nil)
}

// TestLoopExplained: the rebalance-loop finding of a group whose
// rebalances one eviction accounts for drops to info; a loop of many
// generations is still a loop.
func TestLoopExplained(t *testing.T) {
	h := dt.New(t, nil, memberevicted.Analyzer, rebalanceloop.Analyzer)
	group(h, 6000, 2500*time.Millisecond, 11*time.Second, 25, 20*time.Second)
	for _, f := range h.Findings() {
		if f.Detector == "rebalance-loop" && f.Severity > detectors.Info {
			t.Errorf("rebalance-loop %s, not explained: %s", f.Severity, f.Summary)
		}
	}
}

// beats is a member's heartbeats every second from from to to (its
// JoinGroup before the capture), the last answered code.
func beats(h *dt.Harness, client, id, member string, from, to time.Duration, code int16) {
	for t := from; t <= to; t += time.Second {
		c := int16(0)
		if t+time.Second > to {
			c = code
		}
		beat(h, t, client, id, member, 3, c)
	}
}

func TestMemberEvictedJoinedBeforeTheCapture(t *testing.T) {
	dt.Run(t, memberevicted.Analyzer, []dt.Case{
		{
			Name: "joined before the capture, silent 10 s, back to UNKNOWN_MEMBER_ID: evicted, timeout not known",
			Traffic: func(h *dt.Harness) {
				beats(h, "10.2.0.5:40000", "audit-1", "m-a", 0, 20*time.Second, 0)
				beats(h, "10.2.0.6:40000", "audit-2", "m-b", 500*time.Millisecond, 2500*time.Millisecond, 0)
				beat(h, 12500*time.Millisecond, "10.2.0.6:40000", "audit-2", "m-b", 3, 25)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &memberevicted.Finding{
				SilentMs: 10000, SessionTimeoutMs: 0,
			}, Exact: []string{"SessionTimeoutMs"},
				Summary: []string{"silent for 10.0 s (its session timeout not captured)"}}},
			Explanation: []string{"its JoinGroup, which names its session timeout, came before the capture"},
		},
		{
			Name: "joined before the capture, silent 6 s (Kafka's least session timeout), back to UNKNOWN_MEMBER_ID: evicted",
			Traffic: func(h *dt.Harness) {
				beats(h, "10.2.0.5:40000", "audit-1", "m-a", 0, 20*time.Second, 0)
				beats(h, "10.2.0.6:40000", "audit-2", "m-b", 500*time.Millisecond, 2500*time.Millisecond, 0)
				beat(h, 8500*time.Millisecond, "10.2.0.6:40000", "audit-2", "m-b", 3, 25)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &memberevicted.Finding{SilentMs: 6000, SessionTimeoutMs: 0}, Exact: []string{"SessionTimeoutMs"}}},
		},
		{
			Name: "near miss: joined before the capture, silent 5.9 s: nothing",
			Traffic: func(h *dt.Harness) {
				beats(h, "10.2.0.5:40000", "audit-1", "m-a", 0, 20*time.Second, 0)
				beats(h, "10.2.0.6:40000", "audit-2", "m-b", 500*time.Millisecond, 2500*time.Millisecond, 0)
				beat(h, 8400*time.Millisecond, "10.2.0.6:40000", "audit-2", "m-b", 3, 25)
			},
		},
		{
			Name: "near miss: joined before the capture, silent 10 s, but no other member heard meanwhile: nothing",
			Traffic: func(h *dt.Harness) {
				beats(h, "10.2.0.6:40000", "audit-2", "m-b", 500*time.Millisecond, 2500*time.Millisecond, 0)
				beat(h, 12500*time.Millisecond, "10.2.0.6:40000", "audit-2", "m-b", 3, 25)
			},
		},
	}, nil)
}

func TestMemberEvictedSilentSinceTheStart(t *testing.T) {
	dt.Run(t, memberevicted.Analyzer, []dt.Case{
		{
			Name: "first heard 12 s into the capture, answered UNKNOWN_MEMBER_ID: evicted while silent since the start",
			Traffic: func(h *dt.Harness) {
				beats(h, "10.2.0.5:40000", "audit-1", "m-a", 0, 20*time.Second, 0)
				beat(h, 12*time.Second, "10.2.0.6:40000", "audit-2", "m-b", 3, 25)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &memberevicted.Finding{SilentMs: 12000, SinceStart: true},
				Summary: []string{"silent for at least 12.0 s, since before the capture began"}}},
		},
		{
			Name: "first heard 6 s in, answered UNKNOWN_MEMBER_ID, the group's other member beating: evicted (a capture begun after the member stopped)",
			Traffic: func(h *dt.Harness) {
				beats(h, "10.2.0.5:40000", "audit-1", "m-a", 0, 20*time.Second, 0)
				beat(h, 6*time.Second, "10.2.0.6:40000", "audit-2", "m-b", 3, 25)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &memberevicted.Finding{SilentMs: 6000, SinceStart: true}}},
		},
		{
			Name: "near miss: first heard 5.9 s in, answered UNKNOWN_MEMBER_ID: nothing (under Kafka's least session timeout)",
			Traffic: func(h *dt.Harness) {
				beats(h, "10.2.0.5:40000", "audit-1", "m-a", 0, 20*time.Second, 0)
				beat(h, 5900*time.Millisecond, "10.2.0.6:40000", "audit-2", "m-b", 3, 25)
			},
		},
		{
			Name: "near miss: first heard 12 s in, answered UNKNOWN_MEMBER_ID, no other member heard: nothing (a coordinator that lost every member)",
			Traffic: func(h *dt.Harness) {
				beat(h, 12*time.Second, "10.2.0.6:40000", "audit-2", "m-b", 3, 25)
			},
		},
	}, nil)
}

// TestMemberEvictedWithoutMemberID: librdkafka, having timed its session
// out itself, sends its next Heartbeat with no member id (recorded:
// fixtures/pcaps/clients/evicted-librdkafka); the answer is the member's
// this client was.
func TestMemberEvictedWithoutMemberID(t *testing.T) {
	dt.Run(t, memberevicted.Analyzer, []dt.Case{
		{
			Name: "silent 10 s past a 6 s timeout, back with no member id, answered UNKNOWN_MEMBER_ID: evicted",
			Traffic: func(h *dt.Harness) {
				join(h, 0, "10.2.0.5:40000", "audit-1", "m-a", 1, 6000, 0)
				join(h, 10*time.Millisecond, "10.2.0.6:40000", "audit-2", "m-b", 1, 6000, 0)
				beats(h, "10.2.0.5:40000", "audit-1", "m-a", time.Second, 15*time.Second, 0)
				beat(h, 2*time.Second, "10.2.0.6:40000", "audit-2", "m-b", 1, 0)
				beat(h, 12*time.Second, "10.2.0.6:40000", "audit-2", "", 1, 25)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &memberevicted.Finding{SilentMs: 10000, SessionTimeoutMs: 6000, Member: "m-b", ClientID: "audit-2"}}},
		},
		{
			Name: "first heard 8 s in with no member id, answered UNKNOWN_MEMBER_ID, the other member beating: evicted, since the start",
			Traffic: func(h *dt.Harness) {
				beats(h, "10.2.0.5:40000", "audit-1", "m-a", 0, 15*time.Second, 0)
				beat(h, 8*time.Second, "10.2.0.6:40000", "audit-2", "", 1, 25)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &memberevicted.Finding{SilentMs: 8000, Member: "", ClientID: "audit-2", SinceStart: true}, Exact: []string{"Member"},
				Summary: []string{`a member (its id cleared by the client) of group "audit" (client "audit-2" on 10.2.0.6) evicted: silent for at least 8.0 s`}}},
		},
		{
			Name: "near miss: the same from a client that was two members: nothing (which one is not known)",
			Traffic: func(h *dt.Harness) {
				join(h, 0, "10.2.0.5:40000", "audit-1", "m-a", 1, 6000, 0)
				join(h, 10*time.Millisecond, "10.2.0.6:40000", "audit-2", "m-b", 1, 6000, 0)
				join(h, 20*time.Millisecond, "10.2.0.6:40000", "audit-2", "m-c", 1, 6000, 0)
				beats(h, "10.2.0.5:40000", "audit-1", "m-a", time.Second, 15*time.Second, 0)
				beat(h, 12*time.Second, "10.2.0.6:40000", "audit-2", "", 1, 25)
			},
		},
	}, nil)
}
