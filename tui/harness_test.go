package tui

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
)

// scenario is a committed capture under fixtures/pcaps/scenarios.
func scenario(name string) string {
	return filepath.Join("..", "fixtures", "pcaps", "scenarios", name)
}

// analyse runs the whole analysis of a capture with the model as an extra
// handler, as the command does, and hands the findings and counters over.
func analyse(t testing.TB, path string, cfg ModelConfig) (*Model, *pipeline.Result) {
	t.Helper()
	f, err := capture.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := NewModel(cfg)
	// One analyzer, as kfsniff runs the TUI (its live findings keep the
	// pipeline on one): the model reads its connections' counters as
	// events arrive, which workers would still be writing.
	res := pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{
		Flows: flows.DefaultConfig(), Handlers: []flows.Handler{m}, Detectors: set, Workers: 1,
	})
	m.Sync()
	m.SetFindings(res.Report.Findings)
	m.SetCounters(Counters{Packets: res.Report.Capture.Packets, Bytes: res.Report.Capture.Bytes})
	return m, res
}

// screen drives a UI on a tcell simulation screen and reads what a person
// would see.
type screen struct {
	t    *testing.T
	u    *ui
	sim  tcell.SimulationScreen
	errc chan error
	stop context.CancelFunc
}

const (
	screenW = 160
	screenH = 48
)

func startUI(t *testing.T, opts Options) *screen {
	t.Helper()
	return startUISized(t, opts, screenW, screenH)
}

// startUISized is startUI on a terminal of w columns and h rows.
func startUISized(t *testing.T, opts Options, screenW, screenH int) *screen {
	t.Helper()
	sim := tcell.NewSimulationScreen("UTF-8")
	opts.Screen = sim
	if opts.Refresh == 0 {
		opts.Refresh = 20 * time.Millisecond
	}
	u := newUI(opts) // initialises the screen
	sim.SetSize(screenW, screenH)
	ctx, cancel := context.WithCancel(context.Background())
	s := &screen{t: t, u: u, sim: sim, errc: make(chan error, 1), stop: cancel}
	go func() { s.errc <- u.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.errc:
		case <-time.After(5 * time.Second):
			t.Error("the UI did not stop when its context ended")
		}
	})
	return s
}

// onLoop runs f on the UI's event loop (where the widgets and the screen
// may be read without racing the drawing) and waits for it.
func (s *screen) onLoop(f func()) bool {
	done := make(chan struct{})
	s.u.app.QueueUpdate(func() { f(); close(done) })
	select {
	case <-done:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// text is the screen's content, one line per row, trailing blanks cut.
func (s *screen) text() string {
	var out string
	s.onLoop(func() { out = s.contents(nil) })
	return out
}

// contents renders the screen; with style, each cell's style too.
func (s *screen) contents(style func(x, y int, c tcell.SimCell)) string {
	cells, w, h := s.sim.GetContents()
	var b strings.Builder
	for y := 0; y < h; y++ {
		var line strings.Builder
		for x := 0; x < w; x++ {
			c := cells[y*w+x]
			if style != nil {
				style(x, y, c)
			}
			if len(c.Runes) == 0 || c.Runes[0] == 0 {
				line.WriteByte(' ')
				continue
			}
			line.WriteRune(c.Runes[0])
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	return b.String()
}

// waitFor waits until every want is on the screen and returns it.
func (s *screen) waitFor(want ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		got = s.text()
		missing := false
		for _, w := range want {
			if !strings.Contains(got, w) {
				missing = true
				break
			}
		}
		if !missing {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			s.t.Errorf("screen lacks %q", w)
		}
	}
	s.t.Fatalf("screen:\n%s", got)
	return ""
}

// waitGone waits until none of the strings is on the screen.
func (s *screen) waitGone(gone ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		got = s.text()
		found := false
		for _, g := range gone {
			if strings.Contains(got, g) {
				found = true
			}
		}
		if !found {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("screen still shows one of %q:\n%s", gone, got)
	return ""
}

func (s *screen) key(k tcell.Key) { s.sim.InjectKey(k, 0, tcell.ModNone) }

func (s *screen) typeText(text string) {
	for _, r := range text {
		s.sim.InjectKey(tcell.KeyRune, r, tcell.ModNone)
	}
}

// line returns the first screen line containing substr.
func line(screen, substr string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, substr) {
			return l
		}
	}
	return ""
}
