package rebalanceloop_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/rebalanceloop"
	"github.com/kfsniff/kfsniff/flows"
)

const coordinator = "10.1.0.10:9092"

type member struct {
	h   *dt.Harness
	c   *flows.Conn
	id  string
	cid string
	gen int32
}

func newMember(h *dt.Harness, client, clientID string) *member {
	return &member{h: h, c: h.Conn(client, coordinator), cid: clientID}
}

const ms = time.Millisecond

// join is a first join at at: MEMBER_ID_REQUIRED, then the join with the
// id given, answered after lat with generation gen, and a SyncGroup.
func (m *member) join(at time.Duration, id string, gen int32, lat time.Duration) time.Duration {
	m.h.Call(m.c, dt.At(at), 2*ms, m.cid, dt.JoinGroup("g", ""), dt.GroupJoined(79, -1, id))
	return m.rejoin(at+5*ms, id, gen, lat)
}

// rejoin joins with the member id it has, answered after lat, then syncs;
// it returns when the assignment arrived.
func (m *member) rejoin(at time.Duration, id string, gen int32, lat time.Duration) time.Duration {
	m.id, m.gen = id, gen
	m.h.Call(m.c, dt.At(at), lat, m.cid, dt.JoinGroup("g", id), dt.GroupJoined(0, gen, id))
	m.h.Call(m.c, dt.At(at+lat+ms), 10*ms, m.cid, dt.SyncGroup("g", gen, id), dt.Synced(0))
	return at + lat + 11*ms
}

func (m *member) beat(at time.Duration, code int16) {
	m.h.Call(m.c, dt.At(at), 2*ms, m.cid, dt.ClassicHeartbeat("g", m.gen, m.id), dt.Beat(code))
}

// loop: a member joins, then n times its heartbeat is answered
// REBALANCE_IN_PROGRESS and it rejoins with its id, the join answered after
// lat, every period; healthy heartbeats between and after.
func loop(h *dt.Harness, n int, period, lat time.Duration) {
	m := newMember(h, "10.2.0.5:40000", "consumer-1")
	t := m.join(time.Second, "m-1", 1, 20*ms)
	for i := range n {
		at := t + time.Duration(i)*period + 100*ms
		m.beat(at, 27)
		m.rejoin(at+5*ms, "m-1", int32(i+2), lat)
	}
	end := t + time.Duration(n)*period + 200*ms
	m.beat(end, 0)
}

func TestRebalanceLoop(t *testing.T) {
	dt.Run(t, rebalanceloop.Analyzer, []dt.Case{
		{
			Name: "healthy: a first join (MEMBER_ID_REQUIRED, then the join) and heartbeats give nothing",
			Traffic: func(h *dt.Harness) {
				m := newMember(h, "10.2.0.5:40000", "consumer-1")
				t := m.join(time.Second, "m-1", 1, 3*time.Second)
				for i := range 10 {
					m.beat(t+time.Duration(i)*time.Second, 0)
				}
			},
		},
		{
			Name: "healthy: three members joining one after another, each one rebalance, give nothing",
			Traffic: func(h *dt.Harness) {
				a := newMember(h, "10.2.0.5:40000", "consumer-a")
				b := newMember(h, "10.2.0.6:40000", "consumer-b")
				c := newMember(h, "10.2.0.7:40000", "consumer-c")
				t := a.join(time.Second, "a", 1, 3*time.Second)
				a.beat(t+time.Second, 0)
				t = b.join(t+2*time.Second, "b", 2, time.Second)
				a.beat(t-500*ms, 27)
				a.rejoin(t-490*ms, "a", 2, 400*ms)
				t = c.join(t+2*time.Second, "c", 3, time.Second)
				a.beat(t-500*ms, 27)
				a.rejoin(t-490*ms, "a", 3, 400*ms)
				b.beat(t-400*ms, 27)
				b.rejoin(t-390*ms, "b", 3, 300*ms)
				for i := range 5 {
					a.beat(t+time.Duration(i+1)*time.Second, 0)
				}
			},
		},
		{
			Name:    "a classic loop: six rebalances without a member joining, over 5.6 s, is a warning",
			Traffic: func(h *dt.Harness) { loop(h, 6, time.Second, 500*ms) },
			Want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &rebalanceloop.Finding{
					Rebalances: 7, Joined: 1, RebalanceErrors: 6, Episodes: 1, Group: "g", Protocol: "classic",
					Unexplained: 6, GenerationFirst: int32(1), GenerationLast: int32(7), Loop: true,
					Ongoing: false, Members: []string{"m-1"}, Errors: []string{"REBALANCE_IN_PROGRESS x6"},
					Clients: []string{"10.2.0.5"},
				}, Exact: []string{"Ongoing"},
				Summary: []string{`group "g" rebalancing in a loop: 7 rebalances in 5.6 s without an assignment holding 10.0 s (3.1 s in rebalances)`, "REBALANCE_IN_PROGRESS x6"},
			}},
		},
		{
			Name:    "near miss: a loop over 2.9 s is info",
			Traffic: func(h *dt.Harness) { loop(h, 3, 1326500*time.Microsecond, 100*ms) },
			Want: []dt.Want{{Severity: detectors.Info, Detail: &rebalanceloop.Finding{
				Loop: true, EpisodeS: 2.9, Rebalances: 4,
			}}},
		},
		{
			Name:    "a loop over 3 s is a warning",
			Traffic: func(h *dt.Harness) { loop(h, 3, 1376500*time.Microsecond, 100*ms) },
			Want:    []dt.Want{{Severity: detectors.Warning, Detail: &rebalanceloop.Finding{Loop: true, EpisodeS: 3.0}}},
		},
		{
			Name: "members leaving at the end do not leave the group unsettled",
			Traffic: func(h *dt.Harness) {
				loop(h, 3, 1376500*time.Microsecond, 100*ms)
				c := h.Conn("10.2.0.5:40001", coordinator)
				h.Call(c, dt.At(9*time.Second), ms, "consumer-1", dt.LeaveGroup("g", "m-1"), dt.Left())
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &rebalanceloop.Finding{
				Ongoing: false, Left: 1, EpisodeS: 3.0,
			}, Exact: []string{"Ongoing"}}},
		},
		{
			Name:    "near miss: one rebalance beyond the join, however slow, is not a loop",
			Traffic: func(h *dt.Harness) { loop(h, 1, time.Second, 5*time.Second) },
			Want: []dt.Want{{Severity: detectors.Info, Detail: &rebalanceloop.Finding{
				Loop: false, Unexplained: 1,
			}, Exact: []string{"Loop"},
				Summary: []string{`group "g" rebalanced: 2 rebalances`}}},
		},
		{
			Name:    "two rebalances beyond the join, slow, are a loop",
			Traffic: func(h *dt.Harness) { loop(h, 2, 6*time.Second, 5*time.Second) },
			Want:    []dt.Want{{Severity: detectors.Warning, Detail: &rebalanceloop.Finding{Loop: true, Unexplained: 2}}},
		},
		{
			Name:    "a loop of 30 s unsettled is an error",
			Traffic: func(h *dt.Harness) { loop(h, 12, 3*time.Second, 2600*ms) },
			Want:    []dt.Want{{Severity: detectors.Error, Detail: &rebalanceloop.Finding{Rebalances: 13}}},
		},
		{
			Name: "JoinGroup answered REBALANCE_IN_PROGRESS 24 times over 12 s, never settling: an error",
			Traffic: func(h *dt.Harness) {
				m := newMember(h, "10.2.0.5:40000", "consumer-1")
				t := m.join(time.Second, "m-1", 1, 20*ms)
				for i := range 24 {
					h.Call(m.c, dt.At(t+time.Duration(i)*500*ms), 5*ms, "consumer-1", dt.JoinGroup("g", "m-1"), dt.GroupJoined(27, -1, "m-1"))
				}
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &rebalanceloop.Finding{
				RebalanceErrors: 24, Ongoing: true, Loop: true,
			},
				Summary: []string{"still unsettled at the end"}}},
		},
		{
			Name: "JoinGroup answered REBALANCE_IN_PROGRESS 30 times, then its one member leaves: the group is empty, settled, not an error",
			Traffic: func(h *dt.Harness) {
				m := newMember(h, "10.2.0.5:40000", "consumer-1")
				t := m.join(time.Second, "m-1", 1, 20*ms)
				for i := range 30 {
					h.Call(m.c, dt.At(t+time.Duration(i)*500*ms), 5*ms, "consumer-1", dt.JoinGroup("g", "m-1"), dt.GroupJoined(27, -1, "m-1"))
				}
				h.Call(m.c, dt.At(t+15*time.Second), ms, "consumer-1", dt.LeaveGroup("g", "m-1"), dt.Left())
			},
			End:  30 * time.Second,
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &rebalanceloop.Finding{RebalanceErrors: 30, Ongoing: false, Loop: true}, Exact: []string{"Ongoing"}}},
		},
		{
			Name: "near miss: 30 such errors in a group of two, one of which leaves: still unsettled at the end, an error",
			Traffic: func(h *dt.Harness) {
				a := newMember(h, "10.2.0.5:40000", "consumer-1")
				b := newMember(h, "10.2.0.6:40000", "consumer-2")
				t := a.join(time.Second, "m-1", 1, 20*ms)
				b.rejoin(t, "m-2", 1, 20*ms)
				for i := range 30 {
					h.Call(a.c, dt.At(t+time.Duration(i)*500*ms), 5*ms, "consumer-1", dt.JoinGroup("g", "m-1"), dt.GroupJoined(27, -1, "m-1"))
				}
				h.Call(a.c, dt.At(t+15*time.Second), ms, "consumer-1", dt.LeaveGroup("g", "m-1"), dt.Left())
			},
			End:  30 * time.Second,
			Want: []dt.Want{{Severity: detectors.Error, Detail: &rebalanceloop.Finding{Ongoing: true, Loop: true}}},
		},
		{
			Name: "near miss: 19 such errors (min-errors 20) over 9.5 s: not a loop, info",
			Traffic: func(h *dt.Harness) {
				m := newMember(h, "10.2.0.5:40000", "consumer-1")
				t := m.join(time.Second, "m-1", 1, 20*ms)
				for i := range 19 {
					h.Call(m.c, dt.At(t+time.Duration(i)*500*ms), 5*ms, "consumer-1", dt.JoinGroup("g", "m-1"), dt.GroupJoined(27, -1, "m-1"))
				}
				m.rejoin(t+10*time.Second, "m-1", 2, 20*ms)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &rebalanceloop.Finding{
				RebalanceErrors: 19, Loop: false,
			}, Exact: []string{"Loop"}}},
		},
		{
			Name: "UNKNOWN_MEMBER_ID: members fenced rejoin with new ids, which are not new members",
			Traffic: func(h *dt.Harness) {
				m := newMember(h, "10.2.0.5:40000", "consumer-1")
				t := m.join(time.Second, "m-1", 1, 20*ms)
				for i := range 4 {
					at := t + time.Duration(i)*2*time.Second + 100*ms
					m.beat(at, 25)
					m.join(at+10*ms, "m-"+string(rune('2'+i)), int32(i+2), time.Second)
				}
				m.beat(t+9*time.Second, 0)
			},
			Want: []dt.Want{{Severity: detectors.Warning,
				Detail: &rebalanceloop.Finding{
					Rebalances: 5, Joined: 1, Unexplained: 4, Errors: []string{"UNKNOWN_MEMBER_ID x4"},
				},
			}},
		},
		{
			Name: "hold: a disturbance 9.9 s after the group settled is the same episode",
			Traffic: func(h *dt.Harness) {
				m := newMember(h, "10.2.0.5:40000", "consumer-1")
				t := m.join(time.Second, "m-1", 1, 20*ms)
				m.beat(t+100*ms, 27)
				t = m.rejoin(t+105*ms, "m-1", 2, 2*time.Second)
				m.beat(t+9900*ms, 27)
				t = m.rejoin(t+9905*ms, "m-1", 3, 2*time.Second)
				m.beat(t+time.Second, 0)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &rebalanceloop.Finding{Episodes: 1, Rebalances: 3}}},
		},
		{
			Name: "hold: 10 s after it settled, a new episode",
			Traffic: func(h *dt.Harness) {
				m := newMember(h, "10.2.0.5:40000", "consumer-1")
				t := m.join(time.Second, "m-1", 1, 20*ms)
				m.beat(t+100*ms, 27)
				t = m.rejoin(t+105*ms, "m-1", 2, 2*time.Second)
				m.beat(t+10*time.Second, 27)
				t = m.rejoin(t+10005*ms, "m-1", 3, 2*time.Second)
				m.beat(t+time.Second, 0)
			},
			Want: []dt.Want{{Severity: detectors.Info, Detail: &rebalanceloop.Finding{Episodes: 2, Rebalances: 2}}},
		},
		{
			Name: "KIP-848: a member fenced with FENCED_MEMBER_EPOCH eight times, rejoining 500 ms later each time",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.2.0.5:40000", coordinator)
				h.Call(c, dt.At(time.Second), 5*ms, "consumer-1", dt.GroupHeartbeat("g", "", 0), dt.GroupBeat(0, "m-1", 1))
				for i := range 8 {
					at := 2*time.Second + time.Duration(i)*time.Second
					h.Call(c, dt.At(at), 5*ms, "consumer-1", dt.GroupHeartbeat("g", "m-1", int32(1+i)), dt.GroupBeat(110, "", 0))
					h.Call(c, dt.At(at+505*ms), 5*ms, "consumer-1", dt.GroupHeartbeat("g", "m-1", 0), dt.GroupBeat(0, "m-1", int32(2+i)))
				}
			},
			Want: []dt.Want{{Severity: detectors.Warning,
				Detail: &rebalanceloop.Finding{
					Fenced: 8, Rebalances: 8, Protocol: "consumer", Errors: []string{"FENCED_MEMBER_EPOCH x8"},
				},
			}},
		},
		{
			Name: "KIP-848 healthy: members join (epoch 0) and heartbeat, one leaves: nothing",
			Traffic: func(h *dt.Harness) {
				for i, client := range []string{"10.2.0.5:40000", "10.2.0.6:40000", "10.2.0.7:40000"} {
					c := h.Conn(client, coordinator)
					id := "m-" + string(rune('1'+i))
					h.Call(c, dt.At(time.Duration(i+1)*time.Second), 5*ms, "consumer", dt.GroupHeartbeat("g", "", 0), dt.GroupBeat(0, id, int32(i+1)))
					for j := range 5 {
						h.Call(c, dt.At(time.Duration(i+2+j)*time.Second), 5*ms, "consumer", dt.GroupHeartbeat("g", id, int32(i+1)), dt.GroupBeat(0, id, int32(i+1)))
					}
					if i == 2 {
						h.Call(c, dt.At(9*time.Second), 5*ms, "consumer", dt.GroupHeartbeat("g", id, -1), dt.GroupBeat(0, id, -1))
					}
				}
			},
		},
		{
			Name:     "min-rebalances raised: the classic loop is info",
			Settings: map[string]string{"min-rebalances": "7"},
			Traffic:  func(h *dt.Harness) { loop(h, 6, time.Second, 500*ms) },
			Want:     []dt.Want{{Severity: detectors.Info, Detail: &rebalanceloop.Finding{Loop: false}, Exact: []string{"Loop"}}},
		},
	}, nil)
}

// churn: eight members join one by one, 700 ms apart; at each join every
// member already in is answered REBALANCE_IN_PROGRESS beats times and
// rejoins at the new generation; then they leave one by one, the others
// answered the same. A group growing and shrinking normally (issue 30:
// recorded with kgo, fixtures/pcaps/clients/group-churn-kgo, it was a
// warning).
func churn(h *dt.Harness, beats int) {
	var ms8 []*member
	gen := int32(0)
	at := time.Second
	rebalance := func(members []*member) {
		gen++
		for _, m := range members {
			for range beats {
				m.beat(at, 27)
				at += 10 * ms
			}
			m.rejoin(at, m.id, gen, 20*ms)
			at += 40 * ms
		}
	}
	for i := range 8 {
		rebalance(ms8)
		m := newMember(h, fmt.Sprintf("10.2.0.%d:40000", i+5), fmt.Sprintf("billing-%d", i+1))
		m.join(at, fmt.Sprintf("m-%d", i+1), gen, 20*ms)
		ms8 = append(ms8, m)
		at += 700 * ms
	}
	for len(ms8) > 0 {
		m := ms8[0]
		h.Call(m.c, dt.At(at), ms, m.cid, dt.LeaveGroup("g", m.id), dt.Left())
		ms8 = ms8[1:]
		at += 10 * ms
		rebalance(ms8)
		at += 700 * ms
	}
}

// TestRebalanceChurnQuiet: rebalance errors that members joining and
// leaving explain (each change, every member answered once) are no loop,
// however many (56 here, min-errors 20), and nothing is reported; errors beyond them are (near misses both sides).
func TestRebalanceChurnQuiet(t *testing.T) {
	dt.Run(t, rebalanceloop.Analyzer, []dt.Case{
		{Name: "eight members join and leave one by one, each rebalance answered to every member: not a loop",
			Traffic: func(h *dt.Harness) { churn(h, 1) }, End: time.Minute},
		{Name: "near miss the other way: every member answered it three times a rebalance: a loop",
			Traffic: func(h *dt.Harness) { churn(h, 3) }, End: time.Minute,
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &rebalanceloop.Finding{Loop: true}}}},
	}, nil)
}
