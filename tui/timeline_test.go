package tui

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
)

// mm2Requests is the requests per second of the MM2 replay as
// fixtures/gen scripts it (mm2Replay), from 03:00:00: run 1 opens with
// ApiVersions and Metadata at :00, then 257 Produce 4 ms apart from :01
// (250 in :01, 7 in :02); run 2 the same from :35; a consumer's
// ApiVersions, Metadata and Fetch at :38.
func mm2Requests() (all, conn1, produce []int) {
	all, conn1, produce = make([]int, 39), make([]int, 39), make([]int, 39)
	for _, run := range []int{0, 35} {
		all[run] += 2
		for b := range 257 {
			s := run + 1 + b*4/1000
			all[s]++
			produce[s]++
			if run == 0 {
				conn1[s]++
			}
		}
	}
	conn1[0] = 2
	all[38] += 3
	return all, conn1, produce
}

// TestTimelineCounts: the model's per-second counts are the traffic the
// generator scripted, overall, per connection and per API, and no error.
func TestTimelineCounts(t *testing.T) {
	m, _ := analyse(t, scenario("mm2-replay.pcap"), ModelConfig{})
	tl := m.Timeline(300, 1, int16(kmsg.Produce), true)
	all, conn1, produce := mm2Requests()
	if want := time.Date(2026, 7, 20, 3, 0, 0, 0, time.UTC); !tl.First.Equal(want) {
		t.Errorf("first second %v, want %v", tl.First, want)
	}
	if !slices.Equal(tl.All.Requests, all) || tl.Conn == nil || !slices.Equal(tl.Conn.Requests, conn1) || tl.API == nil || !slices.Equal(tl.API.Requests, produce) {
		t.Errorf("requests per second:\nall  %v\nwant %v\n#1   %v\nwant %v\nProduce %v\nwant    %v", tl.All.Requests, all, tl.Conn, conn1, tl.API, produce)
	}
	if slices.Max(tl.All.Errors) != 0 {
		t.Errorf("errors %v, want none", tl.All.Errors)
	}
	// A window shorter than the capture: its last seconds.
	if short := m.Timeline(4, 0, 0, false); !slices.Equal(short.All.Requests, all[35:]) || short.Conn != nil || short.API != nil {
		t.Errorf("the last 4 seconds: %+v", short)
	}
	// The ring keeps only ModelConfig.Timeline seconds.
	m2, _ := analyse(t, scenario("mm2-replay.pcap"), ModelConfig{Timeline: 10})
	if tl := m2.Timeline(300, 0, 0, false); !slices.Equal(tl.All.Requests, all[29:]) {
		t.Errorf("a 10-second ring: %v, want %v", tl.All.Requests, all[29:])
	}
}

// sparkOf returns the sparkline of the timeline row whose label starts
// with label (after the box's border), and the label's line.
func sparkOf(t *testing.T, pane, label string) (string, string) {
	t.Helper()
	for _, l := range strings.Split(pane, "\n") {
		l = strings.TrimPrefix(l, "│")
		if strings.HasPrefix(l, label) {
			_, spark, ok := strings.Cut(l, "│")
			if !ok {
				t.Fatalf("row %q has no axis", l)
			}
			return strings.TrimSuffix(strings.TrimRight(spark, " │"), "│"), l
		}
	}
	t.Fatalf("no timeline row %q in:\n%s", label, pane)
	return "", ""
}

// runeAt is the rune at column c of a sparkline (' ' past its end).
func runeAt(s string, c int) rune {
	r := []rune(s)
	if c >= len(r) {
		return ' '
	}
	return r[c]
}

// TestViewTimeline: `t` shows the timeline in place of the Stats pane:
// one column a second of the MM2 replay, the full block where 250
// requests a second were sent, the lowest where 2 to 7, blanks between
// the runs; no errors; the selected connection's own traffic (moving the
// selection moves it); the duplicate-batches finding's span under them
// from :01 to :37. `t` again brings the Stats back.
func TestViewTimeline(t *testing.T) {
	m, _ := analyse(t, scenario("mm2-replay.pcap"), ModelConfig{})
	done := make(chan struct{})
	close(done)
	s := startUI(t, Options{Title: "mm2", Model: m, Done: done})
	s.waitFor("ENDED", "Stats: per API")
	s.typeText("t")
	scr := s.waitFor("Timeline: requests and errors per second", "03:00:00 .. 03:00:38 UTC")
	if strings.Contains(scr, "Stats: per API") {
		t.Errorf("the Stats pane is still shown:\n%s", scr)
	}
	pane := box(scr, "Timeline")
	all, conn1, _ := mm2Requests()
	spark, lbl := sparkOf(t, pane, "requests all")
	if !strings.Contains(lbl, "max 257/s") && !strings.Contains(lbl, "max 250/s") {
		t.Errorf("row label %q lacks the peak", lbl)
	}
	for c, n := range all {
		got := runeAt(spark, c)
		switch {
		case n == 0 && got != ' ':
			t.Errorf("second %d: %q drawn for no request", c, got)
		case n == 250 && got != '█':
			t.Errorf("second %d (250 requests): %q, want █", c, got)
		case n > 0 && n <= 7 && got != '▁':
			t.Errorf("second %d (%d requests): %q, want ▁", c, n, got)
		}
	}
	if errs, lbl := sparkOf(t, pane, "errors   all"); strings.TrimSpace(errs) != "" || !strings.Contains(lbl, "none") {
		t.Errorf("errors row %q %q, want none", lbl, errs)
	}
	c1, _ := sparkOf(t, pane, "requests #1")
	for c, n := range conn1 {
		if (n == 0) != (runeAt(c1, c) == ' ') {
			t.Errorf("connection #1, second %d: %d requests drawn %q", c, n, runeAt(c1, c))
		}
	}
	span, _ := sparkOf(t, pane, "ERROR duplicate-batches")
	for c := range 39 {
		if want := c >= 1 && c <= 37; want != (runeAt(span, c) == '━') {
			t.Errorf("finding span at second %d: %q", c, runeAt(span, c))
		}
	}
	// The next connection: run 2's.
	s.key(tcell.KeyDown)
	pane = box(s.waitFor("requests #2"), "Timeline")
	c2, _ := sparkOf(t, pane, "requests #2")
	if strings.TrimSpace(string([]rune(c2)[:30])) != "" || runeAt(c2, 36) != '█' {
		t.Errorf("connection #2 sparkline %q: want traffic only from :35", c2)
	}
	s.typeText("t")
	s.waitFor("Stats: per API")
	s.waitGone("Timeline: requests")
}

// TestViewTimelineFollowsCapture: the timeline shown while the analysis
// runs grows with it, up to the capture's last second, with the error
// responses of the observer's Fetch loop (every Fetch refused, 50 a
// second) drawn on its errors row.
func TestViewTimelineFollowsCapture(t *testing.T) {
	m := NewModel(ModelConfig{})
	s := startUI(t, Options{Title: "observer", Model: m})
	s.typeText("t")
	s.waitFor("no traffic yet")
	f, err := capture.Open(scenario("observer-fetch-loop.pcap"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{
		Flows: flows.DefaultConfig(), Handlers: []flows.Handler{m}, Detectors: set, Workers: 1,
	})
	m.SetFindings(res.Report.Findings)
	last := res.Report.Capture.Last.UTC().Format("15:04:05")
	pane := box(s.waitFor(".. "+last+" UTC", "ERROR not-leader-loop"), "Timeline")
	errs, lbl := sparkOf(t, pane, "errors   all")
	if !strings.Contains(lbl, "max 5") { // 50 or 51 a second
		t.Errorf("errors row label %q", lbl)
	}
	r := []rune(strings.TrimRight(errs, " "))
	blank := 0
	for _, c := range r[1 : len(r)-1] {
		if c == ' ' {
			blank++
		}
	}
	if len(r) < 30 || blank > 0 {
		t.Errorf("errors sparkline %q: want every second of the loop drawn", errs)
	}
}
