package capture

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/bpf"
)

// Filter is a tcpdump-style filter expression (pcap-filter(7)), parsed once
// and compiled to classic BPF per link type: attached to the socket for a
// live capture, run on golang.org/x/net/bpf's VM for capture files, so
// `kfsniff -r X port 9092` keeps what `tcpdump -r X port 9092` keeps.
//
// The supported subset: host, net (CIDR, partial dotted quad, or "mask"),
// port, portrange, with src, dst, "src or dst" and "src and dst"; ip, ip6,
// tcp, udp, icmp, icmp6 both as primitives and as qualifiers where tcpdump
// allows them; vlan [ID]; and, or, not (also &&, ||, !) and parentheses. As
// in tcpdump, "and" and "or" have equal precedence and associate left to
// right, "not" binds tighter, an id alone repeats the previous qualifiers
// ("port 9092 or 8081"), and each vlan keyword moves the offsets of what
// follows it past one 802.1Q tag. Addresses are numeric (no DNS look-ups).
type Filter struct {
	expr string
	root fnode // nil matches everything

	mu  sync.Mutex
	vms map[LinkType]*bpf.VM // nil entry: compile failed, match nothing
}

// ParseFilter parses expr. An empty expression matches every packet. The
// error reads as one line naming what is wrong.
func ParseFilter(expr string) (*Filter, error) {
	f := &Filter{expr: strings.TrimSpace(expr)}
	toks, err := tokenize(f.expr)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return f, nil
	}
	p := &parser{toks: toks}
	f.root, err = p.expr()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, fmt.Errorf("unexpected %q after a complete expression", p.toks[p.pos])
	}
	return f, nil
}

// String returns the expression as given.
func (f *Filter) String() string { return f.expr }

// Empty reports whether the filter matches every packet.
func (f *Filter) Empty() bool { return f == nil || f.root == nil }

// Match reports whether p passes the filter, compiling it for p's link type
// on first use.
func (f *Filter) Match(p *Packet) bool {
	if f.Empty() {
		return true
	}
	f.mu.Lock()
	vm, ok := f.vms[p.Link]
	if !ok {
		if f.vms == nil {
			f.vms = make(map[LinkType]*bpf.VM)
		}
		if prog, err := f.Program(p.Link, maxRecord); err == nil {
			vm, _ = bpf.NewVM(prog)
		}
		f.vms[p.Link] = vm
	}
	f.mu.Unlock()
	if vm == nil {
		return false
	}
	n, err := vm.Run(p.Data)
	return err == nil && n > 0
}

// Program compiles the filter for packets of link type lt as they appear in
// a capture file, accepting snaplen bytes of each match.
func (f *Filter) Program(lt LinkType, snaplen uint32) ([]bpf.Instruction, error) {
	l, ok := fileLayout(lt)
	if !ok {
		return nil, fmt.Errorf("filter: link type %s is not supported", lt)
	}
	return f.compile(l, snaplen)
}

// --- tokens ---

func tokenize(s string) ([]string, error) {
	var toks []string
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(' || c == ')':
			toks = append(toks, s[i:i+1])
			i++
		case c == '!':
			if i+1 < len(s) && s[i+1] == '=' {
				return nil, fmt.Errorf("comparisons (%q) are not supported; use host, net, port, portrange, vlan and protocol names", "!=")
			}
			toks = append(toks, "!")
			i++
		case c == '&' || c == '|':
			if i+1 < len(s) && s[i+1] == c {
				toks = append(toks, s[i:i+2])
				i += 2
				continue
			}
			return nil, fmt.Errorf("unexpected %q (use and, or, &&, ||)", string(c))
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n\r()!&|", rune(s[j])) {
				j++
			}
			w := s[i:j]
			if strings.ContainsAny(w, "[]<>=+*") {
				return nil, fmt.Errorf("%q: packet-data expressions and comparisons are not supported; use host, net, port, portrange, vlan and protocol names", w)
			}
			toks = append(toks, w)
			i = j
		}
	}
	return toks, nil
}

// --- syntax tree ---

// fnode is a node of the parsed expression: *fAnd, *fOr, *fNot or *prim.
type fnode interface{ isNode() }

type fAnd struct{ l, r fnode }
type fOr struct{ l, r fnode }
type fNot struct{ x fnode }

func (*fAnd) isNode() {}
func (*fOr) isNode()  {}
func (*fNot) isNode() {}
func (*prim) isNode() {}

type proto uint8

const (
	protoNone proto = iota
	protoIP
	protoIP6
	protoTCP
	protoUDP
	protoICMP
	protoICMP6
)

var protoNames = map[string]proto{"ip": protoIP, "ip6": protoIP6, "tcp": protoTCP, "udp": protoUDP, "icmp": protoICMP, "icmp6": protoICMP6}

type dir uint8

const (
	dirEither dir = iota // src or dst (the default)
	dirSrc
	dirDst
	dirBoth // src and dst
)

type kind uint8

const (
	kindProto kind = iota // a protocol alone: ip, tcp, ...
	kindHost
	kindNet
	kindPort
	kindPortRange
	kindVLAN
)

var kindNames = map[string]kind{"host": kindHost, "net": kindNet, "port": kindPort, "portrange": kindPortRange}

// prim is one primitive with its qualifiers.
type prim struct {
	proto  proto
	dir    dir
	kind   kind
	prefix netip.Prefix // host (full length) and net
	lo, hi uint16       // port (lo == hi) and portrange
	vlanID int          // -1: any
	// vlans is how many vlan keywords came before this primitive: the
	// offsets of what follows each one move past one tag.
	vlans int
}

// quals are the qualifiers a bare id inherits ("port 1 or 2").
type quals struct {
	proto proto
	dir   dir
	kind  kind
	set   bool
}

type parser struct {
	toks  []string
	pos   int
	last  quals
	vlans int
}

func (p *parser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *parser) next() string {
	t := p.peek()
	if t != "" {
		p.pos++
	}
	return t
}

func isAnd(t string) bool { return t == "and" || t == "&&" }
func isOr(t string) bool  { return t == "or" || t == "||" }
func isNot(t string) bool { return t == "not" || t == "!" }

// expr: unary { (and|or) unary }, left to right, equal precedence.
func (p *parser) expr() (fnode, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if !isAnd(t) && !isOr(t) {
			return l, nil
		}
		p.next()
		if p.peek() == "" {
			return nil, fmt.Errorf("expression ends after %q", t)
		}
		r, err := p.unary()
		if err != nil {
			return nil, err
		}
		if isAnd(t) {
			l = &fAnd{l, r}
		} else {
			l = &fOr{l, r}
		}
	}
}

func (p *parser) unary() (fnode, error) {
	t := p.peek()
	switch {
	case t == "":
		return nil, fmt.Errorf("expression ends where a primitive was expected")
	case isNot(t):
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &fNot{x}, nil
	case t == "(":
		p.next()
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.next() != ")" {
			return nil, fmt.Errorf("missing %q", ")")
		}
		return x, nil
	case t == ")":
		return nil, fmt.Errorf("unexpected %q", ")")
	case isAnd(t) || isOr(t):
		return nil, fmt.Errorf("unexpected %q where a primitive was expected", t)
	}
	return p.primitive()
}

func isKeyword(t string) bool {
	_, isProto := protoNames[t]
	_, isKind := kindNames[t]
	return isProto || isKind || slices.Contains([]string{"src", "dst", "vlan", "and", "or", "not", "&&", "||", "!", "(", ")"}, t)
}

func (p *parser) primitive() (fnode, error) {
	start := p.peek()
	if start == "vlan" {
		p.next()
		pr := &prim{kind: kindVLAN, vlanID: -1, vlans: p.vlans}
		if t := p.peek(); t != "" && !isKeyword(t) {
			id, err := strconv.ParseUint(t, 10, 16)
			if err != nil || id > 4095 {
				return nil, fmt.Errorf("vlan %s: a VLAN id is a number from 0 to 4095", t)
			}
			p.next()
			pr.vlanID = int(id)
		}
		p.vlans++
		p.last = quals{}
		return pr, nil
	}
	if !isKeyword(start) {
		// A bare id: the previous primitive's qualifiers, or host.
		q := p.last
		if !q.set {
			q = quals{kind: kindHost, set: true}
		}
		return p.id(q)
	}
	var q quals
	if pr, ok := protoNames[p.peek()]; ok {
		q.proto = pr
		p.next()
	}
	switch p.peek() {
	case "src", "dst":
		first := p.next()
		q.dir = dirSrc
		if first == "dst" {
			q.dir = dirDst
		}
		// "src or dst" and "src and dst" are directions, not operators.
		if t := p.peek(); (isOr(t) || isAnd(t)) && p.pos+1 < len(p.toks) {
			second := p.toks[p.pos+1]
			if (first == "src" && second == "dst") || (first == "dst" && second == "src") {
				p.pos += 2
				q.dir = dirEither
				if isAnd(t) {
					q.dir = dirBoth
				}
			}
		}
	}
	if k, ok := kindNames[p.peek()]; ok {
		q.kind = k
		p.next()
	} else if q.dir != dirEither || p.toks[p.pos-1] == "dst" || p.toks[p.pos-1] == "src" {
		q.kind = kindHost // "src 10.0.0.1"
	} else if q.proto != protoNone {
		// A protocol alone: "tcp", "ip6".
		if t := p.peek(); t != "" && !isKeyword(t) {
			return nil, fmt.Errorf("%s %s: expected host, net, port or portrange before %q", start, t, t)
		}
		pr := &prim{proto: q.proto, kind: kindProto, vlans: p.vlans}
		p.last = quals{}
		return pr, nil
	} else {
		return nil, fmt.Errorf("%q is not a primitive", start)
	}
	q.set = true
	return p.id(q)
}

// id parses the value of a primitive with qualifiers q.
func (p *parser) id(q quals) (fnode, error) {
	t := p.next()
	if t == "" || isKeyword(t) {
		what := map[kind]string{kindHost: "an address", kindNet: "a network", kindPort: "a port", kindPortRange: "a port range"}[q.kind]
		if t == "" {
			return nil, fmt.Errorf("expression ends where %s was expected", what)
		}
		return nil, fmt.Errorf("expected %s, got %q", what, t)
	}
	pr := &prim{proto: q.proto, dir: q.dir, kind: q.kind, vlans: p.vlans}
	var err error
	switch q.kind {
	case kindHost:
		err = pr.parseHost(t)
	case kindNet:
		err = pr.parseNet(t, p)
	case kindPort:
		pr.lo, err = parsePort(t, q.proto)
		pr.hi = pr.lo
	case kindPortRange:
		a, b, ok := strings.Cut(t, "-")
		if !ok {
			return nil, fmt.Errorf("portrange %s: expected LOW-HIGH", t)
		}
		if pr.lo, err = parsePort(a, q.proto); err == nil {
			pr.hi, err = parsePort(b, q.proto)
		}
		if err == nil && pr.lo > pr.hi {
			pr.lo, pr.hi = pr.hi, pr.lo
		}
	}
	if err != nil {
		return nil, err
	}
	if err := pr.check(); err != nil {
		return nil, err
	}
	p.last = q
	return pr, nil
}

func (pr *prim) parseHost(t string) error {
	a, err := netip.ParseAddr(t)
	if err != nil || a.Zone() != "" {
		return fmt.Errorf("host %s: not an IPv4 or IPv6 address (kfsniff does not look up names)", t)
	}
	a = a.Unmap()
	pr.prefix = netip.PrefixFrom(a, a.BitLen())
	return nil
}

func (pr *prim) parseNet(t string, p *parser) error {
	if p.peek() == "mask" {
		p.next()
		m := p.next()
		a, err1 := netip.ParseAddr(t)
		mask, err2 := netip.ParseAddr(m)
		if err1 != nil || err2 != nil || !a.Is4() || !mask.Is4() {
			return fmt.Errorf("net %s mask %s: expected IPv4 address and mask", t, m)
		}
		mb := mask.As4()
		ones, bits := net.IPMask(mb[:]).Size()
		if bits == 0 {
			return fmt.Errorf("net %s mask %s: not a contiguous mask", t, m)
		}
		return pr.setNet(t, netip.PrefixFrom(a, ones))
	}
	if strings.Contains(t, "/") {
		pfx, err := netip.ParsePrefix(t)
		if err != nil {
			return fmt.Errorf("net %s: not a network (like 10.0.0.0/8 or fd00::/8)", t)
		}
		return pr.setNet(t, pfx)
	}
	if a, err := netip.ParseAddr(t); err == nil {
		return pr.setNet(t, netip.PrefixFrom(a, a.BitLen()))
	}
	// tcpdump's partial dotted forms: "net 10" is 10.0.0.0/8, "net 192.168" /16.
	parts := strings.Split(t, ".")
	if len(parts) <= 3 {
		var b [4]byte
		for i, s := range parts {
			n, err := strconv.ParseUint(s, 10, 8)
			if err != nil {
				return fmt.Errorf("net %s: not a network (like 10.0.0.0/8 or fd00::/8)", t)
			}
			b[i] = byte(n)
		}
		return pr.setNet(t, netip.PrefixFrom(netip.AddrFrom4(b), 8*len(parts)))
	}
	return fmt.Errorf("net %s: not a network (like 10.0.0.0/8 or fd00::/8)", t)
}

func (pr *prim) setNet(t string, pfx netip.Prefix) error {
	if pfx.Addr().Zone() != "" {
		return fmt.Errorf("net %s: zones are not supported", t)
	}
	a := pfx.Addr()
	if a.Is4In6() && pfx.Bits() >= 96 {
		pfx = netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
	}
	if pfx.Masked() != pfx {
		return fmt.Errorf("net %s: non-network bits set (did you mean %s?)", t, pfx.Masked())
	}
	pr.prefix = pfx
	return nil
}

func parsePort(s string, pr proto) (uint16, error) {
	if n, err := strconv.ParseUint(s, 10, 16); err == nil {
		return uint16(n), nil
	}
	if s == "" || strings.ContainsAny(s, "./:") {
		return 0, fmt.Errorf("port %s: not a port number", s)
	}
	network := "tcp"
	if pr == protoUDP {
		network = "udp"
	}
	n, err := net.LookupPort(network, s)
	if err != nil {
		return 0, fmt.Errorf("port %s: not a port number or a known service name", s)
	}
	return uint16(n), nil
}

// check rejects qualifier combinations tcpdump rejects.
func (pr *prim) check() error {
	switch pr.kind {
	case kindHost, kindNet:
		switch pr.proto {
		case protoNone:
		case protoIP:
			if !pr.prefix.Addr().Is4() {
				return fmt.Errorf("ip %s: %s is not an IPv4 address", kindWord(pr.kind), pr.prefix.Addr())
			}
		case protoIP6:
			if !pr.prefix.Addr().Is6() {
				return fmt.Errorf("ip6 %s: %s is not an IPv6 address", kindWord(pr.kind), pr.prefix.Addr())
			}
		default:
			return fmt.Errorf("'%s' modifier applied to %s", protoWord(pr.proto), kindWord(pr.kind))
		}
	case kindPort, kindPortRange:
		if pr.proto == protoICMP || pr.proto == protoICMP6 {
			return fmt.Errorf("'%s' modifier applied to %s", protoWord(pr.proto), kindWord(pr.kind))
		}
	}
	return nil
}

func kindWord(k kind) string { return keyword(kindNames, k, "vlan") }

func protoWord(p proto) string { return keyword(protoNames, p, "") }

// keyword is the word names gives v, or none.
func keyword[T comparable](names map[string]T, v T, none string) string {
	for w, x := range names {
		if x == v {
			return w
		}
	}
	return none
}
