package flows_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

// TestNodesLearnBrokers: the node table learns the brokers of Metadata and
// DescribeCluster answers (and a Fetch answer's node endpoints) as they
// are delivered.
func TestNodesLearnBrokers(t *testing.T) {
	d := flows.NewDelivery()
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:9092"))
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d.Deliver(&flows.Event{Conn: &flows.ConnEvent{Kind: flows.ConnOpened, Conn: c, Client: c.Client, Server: c.Server, Time: at}})
	answer := func(req kmsg.Request, resp kmsg.Response) {
		q := flowstest.MakeRequest(c, at, 1, "app", req)
		d.Deliver(&flows.Event{X: &flows.Exchange{Conn: c, Req: q, Resp: flowstest.MakeResponse(q, at, resp)}})
	}
	dc := kmsg.NewPtrDescribeClusterResponse()
	dc.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: 7, Host: "10.0.0.2", Port: 9092}, {NodeID: 8, Host: "10.0.0.3", Port: 9092}}
	answer(kmsg.NewPtrDescribeClusterRequest(), dc)
	meta := kmsg.NewPtrMetadataResponse()
	meta.Version = 12
	meta.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 9, Host: "10.0.0.4", Port: 9092}}
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version = 12
	answer(mreq, meta)
	n := d.Nodes()
	for ep, want := range map[string]int32{"10.0.0.2:9092": 7, "10.0.0.3:9092": 8, "10.0.0.4:9092": 9} {
		if got := n.Server(netip.MustParseAddrPort(ep)); got != want {
			t.Errorf("node at %s: %d, want %d", ep, got, want)
		}
	}
	if got := n.Label(c.Server, true); got != "node 7 (10.0.0.2:9092)" {
		t.Errorf("label %q", got)
	}
}
