package capture

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

// LiveConfig configures a live capture.
type LiveConfig struct {
	// Interface is an interface name, "any" (every interface, as Linux
	// cooked SLL2 frames like tcpdump -i any), or an index from -D.
	Interface string
	// Snaplen is how many bytes of each packet are kept (0: 262144).
	Snaplen int
	// Filter is compiled to classic BPF and attached to the socket; nil
	// or empty keeps every packet.
	Filter *Filter
	// Promiscuous puts a named interface in promiscuous mode while the
	// capture runs (tcpdump's default; -p turns it off).
	Promiscuous bool
	// BufferSize is the kernel ring's size in bytes (0: 32 MiB).
	BufferSize int
	// Timeout is how long Next waits for a packet before returning
	// ErrIdle (0: 100ms), so the reader can look at its clock.
	Timeout time.Duration
}

// DefaultBufferSize is the live capture ring's default size.
const DefaultBufferSize = 32 << 20

// ErrIdle is returned by a live source's Next when no packet arrived within
// its timeout; call Next again. It is not the end of the capture.
var ErrIdle = errors.New("no packet yet")

// ErrPermission marks a live capture refused for lack of privilege
// (CAP_NET_RAW).
var ErrPermission = errors.New("permission denied")

// LiveStats are the kernel's counters of a live capture since it opened:
// packets that passed the filter, and those of them dropped because the
// ring was full.
type LiveStats struct {
	Received uint64
	Dropped  uint64
}

// Interface is a network interface a live capture can open.
type Interface struct {
	Index int
	Name  string
	Flags []string // Up, Running, Loopback, ...
	// Description is set for the "any" pseudo-device.
	Description string
}

func (i Interface) String() string {
	s := strconv.Itoa(i.Index) + "." + i.Name
	if i.Description != "" {
		s += " (" + i.Description + ")"
	}
	if len(i.Flags) > 0 {
		s += " [" + strings.Join(i.Flags, ", ") + "]"
	}
	return s
}

// interfaceFlags are the flags -D shows, as tcpdump names them.
var interfaceFlags = []struct {
	flag net.Flags
	name string
}{{net.FlagUp, "Up"}, {net.FlagRunning, "Running"}, {net.FlagLoopback, "Loopback"}, {net.FlagPointToPoint, "Point-to-point"}}

// Interfaces lists the interfaces by index, the "any" pseudo-device
// (index 0) last, as tcpdump -D does.
func Interfaces() ([]Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	out := make([]Interface, 0, len(ifs)+1)
	for _, ni := range ifs {
		it := Interface{Index: ni.Index, Name: ni.Name}
		for _, fl := range interfaceFlags {
			if ni.Flags&fl.flag != 0 {
				it.Flags = append(it.Flags, fl.name)
			}
		}
		out = append(out, it)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	out = append(out, Interface{Index: 0, Name: "any", Description: "Pseudo-device that captures on all interfaces", Flags: []string{"Up", "Running"}})
	return out, nil
}

// lookupInterface resolves a name, "any" or an index to (index, name); index
// 0 is "any".
func lookupInterface(spec string) (int, string, error) {
	if spec == "any" || spec == "0" {
		return 0, "any", nil
	}
	if n, err := strconv.Atoi(spec); err == nil {
		ni, err := net.InterfaceByIndex(n)
		if err != nil {
			return 0, "", fmt.Errorf("%w: no interface with index %d (kfsniff -D lists them)", ErrUnusable, n)
		}
		return ni.Index, ni.Name, nil
	}
	ni, err := net.InterfaceByName(spec)
	if err != nil {
		return 0, "", fmt.Errorf("%w: no interface %q (kfsniff -D lists them)", ErrUnusable, spec)
	}
	return ni.Index, ni.Name, nil
}

func (c *LiveConfig) defaults() {
	if c.Snaplen <= 0 || c.Snaplen > DefaultSnaplen {
		c.Snaplen = DefaultSnaplen
	}
	if c.BufferSize <= 0 {
		c.BufferSize = DefaultBufferSize
	}
	if c.Timeout <= 0 {
		c.Timeout = 100 * time.Millisecond
	}
}
