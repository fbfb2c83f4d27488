package noprogress_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/noprogress"
)

const (
	client, broker = "10.2.0.5:40000", "10.1.0.10:9092"
	ms             = time.Millisecond
)

// find is a FindCoordinator v4 for the group, answered code.
func find(group string, typ int8, code int16) (kmsg.Request, kmsg.Response) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorType, req.CoordinatorKeys = 4, typ, []string{group}
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key, c.ErrorCode, c.NodeID, c.Host, c.Port = group, code, 1, "10.1.0.10", 9092
	if code != 0 {
		c.NodeID, c.Host, c.Port = -1, "", -1
	}
	resp.Coordinators = []kmsg.FindCoordinatorResponseCoordinator{c}
	return req, resp
}

// findV2 is the same at v2 (sarama), one key at the top level.
func findV2(group string, code int16) (kmsg.Request, kmsg.Response) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKey = 2, group
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.ErrorCode, resp.NodeID = code, -1
	return req, resp
}

// asks has the client ask at each time (from T0), answered code, then
// (if healedAt > 0) succeed at healedAt; the capture goes on to end.
func asks(mk func(code int16) (kmsg.Request, kmsg.Response), code int16, at []time.Duration, healedAt, end time.Duration) func(h *dt.Harness) {
	return asksMid(false, mk, code, at, healedAt, end)
}

// asksMid is asks on a connection opened before the capture began if mid.
func asksMid(mid bool, mk func(code int16) (kmsg.Request, kmsg.Response), code int16, at []time.Duration, healedAt, end time.Duration) func(h *dt.Harness) {
	return func(h *dt.Harness) {
		c := h.Conn(client, broker)
		c.MidStream = mid
		for _, a := range at {
			req, resp := mk(code)
			h.Call(c, dt.At(a), ms, "billing-consumer", req, resp)
		}
		if healedAt > 0 {
			req, resp := mk(0)
			h.Call(c, dt.At(healedAt), ms, "billing-consumer", req, resp)
		}
		if end > 0 {
			h.EndAt(end)
		}
	}
}

func group(code int16) (kmsg.Request, kmsg.Response) { return find("billing", 0, code) }

// backoff is the client: 5 asks with exponential backoff over
// 11 s (0, 0.5, 1.5, 3.5, 7.5 s), found at 11 s.
var backoff = []time.Duration{0, 500 * ms, 1500 * ms, 3500 * ms, 7500 * ms}

func every(from, to, step time.Duration) []time.Duration {
	var out []time.Duration
	for t := from; t < to; t += step {
		out = append(out, t)
	}
	return out
}

func want(sev detectors.Severity, kind string, stalled float64, ongoing bool, answers int64) []dt.Want {
	return []dt.Want{{Severity: sev, Detail: &noprogress.Finding{
		Answers: answers, Kind: kind, StalledS: stalled, Ongoing: ongoing,
	}, Exact: []string{"Answers", "Kind", "StalledS", "Ongoing"}}}
}

// TestNoProgressCoordinator: issue 30's case (a group that cannot find its
// coordinator for 11 s, 5 COORDINATOR_NOT_AVAILABLE with exponential
// backoff, got nothing) and the near misses around min-stall, min-asks,
// the end of the capture and the policy's error boundaries.
func TestNoProgressCoordinator(t *testing.T) {
	dt.Run(t, noprogress.Analyzer, []dt.Case{
		{Name: "5 COORDINATOR_NOT_AVAILABLE in 11 s with backoff, then found: warning",
			Traffic: asks(group, 15, backoff, 11*time.Second, time.Minute),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &noprogress.Finding{
				Answers: 5, Kind: "coordinator", Group: "billing", StalledS: 11.0, Ongoing: false,
				Healed: true,
			}, Exact: []string{"Ongoing"},
				Summary: []string{`client "billing-consumer" (10.2.0.5) found no coordinator for group "billing" for 11.0 s: 5 FindCoordinator answers COORDINATOR_NOT_AVAILABLE; then made progress`}}},
			Explanation: []string{"COORDINATOR_NOT_AVAILABLE means that partition has no leader"},
			Next:        []string{"__consumer_offsets"}},
		{Name: "near miss: 2.999 s without a coordinator: nothing",
			Traffic: asks(group, 15, []time.Duration{0, 1 * time.Second, 2 * time.Second}, 2999*ms, time.Minute)},
		{Name: "near miss the other way: 3 s: warning",
			Traffic: asks(group, 15, []time.Duration{0, 1 * time.Second, 2 * time.Second}, 3*time.Second, time.Minute),
			Want:    want(detectors.Warning, "coordinator", 3, false, 3)},
		{Name: "near miss: one failing answer, found 5 s later: nothing (min-asks 2)",
			Traffic: asks(group, 15, []time.Duration{0}, 5*time.Second, time.Minute)},
		{Name: "still failing at the end after 9.9 s: warning",
			Traffic: asks(group, 15, append(every(0, 9*time.Second, 900*ms), 9899*ms), 0, 0),
			Want:    want(detectors.Warning, "coordinator", 9.9, true, 11)},
		{Name: "near miss the other way: still failing at the end after 10 s: error",
			Traffic: asks(group, 15, append(every(0, 10*time.Second, time.Second), 9999*ms), 0, 0),
			Want: []dt.Want{{Severity: detectors.Error, Detail: &noprogress.Finding{StalledS: 10.0, Ongoing: true},
				Summary: []string{"still failing at the end (seen for 10.0 s)"}}}},
		{Name: "asked for 4 s, then gave up (nothing for max-gap): warning, ended at its last answer",
			Traffic: asks(group, 15, append(every(0, 4*time.Second, time.Second), 3999*ms), 0, time.Minute),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &noprogress.Finding{
				StalledS: 4.0, Ongoing: false, Healed: false,
			}, Exact: []string{"Ongoing", "Healed"},
				Summary: []string{"then stopped asking"}}}},
		{Name: "a transactional id's coordinator (v2 of sarama has one key at the top)",
			Traffic: func(h *dt.Harness) {
				asks(func(code int16) (kmsg.Request, kmsg.Response) { return find("payments-tx", 1, code) }, 14,
					every(0, 5*time.Second, time.Second), 5*time.Second, time.Minute)(h)
				c := h.Conn("10.2.0.6:40000", broker)
				for _, a := range every(0, 4*time.Second, time.Second) {
					req, resp := findV2("audit", 15)
					h.Call(c, dt.At(a), ms, "sarama", req, resp)
				}
			},
			Want: []dt.Want{
				{Severity: detectors.Warning, Detail: &noprogress.Finding{TransactionID: "payments-tx", StalledS: 5.0}},
				{Severity: detectors.Warning, Detail: &noprogress.Finding{
					Group: "audit", ClientID: "sarama", Ongoing: false,
				}, Exact: []string{"Ongoing"}},
			}},
		{Name: "a coordinator moving: NOT_COORDINATOR once, found at once: nothing",
			Traffic: asks(group, 16, []time.Duration{0, 200 * ms}, 400*ms, time.Minute)},
	}, nil)
}

// TestNoProgressJoinCommitProduce: the other kinds of progress, and the
// answers that are protocol steps or other rules' (near misses).
func TestNoProgressJoinCommitProduce(t *testing.T) {
	join := func(code int16) (kmsg.Request, kmsg.Response) {
		return dt.JoinGroup("billing", ""), dt.GroupJoined(code, 1, "m-1")
	}
	sync := func(code int16) (kmsg.Request, kmsg.Response) {
		return dt.SyncGroup("billing", 1, "m-1"), dt.Synced(code)
	}
	commit := func(code int16) (kmsg.Request, kmsg.Response) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group = 8, "billing"
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "orders"
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 10}}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = "orders"
		st.Partitions = []kmsg.OffsetCommitResponseTopicPartition{{Partition: 0, ErrorCode: code}}
		resp.Topics = []kmsg.OffsetCommitResponseTopic{st}
		return req, resp
	}
	produce := func(code int16) (kmsg.Request, kmsg.Response) {
		return dt.ProduceTo(9, "orders", 0, 1), dt.ProducedTo(9, "orders", code, -1, -1, "", 0, 0, 1)
	}
	dt.Run(t, noprogress.Analyzer, []dt.Case{
		{Name: "JoinGroup GROUP_AUTHORIZATION_FAILED for 5 s, then joined: warning",
			Traffic: func(h *dt.Harness) {
				asks(join, 30, every(0, 5*time.Second, time.Second), 0, 0)(h)
				asks(sync, 0, nil, 5*time.Second, time.Minute)(h)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &noprogress.Finding{
				Kind: "join", StalledS: 5.0, Healed: true,
			}}}},
		{Name: "near miss: MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS and UNKNOWN_MEMBER_ID for 5 s are steps: nothing",
			Traffic: func(h *dt.Harness) {
				asks(join, 79, []time.Duration{0}, 0, 0)(h)
				asks(join, 27, every(time.Second, 3*time.Second, time.Second), 0, 0)(h)
				asks(sync, 25, every(3*time.Second, 5*time.Second, time.Second), 0, time.Minute)(h)
			}},
		{Name: "OffsetCommit COORDINATOR_LOAD_IN_PROGRESS for 4 s, then accepted: warning",
			Traffic: asks(commit, 14, every(0, 4*time.Second, 500*ms), 4*time.Second, time.Minute),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &noprogress.Finding{
				Kind: "commit", Group: "billing", StalledS: 4.0,
			}}}},
		{Name: "Produce REQUEST_TIMED_OUT on two partitions for 6 s, still at the end: one warning naming both",
			Traffic: asks(produce, 7, every(0, 6001*ms, time.Second), 0, 0),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &noprogress.Finding{
				Answers: 14, Kind: "produce", Topic: "orders", Partitions: []int32{0, 1}, Ongoing: true,
			},
				Summary: []string{"had no record acknowledged on orders-0, orders-1 for 6.0 s"}}}},
		{Name: "near miss: NOT_LEADER_OR_FOLLOWER and NOT_ENOUGH_REPLICAS for 6 s are other rules': nothing",
			Traffic: func(h *dt.Harness) {
				asks(produce, 6, every(0, 3*time.Second, 500*ms), 0, 0)(h)
				asks(produce, 19, every(3*time.Second, 6*time.Second, 500*ms), 0, time.Minute)(h)
			}},
	}, nil)
}

// TestNoProgressLateJoin: a capture that begins mid-stall (the client's
// connection opened before it) says the stall was already under way; one
// whose client connected in the capture does not.
func TestNoProgressLateJoin(t *testing.T) {
	dt.Run(t, noprogress.Analyzer, []dt.Case{
		{Name: "stall in progress at the capture's start: at least, said so",
			Traffic: asksMid(true, group, 15, []time.Duration{0, 4 * time.Second}, 7*time.Second, time.Minute),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &noprogress.Finding{AtStart: true, StalledS: 7.0},
				Summary: []string{"(already stalled when the capture began)"}}},
			Explanation: []string{"it may have begun before the capture did"}},
		{Name: "one failing answer, found 4.5 s later, on a connection older than the capture: a stall in progress, warning",
			Traffic: asksMid(true, group, 15, []time.Duration{time.Second}, 5500*ms, time.Minute),
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &noprogress.Finding{
				Answers: 1, AtStart: true, StalledS: 4.5,
			}}}},
		{Name: "near miss: the same on a connection opened in the capture: nothing (min-asks)",
			Traffic: asksMid(false, group, 15, []time.Duration{time.Second}, 5500*ms, time.Minute)},
		{Name: "the same client connecting in the capture: not said",
			Traffic: asks(group, 15, []time.Duration{0, 4 * time.Second}, 7*time.Second, time.Minute),
			Want:    []dt.Want{{Severity: detectors.Warning, Detail: &noprogress.Finding{Healed: true, StalledS: 7.0}}}},
	}, func(t *testing.T, f *detectors.Finding) {
		if f.Fields["at_start"] == true && f.Fields["healed"] != true {
			t.Errorf("healed not set: %v", f.Fields)
		}
	})
}
