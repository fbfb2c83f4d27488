package flows

import (
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// TestHotStreamsAreTheMapsStreams: 600 connections on 300 4-tuples (more
// than Analyzer.hot has slots, so that keys share slots), each 4-tuple
// used again after a FIN or a RST, their packets interleaved. After every
// packet each stream kept in hot is its key's stream in the map, and
// every stream of the map is what streamOf finds; and each connection is
// reported with its own request and response, none confused with another
// on its 4-tuple or its slot.
func TestHotStreamsAreTheMapsStreams(t *testing.T) {
	const tuples = 300
	checked := 0
	a, ev := run(t, DefaultConfig(), func(w *gen.Writer) {
		at := bt0
		next := func() time.Time { at = at.Add(time.Millisecond); return at }
		for round := range 2 {
			conns := make([]*gen.Conn, tuples)
			for i := range conns {
				isn := uint32(1000 + round*100000 + i)
				conns[i] = w.Conn(bClient(i), bBroker, next(), gen.ConnOptions{ISN: [2]uint32{isn, isn * 3}})
			}
			for i, c := range conns {
				c.Request(next(), int32(i), nil, apiVersionsReq())
			}
			for i, c := range conns {
				c.Response(next(), int32(i), apiVersionsResp())
			}
			for i, c := range conns {
				if i%2 == 0 {
					c.Close(next())
				} else {
					c.Reset(gen.ClientToServer, next())
				}
			}
		}
	}, func(a *Analyzer) {
		for i, s := range a.hot {
			if s != nil && a.streams[s.key] != s {
				t.Fatalf("slot %d holds a stream that is not its key's (%v)", i, a.streams[s.key])
			}
		}
		if checked++; checked%97 == 0 {
			for k, s := range a.streams {
				if a.streamOf(k) != s {
					t.Fatalf("streamOf does not find the map's stream of %v", k)
				}
			}
		}
	})
	cs := a.Conns()
	if len(cs) != 2*tuples || len(ev.exchanges) != 2*tuples {
		t.Fatalf("%d connections, %d exchanges; want %d of each", len(cs), len(ev.exchanges), 2*tuples)
	}
	for _, c := range cs {
		if c.Requests != 1 || c.Responses != 1 || c.Unmatched != 0 || c.Gaps != 0 {
			t.Errorf("connection %d (%v): %d requests, %d responses, %d unmatched, %d gaps", c.ID, c.Client, c.Requests, c.Responses, c.Unmatched, c.Gaps)
		}
	}
	used := 0
	for _, s := range a.hot {
		if s != nil {
			used++
		}
	}
	if len(a.streams) != 0 || used != 0 {
		t.Errorf("%d streams left in the map, %d in hot", len(a.streams), used)
	}
}
