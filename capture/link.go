package capture

import (
	"encoding/binary"
	"fmt"
)

// LinkType is a pcap LINKTYPE_ value. It is 16 bits wide, unlike gopacket's
// uint8 LinkType, so that SLL2 (276) fits.
type LinkType uint16

// Link types kfsniff decodes.
const (
	LinkNull     LinkType = 0   // BSD loopback, family in host byte order
	LinkEthernet LinkType = 1   // Ethernet II, with 802.1Q / 802.1ad tags
	LinkRawAlt   LinkType = 12  // raw IP (some BSDs)
	LinkRaw      LinkType = 101 // raw IPv4 or IPv6
	LinkLoop     LinkType = 108 // OpenBSD loopback, family in network order
	LinkSLL      LinkType = 113 // Linux cooked capture v1
	LinkIPv4     LinkType = 228
	LinkIPv6     LinkType = 229
	LinkSLL2     LinkType = 276 // Linux cooked capture v2
)

// Supported reports whether kfsniff decodes this link type.
func (l LinkType) Supported() bool {
	switch l {
	case LinkNull, LinkEthernet, LinkRawAlt, LinkRaw, LinkLoop, LinkSLL, LinkIPv4, LinkIPv6, LinkSLL2:
		return true
	}
	return false
}

// linkNames are the link types' names, as tcpdump says them.
var linkNames = map[LinkType]string{
	LinkNull:     "NULL",
	LinkEthernet: "EN10MB",
	LinkRaw:      "RAW",
	LinkRawAlt:   "RAW",
	LinkLoop:     "LOOP",
	LinkSLL:      "LINUX_SLL",
	LinkSLL2:     "LINUX_SLL2",
	LinkIPv4:     "IPV4",
	LinkIPv6:     "IPV6",
	105:          "IEEE802_11",
	127:          "IEEE802_11_RADIOTAP",
	147:          "USER0",
}

func (l LinkType) String() string {
	if s, ok := linkNames[l]; ok {
		return s
	}
	return fmt.Sprintf("DLT_%d", int(l))
}

// EtherTypes of the network layers kfsniff follows.
const (
	EtherTypeIPv4  = 0x0800
	EtherTypeIPv6  = 0x86dd
	etherTypeVLAN  = 0x8100
	etherTypeQinQ  = 0x88a8
	etherTypeQinQ2 = 0x9100
)

// Network strips the link layer from data and returns the EtherType of what
// follows and its bytes. ok is false for frames that carry no IP (ARP, LLC,
// truncated headers); vlans counts the 802.1Q/802.1ad tags removed.
func (l LinkType) Network(data []byte) (etherType uint16, payload []byte, vlans int, ok bool) {
	switch l {
	case LinkEthernet:
		if len(data) < 14 {
			return 0, nil, 0, false
		}
		et := binary.BigEndian.Uint16(data[12:])
		data = data[14:]
		for (et == etherTypeVLAN || et == etherTypeQinQ || et == etherTypeQinQ2) && len(data) >= 4 && vlans < 8 {
			et = binary.BigEndian.Uint16(data[2:])
			data = data[4:]
			vlans++
		}
		return et, data, vlans, et == EtherTypeIPv4 || et == EtherTypeIPv6
	case LinkSLL:
		if len(data) < 16 {
			return 0, nil, 0, false
		}
		et := binary.BigEndian.Uint16(data[14:])
		return et, data[16:], 0, et == EtherTypeIPv4 || et == EtherTypeIPv6
	case LinkSLL2:
		if len(data) < 20 {
			return 0, nil, 0, false
		}
		et := binary.BigEndian.Uint16(data)
		return et, data[20:], 0, et == EtherTypeIPv4 || et == EtherTypeIPv6
	case LinkNull, LinkLoop:
		if len(data) < 4 {
			return 0, nil, 0, false
		}
		// DLT_NULL's family is in the capturing host's byte order; accept
		// either. AF_INET is 2 everywhere; AF_INET6 is 10 (Linux), 24
		// (NetBSD, OpenBSD), 28 (FreeBSD), 30 (macOS).
		fam := binary.BigEndian.Uint32(data)
		if l == LinkNull && fam > 0xffff {
			fam = binary.LittleEndian.Uint32(data)
		}
		switch fam {
		case 2:
			return EtherTypeIPv4, data[4:], 0, true
		case 10, 24, 28, 30:
			return EtherTypeIPv6, data[4:], 0, true
		}
		return 0, nil, 0, false
	case LinkRaw, LinkRawAlt, LinkIPv4, LinkIPv6:
		if len(data) < 1 {
			return 0, nil, 0, false
		}
		switch data[0] >> 4 {
		case 4:
			return EtherTypeIPv4, data, 0, true
		case 6:
			return EtherTypeIPv6, data, 0, true
		}
	}
	return 0, nil, 0, false
}
