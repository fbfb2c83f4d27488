package flows_test

import (
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
	"github.com/kfsniff/kfsniff/internal/memtest"
)

var lagT0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// lagFetch is a Fetch of topic's partitions at the offsets given
// (partition -> offset), in partition order.
func lagFetch(version int16, replica int32, sessionEpoch int32, topic string, offsets map[int32]int64) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.ReplicaID, r.SessionEpoch, r.MaxWaitMillis = version, replica, sessionEpoch, 500
	if len(offsets) == 0 {
		return r
	}
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	for _, p := range slices.Sorted(mapKeys(offsets)) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset = p, offsets[p]
		t.Partitions = append(t.Partitions, fp)
	}
	r.Topics = []kmsg.FetchRequestTopic{t}
	return r
}

// lagFetched answers with the high watermarks given (partition -> HW; a
// negative HW is an OFFSET_OUT_OF_RANGE error).
func lagFetched(version int16, topic string, hws map[int32]int64) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version = version
	if len(hws) == 0 {
		return r
	}
	t := kmsg.NewFetchResponseTopic()
	t.Topic = topic
	for _, p := range slices.Sorted(mapKeys(hws)) {
		fp := kmsg.NewFetchResponseTopicPartition()
		fp.Partition, fp.HighWatermark, fp.LastStableOffset = p, hws[p], hws[p]
		if hws[p] < 0 {
			fp.ErrorCode, fp.HighWatermark, fp.LastStableOffset = 1, -1, -1
		}
		t.Partitions = append(t.Partitions, fp)
	}
	r.Topics = []kmsg.FetchResponseTopic{t}
	return r
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

type lagRig struct {
	t     *testing.T
	table flows.LagTable
	corr  int32
	at    time.Duration
	pkt   uint64
}

// call runs one exchange on c and returns the lags sampled, by partition.
func (r *lagRig) call(c *flows.Conn, clientID string, req kmsg.Request, resp kmsg.Response) map[int32]int64 {
	r.corr++
	r.at += 100 * time.Millisecond
	q := flowstest.MakeRequest(c, lagT0.Add(r.at), r.corr, clientID, req)
	r.table.Request(q)
	if resp == nil {
		return nil
	}
	p := flowstest.MakeResponse(q, lagT0.Add(r.at+time.Millisecond), resp)
	r.pkt += 2
	p.Packet = r.pkt
	out := map[int32]int64{}
	for _, s := range r.table.Fetch(q, p) {
		if s.P.Packet != p.Packet || !s.P.Time.Equal(p.Time) || s.P.Lag < 0 || s.P.Lag > max(s.P.HighWatermark-s.P.Offset, 0) {
			r.t.Errorf("point %+v: not at the response (packet %d) or lag not within 0..HW - offset", s.P, p.Packet)
		}
		out[s.S.Key.Partition.Num] = s.P.Lag
	}
	return out
}

func TestLagConsumer(t *testing.T) {
	r := &lagRig{t: t}
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.5:40000"), netip.MustParseAddrPort("10.0.0.1:9092"))
	got := r.call(c, "app", lagFetch(12, -1, -1, "orders", map[int32]int64{0: 100, 1: 50}), lagFetched(12, "orders", map[int32]int64{0: 130, 1: 50}))
	if want := map[int32]int64{0: 30, 1: 0}; !mapsEqual(got, want) {
		t.Errorf("lags %v, want %v", got, want)
	}
	// An error gives no point, and forgets the high watermark.
	got = r.call(c, "app", lagFetch(12, -1, -1, "orders", map[int32]int64{0: 130, 1: 50}), lagFetched(12, "orders", map[int32]int64{0: -1, 1: 60}))
	if want := map[int32]int64{1: 10}; !mapsEqual(got, want) {
		t.Errorf("lags %v, want %v (an error partition gives none)", got, want)
	}
	ss := r.table.Series(cluster.RoleNone)
	if len(ss) != 2 || ss[0].Key.Partition.Num != 0 || ss[0].Samples != 1 || ss[1].Samples != 2 || ss[0].Key.Replica != -1 ||
		ss[0].TopicName != "orders" || ss[0].Server != c.Server || ss[0].Key.Client.Host != netip.MustParseAddr("10.0.0.5") {
		t.Errorf("series %+v %+v", ss[0], ss[1])
	}
	// Other fetches are not lag: raft's metadata log.
	raft := lagFetch(12, 3, -1, "__cluster_metadata", map[int32]int64{0: 10})
	if got := r.call(c, "raft-client-3", raft, lagFetched(12, "__cluster_metadata", map[int32]int64{0: 20})); len(got) != 0 {
		t.Errorf("raft fetch sampled %v", got)
	}
}

// TestLagSession: an incremental fetch session names a partition in a
// request only when its offset changed and in a response only when
// something changed; the other side's last value stands.
func TestLagSession(t *testing.T) {
	r := &lagRig{t: t}
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.5:40000"), netip.MustParseAddrPort("10.0.0.1:9092"))
	steps := []struct {
		name    string
		epoch   int32
		offsets map[int32]int64
		hws     map[int32]int64
		want    map[int32]int64
	}{
		{"full fetch opening the session", 0, map[int32]int64{0: 100, 1: 200}, map[int32]int64{0: 150, 1: 200}, map[int32]int64{0: 50, 1: 0}},
		{"new records on 1 only: offset of 1 remembered", 1, nil, map[int32]int64{1: 260}, map[int32]int64{1: 60}},
		{"0 read on: its high watermark unchanged, left out", 2, map[int32]int64{0: 140}, nil, map[int32]int64{0: 10}},
		{"nothing changed: no point", 3, nil, nil, map[int32]int64{}},
	}
	for _, st := range steps {
		got := r.call(c, "app", lagFetch(12, -1, st.epoch, "orders", st.offsets), lagFetched(12, "orders", st.hws))
		if !mapsEqual(got, st.want) {
			t.Errorf("%s: lags %v, want %v", st.name, got, st.want)
		}
	}
	// Outside a session (epoch -1) a partition left out of the
	// response is not assumed unchanged.
	got := r.call(c, "app", lagFetch(12, -1, -1, "orders", map[int32]int64{0: 150}), lagFetched(12, "orders", nil))
	if len(got) != 0 {
		t.Errorf("sessionless fetch without an answer for the partition sampled %v", got)
	}
}

func TestLagFollowerAndReadCommitted(t *testing.T) {
	r := &lagRig{t: t}
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.3:50000"), netip.MustParseAddrPort("10.0.0.1:9092"))
	// An in-sync follower asks past the high watermark: lag 0; one
	// behind it trails by HW - offset.
	got := r.call(c, "broker-3-fetcher-0", lagFetch(12, 3, -1, "orders", map[int32]int64{0: 120, 1: 40}), lagFetched(12, "orders", map[int32]int64{0: 110, 1: 90}))
	if want := map[int32]int64{0: 0, 1: 50}; !mapsEqual(got, want) {
		t.Errorf("follower lags %v, want %v", got, want)
	}
	if ss := r.table.Series(cluster.RoleNone); len(ss) != 2 || ss[0].Key.Replica != 3 {
		t.Errorf("follower series %+v", ss)
	}
	// A table following consumers only leaves followers out.
	cons := &lagRig{t: t}
	cons.table.Only = cluster.RoleConsumer
	if got := cons.call(c, "broker-3-fetcher-0", lagFetch(12, 3, -1, "orders", map[int32]int64{1: 40}), lagFetched(12, "orders", map[int32]int64{1: 90})); len(got) != 0 || cons.table.Len() != 0 {
		t.Errorf("a consumers-only table sampled a follower: %v", got)
	}
	// read_committed: the last stable offset bounds the lag.
	q := lagFetch(12, -1, -1, "orders", map[int32]int64{0: 100})
	q.IsolationLevel = 1
	resp := lagFetched(12, "orders", map[int32]int64{0: 150})
	resp.Topics[0].Partitions[0].LastStableOffset = 120
	if got := r.call(c, "reader", q, resp); !mapsEqual(got, map[int32]int64{0: 20}) {
		t.Errorf("read_committed lag %v, want 20 (LSO 120 - offset 100)", got)
	}
}

func TestLagGroupsAndBounds(t *testing.T) {
	r := &lagRig{t: t}
	fetchConn := flows.MakeConn(netip.MustParseAddrPort("10.0.0.5:40000"), netip.MustParseAddrPort("10.0.0.1:9092"))
	coord := flows.MakeConn(netip.MustParseAddrPort("10.0.0.5:40001"), netip.MustParseAddrPort("10.0.0.2:9092"))
	other := flows.MakeConn(netip.MustParseAddrPort("10.0.0.6:40001"), netip.MustParseAddrPort("10.0.0.2:9092"))
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group = 4, "orders-app"
	r.call(coord, "app", hb, nil)
	cg := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cg.Group = "other-app"
	r.call(other, "app", cg, nil)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group = 8, "orders-app"
	r.call(coord, "app", oc, nil)
	if g := r.table.Groups("app", fetchConn.Client.Addr()); !slices.Equal(g, []string{"orders-app"}) {
		t.Errorf("groups of app on 10.0.0.5: %v, want [orders-app] (from its coordinator connection)", g)
	}
	if g := r.table.Groups("app", netip.MustParseAddr("10.0.0.6")); !slices.Equal(g, []string{"other-app"}) {
		t.Errorf("groups of app on 10.0.0.6: %v", g)
	}
	if g := r.table.Groups("other", fetchConn.Client.Addr()); g != nil {
		t.Errorf("groups of a client id never seen in a group: %v", g)
	}

	r.table.Max = 2
	r.call(fetchConn, "app", lagFetch(12, -1, -1, "orders", map[int32]int64{0: 1, 1: 1, 2: 1}), lagFetched(12, "orders", map[int32]int64{0: 5, 1: 5, 2: 5}))
	if r.table.Len() != 2 || r.table.Dropped != 1 || r.table.RoleDropped(cluster.RoleConsumer) != 1 {
		t.Errorf("%d series, %d dropped: want 2 followed and 1 counted as dropped", r.table.Len(), r.table.Dropped)
	}
	// The bound is per role: a follower's partitions beyond the first
	// Max of both roles are still followed for an owner of followers
	// (followerlag), not for one of both (the report), which counts them
	// dropped at every request naming them.
	f := flows.MakeConn(netip.MustParseAddrPort("10.0.0.3:50000"), netip.MustParseAddrPort("10.0.0.1:9092"))
	for range 2 {
		r.call(f, "broker-3-fetcher-0", lagFetch(12, 3, -1, "orders", map[int32]int64{0: 1, 1: 1, 2: 1}), lagFetched(12, "orders", map[int32]int64{0: 5, 1: 5, 2: 5}))
	}
	if r.table.Len() != 4 || r.table.RoleDropped(cluster.RoleReplication) != 2 || r.table.Dropped != 1+2*3 {
		t.Errorf("%d series, %d followers' dropped, %d dropped of both: want 4 (2 a role), 2 (1 a request), 7",
			r.table.Len(), r.table.RoleDropped(cluster.RoleReplication), r.table.Dropped)
	}
	if n := len(r.table.Series(cluster.RoleReplication)); n != 2 {
		t.Errorf("%d followers' series with samples, want 2", n)
	}
	for _, s := range r.table.Series(cluster.RoleNone) {
		if s.Key.Replica >= 0 || !s.InAll {
			t.Errorf("series of both roles %+v: want the 2 consumers' only, the first 2", s.Key)
		}
	}
}

func mapsEqual(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// lagUser follows lag from the Delivery's table if take is set, recording
// the samples each exchange carries.
type lagUser struct {
	take    bool
	offered *flows.LagTable
	table   *flows.LagTable
	got     map[int32]int64
	calls   int
}

func (u *lagUser) UseLag(t *flows.LagTable) bool {
	u.offered = t
	if u.take {
		u.table = t
	}
	return u.take
}

func (u *lagUser) OnExchange(x *flows.Exchange) {
	u.calls++
	for _, s := range u.table.Samples() {
		u.got[s.S.Key.Partition.Num] = s.P.Lag
	}
}

// TestLagDelivered: a Delivery feeds one table for the handlers that take
// it, before they see the exchange, with the consumer groups of the
// requests it delivers; a Delivery none of whose handlers follows lag
// takes no samples.
func TestLagDelivered(t *testing.T) {
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.5:40000"), netip.MustParseAddrPort("10.0.0.1:9092"))
	deliver := func(d *flows.Delivery) {
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version, hb.Group = 4, "orders-app"
		d.Deliver(&flows.Event{Req: flowstest.MakeRequest(c, lagT0, 1, "app", hb)})
		q := flowstest.MakeRequest(c, lagT0.Add(time.Second), 2, "app", lagFetch(12, -1, -1, "orders", map[int32]int64{0: 100, 1: 50}))
		d.Deliver(&flows.Event{Req: q})
		p := flowstest.MakeResponse(q, lagT0.Add(time.Second+time.Millisecond), lagFetched(12, "orders", map[int32]int64{0: 130, 1: 50}))
		d.Deliver(&flows.Event{X: &flows.Exchange{Conn: c, Req: q, Resp: p}})
	}
	a, b := &lagUser{take: true, got: map[int32]int64{}}, &lagUser{take: true, got: map[int32]int64{}}
	deliver(flows.NewDelivery(a, b))
	if want := map[int32]int64{0: 30, 1: 0}; !mapsEqual(a.got, want) || !mapsEqual(b.got, want) {
		t.Errorf("samples delivered %v and %v, want %v to both", a.got, b.got, want)
	}
	if a.table == nil || a.table != b.table || a.table.Len() != 2 {
		t.Fatalf("tables %p and %p: want one, of 2 series", a.table, b.table)
	}
	if g := a.table.Groups("app", c.Client.Addr()); !slices.Equal(g, []string{"orders-app"}) {
		t.Errorf("groups %v, want [orders-app] learned from the delivered Heartbeat", g)
	}
	none := &lagUser{got: map[int32]int64{}}
	deliver(flows.NewDelivery(none))
	if none.calls != 1 || none.offered == nil || none.offered.Len() != 0 || len(none.offered.Samples()) != 0 {
		t.Errorf("%d exchanges, table offered %v: want 1 and a table not fed when no handler takes it", none.calls, none.offered)
	}
	if len(a.table.Samples()) != 0 {
		t.Errorf("samples %v left after the exchange's delivery", a.table.Samples())
	}
}

// TestLagConnCacheFixed: the cache of each connection's last Fetch
// series costs the same however many connections have fetched. A live
// capture numbers every connection it sees (50 new ones a second in the
// soak): 60,000 connections, each fetching once and fetching no more,
// leave under 512 KiB. Before, the cache was indexed by the connection's
// number up to 65,536, every closed connection's slot kept (2.2 MB here;
// +1.7 MB of the soak's live heap after minute 5). A connection fetching
// again still finds its lag.
func TestLagConnCacheFixed(t *testing.T) {
	heap := memtest.HeapLive
	r := &lagRig{t: t}
	first := flows.MakeConn(netip.MustParseAddrPort("10.0.0.5:40000"), netip.MustParseAddrPort("10.0.0.1:9092"))
	first.ID = 1
	r.call(first, "app", lagFetch(12, -1, -1, "orders", map[int32]int64{0: 100}), lagFetched(12, "orders", map[int32]int64{0: 130}))
	before := heap()
	const conns = 60000
	for i := 2; i <= conns; i++ {
		c := flows.MakeConn(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, 5}), uint16(i)), netip.MustParseAddrPort("10.0.0.1:9092"))
		c.ID = i
		r.call(c, "app", lagFetch(12, -1, -1, "orders", map[int32]int64{0: 100}), lagFetched(12, "orders", map[int32]int64{0: 130}))
	}
	grew := int64(heap()) - int64(before)
	if grew > 512<<10 {
		t.Errorf("after %d connections fetched once the lag table grew %d bytes, want under 512 KiB", conns, grew)
	}
	got := r.call(first, "app", lagFetch(12, -1, -1, "orders", map[int32]int64{0: 120}), lagFetched(12, "orders", map[int32]int64{0: 130}))
	if want := map[int32]int64{0: 10}; !mapsEqual(got, want) {
		t.Errorf("lags %v, want %v", got, want)
	}
	runtime.KeepAlive(r)
}
