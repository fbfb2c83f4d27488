package detectors_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/advertisedlistenerconflict"
	"github.com/kfsniff/kfsniff/detectors/leaderelectionstall"
	"github.com/kfsniff/kfsniff/detectors/livenesswithoutreplication"
	"github.com/kfsniff/kfsniff/detectors/metadataquorumdown"
	"github.com/kfsniff/kfsniff/detectors/notleaderloop"
	"github.com/kfsniff/kfsniff/detectors/stalledfetch"
	"github.com/kfsniff/kfsniff/flows"
)

// asker is a rule that asks Exchange.Answers twice in every exchange and
// notes what it was handed.
type asker struct {
	asks  *int
	first *[]*decode.PartitionAnswer // per exchange, the first answer's address
	lens  *[]int
}

func (a asker) Findings(*detectors.Pass) []detectors.Finding { return nil }

func (a asker) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	for range 2 {
		got := x.Answers()
		*a.asks++
		var p *decode.PartitionAnswer
		if len(got) > 0 {
			p = &got[0]
		}
		*a.first = append(*a.first, p)
		*a.lens = append(*a.lens, len(got))
	}
}

type noParams struct{}

// TestAnswersOncePerExchange: however many rules ask a Produce or Fetch
// exchange for its partition answers (the six real rules that read them
// and two test rules asking twice each), the Set computes them once per
// exchange and hands every asker the same slice.
func TestAnswersOncePerExchange(t *testing.T) {
	var asks int
	var first []*decode.PartitionAnswer
	var lens []int
	mk := func(name string) *detectors.Analyzer {
		return detectors.Define(detectors.Analyzer{Name: name, Doc: "asks for answers"}, noParams{},
			func(noParams) detectors.Rule { return asker{&asks, &first, &lens} })
	}
	as := []*detectors.Analyzer{mk("asker-1"), notleaderloop.Analyzer, stalledfetch.Analyzer,
		leaderelectionstall.Analyzer, advertisedlistenerconflict.Analyzer, livenesswithoutreplication.Analyzer,
		metadataquorumdown.Analyzer, mk("asker-2")}
	s, err := detectors.NewSet(as, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.1.1:40000"), netip.MustParseAddrPort("10.0.0.1:9092"))
	c.ID = 1
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	msg := func(key int16, resp bool, n int) *flows.Message {
		at := t0.Add(time.Duration(n) * time.Millisecond)
		m := &flows.Message{Conn: &c.ConnInfo, Response: resp, Key: key, Version: 12, Correlation: int32(n),
			Client: cluster.Client{ID: "client"}, Packet: uint64(2*n + 1), Time: at, FirstTime: at}
		if resp {
			m.Packet++
		}
		return m
	}
	// Exchanges of 3, 2 and 0 partitions: Fetch refused
	// NOT_LEADER_OR_FOLLOWER (what not-leader-loop and
	// leader-election-stall follow), Produce, and a Metadata exchange
	// (no partition answers).
	const rounds = 20
	want := []int{3, 2, 0}
	for i := range rounds {
		freq := msg(int16(kmsg.Fetch), false, 3*i)
		fr := kmsg.NewPtrFetchRequest()
		fr.Version, fr.SessionEpoch, fr.ReplicaID = 12, -1, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "events"
		fresp := msg(int16(kmsg.Fetch), true, 3*i)
		fs := kmsg.NewPtrFetchResponse()
		fs.Version = 12
		st := kmsg.NewFetchResponseTopic()
		st.Topic = "events"
		for p := range int32(3) {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition = p
			ft.Partitions = append(ft.Partitions, fp)
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.ErrorCode, sp.HighWatermark = p, cluster.NotLeaderOrFollower, -1
			st.Partitions = append(st.Partitions, sp)
		}
		fr.Topics = append(fr.Topics, ft)
		fs.Topics = append(fs.Topics, st)
		freq.Req, fresp.Resp = fr, fs
		freq.Identify()

		preq := msg(int16(kmsg.Produce), false, 3*i+1)
		pr := kmsg.NewPtrProduceRequest()
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "events"
		presp := msg(int16(kmsg.Produce), true, 3*i+1)
		rr := kmsg.NewPtrProduceResponse()
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = "events"
		for p := range int32(2) {
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Partition = p
			pt.Partitions = append(pt.Partitions, pp)
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		pr.Topics = append(pr.Topics, pt)
		rr.Topics = append(rr.Topics, rt)
		preq.Req, presp.Resp = pr, rr
		preq.Identify()

		mreq := msg(int16(kmsg.Metadata), false, 3*i+2)
		mreq.Req = kmsg.NewPtrMetadataRequest()
		mresp := msg(int16(kmsg.Metadata), true, 3*i+2)
		mresp.Resp = kmsg.NewPtrMetadataResponse()
		mreq.Identify()

		for _, x := range []flows.Exchange{{Conn: c, Req: freq, Resp: fresp}, {Conn: c, Req: preq, Resp: presp},
			{Conn: c, Req: mreq, Resp: mresp}} {
			s.OnRequest(x.Req)
			s.OnExchange(&x)
		}
	}
	if got := s.AnswersComputed(); got != 3*rounds {
		t.Errorf("answers computed %d times for %d exchanges", got, 3*rounds)
	}
	if asks != 2*2*3*rounds {
		t.Fatalf("the test rules asked %d times, want %d", asks, 2*2*3*rounds)
	}
	// Each exchange's four asks (two rules, twice each) got the same
	// slice, of the exchange's partitions.
	for i := 0; i < len(first); i += 4 {
		x := i / 4
		for j := range 4 {
			if lens[i+j] != want[x%3] {
				t.Fatalf("exchange %d: ask %d got %d answers, want %d", x, j, lens[i+j], want[x%3])
			}
			if first[i+j] != first[i] {
				t.Fatalf("exchange %d: ask %d got another slice than the first ask", x, j)
			}
		}
	}
	// The Set reuses one buffer: the Fetch exchanges after the first are
	// answered in the same memory.
	if first[0] == nil || first[12] != first[0] {
		t.Errorf("the second Fetch exchange's answers are not in the Set's buffer")
	}
}
