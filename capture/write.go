package capture

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Sink receives packets as they are analysed: the -w writer, or a front
// end keeping the capture so far. WritePacket must not keep p.Data.
type Sink interface {
	WritePacket(p *Packet) error
}

// Writer writes packets to a pcap file (nanosecond timestamps) or, when
// created for a name ending in .pcapng, to pcapng (one interface per link
// type). Both read back with File and with tcpdump or Wireshark.
type Writer struct {
	Name    string
	bw      *bufio.Writer
	closer  io.Closer
	ng      bool
	snaplen uint32
	ifname  string
	ifaces  map[LinkType]uint32 // pcapng interface ids
	link    LinkType            // pcap: the file's one link type
	hdr     [32]byte            // a packet's record header
	tail    [8]byte             // a pcapng packet's padding and trailing length
	n       uint64
	closed  bool
}

// Create creates name and writes the file header: pcapng when name ends in
// .pcapng, pcap otherwise. link is the link type of the packets to come;
// ifname names the interface in pcapng ("" for none).
//
// secrets (pcapng only) are written as Decryption Secrets Blocks right
// after the section header, before any interface, where editcap
// --inject-secrets puts them and where Open reads them.
func Create(name string, link LinkType, snaplen int, ifname string, secrets ...Secret) (*Writer, error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	w, err := NewWriter(f, strings.HasSuffix(strings.ToLower(name), ".pcapng"), link, snaplen, ifname, secrets...)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	w.Name, w.closer = name, f
	return w, nil
}

// NewWriter writes a capture to out: pcapng if ng, pcap otherwise.
func NewWriter(out io.Writer, ng bool, link LinkType, snaplen int, ifname string, secrets ...Secret) (*Writer, error) {
	return newWriter(out, ng, link, snaplen, ifname, "", secrets)
}

// NewWriterComment writes a pcapng capture to out whose section header
// carries comment (opt_comment: what the file holds, shown by capinfos
// and Wireshark's capture file properties).
func NewWriterComment(out io.Writer, link LinkType, snaplen int, ifname, comment string, secrets ...Secret) (*Writer, error) {
	return newWriter(out, true, link, snaplen, ifname, comment, secrets)
}

func newWriter(out io.Writer, ng bool, link LinkType, snaplen int, ifname, comment string, secrets []Secret) (*Writer, error) {
	if snaplen <= 0 || snaplen > maxRecord {
		snaplen = DefaultSnaplen
	}
	w := &Writer{bw: bufio.NewWriterSize(out, 1<<16), ng: ng, snaplen: uint32(snaplen), ifname: ifname, link: link}
	if !ng {
		h := w.hdr[:24]
		le := binary.LittleEndian
		le.PutUint32(h[0:], 0xa1b23c4d) // nanosecond pcap
		le.PutUint16(h[4:], 2)
		le.PutUint16(h[6:], 4)
		le.PutUint32(h[8:], 0)
		le.PutUint32(h[12:], 0)
		le.PutUint32(h[16:], w.snaplen)
		le.PutUint32(h[20:], uint32(link))
		_, err := w.bw.Write(h)
		return w, err
	}
	w.ifaces = make(map[LinkType]uint32)
	// Section header block: section length unknown (-1), the comment
	// if any.
	var opts []byte
	if comment != "" {
		opts = appendOpt(opts, 1, []byte(comment[:min(len(comment), 0xfff0)])) // opt_comment
		opts = appendOpt(opts, 0, nil)                                         // opt_endofopt
	}
	n := uint32(28 + len(opts))
	shb := binary.LittleEndian.AppendUint32(nil, ngSHB)
	shb = binary.LittleEndian.AppendUint32(shb, n)
	shb = append(shb, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	shb = append(shb, opts...)
	shb = binary.LittleEndian.AppendUint32(shb, n)
	if _, err := w.bw.Write(shb); err != nil {
		return w, err
	}
	for _, sec := range secrets {
		if err := w.WriteSecrets(sec.Type, sec.Data); err != nil {
			return w, err
		}
	}
	_, err := w.iface(link)
	return w, err
}

// DefaultSnaplen is tcpdump's default snapshot length.
const DefaultSnaplen = 262144

// iface returns the pcapng interface id for link, writing its interface
// description block the first time.
func (w *Writer) iface(link LinkType) (uint32, error) {
	if id, ok := w.ifaces[link]; ok {
		return id, nil
	}
	id := uint32(len(w.ifaces))
	w.ifaces[link] = id
	le := binary.LittleEndian
	var opts []byte
	if w.ifname != "" {
		opts = appendOpt(opts, 2, []byte(w.ifname)) // if_name
	}
	opts = appendOpt(opts, 9, []byte{9}) // if_tsresol: nanoseconds
	opts = appendOpt(opts, 0, nil)       // opt_endofopt
	n := 20 + len(opts)
	b := make([]byte, 0, n)
	b = le.AppendUint32(b, ngIDB)
	b = le.AppendUint32(b, uint32(n))
	b = le.AppendUint16(b, uint16(link))
	b = le.AppendUint16(b, 0)
	b = le.AppendUint32(b, w.snaplen)
	b = append(b, opts...)
	b = le.AppendUint32(b, uint32(n))
	_, err := w.bw.Write(b)
	return id, err
}

// appendOpt appends a pcapng option, its value padded to 4 bytes.
func appendOpt(opts []byte, code uint16, val []byte) []byte {
	opts = binary.LittleEndian.AppendUint16(opts, code)
	opts = binary.LittleEndian.AppendUint16(opts, uint16(len(val)))
	opts = append(opts, val...)
	return append(opts, make([]byte, (4-len(val)%4)%4)...)
}

var errLinkMix = errors.New("a pcap file holds one link type; write .pcapng to keep several")

// WritePacket appends p (its captured bytes, wire length and time).
func (w *Writer) WritePacket(p *Packet) error {
	le := binary.LittleEndian
	data := p.Data
	if len(data) > int(w.snaplen) {
		data = data[:w.snaplen]
	}
	wire := uint32(max(p.Len, len(p.Data)))
	ns := p.Time.UnixNano()
	var h, tail []byte
	if !w.ng {
		if p.Link != w.link {
			return errLinkMix
		}
		h = w.hdr[:16]
		le.PutUint32(h[0:], uint32(ns/1e9))
		le.PutUint32(h[4:], uint32(ns%1e9))
		le.PutUint32(h[8:], uint32(len(data)))
		le.PutUint32(h[12:], wire)
	} else {
		id, err := w.iface(p.Link)
		if err != nil {
			return err
		}
		pad := (4 - len(data)%4) % 4
		n := uint32(32 + len(data) + pad)
		h = w.hdr[:28]
		le.PutUint32(h[0:], ngEPB)
		le.PutUint32(h[4:], n)
		le.PutUint32(h[8:], id)
		le.PutUint32(h[12:], uint32(uint64(ns)>>32))
		le.PutUint32(h[16:], uint32(uint64(ns)))
		le.PutUint32(h[20:], uint32(len(data)))
		le.PutUint32(h[24:], wire)
		// The padding, then the block's length again.
		tail = w.tail[:pad+4]
		clear(tail[:pad])
		le.PutUint32(tail[pad:], n)
	}
	if _, err := w.bw.Write(h); err != nil {
		return err
	}
	if _, err := w.bw.Write(data); err != nil {
		return err
	}
	if len(tail) > 0 {
		if _, err := w.bw.Write(tail); err != nil {
			return err
		}
	}
	w.n++
	return nil
}

// Packets returns how many packets were written.
func (w *Writer) Packets() uint64 { return w.n }

// Flush writes buffered packets out.
func (w *Writer) Flush() error { return w.bw.Flush() }

// Close flushes and closes the file; later calls do nothing.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.bw.Flush()
	if w.closer != nil {
		if cerr := w.closer.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// WriteSecrets writes a pcapng Decryption Secrets Block of type typ
// (SecretsTLSKeyLog), as editcap --inject-secrets does, so that one file
// carries the packets and the keys to read them: before the packets that
// need it (Create writes those it is given before the first interface).
// A pcap file cannot hold one: an error.
func (w *Writer) WriteSecrets(typ uint32, data []byte) error {
	if !w.ng {
		return errors.New("a pcap file cannot hold decryption secrets; write .pcapng")
	}
	pad := (4 - len(data)%4) % 4
	n := 12 + 8 + len(data) + pad
	b := make([]byte, 0, n)
	b = binary.LittleEndian.AppendUint32(b, ngDSB)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint32(b, typ)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	b = append(b, data...)
	b = append(b, make([]byte, pad)...)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	_, err := w.bw.Write(b)
	return err
}
