//go:build !linux

package capture

import "errors"

// Live is a live capture; it needs Linux's AF_PACKET.
type Live struct {
	Name    string
	Format  string
	Links   []LinkType
	Snaplen int
}

// OpenLive fails on this system: live capture needs Linux.
func OpenLive(cfg LiveConfig) (*Live, error) {
	return nil, errors.New("live capture needs Linux (AF_PACKET); capture with tcpdump -w and read the file with -r")
}

// Next implements Source.
func (l *Live) Next(p *Packet) error { return ErrIdle }

// Stats returns the kernel's counters.
func (l *Live) Stats() (LiveStats, error) { return LiveStats{}, nil }

// Close ends the capture.
func (l *Live) Close() error { return nil }
