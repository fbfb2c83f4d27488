package packet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/kfsniff/kfsniff/capture"
)

// TestTCP4SameAsParser: IPv4 packets decoded by parseIP (tcp4 first)
// and by the parser alone (parseLayers) come out the same: kind,
// endpoints, error, and the TCP segment handed to reassembly (sequence
// numbers, flags, ports and the key reassembly makes of them, payload).
// The packets are built with gopacket (options in IP and TCP, fragments,
// UDP, tunnels), then cut and changed at random bytes.
func TestTCP4SameAsParser(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 3))
	var fast, slow Headers
	fast.Init()
	slow.Init()
	kinds := map[Kind]int{}
	for i := range 20000 {
		b := ipPacket(t, r)
		switch r.IntN(4) {
		case 0:
			b = b[:r.IntN(len(b)+1)]
		case 1:
			for range 1 + r.IntN(3) {
				b[r.IntN(min(len(b), 64))] = byte(r.IntN(256))
			}
		}
		k1, s1, d1, e1 := fast.parseIP(capture.EtherTypeIPv4, b, 0)
		k2, s2, d2, e2 := slow.parseLayers(capture.EtherTypeIPv4, b, 0)
		kinds[k2]++
		if k1 != k2 || s1 != s2 || d1 != d2 || fmt.Sprint(e1) != fmt.Sprint(e2) {
			t.Fatalf("packet %d %x:\ntcp4:   %v %v %v %v\nparser: %v %v %v %v", i, b, k1, s1, d1, e1, k2, s2, d2, e2)
		}
		if k1 != TCP {
			continue
		}
		x, y := &fast.TCP, &slow.TCP
		if x.Seq != y.Seq || x.Ack != y.Ack || x.SYN != y.SYN || x.ACK != y.ACK || x.FIN != y.FIN || x.RST != y.RST || x.PSH != y.PSH ||
			x.TransportFlow() != y.TransportFlow() || string(x.Payload) != string(y.Payload) {
			t.Fatalf("packet %d %x: segments differ:\ntcp4:   %+v\nparser: %+v", i, b, x, y)
		}
	}
	t.Logf("kinds by the parser: %v", kinds)
	if kinds[TCP] < 1000 || kinds[Bad] < 1000 || kinds[Fragment] < 100 || kinds[NonTCP] < 100 {
		t.Errorf("the packets did not exercise every kind: %v", kinds)
	}
}

// ipPacket builds an IPv4 packet: mostly TCP, with or without options and
// payload; some fragments, UDP, and IPv4 or IPv6 in IPv4.
func ipPacket(t *testing.T, r *rand.Rand) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, Id: uint16(r.IntN(65536)),
		SrcIP: net.IP{10, 0, byte(r.IntN(4)), 1}, DstIP: net.IP{10, 0, 0, 2}}
	if r.IntN(8) == 0 {
		ip.Options = []layers.IPv4Option{{OptionType: 7, OptionLength: 7, OptionData: []byte{4, 0, 0, 0, 0}}}
	}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(40000 + r.IntN(3)), DstPort: []layers.TCPPort{9092, 53, 80}[r.IntN(3)],
		Seq: r.Uint32(), Ack: r.Uint32(), SYN: r.IntN(4) == 0, ACK: r.IntN(4) > 0, FIN: r.IntN(8) == 0, RST: r.IntN(16) == 0, PSH: r.IntN(2) == 0, Window: 1000}
	if r.IntN(4) == 0 {
		tcp.Options = []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{5, 0xb4}},
			{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: make([]byte, 8)}}
	}
	payload := make([]byte, []int{0, 1, 40, 1400}[r.IntN(4)])
	for i := range payload {
		payload[i] = byte(r.IntN(256))
	}
	var ls []gopacket.SerializableLayer
	switch r.IntN(10) {
	case 0:
		ip.Protocol = layers.IPProtocolUDP
		udp := &layers.UDP{SrcPort: 5000, DstPort: 53}
		udp.SetNetworkLayerForChecksum(ip)
		ls = []gopacket.SerializableLayer{ip, udp, gopacket.Payload(payload)}
	case 1:
		ip.Flags, ip.FragOffset = layers.IPv4MoreFragments, uint16(r.IntN(2))
		ls = []gopacket.SerializableLayer{ip, gopacket.Payload(append(payload, make([]byte, 8)...))}
	case 2:
		ip.Protocol = layers.IPProtocolIPv4
		inner := *ip
		inner.Protocol, inner.Options = layers.IPProtocolTCP, nil
		tcp.SetNetworkLayerForChecksum(&inner)
		ls = []gopacket.SerializableLayer{ip, &inner, tcp, gopacket.Payload(payload)}
	default:
		tcp.SetNetworkLayerForChecksum(ip)
		ls = []gopacket.SerializableLayer{ip, tcp, gopacket.Payload(payload)}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}
