package capture

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/net/bpf"
)

// testPacket is a crafted frame: the Ethernet bytes (with the 802.1Q tag in
// band when vlan is set) and what the kernel would report beside them.
type testPacket struct {
	name  string
	frame []byte // Ethernet
	vlan  int    // -1: untagged; otherwise the tag's VLAN id
}

func mac(b byte) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, b} }

func serialize(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	for _, l := range ls {
		if n, ok := l.(gopacket.NetworkLayer); ok {
			for _, x := range ls {
				switch x := x.(type) {
				case *layers.TCP:
					x.SetNetworkLayerForChecksum(n)
				case *layers.UDP:
					x.SetNetworkLayerForChecksum(n)
				}
			}
		}
	}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(buf.Bytes())
}

// testPackets builds one packet of each kind the primitives tell apart.
func testPackets(t *testing.T) []testPacket {
	eth := func(et layers.EthernetType) *layers.Ethernet {
		return &layers.Ethernet{SrcMAC: mac(1), DstMAC: mac(2), EthernetType: et}
	}
	ip4 := func(src, dst string, proto layers.IPProtocol) *layers.IPv4 {
		return &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
	}
	ip6 := func(src, dst string, proto layers.IPProtocol) *layers.IPv6 {
		return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: net.ParseIP(src), DstIP: net.ParseIP(dst)}
	}
	tcp := func(sp, dp int) *layers.TCP {
		return &layers.TCP{SrcPort: layers.TCPPort(sp), DstPort: layers.TCPPort(dp), Seq: 1, ACK: true, Window: 1000}
	}
	udp := func(sp, dp int) *layers.UDP {
		return &layers.UDP{SrcPort: layers.UDPPort(sp), DstPort: layers.UDPPort(dp)}
	}
	payload := gopacket.Payload([]byte("kafka"))

	withOpts := ip4("10.0.0.1", "10.0.0.2", layers.IPProtocolTCP)
	withOpts.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}} // NOPs: IHL 6
	frag := ip4("10.0.0.1", "10.0.0.2", layers.IPProtocolTCP)
	frag.FragOffset = 185 // a later fragment: its payload is no TCP header

	pk := []testPacket{
		{name: "v4-tcp-9092", frame: serialize(t, eth(layers.EthernetTypeIPv4), ip4("10.0.0.1", "10.0.0.2", layers.IPProtocolTCP), tcp(51000, 9092), payload)},
		{name: "v4-tcp-reply", frame: serialize(t, eth(layers.EthernetTypeIPv4), ip4("10.0.0.2", "10.0.0.1", layers.IPProtocolTCP), tcp(9092, 51000), payload)},
		{name: "v4-tcp-8081-ihl6", frame: serialize(t, eth(layers.EthernetTypeIPv4), withOpts, tcp(40000, 8081), payload)},
		{name: "v4-udp-9093", frame: serialize(t, eth(layers.EthernetTypeIPv4), ip4("192.168.7.9", "10.0.0.2", layers.IPProtocolUDP), udp(5353, 9093), payload)},
		{name: "v4-frag", frame: serialize(t, eth(layers.EthernetTypeIPv4), frag, gopacket.Payload([]byte{0x23, 0x84, 0x23, 0x84, 0, 0, 0, 0}))},
		{name: "v4-icmp", frame: serialize(t, eth(layers.EthernetTypeIPv4), ip4("10.0.0.1", "10.0.0.2", layers.IPProtocolICMPv4), &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0)}, payload)},
		{name: "v6-tcp-9092", frame: serialize(t, eth(layers.EthernetTypeIPv6), ip6("fd00::1", "fd00::2", layers.IPProtocolTCP), tcp(51000, 9092), payload)},
		{name: "v6-udp-53", frame: serialize(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8::7", "fd00::2", layers.IPProtocolUDP), udp(53, 33000), payload)},
		{name: "arp", frame: serialize(t, eth(layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: 1,
			SourceHwAddress: mac(1), SourceProtAddress: []byte{10, 0, 0, 1}, DstHwAddress: mac(0), DstProtAddress: []byte{10, 0, 0, 2}})},
		{name: "vlan100-v4-tcp-9092", vlan: 100, frame: serialize(t, eth(layers.EthernetTypeDot1Q),
			&layers.Dot1Q{VLANIdentifier: 100, Type: layers.EthernetTypeIPv4}, ip4("10.0.0.1", "10.0.0.2", layers.IPProtocolTCP), tcp(51000, 9092), payload)},
	}
	for i := range pk {
		if !strings.HasPrefix(pk[i].name, "vlan") {
			pk[i].vlan = -1
		}
	}
	return pk
}

// asLink re-frames an Ethernet frame for link type lt, as a capture file
// of that type holds it. ok is false when lt cannot carry it (a VLAN tag
// on a link with no link layer).
func asLink(frame []byte, lt LinkType) (b []byte, ok bool) {
	et := binary.BigEndian.Uint16(frame[12:])
	rest := frame[14:]
	switch lt {
	case LinkEthernet:
		return frame, true
	case LinkSLL:
		h := make([]byte, 16)
		binary.BigEndian.PutUint16(h[0:], 0) // to us
		binary.BigEndian.PutUint16(h[2:], 1) // ARPHRD_ETHER
		binary.BigEndian.PutUint16(h[4:], 6)
		copy(h[6:], frame[6:12])
		binary.BigEndian.PutUint16(h[14:], et)
		return append(h, rest...), true
	case LinkSLL2:
		h := make([]byte, 20)
		binary.BigEndian.PutUint16(h[0:], et)
		binary.BigEndian.PutUint32(h[4:], 2)
		binary.BigEndian.PutUint16(h[8:], 1)
		h[11] = 6
		copy(h[12:], frame[6:12])
		return append(h, rest...), true
	}
	if et == etherTypeVLAN {
		return nil, false
	}
	fam := map[uint16]uint32{EtherTypeIPv4: 2, EtherTypeIPv6: 10}[et]
	switch lt {
	case LinkRaw:
		if fam == 0 {
			return nil, false // raw links carry only IP
		}
		return rest, true
	case LinkNull:
		h := binary.LittleEndian.AppendUint32(nil, fam)
		return append(h, rest...), true
	case LinkLoop:
		h := binary.BigEndian.AppendUint32(nil, map[uint32]uint32{2: 2, 10: 24}[fam])
		return append(h, rest...), true
	}
	return nil, false
}

var filterCases = []struct {
	expr string
	want []string // the packets that pass
}{
	{"", []string{"arp", "v4-frag", "v4-icmp", "v4-tcp-8081-ihl6", "v4-tcp-9092", "v4-tcp-reply", "v4-udp-9093", "v6-tcp-9092", "v6-udp-53", "vlan100-v4-tcp-9092"}},
	{"ip", []string{"v4-frag", "v4-icmp", "v4-tcp-8081-ihl6", "v4-tcp-9092", "v4-tcp-reply", "v4-udp-9093"}},
	{"ip6", []string{"v6-tcp-9092", "v6-udp-53"}},
	{"tcp", []string{"v4-frag", "v4-tcp-8081-ihl6", "v4-tcp-9092", "v4-tcp-reply", "v6-tcp-9092"}},
	{"udp", []string{"v4-udp-9093", "v6-udp-53"}},
	{"icmp", []string{"v4-icmp"}},
	{"not ip and not ip6", []string{"arp", "vlan100-v4-tcp-9092"}},
	{"! tcp && ! udp", []string{"arp", "v4-icmp", "vlan100-v4-tcp-9092"}},
	{"port 9092", []string{"v4-tcp-9092", "v4-tcp-reply", "v6-tcp-9092"}},
	{"tcp port 9092", []string{"v4-tcp-9092", "v4-tcp-reply", "v6-tcp-9092"}},
	{"udp port 9092", nil},
	{"dst port 9092", []string{"v4-tcp-9092", "v6-tcp-9092"}},
	{"src port 9092", []string{"v4-tcp-reply"}},
	{"src or dst port 9092", []string{"v4-tcp-9092", "v4-tcp-reply", "v6-tcp-9092"}},
	{"src and dst port 9092", nil},
	{"ip6 port 9092", []string{"v6-tcp-9092"}},
	{"ip port 9092", []string{"v4-tcp-9092", "v4-tcp-reply"}},
	{"port 8081", []string{"v4-tcp-8081-ihl6"}},
	{"port 9092 or port 8081", []string{"v4-tcp-8081-ihl6", "v4-tcp-9092", "v4-tcp-reply", "v6-tcp-9092"}},
	{"port 9092 or 8081", []string{"v4-tcp-8081-ihl6", "v4-tcp-9092", "v4-tcp-reply", "v6-tcp-9092"}},
	{"port 9092 and not dst port 9092", []string{"v4-tcp-reply"}},
	{"port 8996", nil}, // 0x2384: only in the fragment's payload
	{"portrange 9092-9094", []string{"v4-tcp-9092", "v4-tcp-reply", "v4-udp-9093", "v6-tcp-9092"}},
	{"udp portrange 9090-9099", []string{"v4-udp-9093"}},
	{"dst portrange 9093-9094", []string{"v4-udp-9093"}},
	{"portrange 50000-52000", []string{"v4-tcp-9092", "v4-tcp-reply", "v6-tcp-9092"}},
	{"host 10.0.0.1", []string{"v4-frag", "v4-icmp", "v4-tcp-8081-ihl6", "v4-tcp-9092", "v4-tcp-reply"}},
	{"src host 10.0.0.1", []string{"v4-frag", "v4-icmp", "v4-tcp-8081-ihl6", "v4-tcp-9092"}},
	{"dst 10.0.0.1", []string{"v4-tcp-reply"}},
	{"10.0.0.1 and port 9092", []string{"v4-tcp-9092", "v4-tcp-reply"}},
	{"host fd00::2", []string{"v6-tcp-9092", "v6-udp-53"}},
	{"ip6 src host fd00::1", []string{"v6-tcp-9092"}},
	{"net 192.168.0.0/16", []string{"v4-udp-9093"}},
	{"net 192.168", []string{"v4-udp-9093"}},
	{"src net 192.168.0.0 mask 255.255.0.0", []string{"v4-udp-9093"}},
	{"dst net 10.0.0.0/8 and udp", []string{"v4-udp-9093"}},
	{"net 2001:db8::/32", []string{"v6-udp-53"}},
	{"net fd00::/8", []string{"v6-tcp-9092", "v6-udp-53"}},
	{"net ::/0", []string{"v6-tcp-9092", "v6-udp-53"}},
	{"host 10.0.0.2 and (port 9092 or port 9093)", []string{"v4-tcp-9092", "v4-tcp-reply", "v4-udp-9093"}},
	// tcpdump: and/or have equal precedence, left to right.
	{"udp or tcp and port 9093", []string{"v4-udp-9093"}},
	{"udp or (tcp and port 9093)", []string{"v4-udp-9093", "v6-udp-53"}},
	{"not (port 9092 or port 8081) and tcp", []string{"v4-frag"}},
	{"vlan", []string{"vlan100-v4-tcp-9092"}},
	{"vlan 100", []string{"vlan100-v4-tcp-9092"}},
	{"vlan 101", nil},
	{"vlan and port 9092", []string{"vlan100-v4-tcp-9092"}},
	{"vlan 100 and host 10.0.0.2 and tcp dst port 9092", []string{"vlan100-v4-tcp-9092"}},
	{"port 9092 or vlan", []string{"v4-tcp-9092", "v4-tcp-reply", "v6-tcp-9092", "vlan100-v4-tcp-9092"}},
	// As in tcpdump, what follows a vlan keyword is looked for inside
	// the tag, even across "or".
	{"vlan or port 9092", []string{"vlan100-v4-tcp-9092"}},
}

// liveVLAN lists the expressions that pass the VLAN-tagged packet on a
// live socket. The kernel takes the outer tag out of the packet before the
// filter runs, so, as with tcpdump on Linux, "ip" or "port 9092" match
// tagged packets live that they do not match in a file.
var liveVLAN = map[string]bool{
	"": true, "ip": true, "tcp": true, "port 9092": true, "tcp port 9092": true, "dst port 9092": true,
	"src or dst port 9092": true, "ip port 9092": true, "port 9092 or port 8081": true, "port 9092 or 8081": true,
	"portrange 9092-9094": true, "portrange 50000-52000": true, "host 10.0.0.1": true, "src host 10.0.0.1": true,
	"10.0.0.1 and port 9092": true, "host 10.0.0.2 and (port 9092 or port 9093)": true,
	"vlan": true, "vlan 100": true, "vlan and port 9092": true, "vlan 100 and host 10.0.0.2 and tcp dst port 9092": true,
	"port 9092 or vlan": true, "vlan or port 9092": true,
}

func names(pk []testPacket, pass func(testPacket) (bool, bool)) []string {
	var out []string
	for _, p := range pk {
		ok, applies := pass(p)
		if applies && ok {
			out = append(out, p.name)
		}
	}
	sort.Strings(out)
	return out
}

// TestFilterFiles runs every expression on the x/net/bpf VM over the
// packets as each link type's capture files hold them.
func TestFilterFiles(t *testing.T) {
	pk := testPackets(t)
	for _, lt := range []LinkType{LinkEthernet, LinkSLL, LinkSLL2, LinkRaw, LinkNull, LinkLoop} {
		for _, tc := range filterCases {
			t.Run(fmt.Sprintf("%s/%s", lt, tc.expr), func(t *testing.T) {
				f, err := ParseFilter(tc.expr)
				if err != nil {
					t.Fatal(err)
				}
				got := names(pk, func(p testPacket) (bool, bool) {
					b, ok := asLink(p.frame, lt)
					if !ok {
						return false, false
					}
					return f.Match(&Packet{Link: lt, Data: b, Len: len(b)}), true
				})
				var want []string
				cases := tc.want
				if _, ok := fileLayout(lt); tc.expr == "vlan or port 9092" && ok && !mustLayout(lt).vlan {
					// No tags on this link: vlan never matches, nothing shifts.
					cases = []string{"v4-tcp-9092", "v4-tcp-reply", "v6-tcp-9092"}
				}
				for _, n := range cases {
					for _, p := range pk {
						if p.name == n {
							if _, ok := asLink(p.frame, lt); ok {
								want = append(want, n)
							}
						}
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("passes %v\nwant   %v", got, want)
				}
			})
		}
	}
}

func mustLayout(lt LinkType) layout {
	l, _ := fileLayout(lt)
	return l
}

// kernelRun runs a kernel program on the VM: the ancillary loads the
// kernel answers from the socket buffer (ld proto, vlan_avail, vlan_tci)
// become constants of the packet.
func kernelRun(t *testing.T, prog []bpf.Instruction, data []byte, proto uint16, vlan int) bool {
	t.Helper()
	sim := make([]bpf.Instruction, len(prog))
	for i, ins := range prog {
		sim[i] = ins
		if ext, ok := ins.(bpf.LoadExtension); ok {
			var v uint32
			switch ext.Num {
			case bpf.ExtProto:
				v = uint32(proto)
			case bpf.ExtVLANTagPresent:
				if vlan >= 0 {
					v = 1
				}
			case bpf.ExtVLANTag:
				v = uint32(max(vlan, 0)) | 3<<13 // a priority too: only the id counts
			default:
				t.Fatalf("unexpected extension %v", ext.Num)
			}
			sim[i] = bpf.LoadConstant{Dst: bpf.RegA, Val: v}
		}
	}
	vm, err := bpf.NewVM(sim)
	if err != nil {
		t.Fatal(err)
	}
	n, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestFilterKernel checks the programs attached to live sockets, which see
// packets without their outer VLAN tag (the kernel keeps it aside): a raw
// socket sees the Ethernet header, a cooked one (-i any) the network header.
func TestFilterKernel(t *testing.T) {
	pk := testPackets(t)
	for _, cooked := range []bool{false, true} {
		for _, tc := range filterCases {
			t.Run(fmt.Sprintf("cooked=%v/%s", cooked, tc.expr), func(t *testing.T) {
				f, err := ParseFilter(tc.expr)
				if err != nil {
					t.Fatal(err)
				}
				prog, err := kernelProgram(f, cooked, LinkEthernet, 1000)
				if err != nil {
					t.Fatal(err)
				}
				got := names(pk, func(p testPacket) (bool, bool) {
					frame := p.frame
					if p.vlan >= 0 {
						// The kernel takes the tag out.
						frame = append(slices.Clone(frame[:12]), frame[16:]...)
					}
					proto := binary.BigEndian.Uint16(frame[12:])
					if cooked {
						return kernelRun(t, prog, frame[14:], proto, p.vlan), true
					}
					return kernelRun(t, prog, frame, proto, p.vlan), true
				})
				var want []string
				for _, n := range tc.want {
					if n != "vlan100-v4-tcp-9092" {
						want = append(want, n)
					}
				}
				if tc.expr == "vlan or port 9092" {
					// Live, the outer tag is not in the packet: no shift.
					want = []string{"v4-tcp-9092", "v4-tcp-reply", "v6-tcp-9092"}
				}
				if liveVLAN[tc.expr] {
					want = append(want, "vlan100-v4-tcp-9092")
				}
				sort.Strings(want)
				if !slices.Equal(got, want) {
					t.Errorf("passes %v\nwant   %v", got, want)
				}
				if len(prog) == 0 || prog[len(prog)-1] == nil {
					t.Fatal("empty program")
				}
			})
		}
	}
}

func TestFilterSnaplen(t *testing.T) {
	f, _ := ParseFilter("tcp")
	prog, err := f.Program(LinkEthernet, 96)
	if err != nil {
		t.Fatal(err)
	}
	vm, _ := bpf.NewVM(prog)
	pk := testPackets(t)
	if n, _ := vm.Run(pk[0].frame); n != 96 {
		t.Errorf("accepted packet returns %d, want the snaplen 96 (the kernel truncates to it)", n)
	}
	if n, _ := vm.Run(pk[3].frame); n != 0 {
		t.Errorf("rejected packet returns %d, want 0", n)
	}
	if n, _ := vm.Run(pk[0].frame[:20]); n != 0 {
		t.Errorf("a packet too short for the loads passes (%d)", n)
	}
}

// TestFilterLongJumps: an expression longer than a conditional jump can
// skip still lays out, assembles and decides right.
func TestFilterLongJumps(t *testing.T) {
	var parts []string
	for p := 1000; p < 1080; p++ {
		parts = append(parts, fmt.Sprint("port ", p))
	}
	parts = append(parts, "port 9092")
	f, err := ParseFilter(strings.Join(parts, " or "))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := f.Program(LinkEthernet, 65535)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(prog, func(i bpf.Instruction) bool { _, ok := i.(bpf.Jump); return ok }) {
		t.Fatalf("program of %d instructions has no long jump: the test does not test them", len(prog))
	}
	pk := testPackets(t)
	for _, p := range pk {
		want := slices.Contains([]string{"v4-tcp-9092", "v4-tcp-reply", "v6-tcp-9092"}, p.name)
		if got := f.Match(&Packet{Link: LinkEthernet, Data: p.frame}); got != want {
			t.Errorf("%s: match %v, want %v", p.name, got, want)
		}
	}
	// Too long for the kernel: an error, not a broken program.
	for i := range 30 {
		parts = append(parts, fmt.Sprintf("host fd00::%x", i), fmt.Sprintf("net 10.%d.0.0/16", i))
	}
	big := strings.Join(parts, " or ")
	for range 3 {
		big = big + " or " + big
	}
	f, err = ParseFilter(big)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Program(LinkEthernet, 65535); err == nil || !strings.Contains(err.Error(), "instructions") {
		t.Errorf("oversized filter: %v; want an error naming the instruction limit", err)
	}
}

func TestFilterErrors(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"port", "expression ends where a port was expected"},
		{"port x9", "not a port number or a known service name"},
		{"port 70000", "not a port number"},
		{"host 10.0.0", "not an IPv4 or IPv6 address"},
		{"host kafka-1", "does not look up names"},
		{"net 10.0.0.1/8", "non-network bits set (did you mean 10.0.0.0/8?)"},
		{"net 10.0.0.0 mask 255.0.255.0", "not a contiguous mask"},
		{"tcp host 10.0.0.1", "'tcp' modifier applied to host"},
		{"icmp port 1", "'icmp' modifier applied to port"},
		{"ip host fd00::1", "not an IPv4 address"},
		{"ip6 net 10.0.0.0/8", "not an IPv6 address"},
		{"(port 1", `missing ")"`},
		{"port 1)", `unexpected ")"`},
		{"port 1 and", `expression ends after "and"`},
		{"and port 1", `unexpected "and"`},
		{"not", "expression ends where a primitive was expected"},
		{"vlan 5000", "VLAN id is a number from 0 to 4095"},
		{"portrange 9092", "expected LOW-HIGH"},
		{"tcp[13] & 2 != 0", "not supported"},
		{"port 1 & port 2", `unexpected "&"`},
		{"tcp 9092", "expected host, net, port or portrange"},
		{"port 1 port 2", `unexpected "port" after a complete expression`},
		{"bogus", "not an IPv4 or IPv6 address"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			_, err := ParseFilter(tc.expr)
			if err == nil {
				t.Fatalf("no error; want one containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q; want one line containing %q", err, tc.want)
			}
		})
	}
}

func TestFilterMatchAllocations(t *testing.T) {
	f, _ := ParseFilter("host 10.0.0.2 and (port 9092 or portrange 8081-8082)")
	p := &Packet{Link: LinkEthernet, Data: testPackets(t)[0].frame}
	if !f.Match(p) {
		t.Fatal("no match")
	}
	if n := testing.AllocsPerRun(200, func() { f.Match(p) }); n != 0 {
		t.Errorf("Match allocates %.1f times per packet; want 0", n)
	}
}

func BenchmarkFilterMatch(b *testing.B) {
	f, _ := ParseFilter("port 9092 or port 8081")
	t := &testing.T{}
	p := &Packet{Link: LinkEthernet, Data: testPackets(t)[0].frame}
	b.ReportAllocs()
	b.SetBytes(int64(len(p.Data)))
	for b.Loop() {
		f.Match(p)
	}
}

// FuzzFilter parses arbitrary expressions. Besides not panicking: an error
// is one line; an expression that parses compiles for every link type (or
// says it is too long for the kernel), the program assembles for the kernel
// and runs on the VM over the test packets, and matching is deterministic.
func FuzzFilter(f *testing.F) {
	for _, tc := range filterCases {
		f.Add(tc.expr)
	}
	for _, s := range []string{"port 9092 or 8081", "not (a", "vlan 1 and vlan 2 and ip6 net ::/3", "src and dst net 10 mask 255.0.0.0", "!((tcp))&&udp||ip"} {
		f.Add(s)
	}
	pk := testPackets(&testing.T{})
	f.Fuzz(func(t *testing.T, expr string) {
		flt, err := ParseFilter(expr)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of %q is not one line: %q", expr, err)
			}
			return
		}
		for _, lt := range []LinkType{LinkEthernet, LinkSLL, LinkSLL2, LinkRaw, LinkNull, LinkLoop} {
			prog, err := flt.Program(lt, 65535)
			if err != nil {
				if !strings.Contains(err.Error(), "instructions") {
					t.Fatalf("%q on %s: %v", expr, lt, err)
				}
				return
			}
			vm, err := bpf.NewVM(prog)
			if err != nil {
				t.Fatalf("%q on %s: the VM refuses the program: %v", expr, lt, err)
			}
			for _, p := range pk {
				b, ok := asLink(p.frame, lt)
				if !ok {
					continue
				}
				n1, err1 := vm.Run(b)
				n2, _ := vm.Run(b)
				if err1 != nil || n1 != n2 || (n1 != 0 && n1 != 65535) {
					t.Fatalf("%q on %s, %s: run gives %d, %d, %v", expr, lt, p.name, n1, n2, err1)
				}
			}
		}
		for _, cooked := range []bool{false, true} {
			prog, err := kernelProgram(flt, cooked, LinkEthernet, 65535)
			if err != nil {
				if !strings.Contains(err.Error(), "instructions") {
					t.Fatalf("%q kernel cooked=%v: %v", expr, cooked, err)
				}
				continue
			}
			if _, err := bpf.Assemble(prog); err != nil {
				t.Fatalf("%q kernel cooked=%v: %v", expr, cooked, err)
			}
		}
	})
}
