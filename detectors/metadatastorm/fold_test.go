package metadatastorm

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/flows"
)

// TestKeepClosedLevels: live (Pass.KeepClosed 5 min), 200 client ids
// each opening a connection every 20 s for one Metadata request and
// closing it (the soak's short-lived admin clients) for an hour: the
// connections the clients are named with level at what the last 5-10
// minutes closed (at most 31 a client), where before they filled to 180
// a client (256 after 85 minutes); each client's count of connections
// still says every one (180: listed plus folded). Without KeepClosed
// (-r) every connection is kept, as before.
func TestKeepClosedLevels(t *testing.T) {
	server := netip.MustParseAddrPort("10.1.0.10:9092")
	for _, keep := range []time.Duration{5 * time.Minute, 0} {
		r := New(Params{Window: 10 * time.Second, MinRequests: 50, ExplainWithin: 2 * time.Second}).(*rule)
		p := &detectors.Pass{KeepClosed: keep}
		const clients, period, hour = 200, 20 * time.Second, time.Hour
		id := 0
		most := 0
		for at := time.Duration(0); at < hour; at += period / clients {
			id++
			k := cluster.Client{ID: fmt.Sprintf("admin-%d", id%clients), Host: netip.MustParseAddr("10.2.0.5")}
			c := &flows.ConnInfo{ID: id, Client: netip.AddrPortFrom(k.Host, uint16(id)), Server: server}
			t0 := dt.At(at)
			r.ConnEvent(p, &detectors.ConnEvent{Kind: flows.ConnOpened, Conn: c, Client: c.Client, Server: server, Time: t0})
			req := &flows.Message{Key: int16(kmsg.Metadata), Version: 12, Time: t0, Client: k, Req: kmsg.NewPtrMetadataRequest()}
			resp := &flows.Message{Key: int16(kmsg.Metadata), Version: 12, Time: t0.Add(time.Millisecond), Client: k, Size: 100}
			r.Exchange(p, &detectors.Exchange{Conn: c, Req: req, Resp: resp})
			r.ConnEvent(p, &detectors.ConnEvent{Kind: flows.ConnClosed, Conn: c, Client: c.Client, Server: server, Time: t0.Add(5 * time.Millisecond)})
			if at > 15*time.Minute {
				for _, cl := range r.clients {
					most = max(most, cl.conns.Len())
				}
			}
		}
		perClient := int(hour / period)
		for _, cl := range r.clients {
			if got := int64(cl.conns.Len()) + cl.folded; got != int64(perClient) {
				t.Fatalf("keep %v: client %s counts %d connections (listed %d, folded %d), want %d", keep, cl.key.ID, got, cl.conns.Len(), cl.folded, perClient)
			}
		}
		if keep > 0 && most > int(2*keep/period)+1 {
			t.Errorf("keep %v: a client lists up to %d connections after 15 minutes, want at most %d (closed in the last 5-10 min)", keep, most, int(2*keep/period)+1)
		}
		if keep == 0 && most != perClient {
			t.Errorf("-r: a client lists up to %d connections, want all %d", most, perClient)
		}
	}
}
