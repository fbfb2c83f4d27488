package capture

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

const (
	ngSHB = 0x0a0d0d0a // section header block
	ngIDB = 0x00000001 // interface description block
	ngPB  = 0x00000002 // obsolete packet block
	ngSPB = 0x00000003 // simple packet block
	ngEPB = 0x00000006 // enhanced packet block
	ngDSB = 0x0000000A // decryption secrets block

	ngMaxBlock = maxRecord + 1<<16
	ngMaxIface = 4096
)

type ngIface struct {
	link    LinkType
	snaplen uint32
	// units per second of timestamps, and the offset in seconds.
	tsUnits  uint64
	tsOffset int64
}

type ngState struct {
	order  binary.ByteOrder
	ifaces []ngIface
}

func (f *File) openNg() error {
	f.ng = &ngState{}
	f.Format = "pcapng"
	// Read blocks until the first interface is known, so that the link
	// type can be checked up front as for classic pcap.
	if err := f.ngBlock(nil); err != nil {
		return fmt.Errorf("bad pcapng section header: %v", err)
	}
	return nil
}

// ngBlock reads blocks up to the next packet block, handling the others,
// and fills p from it; when p is nil (openNg), it returns once an
// interface is known.
func (f *File) ngBlock(p *Packet) error {
	s := f.ng
	for {
		start := f.off
		// Fields are read out of a view before the next take, which
		// may move it.
		hdr, err := f.take(8)
		if err != nil {
			return err
		}
		typ := binary.BigEndian.Uint32(hdr)
		if typ == ngSHB {
			rawLen := [4]byte(hdr[4:])
			// The byte-order magic follows the length; read it first.
			b, err := f.takeAll(4)
			if err != nil {
				return err
			}
			bom := [4]byte(b)
			switch binary.BigEndian.Uint32(bom[:]) {
			case 0x1a2b3c4d:
				s.order = binary.BigEndian
			case 0x4d3c2b1a:
				s.order = binary.LittleEndian
			default:
				return fmt.Errorf("section header at byte %d has bad byte-order magic % x", start, bom)
			}
			length := s.order.Uint32(rawLen[:])
			if length < 28 || length%4 != 0 || length > ngMaxBlock {
				return fmt.Errorf("section header at byte %d has bad length %d", start, length)
			}
			s.ifaces = s.ifaces[:0]
			if err := f.skip(int64(length) - 12); err != nil {
				return err
			}
			continue
		}
		if s.order == nil {
			return fmt.Errorf("block at byte %d before any section header", start)
		}
		typ = s.order.Uint32(hdr)
		length := s.order.Uint32(hdr[4:])
		if length < 12 || length%4 != 0 || length > ngMaxBlock {
			return fmt.Errorf("block type %#x at byte %d has bad length %d", typ, start, length)
		}
		body, err := f.takeAll(int(length) - 8)
		if err != nil {
			return err
		}
		body = body[:len(body)-4] // trailing length copy
		switch typ {
		case ngIDB:
			if err := f.ngInterface(body); err != nil {
				return fmt.Errorf("interface block at byte %d: %v", start, err)
			}
			if p == nil {
				return nil
			}
		case ngEPB, ngPB:
			if len(body) < 20 {
				return fmt.Errorf("packet block at byte %d too short", start)
			}
			var idx uint32
			if typ == ngEPB {
				idx = s.order.Uint32(body)
			} else {
				idx = uint32(s.order.Uint16(body))
			}
			if int(idx) >= len(s.ifaces) {
				return fmt.Errorf("packet block at byte %d names interface %d of %d", start, idx, len(s.ifaces))
			}
			ifc := &s.ifaces[idx]
			ts := uint64(s.order.Uint32(body[4:]))<<32 | uint64(s.order.Uint32(body[8:]))
			caplen := s.order.Uint32(body[12:])
			wire := s.order.Uint32(body[16:])
			if uint64(caplen) > uint64(len(body)-20) {
				return fmt.Errorf("packet block at byte %d claims %d captured bytes in a %d-byte block", start, caplen, length)
			}
			if p == nil {
				return fmt.Errorf("packet block at byte %d before any interface block", start)
			}
			p.Data = body[20 : 20+caplen]
			p.Len = int(max(wire, caplen))
			p.Link = ifc.link
			p.Time = ngTime(ifc, ts)
			p.Offset = start
			return nil
		case ngSPB:
			if len(s.ifaces) == 0 || len(body) < 4 {
				return fmt.Errorf("simple packet block at byte %d without interface", start)
			}
			if p == nil {
				return fmt.Errorf("packet block at byte %d before any interface block", start)
			}
			wire := s.order.Uint32(body)
			data := body[4:]
			if uint32(len(data)) > wire {
				data = data[:wire]
			}
			p.Data = data
			p.Len = int(max(wire, uint32(len(data))))
			p.Link = s.ifaces[0].link
			p.Time = time.Time{}
			p.Offset = start
			return nil
		case ngDSB:
			f.ngSecrets(body, start)
		default:
			// Statistics, name resolution, custom and unknown blocks
			// carry no packets: skip them, as the format asks.
		}
	}
}

// SecretsTLSKeyLog is the secrets type of a Decryption Secrets Block
// holding an NSS key log ("TLSK").
const SecretsTLSKeyLog = 0x544c534b

// MaxSecrets bounds the bytes of decryption secrets kept from a file.
const MaxSecrets = 16 << 20

// Secret is the content of a pcapng Decryption Secrets Block.
type Secret struct {
	Type uint32 // SecretsTLSKeyLog, ...
	Data []byte
	// Offset is the block's place in the file.
	Offset int64
}

// ngSecrets keeps a Decryption Secrets Block's secrets (copied), for
// OnSecret or Secrets; one that does not hold together is skipped.
func (f *File) ngSecrets(body []byte, start int64) {
	s := f.ng
	if len(body) < 8 {
		return
	}
	typ, n := s.order.Uint32(body), s.order.Uint32(body[4:])
	if uint64(n) > uint64(len(body)-8) || f.secretBytes+int(n) > MaxSecrets {
		if f.SecretsDropped == 0 {
			f.SecretsDroppedAt = start
		}
		f.SecretsDropped++
		return
	}
	f.secretBytes += int(n)
	sec := Secret{Type: typ, Data: append([]byte(nil), body[8:8+n]...), Offset: start}
	if f.OnSecret != nil {
		f.OnSecret(sec)
		return
	}
	f.secrets = append(f.secrets, sec)
}

// Secrets returns the Decryption Secrets Blocks read so far that no
// OnSecret took (those before the first packet are read by Open), until
// TakeSecrets.
func (f *File) Secrets() []Secret { return f.secrets }

// TakeSecrets forgets the blocks Secrets returns (they were used).
func (f *File) TakeSecrets() { f.secrets = nil }

func (f *File) ngInterface(body []byte) error {
	s := f.ng
	if len(body) < 8 {
		return fmt.Errorf("too short")
	}
	if len(s.ifaces) >= ngMaxIface {
		return fmt.Errorf("more than %d interfaces", ngMaxIface)
	}
	ifc := ngIface{
		link:    LinkType(s.order.Uint16(body)),
		snaplen: s.order.Uint32(body[4:]),
		tsUnits: 1e6,
	}
	opts := body[8:]
	for len(opts) >= 4 {
		code := s.order.Uint16(opts)
		n := int(s.order.Uint16(opts[2:]))
		opts = opts[4:]
		if n > len(opts) {
			break
		}
		val := opts[:n]
		switch {
		case code == 0:
			opts = nil
		case code == 9 && n == 1: // if_tsresol
			r := val[0]
			units := uint64(1)
			for i := 0; i < int(r&0x7f) && i < 19; i++ {
				if r&0x80 != 0 {
					units *= 2
				} else {
					units *= 10
				}
			}
			ifc.tsUnits = units
		case code == 14 && n == 8: // if_tsoffset
			ifc.tsOffset = int64(s.order.Uint64(val))
		}
		if opts == nil {
			break
		}
		opts = opts[(n+3)&^3:]
	}
	s.ifaces = append(s.ifaces, ifc)
	if len(f.Links) == 0 || !slices.Contains(f.Links, ifc.link) {
		f.Links = append(f.Links, ifc.link)
	}
	return nil
}

func ngTime(ifc *ngIface, ts uint64) time.Time {
	sec := ts / ifc.tsUnits
	frac := ts % ifc.tsUnits
	nsec := frac * 1e9 / ifc.tsUnits
	if ifc.tsUnits > 1e9 {
		nsec = frac / (ifc.tsUnits / 1e9)
	}
	return time.Unix(int64(sec)+ifc.tsOffset, int64(nsec)).UTC()
}
