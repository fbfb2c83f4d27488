package cluster

import (
	"net/netip"
	"slices"
	"testing"
)

func TestAdvertisedAs(t *testing.T) {
	n := NewNodes()
	n.learnEndpoint(1, "10.0.0.2", 9092)
	n.learnEndpoint(2, "10.0.0.3", 9092)
	n.learnEndpoint(2, "broker-2.example", 9092)
	n.learnEndpoint(4, "localhost", 9492)
	n.learnEndpoint(5, "127.0.0.1", 9492)
	n.learnEndpoint(6, "fd00::6", 9092)
	for _, tc := range []struct {
		ap   string
		want []string
		ids  []int32
	}{
		{"10.0.0.3:9092", []string{"10.0.0.3:9092"}, []int32{2}},
		{"[::ffff:10.0.0.2]:9092", []string{"10.0.0.2:9092"}, []int32{1}},
		{"127.0.0.1:9492", []string{"127.0.0.1:9492", "localhost:9492"}, []int32{4, 5}},
		{"[::1]:9492", []string{"localhost:9492"}, []int32{4}},
		{"[fd00::6]:9092", []string{"[fd00::6]:9092"}, []int32{6}},
		// Not advertised: another port, another host, a hostname.
		{"10.0.0.3:9093", nil, nil},
		{"10.0.0.9:9092", nil, nil},
		{"10.0.0.2:9492", nil, nil},
	} {
		ap := netip.MustParseAddrPort(tc.ap)
		if got := n.AdvertisedAs(ap); !slices.Equal(got, tc.want) {
			t.Errorf("AdvertisedAs(%s) = %q, want %q", tc.ap, got, tc.want)
		}
		if got := n.ServerIDs(ap); !slices.Equal(got, tc.ids) {
			t.Errorf("ServerIDs(%s) = %v, want %v: the endpoints and the ids must agree", tc.ap, got, tc.ids)
		}
	}
}
