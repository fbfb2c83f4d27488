package collect

import (
	"math"
	"math/bits"
	"net/netip"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// The timeline is the capture's traffic over time, gathered by the
// Collector for the HTML report's charts: per bucket of capture time,
// requests and error responses by API and by broker, latency by API, and
// the bytes of Kafka frames each way. Buckets are one second wide until
// the capture outgrows MaxBuckets of them; then the width doubles (pairs
// of buckets merged) as often as needed, so memory does not grow with the
// capture's length. Lines are bounded too: API keys beyond timelineKeys
// and brokers beyond maxBrokerLines are summed into one "other" line.
const (
	// MaxBuckets is the most buckets a timeline keeps.
	MaxBuckets = 300
	// maxBrokerLines bounds the servers with a line of their own.
	maxBrokerLines = 32
	// timelineKeys: API keys 0..timelineKeys-1 have a line of their own
	// (Kafka's keys are below 100); others share the "other" line.
	timelineKeys = 128
	// maxLatencyLines bounds the APIs whose latency is kept over time
	// (134 KiB each), the first to be answered; the chart shows the 4
	// with the most responses.
	maxLatencyLines = 16
)

// Latency bins per bucket: 4 per power of two of microseconds (values
// within about 10 % of the bin's middle), up to 2^27 us (134 s), above
// which all share the last bin.
const (
	latSubBits = 2
	latSub     = 1 << latSubBits
	latMaxExp  = 27
	latBins    = (latMaxExp + 1) * latSub
)

type latBuckets [MaxBuckets][latBins]uint32

type apiLine struct {
	requests, errors [MaxBuckets]uint32
	latency          *latBuckets // allocated at the first response
	seen             bool
}

type brokerLine struct {
	server           netip.AddrPort
	requests, errors [MaxBuckets]uint32
}

type timeline struct {
	start   time.Time
	startNs int64
	width   time.Duration
	used    int // buckets up to the last one counted in
	started bool
	// cur is the bucket last returned, for times in [curLo, curHi) ns.
	cur          int
	curLo, curHi int64

	apis     [timelineKeys + 1]*apiLine // the last one: "other"
	brokers  []*brokerLine              // in order of first request; the last may be "other"
	byServer map[netip.AddrPort]int32
	byConn   connCache[int32] // a connection's broker line + 1 (0: not yet known)
	other    int32            // the "other" broker line + 1, once needed

	toServer, toClient [MaxBuckets]int64
	latencyLines       int
}

func (l *timeline) init() {
	l.width = firstWidth
	l.byServer = make(map[netip.AddrPort]int32)
}

// bucket returns the bucket of capture time t, widening the buckets when
// t is past the last one. Times before the first bucket (a capture whose
// timestamps go back) count in the first. Most events fall in the bucket
// of the one before: that bucket's bounds are kept to skip the division.
func (l *timeline) bucket(t time.Time) int {
	ns := t.UnixNano()
	if ns >= l.curLo && ns < l.curHi {
		return l.cur
	}
	if !l.started {
		l.start, l.started = t.Truncate(time.Second), true
		l.startNs = l.start.UnixNano()
	}
	d := max(ns-l.startNs, 0)
	w := int64(l.width)
	i := d / w
	if i >= MaxBuckets {
		l.widen(i)
		w = int64(l.width)
		i = d / w
	}
	if int(i) >= l.used {
		l.used = int(i) + 1
	}
	l.cur, l.curLo, l.curHi = int(i), l.startNs+i*w, l.startNs+(i+1)*w
	if i == 0 {
		l.curLo = math.MinInt64 // earlier times count in the first bucket
	}
	return l.cur
}

// firstWidth is the buckets' width at first: a capture of less than
// MaxBuckets of them (30 s) is drawn in tenths of a second.
const firstWidth = 100 * time.Millisecond

// widen widens the buckets until bucket i (at the current width) fits:
// from tenths of a second to seconds, then doubling (2, 4, 8... s).
func (l *timeline) widen(i int64) {
	l.curLo, l.curHi = 0, 0 // the bucket's bounds change
	for i >= MaxBuckets {
		f := 2
		if l.width < time.Second {
			f = int(time.Second / l.width)
		}
		l.width *= time.Duration(f)
		i /= int64(f)
		l.used = (l.used + f - 1) / f
		fold(&l.toServer, f)
		fold(&l.toClient, f)
		for _, a := range l.apis {
			if a == nil {
				continue
			}
			fold(&a.requests, f)
			fold(&a.errors, f)
			if a.latency != nil {
				lb := a.latency
				for j := 0; j < MaxBuckets/f; j++ {
					sum := lb[f*j]
					for m := 1; m < f; m++ {
						for k := range sum {
							sum[k] += lb[f*j+m][k]
						}
					}
					lb[j] = sum
				}
				clear(lb[MaxBuckets/f:])
			}
		}
		for _, b := range l.brokers {
			fold(&b.requests, f)
			fold(&b.errors, f)
		}
	}
}

// fold merges groups of f buckets into the first MaxBuckets/f.
func fold[T uint32 | int64](s *[MaxBuckets]T, f int) {
	for j := 0; j < MaxBuckets/f; j++ {
		var sum T
		for m := range f {
			sum += s[f*j+m]
		}
		s[j] = sum
	}
	clear(s[MaxBuckets/f:])
}

func (l *timeline) api(key int16) *apiLine {
	k := int(key)
	if k < 0 || k >= timelineKeys {
		k = timelineKeys
	}
	a := l.apis[k]
	if a == nil {
		a = &apiLine{}
		l.apis[k] = a
	}
	return a
}

// broker returns the line of a connection's server: by connection number
// (a slice index) once known, else by endpoint.
func (l *timeline) broker(c *flows.ConnInfo) *brokerLine {
	if c == nil {
		return nil
	}
	id := c.ID
	slot := l.byConn.slot(id)
	if id > 0 && slot.id == id {
		return l.brokers[slot.v-1]
	}
	n, ok := l.byServer[c.Server]
	if !ok {
		if len(l.brokers) < maxBrokerLines-1 {
			l.brokers = append(l.brokers, &brokerLine{server: c.Server})
			n = int32(len(l.brokers))
		} else {
			if l.other == 0 {
				l.brokers = append(l.brokers, &brokerLine{})
				l.other = int32(len(l.brokers))
			}
			n = l.other
		}
		l.byServer[c.Server] = n
	}
	if id > 0 {
		slot.id, slot.v = id, n
	}
	return l.brokers[n-1]
}

func (l *timeline) request(m *flows.Message) {
	i := l.bucket(m.Time)
	l.toServer[i] += int64(m.Size)
	a := l.api(m.Key)
	a.seen = true
	a.requests[i]++
	if b := l.broker(m.Conn); b != nil {
		b.requests[i]++
	}
}

// response counts a response at its time: bytes, and for a paired one its
// error and latency.
func (l *timeline) response(x *flows.Exchange) {
	r := x.Resp
	i := l.bucket(r.Time)
	l.toClient[i] += int64(r.Size)
	if x.Req == nil {
		return
	}
	a := l.api(x.Req.Key)
	if len(r.ErrorCodes) > 0 {
		a.errors[i]++
		if x.Conn != nil {
			if b := l.broker(&x.Conn.ConnInfo); b != nil {
				b.errors[i]++
			}
		}
	}
	if a.latency == nil {
		if l.latencyLines == maxLatencyLines {
			return
		}
		l.latencyLines++
		a.latency = new(latBuckets)
	}
	a.latency[i][latIndex(x.Latency())]++
}

func latIndex(d time.Duration) int {
	if d < 0 {
		d = 0
	}
	us := uint64(d / time.Microsecond)
	if us < latSub {
		return int(us)
	}
	exp := bits.Len64(us) - 1
	if exp > latMaxExp {
		return latBins - 1
	}
	mant := (us >> (exp - latSubBits)) & (latSub - 1)
	return (exp-latSubBits+1)*latSub + int(mant)
}

// latMiddle is the middle of bin i, in milliseconds.
func latMiddle(i int) float64 {
	return float64(latLower(i)+latLower(i+1)) / 2 / 1000
}

func latLower(i int) uint64 {
	if i < latSub {
		return uint64(i)
	}
	exp := i/latSub + latSubBits - 1
	mant := uint64(i % latSub)
	return 1<<exp | mant<<(exp-latSubBits)
}

func (l *timeline) build(nodes *cluster.Nodes) *report.Timeline {
	t := &report.Timeline{Start: l.start, Width: l.width, Buckets: l.used}
	n := l.used
	t.ToServer = append([]int64{}, l.toServer[:n]...)
	t.ToClient = append([]int64{}, l.toClient[:n]...)
	for k, a := range l.apis {
		if a == nil || !a.seen && a.latency == nil {
			continue
		}
		line := report.APILine{Key: int16(k), Name: decode.Name(int16(k)), Requests: widenInts(a.requests[:n]), Errors: widenInts(a.errors[:n])}
		if k == timelineKeys {
			line.Key, line.Name = -1, "other"
		}
		if a.latency != nil {
			for i := range n {
				if p, ok := latPoint(&a.latency[i]); ok {
					p.Bucket = i
					line.Latency = append(line.Latency, p)
				}
			}
		}
		t.APIs = append(t.APIs, line)
	}
	for i, b := range l.brokers {
		line := report.BrokerLine{Server: b.server.String(), Node: -1, Requests: widenInts(b.requests[:n]), Errors: widenInts(b.errors[:n])}
		if l.other == int32(i+1) {
			line.Server = "other"
		} else if nodes != nil {
			line.Node = nodes.Server(b.server)
		}
		t.Brokers = append(t.Brokers, line)
	}
	return t
}

func widenInts(s []uint32) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// latPoint reads p50 and p99 from one bucket's bins.
func latPoint(bins *[latBins]uint32) (report.LatencyPoint, bool) {
	var n uint64
	for _, c := range bins {
		n += uint64(c)
	}
	if n == 0 {
		return report.LatencyPoint{}, false
	}
	p := report.LatencyPoint{Responses: int64(n)}
	quantile := func(q float64) float64 {
		rank := max(uint64(q*float64(n)+0.5), 1)
		var seen uint64
		for i, c := range bins {
			seen += uint64(c)
			if seen >= rank {
				return latMiddle(i)
			}
		}
		return latMiddle(latBins - 1)
	}
	p.P50, p.P99 = quantile(0.5), quantile(0.99)
	return p, true
}
