package correlate

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/packet"
	"github.com/kfsniff/kfsniff/pipeline"
)

// agentView is what one agent of a split capture saw: the connections of
// some shards (the Sharder deals a capture's connections into shards, both
// directions of one to the same shard), by a clock that differs from the
// capture's by shift (per shard: per connection, as the capture points of
// two hosts differ by connection; and per direction, as a host across a
// network sees what goes to the server later and what comes back
// earlier).
type agentView struct {
	name  string
	sees  func(shard int) bool
	shift func(shard int, toServer bool) time.Duration
}

// splitCapture deals a committed capture's connections among agents, as if
// each had captured on its own host with its own clock, writes each
// agent's capture (pcap, the packets in the capture's order, their
// timestamps shifted) and ships it through the analysis and the real
// exporter: the records of each agent.
func splitCapture(t testing.TB, path string, shards int, views ...agentView) map[string][][]byte {
	t.Helper()
	f, err := capture.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg := flows.DefaultConfig()
	sh := packet.NewSharder(shards, packet.Bounds{IdleTimeout: cfg.IdleTimeout, ReorderWindow: cfg.ReorderWindow})
	per := make([][]capture.Packet, len(views))
	var p capture.Packet
	for {
		if err := f.Next(&p); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		sh.Route(&p, func(shard int, w *packet.Work) {
			if w.Kind != packet.WorkPacket {
				return
			}
			for i, v := range views {
				if v.sees(shard) {
					q := *w.Packet
					q.Data = slices.Clone(q.Data)
					q.Time = q.Time.Add(v.shift(shard, toServer(t, &q)))
					per[i] = append(per[i], q)
				}
			}
		})
	}
	out := map[string][][]byte{}
	for i, v := range views {
		var buf bytes.Buffer
		w, err := capture.NewWriter(&buf, false, f.Links[0], 262144, "")
		if err != nil {
			t.Fatal(err)
		}
		for j := range per[i] {
			if err := w.WritePacket(&per[i][j]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		out[v.name] = shipBytes(t, v.name+".pcap", buf.Bytes(), v.name)
	}
	return out
}

// shipBytes is shipCapture of a capture held in memory.
func shipBytes(t testing.TB, name string, b []byte, agent string) [][]byte {
	t.Helper()
	var s shippedValues
	x := exporter(t, agent, &s)
	f, err := capture.NewFile(name, 0, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	set, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{Flows: flows.DefaultConfig(), Detectors: set,
		Handlers: []flows.Handler{x}, Workers: 1})
	x.Findings(res.Report.Findings)
	x.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vals
}

// merged parses every agent's records and merges them by capture time
// (findings, which have none, last), as a correlator reading the topic
// would see them, not agent after agent.
func merged(t testing.TB, by map[string][][]byte) []Record {
	t.Helper()
	var all []Record
	for _, vals := range by {
		all = append(all, parseAll(t, vals)...)
	}
	slices.SortStableFunc(all, func(a, b Record) int {
		at, bt := a.TS, b.TS
		if a.Type == TypeFinding {
			at = 1<<63 - 1
		}
		if b.Type == TypeFinding {
			bt = 1<<63 - 1
		}
		switch {
		case at < bt:
			return -1
		case at > bt:
			return 1
		}
		if a.Agent < b.Agent {
			return -1
		}
		if a.Agent > b.Agent {
			return 1
		}
		return 0
	})
	return all
}

// jitter is a shard's own offset in [-150us, +150us], fixed.
func jitter(shard int) time.Duration {
	return time.Duration((shard*7919)%301-150) * time.Microsecond
}

func none(int, bool) time.Duration { return 0 }

// ahead is a clock ahead by d plus each connection's jitter.
func ahead(d time.Duration) func(int, bool) time.Duration {
	return func(s int, _ bool) time.Duration { return d + jitter(s) }
}

// toServer says whether a packet of the real clients' captures (Ethernet,
// IPv4, TCP; kfake listening on ports below the clients') goes to the
// server.
func toServer(t testing.TB, p *capture.Packet) bool {
	d := p.Data
	if p.Link != 1 || len(d) < 14+20 || d[12] != 0x08 || d[13] != 0 {
		return false // not Ethernet and IPv4: the test's captures are
	}
	ip := d[14:]
	ihl := int(ip[0]&0xf) * 4
	if ip[9] != 6 || len(ip) < ihl+4 {
		return false
	}
	src, dst := binary.BigEndian.Uint16(ip[ihl:]), binary.BigEndian.Uint16(ip[ihl+2:])
	return dst < src
}
