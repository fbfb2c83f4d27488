package metrics_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
	"github.com/kfsniff/kfsniff/metrics"
)

// steady is a round of warm traffic: a Produce answered with an error on
// one partition, a Fetch and a Metadata, on connections to 3 brokers from
// 6 clients.
type steady struct {
	x []*flows.Exchange
}

func newSteady() *steady {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := &steady{}
	for i := range 6 {
		c := conn(fmt.Sprintf("10.0.0.%d:40000", i+1), fmt.Sprintf("10.1.0.%d:9092", i%3+1))
		id := fmt.Sprintf("app-%d", i)
		p := kmsg.NewPtrProduceRequest()
		p.SetVersion(9)
		pr := kmsg.NewPtrProduceResponse()
		pr.SetVersion(9)
		pt := kmsg.NewProduceResponseTopic()
		pt.Topic = "t"
		pp := kmsg.NewProduceResponseTopicPartition()
		pp.ErrorCode = 6
		pt.Partitions = append(pt.Partitions, pp)
		pr.Topics = append(pr.Topics, pt)
		f := kmsg.NewPtrFetchRequest()
		f.SetVersion(13)
		f.ReplicaID = -1
		fr := kmsg.NewPtrFetchResponse()
		fr.SetVersion(13)
		md := kmsg.NewPtrMetadataRequest()
		md.SetVersion(12)
		mr := kmsg.NewPtrMetadataResponse()
		mr.SetVersion(12)
		for j, pair := range []struct {
			req  kmsg.Request
			resp kmsg.Response
		}{{p, pr}, {f, fr}, {md, mr}} {
			req := flowstest.MakeRequest(c, at, int32(j), id, pair.req)
			s.x = append(s.x, &flows.Exchange{Conn: c, Req: req, Resp: flowstest.MakeResponse(req, at.Add(time.Duration(j+1)*time.Millisecond), pair.resp)})
		}
	}
	return s
}

func (s *steady) run(m *metrics.Metrics) {
	for _, x := range s.x {
		m.OnRequest(x.Req)
		m.OnExchange(x)
	}
}

// BenchmarkExchange is the handler's cost per exchange (its request and
// its response) once warm: what --metrics-addr adds to every exchange.
func BenchmarkExchange(b *testing.B) {
	m := metrics.New(metrics.Config{})
	s := newSteady()
	s.run(m)
	b.ReportAllocs()
	for b.Loop() {
		s.run(m)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(s.x)), "ns/exchange")
}

// TestHotPathAllocs: once every series exists, counting an exchange
// allocates nothing.
func TestHotPathAllocs(t *testing.T) {
	m := metrics.New(metrics.Config{})
	s := newSteady()
	s.run(m)
	if n := testing.AllocsPerRun(100, func() { s.run(m) }); n != 0 {
		t.Errorf("%v allocations per round of %d exchanges; want 0", n, len(s.x))
	}
}
