package pipeline

import (
	"context"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/flows"
)

// bigSource gives one batch of n connection events, then the end.
type bigSource struct {
	n    int
	done bool
}

func (s *bigSource) Next(context.Context) (RemoteBatch, error) {
	if s.done {
		return RemoteBatch{}, io.EOF
	}
	s.done = true
	b := RemoteBatch{Items: make([]RemoteItem, s.n)}
	c, srv := netip.MustParseAddrPort("10.0.0.9:4000"), netip.MustParseAddrPort("10.0.0.1:9092")
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range b.Items {
		b.Items[i].Conn = &flows.Event{Conn: &flows.ConnEvent{Kind: flows.ConnRefused, Client: c, Server: srv, Time: at, Attempts: 1}}
	}
	return b, nil
}
func (s *bigSource) Flush() RemoteBatch           { return RemoteBatch{} }
func (s *bigSource) Name() string                 { return "kafka://test/big" }
func (s *bigSource) Nodes() *cluster.Nodes        { return cluster.NewNodes() }
func (s *bigSource) Conns() []*flows.Conn         { return nil }
func (s *bigSource) End(string) (time.Time, bool) { return time.Time{}, false }
func (s *bigSource) Read() (int64, int64, time.Time, time.Time) {
	return int64(s.n), 0, time.Time{}, time.Time{}
}

// slowHandler is a rule that takes a millisecond per connection event.
type slowHandler struct{ seen int }

func (h *slowHandler) OnConnEvent(*flows.ConnEvent) { h.seen++; time.Sleep(time.Millisecond) }

// TestRemoteInterruptedMidBatch: Ctrl-C while a batch of 100,000 records
// is delivered to a handler taking a millisecond each (100 s in all)
// stops the run within a second, with a warning counting the records not
// analysed (issue 31: a correlator ignored SIGINT while a rule worked).
func TestRemoteInterruptedMidBatch(t *testing.T) {
	src := &bigSource{n: 100000}
	h := &slowHandler{}
	var warnings []string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Result, 1)
	go func() {
		done <- RunRemote(ctx, src, false, nil, Options{Handlers: []flows.Handler{h},
			Warn: func(err error) { warnings = append(warnings, err.Error()) }})
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	began := time.Now()
	select {
	case res := <-done:
		took := time.Since(began)
		if took > time.Second {
			t.Errorf("stopped %v after Ctrl-C", took)
		}
		if !res.Interrupted {
			t.Errorf("stop %v, want interrupted", res.Stop)
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], "not analysed") {
			t.Errorf("warnings %q: want one counting the records not analysed", warnings)
		}
		t.Logf("stopped %v after Ctrl-C, %d of %d records delivered; %q", took, h.seen, src.n, warnings)
	case <-time.After(5 * time.Second):
		t.Fatal("still delivering 5 s after Ctrl-C")
	}
}
