package copies_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/internal/copies"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

// TestRangesMerge: offsets seen are one range per unbroken run, however
// they arrive, and a partition's ranges are bounded.
func TestRangesMerge(t *testing.T) {
	var s copies.Ranges
	s.Add(100, 177)
	s.Add(0, 77)
	s.Add(78, 99) // joins both
	s.Add(300, 300)
	s.Add(250, 260)
	if s.Len() != 3 {
		t.Fatalf("%d ranges, want 3", s.Len())
	}
	for x, want := range map[int64]bool{0: true, 99: true, 177: true, 178: false, 255: true, 261: false, 300: true, -1: false} {
		if s.Contains(x) != want {
			t.Errorf("Contains(%d) = %v", x, !want)
		}
	}
	for i := range copies.MaxRanges + 10 {
		s.Add(int64(1000+2*i), int64(1000+2*i))
	}
	if s.Len() != copies.MaxRanges || s.Dropped == 0 || s.Contains(0) {
		t.Errorf("%d ranges, %d dropped, lowest kept %v: not bounded", s.Len(), s.Dropped, s.Contains(0))
	}
}

func TestBitset(t *testing.T) {
	var b copies.Bitset
	for _, i := range []uint32{200, 3, 64, 3, 0} {
		b.Add(i)
	}
	if got := slices.Collect(b.All()); !slices.Equal(got, []uint32{0, 3, 64, 200}) || b.Add(64) || !b.Add(65) {
		t.Errorf("members %v", got)
	}
}

// TestParts: batches find their partition by name, by id for versions
// that name topics by id, KRaft's log by its fixed id; partitions past the
// bound are counted, not followed.
func TestParts(t *testing.T) {
	type state struct {
		k   cluster.Partition
		idx uint32
	}
	ps := copies.NewParts(3, func(k cluster.Partition, idx uint32) *state { return &state{k, idx} })
	id := [16]byte{7, 15: 7}
	batches := []flows.BatchRef{
		{Topic: "orders", Partition: 0},
		{TopicID: id, Partition: 0},
		{Topic: "orders", Partition: 0},
		{TopicID: cluster.ClusterMetadataTopicID},
		{Topic: "orders", Partition: 1},
		{TopicID: id, Partition: 0},
	}
	var got []uint32
	for i := range batches {
		if p := ps.Of(&batches[i]); p != nil {
			got = append(got, p.idx)
		} else {
			got = append(got, 99)
		}
	}
	if !slices.Equal(got, []uint32{0, 1, 0, 2, 99, 1}) || ps.Dropped != 1 || len(ps.List()) != 3 {
		t.Errorf("partitions %v, %d dropped", got, ps.Dropped)
	}
	if l := ps.List()[2].k.Label(nil); l != cluster.ClusterMetadataTopic+"-0" {
		t.Errorf("KRaft's log is %q", l)
	}
	if n := ps.List()[1].k.TopicName(nil); n != "BwAAAAAAAAAAAAAAAAAABw" {
		t.Errorf("a topic id unknown to Metadata shows as %q, want it in base64 as Kafka prints it", n)
	}
}

// TestCopies: an exchange's copies with their offsets and sources: a
// Produce's at the response's offsets (-1 refused), all of them unanswered
// (Answered false), a replica's Fetch's at their own, by path; one source
// per connection and path, interned once.
func TestCopies(t *testing.T) {
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.3:40000"), netip.MustParseAddrPort("10.0.0.1:9092"))
	c.ID = 7
	b1 := dt.BatchSpec{ProducerID: -1, Records: dt.Records(0, 3)}.Encode(t)
	b2 := dt.BatchSpec{ProducerID: -1, Records: dt.Records(3, 2)}.Encode(t)
	produce := flowstest.MakeRequest(c, dt.T0, 1, "producer", dt.ProduceRaw("orders", 0, b1, b2))
	var srcs copies.Sources
	var got []string
	each := func(x *copies.Copy) {
		s := srcs.Get(x.Src)
		got = append(got, fmt.Sprintf("%s#%d@%d/%d answered=%v by %s conn %d fetcher %d", x.Path, x.I, x.Base, x.Code, x.Answered, s.ClientID, s.Conn, s.Fetcher))
	}
	srcs.Copies(&detectors.Exchange{Req: produce}, each)
	srcs.Copies(&detectors.Exchange{Req: produce, Resp: flowstest.MakeResponse(produce, dt.T0, dt.ProducedAt("orders", 0, 0, 40))}, each)
	srcs.Copies(&detectors.Exchange{Req: produce, Resp: flowstest.MakeResponse(produce, dt.T0, dt.ProducedAt("orders", 0, 6, -1))}, each)
	fetch := flowstest.MakeRequest(c, dt.T0, 2, "broker-3-fetcher-0", dt.FetchOf([16]byte{1}, 0, 40, 3))
	srcs.Copies(&detectors.Exchange{Req: fetch, Resp: flowstest.MakeResponse(fetch, dt.T0, dt.FetchedBatches([16]byte{1}, 0, 45, dt.Stored(b1, 40, 0), dt.Stored(b2, 43, 0)))}, each)
	want := []string{
		"produce#0@-1/0 answered=false by producer conn 7 fetcher -1", "produce#1@-1/0 answered=false by producer conn 7 fetcher -1",
		"produce#0@40/0 answered=true by producer conn 7 fetcher -1", "produce#1@43/0 answered=true by producer conn 7 fetcher -1",
		"produce#0@-1/6 answered=true by producer conn 7 fetcher -1", "produce#1@-1/6 answered=true by producer conn 7 fetcher -1",
		"replica-fetch#0@40/0 answered=true by broker-3-fetcher-0 conn 7 fetcher 3", "replica-fetch#1@43/0 answered=true by broker-3-fetcher-0 conn 7 fetcher 3",
	}
	if !slices.Equal(got, want) {
		t.Errorf("copies:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSourcesAcrossConnections: each connection's copies keep the source
// first given to them, with its client id, while the connections numbered
// grow from a few to more than the lookup cache holds (it grows with
// them), whatever order they come back in.
func TestSourcesAcrossConnections(t *testing.T) {
	var srcs copies.Sources
	const conns = 5000
	first := make(map[int]uint32)
	msg := func(id int) *flows.Message {
		c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.3:40000"), netip.MustParseAddrPort("10.0.0.1:9092"))
		c.ID = id
		return flowstest.MakeRequest(c, dt.T0, 1, fmt.Sprintf("client-%d", id), dt.ProduceRaw("orders", 0))
	}
	for round := range 3 {
		for i := range conns {
			id := i + 1
			if round == 1 {
				id = conns - i // backwards
			}
			got := srcs.Of(msg(id), copies.Produce)
			if round == 0 {
				first[id] = got
				continue
			}
			if got != first[id] {
				t.Fatalf("round %d: conn %d has source %d, first %d", round, id, got, first[id])
			}
		}
	}
	for id, i := range first {
		if s := srcs.Get(i); s.Conn != id || s.ClientID != fmt.Sprintf("client-%d", id) {
			t.Fatalf("source %d: conn %d client %q, want conn %d", i, s.Conn, s.ClientID, id)
		}
	}
}
