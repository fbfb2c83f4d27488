package flows

import (
	"fmt"
	"strconv"
	"strings"
)

// Ports is a set of TCP ports, parsed from "9092-9094,9192-9194".
type Ports struct {
	bits [65536 / 64]uint64
	spec string
}

// DefaultPorts are the Kafka ports recognised without content checks.
const DefaultPorts = "9092-9094,9192-9194"

// ParsePorts parses a comma-separated list of ports and ranges.
func ParsePorts(spec string) (*Ports, error) {
	p := &Ports{spec: spec}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 16)
		if err != nil || a == 0 {
			return nil, fmt.Errorf("bad port %q in %q", lo, spec)
		}
		b := a
		if isRange {
			b, err = strconv.ParseUint(hi, 10, 16)
			if err != nil || b < a {
				return nil, fmt.Errorf("bad port range %q in %q", part, spec)
			}
		}
		for x := a; x <= b; x++ {
			p.bits[x/64] |= 1 << (x % 64)
		}
	}
	return p, nil
}

// Has reports whether port is in the set.
func (p *Ports) Has(port uint16) bool { return p.bits[port/64]&(1<<(port%64)) != 0 }

func (p *Ports) String() string { return p.spec }
