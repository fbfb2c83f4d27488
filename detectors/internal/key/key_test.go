package key

import (
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/flows"
)

// TestKeys: a partition named by id and by name in turn is one key, and is
// shown by name when the run knows it, by id otherwise; a client is its
// client id and host, whatever the port.
func TestKeys(t *testing.T) {
	id := [16]byte{0x14, 0x65}
	if PartitionOf("orders", id, 3) != PartitionOf("", id, 3) {
		t.Error("the same partition by id, with and without its name, makes two keys")
	}
	if got := PartitionOf("", id, 3).Label(nil); got != cluster.TopicID(id)+"-3" {
		t.Errorf("unknown id: %q", got)
	}
	if got := PartitionOf("orders", [16]byte{}, 0).Label(nil); got != "orders-0" {
		t.Errorf("by name: %q", got)
	}
	c1 := flows.MakeConn(netip.MustParseAddrPort("[::ffff:10.0.0.5]:40000"), netip.MustParseAddrPort("10.0.0.1:9092"))
	c2 := flows.MakeConn(netip.MustParseAddrPort("10.0.0.5:40001"), netip.MustParseAddrPort("10.0.0.2:9092"))
	m1 := flows.MakeRequest(c1, time.Time{}, 1, "app", kmsg.NewPtrMetadataRequest())
	m2 := flows.MakeRequest(c2, time.Time{}, 1, "app", kmsg.NewPtrMetadataRequest())
	if ClientOf(m1) != ClientOf(m2) || ClientOf(m1).Host.String() != "10.0.0.5" {
		t.Errorf("clients %v and %v: want one client, app on 10.0.0.5", ClientOf(m1), ClientOf(m2))
	}
}
