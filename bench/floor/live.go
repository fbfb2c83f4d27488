package floor

import (
	"context"
	"errors"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/reassembly"

	"github.com/kfsniff/kfsniff/capture"
)

// Live is the floor of live analysis: it captures from an interface as
// kfsniff -i does (capture.OpenLive: the same AF_PACKET TPACKET_V3 ring,
// 32 MiB unless bufSize, no filter, promiscuous) and analyses as LiveOn.
func Live(ctx context.Context, iface string, bufSize int) (Result, capture.LiveStats, error) {
	l, err := capture.OpenLive(capture.LiveConfig{Interface: iface, Promiscuous: true, BufferSize: bufSize})
	if err != nil {
		return Result{}, capture.LiveStats{}, err
	}
	defer l.Close()
	return LiveOn(ctx, l)
}

// LiveOn decodes every packet of l to TCP as Read does, and hands each TCP
// packet to gopacket's reassembly as flows.Analyzer does (holes pushed
// through after kfsniff's reorder window of 2 s), with streams that only
// count their bytes: no Kafka, no handlers. Once ctx ends it reads what
// the ring holds still (for at most a second), and returns what it read,
// the reassembled bytes (Result.Reassembled) and the kernel's counters.
func LiveOn(ctx context.Context, l *capture.Live) (Result, capture.LiveStats, error) {
	var r Result
	d := NewDecoder()
	asm := reassembly.NewAssembler(reassembly.NewStreamPool(counting{&r}))
	const window = 2 * time.Second
	var p capture.Packet
	var last, end time.Time
	for {
		if end.IsZero() && ctx.Err() != nil {
			end = time.Now().Add(time.Second)
		}
		if !end.IsZero() && time.Now().After(end) {
			break
		}
		err := l.Next(&p)
		if errors.Is(err, capture.ErrIdle) {
			if !end.IsZero() {
				break
			}
			continue
		}
		if err != nil {
			st, _ := l.Stats()
			return r, st, err
		}
		tcp := r.TCP
		d.Packet(&p, &r)
		if r.TCP == tcp || len(d.decoded) == 0 {
			continue
		}
		nf := d.ip4.NetworkFlow()
		if d.decoded[0] == layers.LayerTypeIPv6 {
			nf = d.ip6.NetworkFlow()
		}
		asm.AssembleWithContext(nf, &d.tcp, &assemblyContext{gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(p.Data), Length: p.Len}})
		if p.Time.Sub(last) >= window {
			asm.FlushWithOptions(reassembly.FlushOptions{T: p.Time.Add(-window)})
			last = p.Time
		}
	}
	asm.FlushAll()
	st, err := l.Stats()
	return r, st, err
}

type assemblyContext struct{ ci gopacket.CaptureInfo }

func (c *assemblyContext) GetCaptureInfo() gopacket.CaptureInfo { return c.ci }

// counting makes streams that count the bytes reassembled.
type counting struct{ r *Result }

func (c counting) New(_, _ gopacket.Flow, _ *layers.TCP, _ reassembly.AssemblerContext) reassembly.Stream {
	return c
}

func (c counting) Accept(_ *layers.TCP, _ gopacket.CaptureInfo, _ reassembly.TCPFlowDirection, _ reassembly.Sequence, start *bool, _ reassembly.AssemblerContext) bool {
	*start = true // connections joined mid-way too, as kfsniff takes them
	return true
}

func (c counting) ReassembledSG(sg reassembly.ScatterGather, _ reassembly.AssemblerContext) {
	n, _ := sg.Lengths()
	c.r.Reassembled += int64(n)
}

func (c counting) ReassemblyComplete(reassembly.AssemblerContext) bool { return true }
