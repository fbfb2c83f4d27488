package pipeline

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/flows"
)

// fakeLive replays a capture file like a live source: idle pauses between
// packets, kernel counters, no end unless told.
type fakeLive struct {
	f      *capture.File
	idle   int // ErrIdle answers before each packet
	left   int
	forget bool // at the end of the file, keep idling instead of io.EOF
	stats  capture.LiveStats
}

func (s *fakeLive) Next(p *capture.Packet) error {
	if s.left > 0 {
		s.left--
		time.Sleep(time.Millisecond)
		return capture.ErrIdle
	}
	s.left = s.idle
	err := s.f.Next(p)
	if err == io.EOF && s.forget {
		time.Sleep(time.Millisecond)
		return capture.ErrIdle
	}
	if err == nil {
		s.stats.Received++
	}
	return err
}

func (s *fakeLive) Stats() (capture.LiveStats, error) { return s.stats, nil }

type countSink struct{ n int }

func (c *countSink) WritePacket(*capture.Packet) error { c.n++; return nil }

func openFixture(t *testing.T, name string) *capture.File {
	t.Helper()
	f, err := capture.Open("../fixtures/pcaps/"+name, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestRunSourceStops(t *testing.T) {
	t.Run("count", func(t *testing.T) {
		sink := &countSink{}
		var last Progress
		calls := 0
		res := RunSource(context.Background(), &fakeLive{f: openFixture(t, "basic.pcap"), idle: 1, forget: true}, Options{
			Flows: flows.DefaultConfig(), Count: 10, Sinks: []capture.Sink{sink},
			Progress: func(p Progress) { last = p; calls++ }, ProgressEvery: time.Millisecond,
		})
		if res.Stop != StopCount || res.Report.Capture.Packets != 10 || sink.n != 10 {
			t.Errorf("stop %v, %d packets analysed, %d written; want count reached at 10", res.Stop, res.Report.Capture.Packets, sink.n)
		}
		if !last.Done || last.Packets != 10 || last.Live == nil || last.Live.Received != 10 || calls < 2 {
			t.Errorf("progress: %d calls, last %+v", calls, last)
		}
		if res.Live == nil || res.Report.Capture.Drops == nil || *res.Report.Capture.Drops != 0 {
			t.Errorf("kernel counters missing: %+v, drops %v", res.Live, res.Report.Capture.Drops)
		}
	})
	t.Run("duration with no traffic", func(t *testing.T) {
		start := time.Now()
		res := RunSource(context.Background(), &fakeLive{f: openFixture(t, "basic.pcap"), forget: true}, Options{
			Flows: flows.DefaultConfig(), Duration: 100 * time.Millisecond,
		})
		if res.Stop != StopDuration || res.Report.Totals.Requests != 9 {
			t.Errorf("stop %v, %d requests; want duration reached after all 9", res.Stop, res.Report.Totals.Requests)
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("took %s", time.Since(start))
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		res := RunSource(ctx, &fakeLive{f: openFixture(t, "basic.pcap"), forget: true}, Options{Flows: flows.DefaultConfig()})
		if res.Stop != StopInterrupted || !res.Interrupted || res.Report.Totals.Responses != 9 {
			t.Errorf("stop %v, %d responses", res.Stop, res.Report.Totals.Responses)
		}
	})
	t.Run("filter", func(t *testing.T) {
		flt, err := capture.ParseFilter("dst port 9092")
		if err != nil {
			t.Fatal(err)
		}
		sink := &countSink{}
		res := RunSource(context.Background(), openFixture(t, "basic.pcap"), Options{Flows: flows.DefaultConfig(), Filter: flt, Sinks: []capture.Sink{sink}})
		if res.Stop != StopEnd || res.Report.Totals.Requests != 9 || res.Report.Totals.Responses != 0 || int64(sink.n) != res.Report.Capture.Files[0].Packets {
			t.Errorf("stop %v, %d requests, %d responses, %d written", res.Stop, res.Report.Totals.Requests, res.Report.Totals.Responses, sink.n)
		}
	})
}

// slowFile is a file read slowly, as from a pipe, not a live source: a
// pause (ErrIdle) before each packet.
type slowFile struct {
	f    *capture.File
	idle *bool
}

func (s slowFile) Next(p *capture.Packet) error {
	if *s.idle = !*s.idle; *s.idle {
		time.Sleep(2 * time.Millisecond)
		return capture.ErrIdle
	}
	return s.f.Next(p)
}

// TestPartial: a run of files that stopped before their end says why in
// the report (Capture.Partial); one that read them whole, and a live
// capture however it was stopped, says nothing.
func TestPartial(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		src  func(t *testing.T) capture.Source
		opt  Options
		want string // Partial.String(), "" for nil
	}{
		{"whole", context.Background(), func(t *testing.T) capture.Source { return openFixture(t, "basic.pcap") },
			Options{}, ""},
		{"count", context.Background(), func(t *testing.T) capture.Source { return openFixture(t, "basic.pcap") },
			Options{Count: 10}, "stopped after -c 10 packets, before the end of the input"},
		{"interrupted", cancelled, func(t *testing.T) capture.Source { return openFixture(t, "basic.pcap") },
			Options{}, "interrupted (Ctrl-C) before the end of the input"},
		{"duration", context.Background(), func(t *testing.T) capture.Source { return slowFile{openFixture(t, "basic.pcap"), new(bool)} },
			Options{Duration: 20 * time.Millisecond}, "stopped after --duration 20ms, before the end of the input"},
		{"live count", context.Background(), func(t *testing.T) capture.Source {
			return &fakeLive{f: openFixture(t, "basic.pcap"), forget: true}
		}, Options{Count: 10}, ""},
		{"live interrupted", cancelled, func(t *testing.T) capture.Source {
			return &fakeLive{f: openFixture(t, "basic.pcap"), forget: true}
		}, Options{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opt.Flows = flows.DefaultConfig()
			res := RunSource(tc.ctx, tc.src(t), tc.opt)
			got := ""
			if p := res.Report.Capture.Partial; p != nil {
				got = p.String()
			}
			if got != tc.want {
				t.Errorf("partial %q (stop %v), want %q", got, res.Stop, tc.want)
			}
		})
	}
}
