package tui

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
)

// TestViewStatsDrill: Enter on an API in Stats lists its exchanges.
func TestViewStatsDrill(t *testing.T) {
	m, done := observer(t)
	s := startUI(t, Options{Model: m, Done: done})
	s.waitFor("ENDED")
	for i := 0; i < 3; i++ {
		s.key(tcell.KeyTab)
	}
	s.typeText("j") // BrokerHeartbeat
	s.key(tcell.KeyEnter)
	scr := s.waitFor("Exchanges: all (20) filter: api:=BrokerHeartbeat")
	if xs := box(scr, "Exchanges"); strings.Contains(xs, "Fetch") {
		t.Errorf("API drill-down shows other APIs:\n%s", xs)
	}
}

// TestViewUnderLoad: while the pipeline's side delivers exchanges as fast
// as it can, the display keeps up at its own pace and answers keys.
func TestViewUnderLoad(t *testing.T) {
	m := NewModel(ModelConfig{})
	var stop atomic.Bool
	var n atomic.Int64
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		s := newSynth(1, "load")
		for !stop.Load() {
			s.exchange(m, 0)
			n.Add(1)
		}
	}()
	defer func() { stop.Store(true); <-writerDone }()
	s := startUI(t, Options{Model: m})
	s.waitFor("Connections (1)")
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	s.typeText("?")
	s.waitFor("Help: keys")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("help took %v to show under load", d)
	}
	s.key(tcell.KeyEscape)
	s.waitGone("Help: keys")
	before := n.Load()
	time.Sleep(200 * time.Millisecond)
	rate := float64(n.Load()-before) / 0.2
	t.Logf("%.0f exchanges/s delivered while the UI ran", rate)
	if rate < 20000 {
		t.Errorf("only %.0f exchanges/s while the UI ran, want tens of thousands", rate)
	}
}

// BenchmarkUIRefresh is one display refresh over a full model: 10,000
// exchanges, 500 connections, drawn on a 160x48 screen.
func BenchmarkUIRefresh(b *testing.B) {
	m := NewModel(ModelConfig{})
	for id := 1; id <= 500; id++ {
		s := newSynth(id, "client")
		for i := 0; i < 20; i++ {
			s.exchange(m, int16(i%2)*6)
		}
	}
	sim := tcell.NewSimulationScreen("UTF-8")
	u := newUI(Options{Model: m, Screen: sim})
	sim.SetSize(screenW, screenH)
	u.root.SetRect(0, 0, screenW, screenH)
	u.setScope(scope{kind: scopeAll})
	b.ReportAllocs()
	for b.Loop() {
		s := newSynth(1000, "more") // one new exchange per refresh
		s.exchange(m, 0)
		u.tick(true)
		u.root.Draw(sim)
	}
}
