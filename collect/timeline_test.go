package collect

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
	"github.com/kfsniff/kfsniff/report"
)

// timelineRun sends Metadata requests through a Delivery to a Collector:
// at each offset from t0 one request, answered after lat, with an error
// code when failing.
func timelineRun(t *testing.T, servers []string, at []time.Duration, lat time.Duration, failing func(i int) bool) *report.Report {
	t.Helper()
	c := NewCollector()
	dl := flows.NewDelivery(c)
	var conns []*flows.Conn
	for i, s := range servers {
		cn := flows.MakeConn(netip.AddrPortFrom(netip.MustParseAddr("10.1.0.1"), uint16(40000+i)), netip.MustParseAddrPort(s))
		dl.Deliver(&flows.Event{Conn: &flows.ConnEvent{Kind: flows.ConnOpened, Conn: cn, Client: cn.Client, Server: cn.Server, Time: t0}})
		conns = append(conns, cn)
	}
	for i, d := range at {
		cn := conns[i%len(conns)]
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		q := flowstest.MakeRequest(cn, t0.Add(d), int32(i), "app", req)
		dl.Deliver(&flows.Event{Req: q})
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 12
		if failing != nil && failing(i) {
			tp := kmsg.NewMetadataResponseTopic()
			tp.ErrorCode = 3
			resp.Topics = append(resp.Topics, tp)
		}
		a := flowstest.MakeResponse(q, t0.Add(d+lat), resp)
		dl.Deliver(&flows.Event{X: &flows.Exchange{Conn: cn, Req: q, Resp: a}})
	}
	return c.Build(nil, &flows.Stats{}, conns, dl.Nodes(), nil)
}

func total(s []int64) (n int64) {
	for _, v := range s {
		n += v
	}
	return n
}

// A short capture (under 30 s) has one bucket per tenth of a second, so
// that one of 2 s draws lines, not single dots.
func TestTimelineTenths(t *testing.T) {
	at := []time.Duration{100 * time.Millisecond, 900 * time.Millisecond, 2500 * time.Millisecond}
	r := timelineRun(t, []string{"10.0.0.1:9092"}, at, 5*time.Millisecond, func(i int) bool { return i == 2 })
	tl := r.Timeline
	if tl.Width != 100*time.Millisecond || tl.Buckets != 26 || !tl.Start.Equal(t0) {
		t.Fatalf("timeline of %v width %v buckets %d, want from %v, 100ms, 26", tl.Start, tl.Width, tl.Buckets, t0)
	}
	a := tl.APIs[0]
	for i, n := range a.Requests {
		if want := int64(map[int]int{1: 1, 9: 1, 25: 1}[i]); n != want {
			t.Errorf("bucket %d: %d requests, want %d", i, n, want)
		}
	}
	if a.Errors[25] != 1 || total(a.Errors) != 1 {
		t.Errorf("errors %v, want one in bucket 25", a.Errors)
	}
	if len(a.Latency) != 3 || a.Latency[0].Bucket != 1 || a.Latency[1].Bucket != 9 || a.Latency[2].Bucket != 25 {
		t.Errorf("latency points %+v, want buckets 1, 9, 25", a.Latency)
	}
}

// A capture of 30 s or more has one bucket per second (tenths folded ten
// at a time); requests, errors and bytes land in the second they
// happened.
func TestTimelineSeconds(t *testing.T) {
	at := []time.Duration{100 * time.Millisecond, 900 * time.Millisecond, 2500 * time.Millisecond, 40500 * time.Millisecond}
	r := timelineRun(t, []string{"10.0.0.1:9092"}, at, 5*time.Millisecond, func(i int) bool { return i == 2 })
	tl := r.Timeline
	if tl.Width != time.Second || tl.Buckets != 41 || !tl.Start.Equal(t0) {
		t.Fatalf("timeline of %v width %v buckets %d, want from %v, 1s, 41", tl.Start, tl.Width, tl.Buckets, t0)
	}
	if len(tl.APIs) != 1 || tl.APIs[0].Name != "Metadata" {
		t.Fatalf("APIs %+v, want Metadata alone", tl.APIs)
	}
	a := tl.APIs[0]
	if want := []int64{2, 0, 1}; !equal(a.Requests[:3], want) {
		t.Errorf("requests per second %v, want %v", a.Requests, want)
	}
	if want := []int64{0, 0, 1}; !equal(a.Errors[:3], want) {
		t.Errorf("errors per second %v, want %v", a.Errors, want)
	}
	if len(tl.Brokers) != 1 || tl.Brokers[0].Server != "10.0.0.1:9092" || !equal(tl.Brokers[0].Errors[:3], []int64{0, 0, 1}) {
		t.Errorf("brokers %+v", tl.Brokers)
	}
	if tl.ToServer[0] == 0 || tl.ToServer[1] != 0 || tl.ToServer[2] == 0 || tl.ToClient[1] != 0 || tl.ToClient[2] <= tl.ToClient[0]/2-1 {
		t.Errorf("bytes to server %v, to client %v: want them in seconds 0 and 2", tl.ToServer, tl.ToClient)
	}
	if len(a.Latency) != 3 || a.Latency[0].Bucket != 0 || a.Latency[0].Responses != 2 || a.Latency[1].Bucket != 2 || a.Latency[2].Bucket != 40 {
		t.Fatalf("latency points %+v, want buckets 0 (2 responses), 2 and 40", a.Latency)
	}
	for _, p := range a.Latency {
		if math.Abs(p.P50-5)/5 > 0.13 || math.Abs(p.P99-5)/5 > 0.13 {
			t.Errorf("latency %+v, want 5 ms within the bins' 13 %%", p)
		}
	}
}

// A capture longer than MaxBuckets seconds widens the buckets: no more
// than MaxBuckets, every request still counted, in the bucket of its time.
func TestTimelineWidens(t *testing.T) {
	var at []time.Duration
	for s := 0; s < 2000; s += 7 {
		at = append(at, time.Duration(s)*time.Second+300*time.Millisecond)
	}
	r := timelineRun(t, []string{"10.0.0.1:9092", "10.0.0.2:9092"}, at, 40*time.Millisecond, func(i int) bool { return i%3 == 0 })
	tl := r.Timeline
	// 2000 s in at most 300 buckets: 8 s wide (2000/8 = 250 buckets).
	if tl.Width != 8*time.Second || tl.Buckets != 250 {
		t.Fatalf("width %v, %d buckets; want 8s and 250", tl.Width, tl.Buckets)
	}
	a := tl.APIs[0]
	if got := total(a.Requests); got != int64(len(at)) {
		t.Errorf("%d requests in the buckets, want %d", got, len(at))
	}
	var errs int64
	for i, d := range at {
		if i%3 == 0 {
			errs++
		}
		b := int(d / tl.Width)
		if a.Requests[b] == 0 {
			t.Fatalf("request at %v not in bucket %d", d, b)
		}
	}
	if total(a.Errors) != errs {
		t.Errorf("%d errors in the buckets, want %d", total(a.Errors), errs)
	}
	if len(tl.Brokers) != 2 || total(tl.Brokers[0].Requests)+total(tl.Brokers[1].Requests) != int64(len(at)) {
		t.Errorf("brokers' requests do not add up: %+v", tl.Brokers)
	}
	var n int64
	for _, p := range a.Latency {
		n += p.Responses
		if math.Abs(p.P99-40)/40 > 0.13 {
			t.Errorf("bucket %d p99 %.2f ms, want 40", p.Bucket, p.P99)
		}
	}
	if n != int64(len(at)) {
		t.Errorf("latency points count %d responses, want %d", n, len(at))
	}
}

// More servers than lines: the rest share "other", nothing is lost.
func TestTimelineBrokersBounded(t *testing.T) {
	var servers []string
	var at []time.Duration
	for i := range 50 {
		servers = append(servers, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 1, byte(i)}), 9092).String())
		at = append(at, time.Duration(i)*time.Millisecond)
	}
	tl := timelineRun(t, servers, at, time.Millisecond, nil).Timeline
	if len(tl.Brokers) != maxBrokerLines || tl.Brokers[maxBrokerLines-1].Server != "other" {
		t.Fatalf("%d broker lines, the last %q; want %d, other", len(tl.Brokers), tl.Brokers[len(tl.Brokers)-1].Server, maxBrokerLines)
	}
	var n int64
	for _, b := range tl.Brokers {
		n += total(b.Requests)
	}
	if n != 50 || total(tl.Brokers[maxBrokerLines-1].Requests) != 50-(maxBrokerLines-1) {
		t.Errorf("requests in the lines: %d, other %d", n, total(tl.Brokers[maxBrokerLines-1].Requests))
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Latency over time is kept for the first maxLatencyLines APIs answered,
// not for every key the wire names; their requests are all counted.
func TestTimelineLatencyLinesBounded(t *testing.T) {
	c := NewCollector()
	cn := flows.MakeConn(netip.MustParseAddrPort("10.1.0.1:40000"), netip.MustParseAddrPort("10.0.0.1:9092"))
	for k := range int16(40) {
		q := &flows.Message{Conn: &cn.ConnInfo, Key: k, Time: t0, Size: 20}
		c.OnRequest(q)
		c.OnExchange(&flows.Exchange{Conn: cn, Req: q, Resp: &flows.Message{Response: true, Key: k, Time: t0.Add(time.Millisecond), Size: 10}})
	}
	tl := c.Build(nil, &flows.Stats{}, nil, nil, nil).Timeline
	withLatency := 0
	for _, a := range tl.APIs {
		if len(a.Latency) > 0 {
			withLatency++
		}
		if total(a.Requests) != 1 {
			t.Errorf("%s: %d requests, want 1", a.Name, total(a.Requests))
		}
	}
	if len(tl.APIs) != 40 || withLatency != maxLatencyLines {
		t.Errorf("%d API lines, %d with latency; want 40 and %d", len(tl.APIs), withLatency, maxLatencyLines)
	}
}
