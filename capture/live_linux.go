package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Live is a live capture on an AF_PACKET socket with a TPACKET_V3 receive
// ring, in pure Go (no libpcap). A named interface of Ethernet type
// (loopback included) gives Ethernet frames, one without a link layer (tun)
// raw IP; "any" and other types give Linux cooked SLL2 frames like
// tcpdump -i any. VLAN tags the kernel took out of the frame are put back,
// as libpcap does, so -w files hold what tcpdump would write.
//
// One goroutine calls Next; Stats may be called from any.
type Live struct {
	Name    string     // interface name ("any" for all)
	Format  string     // for the report: "live AF_PACKET"
	Links   []LinkType // the one link type of the packets
	Snaplen int

	fd      int
	cooked  bool
	ifindex int
	loop    map[int32]bool // loopback ifindexes: their outgoing copies are skipped
	timeout int            // ms

	ring      []byte
	blockSize int
	nblocks   int
	cur       int  // current block
	inBlock   bool // cur is ours (TP_STATUS_USER) and not yet released
	left      int  // packets left in cur
	off       int  // offset of the next packet in cur
	n         uint64
	scratch   []byte

	mu    sync.Mutex
	stats LiveStats
}

// Sizes of the kernel structures the ring holds (linux/if_packet.h).
const (
	tpHdrLen    = 48 // TPACKET_ALIGN(sizeof(struct tpacket3_hdr))
	sllOff      = tpHdrLen
	sllEnd      = sllOff + 20 // sizeof(struct sockaddr_ll)
	vlanTagLen  = 4
	tpReserve   = sll2HdrLen + vlanTagLen
	blockStatus = 8
	blockNum    = 12
	blockFirst  = 16

	arphrdEther    = 1
	arphrdLoopback = 772
	arphrdRawIP    = 519
	arphrdNone     = 0xfffe
)

// OpenLive opens a live capture. Without CAP_NET_RAW the error wraps
// ErrPermission; an unknown interface wraps ErrUnusable.
func OpenLive(cfg LiveConfig) (*Live, error) {
	cfg.defaults()
	idx, name, err := lookupInterface(cfg.Interface)
	if err != nil {
		return nil, err
	}
	l := &Live{Name: name, Format: "live AF_PACKET", Snaplen: cfg.Snaplen, ifindex: idx, timeout: int(cfg.Timeout / time.Millisecond)}
	link := LinkSLL2
	l.cooked = true
	if idx != 0 {
		switch arphrd(name) {
		case arphrdEther, arphrdLoopback:
			link, l.cooked = LinkEthernet, false
		case arphrdNone, arphrdRawIP:
			link, l.cooked = LinkRaw, false
		}
	}
	l.Links = []LinkType{link}
	l.loop = loopbacks()

	typ := unix.SOCK_RAW
	if l.cooked {
		typ = unix.SOCK_DGRAM
	}
	// Protocol 0: nothing is received until bind, so the filter is in
	// place before the first packet.
	l.fd, err = unix.Socket(unix.AF_PACKET, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("%w: capturing on %s needs the CAP_NET_RAW privilege", ErrPermission, name)
		}
		return nil, fmt.Errorf("%s: packet socket: %w", name, err)
	}
	if err := l.setup(cfg, link); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Live) setup(cfg LiveConfig, link LinkType) error {
	fd := l.fd
	wrap := func(what string, err error) error {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return fmt.Errorf("%w: capturing on %s needs the CAP_NET_RAW privilege (%s)", ErrPermission, l.Name, what)
		}
		return fmt.Errorf("%s: %s: %w", l.Name, what, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return wrap("TPACKET_V3", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_RESERVE, tpReserve); err != nil {
		return wrap("PACKET_RESERVE", err)
	}
	prog, err := kernelProgram(cfg.Filter, l.cooked, link, l.Snaplen)
	if err != nil {
		return err
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("filter: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(raw)), Filter: (*unix.SockFilter)(unsafe.Pointer(&raw[0]))}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); err != nil {
		return wrap("attaching the filter", err)
	}
	l.blockSize = 1 << 20
	for l.blockSize < l.Snaplen+tpHdrLen+128+tpReserve {
		l.blockSize <<= 1
	}
	l.nblocks = max(2, cfg.BufferSize/l.blockSize)
	const frame = 1 << 11
	req := unix.TpacketReq3{
		Block_size:     uint32(l.blockSize),
		Block_nr:       uint32(l.nblocks),
		Frame_size:     frame,
		Frame_nr:       uint32(l.blockSize / frame * l.nblocks),
		Retire_blk_tov: 50, // ms: a block with few packets is handed over after this
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return wrap(fmt.Sprintf("ring of %d blocks of %d bytes", l.nblocks, l.blockSize), err)
	}
	l.ring, err = unix.Mmap(fd, 0, l.blockSize*l.nblocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return wrap("mapping the ring", err)
	}
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: l.ifindex}
	if err := unix.Bind(fd, sa); err != nil {
		if errors.Is(err, unix.ENETDOWN) {
			return fmt.Errorf("%w: %s is down (ip link set %s up)", ErrUnusable, l.Name, l.Name)
		}
		return wrap("bind", err)
	}
	if cfg.Promiscuous && l.ifindex != 0 {
		mreq := unix.PacketMreq{Ifindex: int32(l.ifindex), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			return wrap("promiscuous mode", err)
		}
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// arphrd returns the ARPHRD_ type of an interface (-1 if unknown).
func arphrd(name string) int {
	if b, err := os.ReadFile("/sys/class/net/" + name + "/type"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return -1
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFHWADDR, ifr); err != nil {
		return -1
	}
	return int(ifr.Uint16())
}

func loopbacks() map[int32]bool {
	m := map[int32]bool{}
	ifs, _ := net.Interfaces()
	for _, ni := range ifs {
		if ni.Flags&net.FlagLoopback != 0 {
			m[int32(ni.Index)] = true
		}
	}
	return m
}

func (l *Live) u32(off int) uint32 { return binary.NativeEndian.Uint32(l.ring[off:]) }
func (l *Live) u16(off int) uint16 { return binary.NativeEndian.Uint16(l.ring[off:]) }

func (l *Live) status(block int) *uint32 {
	return (*uint32)(unsafe.Pointer(&l.ring[block*l.blockSize+blockStatus]))
}

// Next returns the next packet; p.Data points into the ring and is valid
// until the next call. It returns ErrIdle after the configured timeout
// without a packet, and an error if the interface went away.
func (l *Live) Next(p *Packet) error {
	for {
		if l.left > 0 {
			if l.packet(p) {
				return nil
			}
			continue
		}
		if l.inBlock {
			// Hand the block back to the kernel.
			atomic.StoreUint32(l.status(l.cur), unix.TP_STATUS_KERNEL)
			l.inBlock = false
			l.cur = (l.cur + 1) % l.nblocks
		}
		if atomic.LoadUint32(l.status(l.cur))&unix.TP_STATUS_USER != 0 {
			base := l.cur * l.blockSize
			l.inBlock = true
			l.left = int(l.u32(base + blockNum))
			l.off = base + int(l.u32(base+blockFirst))
			continue
		}
		fds := []unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN | unix.POLLERR}}
		n, err := unix.Poll(fds, l.timeout)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("%s: poll: %w", l.Name, err)
		}
		if n == 0 {
			return ErrIdle
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			if e, _ := unix.GetsockoptInt(l.fd, unix.SOL_SOCKET, unix.SO_ERROR); e != 0 {
				if unix.Errno(e) == unix.ENETDOWN {
					return fmt.Errorf("%s: the interface went down", l.Name)
				}
				return fmt.Errorf("%s: %w", l.Name, unix.Errno(e))
			}
		}
	}
}

// packet reads the packet at l.off into p and moves on; false means the
// packet was skipped (the outgoing copy of a loopback packet).
func (l *Live) packet(p *Packet) bool {
	h := l.off
	next := int(l.u32(h))
	l.left--
	if next == 0 {
		l.left = 0
	} else {
		l.off += next
	}
	sec, nsec := l.u32(h+4), l.u32(h+8)
	snap, wire := int(l.u32(h+12)), int(l.u32(h+16))
	status := l.u32(h + 20)
	mac := h + int(l.u16(h+24))
	sll := l.ring[h+sllOff : h+sllEnd]
	ifindex := int32(binary.NativeEndian.Uint32(sll[4:]))
	pkttype := sll[10]
	if pkttype == unix.PACKET_OUTGOING && l.loop[ifindex] {
		// Loopback traffic is seen leaving and arriving: keep one.
		return false
	}
	if blockEnd := (h/l.blockSize + 1) * l.blockSize; mac+snap > blockEnd {
		return false // not from a sane kernel
	}
	var tci, tpid uint16
	tagged := status&unix.TP_STATUS_VLAN_VALID != 0 || l.u32(h+32) != 0
	if tagged {
		tci = uint16(l.u32(h + 32))
		tpid = etherTypeVLAN
		if status&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
			tpid = l.u16(h + 36)
		}
	}
	// hl bytes are written in front of the packet: an SLL2 header, or
	// the VLAN tag the kernel took out. The ring has room for them
	// (PACKET_RESERVE); if not, the packet is copied.
	hl := 0
	switch {
	case l.cooked:
		hl = sll2HdrLen
		if tagged {
			hl += vlanTagLen
		}
	case tagged && l.Links[0] == LinkEthernet && snap >= 12:
		hl = vlanTagLen
	}
	var b []byte // the packet as delivered: hl + snap bytes
	if start := mac - hl; start >= h+sllEnd {
		b = l.ring[start : mac+snap]
	} else {
		if cap(l.scratch) < hl+snap {
			l.scratch = make([]byte, hl+snap)
		}
		b = l.scratch[:hl+snap]
		copy(b[hl:], l.ring[mac:mac+snap])
	}
	switch {
	case l.cooked:
		// SLL2: protocol, reserved, ifindex, ARPHRD type, packet type,
		// address length, address (8); then the tag if there was one.
		proto := binary.BigEndian.Uint16(sll[2:])
		if tagged {
			binary.BigEndian.PutUint16(b[20:], tci)
			binary.BigEndian.PutUint16(b[22:], proto)
			proto = tpid
		}
		binary.BigEndian.PutUint16(b[0:], proto)
		binary.BigEndian.PutUint16(b[2:], 0)
		binary.BigEndian.PutUint32(b[4:], uint32(ifindex))
		binary.BigEndian.PutUint16(b[8:], binary.NativeEndian.Uint16(sll[8:]))
		b[10] = pkttype
		b[11] = sll[11]
		copy(b[12:20], sll[12:20])
	case hl == vlanTagLen:
		// Ethernet: the MAC addresses move 4 bytes up, the tag follows.
		copy(b[0:12], b[4:16])
		binary.BigEndian.PutUint16(b[12:], tpid)
		binary.BigEndian.PutUint16(b[14:], tci)
	}
	l.n++
	p.N = l.n
	p.File = 0
	p.Offset = 0
	p.Time = time.Unix(int64(sec), int64(nsec)).UTC()
	p.Len = wire + hl
	p.Link = l.Links[0]
	p.Data = b
	return true
}

// Stats returns the kernel's counters since the capture opened.
func (l *Live) Stats() (LiveStats, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return l.stats, nil
	}
	// Reading the counters resets them: keep the sum.
	st, err := unix.GetsockoptTpacketStatsV3(l.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return l.stats, fmt.Errorf("%s: reading drop counts: %w", l.Name, err)
	}
	l.stats.Received += uint64(st.Packets)
	l.stats.Dropped += uint64(st.Drops)
	return l.stats, nil
}

// Close reads the final counters and releases the ring and the socket.
// Call it once Next is no longer running.
func (l *Live) Close() error {
	if l.fd < 0 {
		return nil
	}
	l.Stats()
	if l.ring != nil {
		unix.Munmap(l.ring)
		l.ring = nil
	}
	l.mu.Lock()
	err := unix.Close(l.fd)
	l.fd = -1
	l.mu.Unlock()
	return err
}
