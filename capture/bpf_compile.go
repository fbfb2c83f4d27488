package capture

import (
	"cmp"
	"encoding/binary"
	"fmt"

	"golang.org/x/net/bpf"
)

// layout says where a filter finds the network layer of a packet.
type layout struct {
	et     etSource
	etOff  uint32 // etEther: offset of the EtherType
	netOff uint32 // offset of the IP header
	// vlan: the link carries 802.1Q tags; kernelVLAN: the kernel has
	// taken the outermost tag out of the packet (SKF_AD_VLAN_TAG*), as it
	// does for every packet socket.
	vlan, kernelVLAN bool
}

type etSource uint8

const (
	etEther  etSource = iota // 16-bit EtherType at etOff
	etKernel                 // the kernel's skb->protocol (ld proto), for cooked sockets
	etRaw                    // no link layer: the IP version nibble
	etNull                   // BSD loopback family, either byte order
	etLoop                   // OpenBSD loopback family, network order
)

// fileLayout is how packets of link type lt appear in a capture file.
func fileLayout(lt LinkType) (layout, bool) {
	switch lt {
	case LinkEthernet:
		return layout{et: etEther, etOff: 12, netOff: 14, vlan: true}, true
	case LinkSLL:
		return layout{et: etEther, etOff: 14, netOff: 16, vlan: true}, true
	case LinkSLL2:
		return layout{et: etEther, etOff: 0, netOff: 20, vlan: true}, true
	case LinkRaw, LinkRawAlt, LinkIPv4, LinkIPv6:
		return layout{et: etRaw}, true
	case LinkNull:
		return layout{et: etNull, netOff: 4}, true
	case LinkLoop:
		return layout{et: etLoop, netOff: 4}, true
	}
	return layout{}, false
}

// at returns the layout after depth vlan tags.
func (l layout) at(depth int) layout {
	if l.kernelVLAN {
		depth-- // the outermost tag is not in the packet
	}
	if depth <= 0 || !l.vlan {
		return l
	}
	// Each tag is TCI(2) then the inner EtherType(2) where the network
	// layer was.
	l.et = etEther
	l.etOff = l.netOff + 4*uint32(depth-1) + 2
	l.netOff += 4 * uint32(depth)
	return l
}

// kernelProgram is the filter as the kernel sees a packet socket's
// packets: from the link header (raw sockets) or from the network header
// (cooked sockets, the protocol in skb->protocol), the outer VLAN tag out
// of band in both. It accepts snaplen bytes of the packet as delivered,
// including the SLL2 header added to cooked packets.
func kernelProgram(f *Filter, cooked bool, link LinkType, snaplen int) ([]bpf.Instruction, error) {
	snap := uint32(snaplen)
	var lay layout
	if cooked {
		// The SLL2 header is added after the kernel.
		snap = uint32(max(snaplen-sll2HdrLen, 1))
		lay = layout{et: etKernel, vlan: true, kernelVLAN: true}
	} else {
		var ok bool
		if lay, ok = fileLayout(link); !ok {
			return nil, fmt.Errorf("filter: link type %s is not supported", link)
		}
		lay.kernelVLAN = lay.vlan
	}
	if f == nil {
		f = &Filter{}
	}
	return f.compile(lay, snap)
}

// sll2HdrLen is the length of a Linux cooked v2 header.
const sll2HdrLen = 20

// --- the intermediate form: tests combined with and, or, not ---

type cnode interface{ isC() }

type cAnd []cnode
type cOr []cnode
type cNot struct{ x cnode }
type cConst bool

// cTest loads a value, masks it and compares it. With msh set, X is first
// loaded with the IPv4 header length at mshOff and the load is indirect.
type cTest struct {
	load   bpf.Instruction
	msh    bool
	mshOff uint32
	mask   uint32
	cond   bpf.JumpTest
	val    uint32
}

func (cAnd) isC()   {}
func (cOr) isC()    {}
func (cNot) isC()   {}
func (cConst) isC() {}
func (cTest) isC()  {}

func ldAbs(off, size uint32) bpf.Instruction { return bpf.LoadAbsolute{Off: off, Size: int(size)} }

func eq(load bpf.Instruction, v uint32) cTest {
	return cTest{load: load, cond: bpf.JumpEqual, val: v}
}

// family returns the test that the packet is IPv4 (v6 false) or IPv6.
func (l layout) family(v6 bool) cnode {
	et, nibble := uint32(EtherTypeIPv4), uint32(0x40)
	fams := []uint32{2}
	if v6 {
		et, nibble = EtherTypeIPv6, 0x60
		fams = []uint32{10, 24, 28, 30}
	}
	switch l.et {
	case etEther:
		return eq(ldAbs(l.etOff, 2), et)
	case etKernel:
		return eq(bpf.LoadExtension{Num: bpf.ExtProto}, et)
	case etRaw:
		t := eq(ldAbs(l.netOff, 1), nibble)
		t.mask = 0xf0
		return t
	case etNull, etLoop:
		var or cOr
		for _, f := range fams {
			or = append(or, eq(ldAbs(0, 4), f))
			if l.et == etNull {
				var b [4]byte
				binary.LittleEndian.PutUint32(b[:], f)
				or = append(or, eq(ldAbs(0, 4), binary.BigEndian.Uint32(b[:])))
			}
		}
		return or
	}
	return cConst(false)
}

const (
	ipprotoICMP  = 1
	ipprotoTCP   = 6
	ipprotoUDP   = 17
	ipprotoICMP6 = 58
	ipprotoSCTP  = 132
)

// ipProto tests the IP protocol (IPv4) or next header (IPv6) against any of ps.
func (l layout) ipProto(v6 bool, ps ...uint32) cnode {
	off := l.netOff + 9
	if v6 {
		off = l.netOff + 6
	}
	var or cOr
	for _, p := range ps {
		or = append(or, eq(ldAbs(off, 1), p))
	}
	return cAnd{l.family(v6), or}
}

func directed(d dir, src, dst cnode) cnode {
	switch d {
	case dirSrc:
		return src
	case dirDst:
		return dst
	case dirBoth:
		return cAnd{src, dst}
	}
	return cOr{src, dst}
}

// prim returns the tests of one primitive.
func (l layout) prim(p *prim) cnode {
	if p.kind == kindVLAN {
		return l.vlanTest(p)
	}
	l = l.at(p.vlans)
	switch p.kind {
	case kindProto:
		switch p.proto {
		case protoIP:
			return l.family(false)
		case protoIP6:
			return l.family(true)
		case protoTCP:
			return cOr{l.ipProto(false, ipprotoTCP), l.ipProto(true, ipprotoTCP)}
		case protoUDP:
			return cOr{l.ipProto(false, ipprotoUDP), l.ipProto(true, ipprotoUDP)}
		case protoICMP:
			return l.ipProto(false, ipprotoICMP)
		case protoICMP6:
			return l.ipProto(true, ipprotoICMP6)
		}
	case kindHost, kindNet:
		return l.addrTest(p)
	case kindPort, kindPortRange:
		return l.portTest(p)
	}
	return cConst(false)
}

func (l layout) vlanTest(p *prim) cnode {
	if !l.vlan {
		return cConst(false)
	}
	if l.kernelVLAN && p.vlans == 0 {
		present := cTest{load: bpf.LoadExtension{Num: bpf.ExtVLANTagPresent}, cond: bpf.JumpNotEqual, val: 0}
		if p.vlanID < 0 {
			return present
		}
		id := eq(bpf.LoadExtension{Num: bpf.ExtVLANTag}, uint32(p.vlanID))
		id.mask = 0x0fff
		return cAnd{present, id}
	}
	outer := l.at(p.vlans)
	var tag cOr
	for _, tpid := range []uint32{etherTypeVLAN, etherTypeQinQ, etherTypeQinQ2} {
		if outer.et == etKernel {
			tag = append(tag, eq(bpf.LoadExtension{Num: bpf.ExtProto}, tpid))
		} else {
			tag = append(tag, eq(ldAbs(outer.etOff, 2), tpid))
		}
	}
	if p.vlanID < 0 {
		return tag
	}
	id := eq(ldAbs(outer.netOff, 2), uint32(p.vlanID))
	id.mask = 0x0fff
	return cAnd{tag, id}
}

// addrTest tests the source or destination address against the prefix,
// a 32-bit word at a time (one for IPv4, up to four for IPv6).
func (l layout) addrTest(p *prim) cnode {
	a, bits := p.prefix.Addr(), p.prefix.Bits()
	b := a.AsSlice()
	src, dst := l.netOff+12, l.netOff+16
	if a.Is6() {
		src, dst = l.netOff+8, l.netOff+24
	}
	at := func(off uint32) cnode {
		var and cAnd
		for w := 0; w < len(b)/4 && bits > 32*w; w++ {
			mask := ^uint32(0) << (32 - min(bits-32*w, 32))
			t := eq(ldAbs(off+4*uint32(w), 4), binary.BigEndian.Uint32(b[4*w:])&mask)
			if mask != ^uint32(0) {
				t.mask = mask
			}
			and = append(and, t)
		}
		if len(and) == 0 {
			return cConst(true)
		}
		return and
	}
	return cAnd{l.family(a.Is6()), directed(p.dir, at(src), at(dst))}
}

func (l layout) portTest(p *prim) cnode {
	protos := []uint32{ipprotoTCP, ipprotoUDP, ipprotoSCTP}
	switch p.proto {
	case protoTCP:
		protos = []uint32{ipprotoTCP}
	case protoUDP:
		protos = []uint32{ipprotoUDP}
	}
	cmp := func(load bpf.Instruction, msh bool) cnode {
		t := cTest{load: load, msh: msh, mshOff: l.netOff}
		if p.lo == p.hi {
			t.cond, t.val = bpf.JumpEqual, uint32(p.lo)
			return t
		}
		hi := t
		t.cond, t.val = bpf.JumpGreaterOrEqual, uint32(p.lo)
		hi.cond, hi.val = bpf.JumpLessOrEqual, uint32(p.hi)
		return cAnd{t, hi}
	}
	// IPv4: not a later fragment, ports after the header's IHL words.
	notFrag := cNot{cTest{load: ldAbs(l.netOff+6, 2), cond: bpf.JumpBitsSet, val: 0x1fff}}
	v4 := cAnd{l.ipProto(false, protos...), notFrag, directed(p.dir,
		cmp(bpf.LoadIndirect{Off: l.netOff, Size: 2}, true),
		cmp(bpf.LoadIndirect{Off: l.netOff + 2, Size: 2}, true))}
	// IPv6: ports right after the fixed header (as tcpdump: no extension
	// header walking).
	v6 := cAnd{l.ipProto(true, protos...), directed(p.dir,
		cmp(ldAbs(l.netOff+40, 2), false),
		cmp(ldAbs(l.netOff+42, 2), false))}
	switch p.proto {
	case protoIP:
		return v4
	case protoIP6:
		return v6
	}
	return cOr{v4, v6}
}

func (l layout) tree(n fnode) cnode {
	switch n := n.(type) {
	case *fAnd:
		return cAnd{l.tree(n.l), l.tree(n.r)}
	case *fOr:
		return cOr{l.tree(n.l), l.tree(n.r)}
	case *fNot:
		return cNot{l.tree(n.x)}
	case *prim:
		return l.prim(n)
	}
	return cConst(false)
}

// compile turns the filter into a program for layout l: the accepted
// packets return snaplen, the others 0.
func (f *Filter) compile(l layout, snaplen uint32) ([]bpf.Instruction, error) {
	snaplen = cmp.Or(snaplen, maxRecord)
	if f.Empty() {
		return []bpf.Instruction{bpf.RetConstant{Val: snaplen}}, nil
	}
	var e emitter
	accept, reject := e.label(), e.label()
	e.gen(l.tree(f.root), accept, reject)
	e.place(accept)
	e.emit(bpf.RetConstant{Val: snaplen})
	e.place(reject)
	e.emit(bpf.RetConstant{Val: 0})
	prog, err := e.resolve()
	if err != nil {
		return nil, err
	}
	if len(prog) > bpfMaxInstructions {
		return nil, fmt.Errorf("filter compiles to %d instructions, more than the kernel's %d: simplify it", len(prog), bpfMaxInstructions)
	}
	if _, err := bpf.Assemble(prog); err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	return prog, nil
}

// bpfMaxInstructions is the kernel's BPF_MAXINSNS.
const bpfMaxInstructions = 4096

// emitter generates short-circuit code with symbolic labels, then resolves
// them, inserting a long jump where a conditional one would skip more than
// the 255 instructions its 8-bit offset can.
type emitter struct {
	items  []item
	labels int
}

type item struct {
	ins   bpf.Instruction // a plain instruction, or nil
	label int             // > 0: this item marks a label (no instruction)
	jcond bool            // conditional jump to t (true) or f (false)
	ja    bool            // unconditional jump to t
	cond  bpf.JumpTest
	val   uint32
	t, f  int
}

func (e *emitter) label() int             { e.labels++; return e.labels }
func (e *emitter) place(l int)            { e.items = append(e.items, item{label: l}) }
func (e *emitter) emit(i bpf.Instruction) { e.items = append(e.items, item{ins: i}) }

func (e *emitter) gen(n cnode, t, f int) {
	switch n := n.(type) {
	case cConst:
		target := f
		if n {
			target = t
		}
		e.items = append(e.items, item{ja: true, t: target})
	case cNot:
		e.gen(n.x, f, t)
	case cAnd:
		e.chain(n, t, f, true)
	case cOr:
		e.chain(n, t, f, false)
	case cTest:
		if n.msh {
			e.emit(bpf.LoadMemShift{Off: n.mshOff})
		}
		e.emit(n.load)
		if n.mask != 0 {
			e.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: n.mask})
		}
		e.items = append(e.items, item{jcond: true, cond: n.cond, val: n.val, t: t, f: f})
	}
}

// chain generates the tests of an and (and true) or an or in turn: each
// one's false (and) or true (or) jumps to the end, the last decides.
func (e *emitter) chain(xs []cnode, t, f int, and bool) {
	for _, x := range xs[:len(xs)-1] {
		next := e.label()
		if and {
			e.gen(x, next, f)
		} else {
			e.gen(x, t, next)
		}
		e.place(next)
	}
	e.gen(xs[len(xs)-1], t, f)
}

func (e *emitter) resolve() ([]bpf.Instruction, error) {
	// Each round gives every far conditional jump adjacent long jumps,
	// after which it is never far again; inserting them can make others
	// far, so repeat until none is.
	for {
		pcs := make(map[int]int, e.labels)
		pc := 0
		at := make([]int, len(e.items))
		for i, it := range e.items {
			at[i] = pc
			if it.label > 0 {
				pcs[it.label] = pc
				continue
			}
			pc++
		}
		if pc > bpfMaxInstructions {
			return nil, fmt.Errorf("filter compiles to more than the kernel's %d instructions: simplify it", bpfMaxInstructions)
		}
		far := func(i int, target int) bool { return pcs[target]-at[i]-1 > 255-2 }
		var out []item
		for i, it := range e.items {
			if !it.jcond || (!far(i, it.t) && !far(i, it.f)) {
				if out != nil {
					out = append(out, it)
				}
				continue
			}
			if out == nil {
				out = append(make([]item, 0, len(e.items)+16), e.items[:i]...)
			}
			// Route the far branches through long jumps right after
			// the conditional one.
			var tramp []item
			for _, target := range []*int{&it.t, &it.f} {
				if far(i, *target) {
					l := e.label()
					tramp = append(tramp, item{label: l}, item{ja: true, t: *target})
					*target = l
				}
			}
			out = append(out, it)
			out = append(out, tramp...)
		}
		if out != nil {
			e.items = out
			continue
		}
		prog := make([]bpf.Instruction, 0, pc)
		for i, it := range e.items {
			switch {
			case it.label > 0:
			case it.ja:
				prog = append(prog, bpf.Jump{Skip: uint32(pcs[it.t] - at[i] - 1)})
			case it.jcond:
				prog = append(prog, bpf.JumpIf{Cond: it.cond, Val: it.val,
					SkipTrue: uint8(pcs[it.t] - at[i] - 1), SkipFalse: uint8(pcs[it.f] - at[i] - 1)})
			default:
				prog = append(prog, it.ins)
			}
		}
		return prog, nil
	}
}
