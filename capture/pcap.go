package capture

import (
	"encoding/binary"
	"fmt"
	"time"
)

type pcapState struct {
	order binary.ByteOrder
	nano  bool
	link  LinkType
}

func (f *File) openPcap() error {
	h, err := f.take(24)
	if err != nil {
		return fmt.Errorf("pcap header cut short")
	}
	s := &f.pcap
	switch binary.BigEndian.Uint32(h[:]) {
	case 0xa1b2c3d4:
		s.order = binary.BigEndian
	case 0xd4c3b2a1:
		s.order = binary.LittleEndian
	case 0xa1b23c4d:
		s.order, s.nano = binary.BigEndian, true
	case 0x4d3cb2a1:
		s.order, s.nano = binary.LittleEndian, true
	}
	// The low 16 bits are the link type; the upper bits carry FCS flags.
	s.link = LinkType(s.order.Uint32(h[20:]) & 0xffff)
	f.Links = []LinkType{s.link}
	f.Format = "pcap"
	if s.nano {
		f.Format = "pcap (nanosecond)"
	}
	return nil
}

func (f *File) nextPcap(p *Packet) error {
	s := &f.pcap
	// The header is read before the record's bytes, which may move it.
	hdr, err := f.take(16)
	if err != nil {
		return err
	}
	sec := s.order.Uint32(hdr[0:])
	frac := s.order.Uint32(hdr[4:])
	caplen := s.order.Uint32(hdr[8:])
	wire := s.order.Uint32(hdr[12:])
	if caplen > maxRecord {
		return fmt.Errorf("record claims %d captured bytes (more than %d): corrupt capture", caplen, maxRecord)
	}
	p.Offset = f.off - 16
	if p.Data, err = f.takeAll(int(caplen)); err != nil {
		return err
	}
	nsec := int64(frac)
	if !s.nano {
		nsec *= 1000
	}
	p.Time = time.Unix(int64(sec), nsec).UTC()
	p.Len = int(max(wire, caplen))
	p.Link = s.link
	return nil
}
