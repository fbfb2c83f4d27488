package correlate

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
)

// rebuildAll parses and rebuilds records in order, failing on an error.
func rebuildAll(t *testing.T, rb *Rebuilder, recs ...string) []Events {
	t.Helper()
	var out []Events
	for _, v := range recs {
		r, err := Parse([]byte(v))
		if err != nil {
			t.Fatalf("%v: %s", err, v)
		}
		ev, err := rb.Rebuild(&r)
		if err != nil {
			t.Fatalf("%v: %s", err, v)
		}
		out = append(out, ev)
	}
	return out
}

// TestRebuildAgentEnd: an agent's capture ends where its records say:
// the end it shipped with a request still waiting then (end_ns), else (a
// record of an agent older than end_ns, which parses as before) its
// latest request, response or connection event; on the reference clock
// once its skew is known. Each agent its own.
func TestRebuildAgentEnd(t *testing.T) {
	const s = int64(time.Second)
	rb := NewRebuilder(cluster.NewNodes())
	if _, ok := rb.End("old"); ok {
		t.Fatal("an agent not read has an end")
	}
	evs := rebuildAll(t, rb,
		// An older agent: answered, then a connection closed, then a
		// request still waiting, without end_ns.
		`{"v":1,"type":"exchange","agent":"old","ts_ns":100000000000,"latency_ns":3000000000,"conn":1,"client":"10.0.0.1:4000","server":"10.0.0.2:9092","client_id":"a","api":3,"ver":12,"corr":1,"status":"answered","req_pkt":4,"resp_pkt":5}`,
		`{"v":1,"type":"conn","agent":"old","ts_ns":102000000000,"event":"closed","conn":1,"client":"10.0.0.1:4000","server":"10.0.0.2:9092","pkt":6}`,
		`{"v":1,"type":"exchange","agent":"old","ts_ns":101000000000,"conn":2,"client":"10.0.0.1:4001","server":"10.0.0.2:9092","client_id":"a","api":3,"ver":12,"corr":1,"status":"unanswered","req_pkt":8}`,
		// A current agent: a request still waiting 40 s at its end.
		`{"v":1,"type":"exchange","agent":"new","ts_ns":100000000000,"conn":1,"client":"10.0.0.3:4000","server":"10.0.0.2:9092","client_id":"b","api":3,"ver":12,"corr":1,"status":"unanswered","end_ns":140000000000,"conn_gaps":2,"req_pkt":4}`,
	)
	if end, _ := rb.End("old"); end.UnixNano() != 103*s {
		t.Errorf("the older agent's end %v: want its last response's time, 103 s", end.UnixNano())
	}
	if end, _ := rb.End("new"); end.UnixNano() != 140*s {
		t.Errorf("the agent's end %v: want the end it shipped, 140 s", end.UnixNano())
	}
	if x := evs[2].X.X; !x.Unanswered || x.AtEnd {
		t.Errorf("the older agent's request: %+v: want unanswered, not known to be waiting at the end", x)
	}
	if x := evs[3].X.X; !x.AtEnd || x.Waited != 40*time.Second || x.ConnGaps != 2 {
		t.Errorf("the request waiting at the end: %+v: want AtEnd, Waited 40 s, ConnGaps 2", x)
	}
	rb.Skew = func(agent string) (time.Duration, bool) { return 5 * time.Second, agent == "new" }
	if end, _ := rb.End("new"); end.UnixNano() != 135*s {
		t.Errorf("the agent's end on the reference clock %v: want 135 s (its clock 5 s ahead)", end.UnixNano())
	}
}

// TestRebuildSplitOnce: the records of an exchange split by partition
// are its partitions; the first read stands for the exchange and the
// others are Again, so that the connection counts one request and one
// unanswered request, as the agent's capture did.
func TestRebuildSplitOnce(t *testing.T) {
	rb := NewRebuilder(cluster.NewNodes())
	rec := `{"v":1,"type":"exchange","agent":"a","ts_ns":100000000000,"conn":1,"client":"10.0.0.1:4000","server":"10.0.0.2:9092","client_id":"c","api":0,"ver":9,"corr":7,"status":"unanswered","req_pkt":4,"acks":-1,"parts":2,"topic":"orders","partition":`
	evs := rebuildAll(t, rb, rec+`1}`, rec+`0}`)
	if evs[0].X.X.Again || !evs[1].X.X.Again || evs[0].Req == nil || evs[1].Req != nil {
		t.Errorf("Again %v, %v; requests %v, %v: want the first record to stand for the exchange",
			evs[0].X.X.Again, evs[1].X.X.Again, evs[0].Req != nil, evs[1].Req != nil)
	}
	c := rb.Conns()[0]
	if c.Requests != 1 || c.Unanswered != 1 {
		t.Errorf("connection: %d requests, %d unanswered: want 1 and 1", c.Requests, c.Unanswered)
	}
	if _, ok := c.OneSided(); ok {
		t.Errorf("connection one-sided: an unanswered request says the agent captured the server")
	}
}

// TestRebuildFetchMaxWait: a Fetch is rebuilt with the max wait its
// agent shipped (max_wait_ms), split by partition or not, so that the
// rules allow it that long (decode.MaxWait); a record of an older agent,
// without it, is rebuilt allowed the longest, as before.
func TestRebuildFetchMaxWait(t *testing.T) {
	rb := NewRebuilder(cluster.NewNodes())
	head := `{"v":1,"type":"exchange","agent":"a","ts_ns":100000000000,"latency_ns":700000000,"client":"10.0.0.1:4000","server":"10.0.0.2:9092","client_id":"c","api":1,"ver":12,"status":"answered","req_pkt":4,"resp_pkt":5,"replica":-1`
	evs := rebuildAll(t, rb,
		head+`,"conn":1,"corr":1,"max_wait_ms":500,"parts":1,"topic":"orders","partition":0,"fetch_offset":40,"error":0}`,
		head+`,"conn":1,"corr":2,"max_wait_ms":0}`,
		head+`,"conn":2,"corr":1,"parts":1,"topic":"orders","partition":0,"fetch_offset":40,"error":0}`,
	)
	for i, want := range []time.Duration{500 * time.Millisecond, 0, math.MaxInt32 * time.Millisecond} {
		q, ok := evs[i].X.X.Req.Req.(*kmsg.FetchRequest)
		if !ok {
			t.Fatalf("record %d: request %T, want a Fetch", i, evs[i].X.X.Req.Req)
		}
		if got, _ := decode.MaxWait(q); got != want {
			t.Errorf("record %d: the Fetch may wait %v, want %v", i, got, want)
		}
	}
}

// TestRebuildThrottle: a response is rebuilt with the throttle time its
// agent shipped (throttle_time_ms; 0 when absent), which the rules read
// through kmsg.ThrottleResponse with whether the broker throttled after
// sending (KIP-219, by the version): on the body of a Produce split by
// partition, and on a Metadata, whose body is not shipped, as a response
// that is no Metadata body (an empty one would tell the rules of a
// cluster without brokers); a SASLHandshake, without a throttle time,
// keeps its empty body.
func TestRebuildThrottle(t *testing.T) {
	rb := NewRebuilder(cluster.NewNodes())
	head := `{"v":1,"type":"exchange","agent":"a","ts_ns":100000000000,"latency_ns":1000000,"client":"10.0.0.1:4000","server":"10.0.0.2:9092","client_id":"c","status":"answered","req_pkt":4,"resp_pkt":5,"conn":1`
	evs := rebuildAll(t, rb,
		head+`,"corr":1,"api":0,"ver":5,"throttle_time_ms":2000,"parts":1,"topic":"orders","partition":0,"error":0}`,
		head+`,"corr":2,"api":0,"ver":9,"parts":1,"topic":"orders","partition":0,"error":0}`,
		head+`,"corr":3,"api":3,"ver":5,"throttle_time_ms":1500}`,
		head+`,"corr":4,"api":3,"ver":12,"throttle_time_ms":4000}`,
		head+`,"corr":5,"api":3,"ver":12}`,
		head+`,"corr":6,"api":17,"ver":1}`,
	)
	for i, want := range []struct {
		ms    int32
		after bool
	}{{2000, false}, {0, true}, {1500, false}, {4000, true}, {0, true}} {
		resp := evs[i].X.X.Resp.Resp
		tr, ok := resp.(kmsg.ThrottleResponse)
		if !ok {
			t.Fatalf("record %d: response %T has no throttle time", i, resp)
		}
		if ms, after := tr.Throttle(); ms != want.ms || after != want.after {
			t.Errorf("record %d: throttled %d ms, after the response %v; want %d, %v", i, ms, after, want.ms, want.after)
		}
		if _, body := resp.(*kmsg.MetadataResponse); body {
			t.Errorf("record %d: an empty Metadata body, which says no brokers", i)
		}
		if resp.Key() != evs[i].X.X.Req.Key || resp.GetVersion() != evs[i].X.X.Req.Version {
			t.Errorf("record %d: response key %d v%d, want the request's", i, resp.Key(), resp.GetVersion())
		}
	}
	// --frames -v shows what is known of the Metadata's body.
	if js, err := json.Marshal(evs[2].X.X.Resp.Resp); err != nil || string(js) != `{"Version":5,"ThrottleMillis":1500}` {
		t.Errorf("the throttled Metadata's body as JSON: %s, %v", js, err)
	}
	if _, ok := evs[5].X.X.Resp.Resp.(*kmsg.SASLHandshakeResponse); !ok {
		t.Errorf("SASLHandshake rebuilt as %T, want its empty body", evs[5].X.X.Resp.Resp)
	}
}
