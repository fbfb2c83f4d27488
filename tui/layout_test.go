package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"
)

// client is a capture of a real client under fixtures/pcaps/clients.
func client(name string) string {
	return filepath.Join("..", "fixtures", "pcaps", "clients", name)
}

// realClient is kgo refused by the leader of three partitions for 8 s,
// analysed, its capture ended.
func realClient(t *testing.T, name string) (*Model, chan struct{}) {
	t.Helper()
	m, _ := analyse(t, client(name), ModelConfig{})
	done := make(chan struct{})
	close(done)
	return m, done
}

var paneTitles = []string{"Connections (", "Exchanges: all (", "Findings (", "Stats: per API"}

// boxes are the titles of the panes drawn on the screen (top borders).
func boxes(scr string) []string {
	var out []string
	for _, l := range strings.Split(scr, "\n") {
		if !strings.HasPrefix(l, "┌") && !strings.HasPrefix(l, "╔") {
			continue
		}
		for _, title := range append(paneTitles, "Timeline:") {
			if strings.Contains(l, title) {
				out = append(out, title)
			}
		}
	}
	return out
}

// dataRows is the number of rows under the column header of the pane
// titled title.
func dataRows(scr, title string) int {
	b := box(scr, title)
	if b == "" {
		return 0
	}
	return strings.Count(b, "\n") // lines minus the header
}

// TestViewSizes draws a real client's capture at 80x24 (one pane at a
// time under a switcher), 120x36 (stacked, short caps) and 200x60
// (stacked): the hint bar names the keys that matter, the status line is
// whole, Tab never focuses a pane not drawn, and Exchanges, when stacked,
// has room for rows.
func TestViewSizes(t *testing.T) {
	for _, tc := range []struct {
		w, h    int
		single  bool
		minRows int // Exchanges rows when stacked
	}{
		{80, 24, true, 0},
		{120, 36, false, 7},
		{200, 60, false, 20},
	} {
		t.Run(fmt.Sprintf("%dx%d", tc.w, tc.h), func(t *testing.T) {
			m, done := realClient(t, "notleader-8s-kgo.pcap")
			s := startUISized(t, Options{Title: "file notleader-8s-kgo.pcap", Model: m, Done: done}, tc.w, tc.h)
			scr := s.waitFor("ENDED", "Connections")
			lines := strings.Split(scr, "\n")
			for _, want := range []string{"? help", "Tab pane", "Enter open", "Esc back", "t timeline", "q quit"} {
				if !strings.Contains(lines[0], want) {
					t.Errorf("hint bar %q lacks %q", lines[0], want)
				}
			}
			status := strings.Join(lines[len(lines)-4:], " ")
			for _, want := range []string{"file notleader-8s-kgo.pcap", "454 packets", "5 Kafka connections", "106 exchanges", "1 findings", "ENDED"} {
				if !strings.Contains(status, want) {
					t.Errorf("status %q lacks %q", status, want)
				}
			}
			got := boxes(scr)
			if tc.single {
				if len(got) != 1 || got[0] != "Connections (" {
					t.Fatalf("at %dx%d one pane, Connections, should show; got %q:\n%s", tc.w, tc.h, got, scr)
				}
				sw := lines[1]
				for _, want := range []string{"Connections 5", "Exchanges 106", "Findings 1", "Stats", "Tab"} {
					if !strings.Contains(sw, want) {
						t.Errorf("switcher %q lacks %q", sw, want)
					}
				}
				// The pane shown is highlighted in the switcher.
				if _, bg, _ := s.styles().styleAt(sw, "Connections 5", 0).Decompose(); bg != tcell.ColorYellow {
					t.Errorf("switcher's shown pane background %v, want yellow", bg)
				}
			} else {
				if len(got) != 4 {
					t.Fatalf("at %dx%d all four panes should show; got %q:\n%s", tc.w, tc.h, got, scr)
				}
				if n := dataRows(scr, "Exchanges: all"); n < tc.minRows {
					t.Errorf("Exchanges shows %d rows at %dx%d, want at least %d:\n%s", n, tc.w, tc.h, tc.minRows, scr)
				}
			}
			// Tab goes round the panes; the focused one is always drawn
			// (in the single layout, the only one drawn).
			for i := 1; i <= 4; i++ {
				s.key(tcell.KeyTab)
				title := paneTitles[i%4]
				scr = s.waitFocus(title)
				if got := boxes(scr); tc.single && (len(got) != 1 || got[0] != title) {
					t.Errorf("after %d Tab: panes drawn %q, want only %q", i, got, title)
				}
				if fg := s.styles().at(line(scr, title), strings.Fields(title)[0], 0); fg != colorFocus {
					t.Errorf("%s title drawn in %v, want %v", title, fg, colorFocus)
				}
			}
			// The timeline: at 80x24 it is the pane shown, focused; with
			// room it takes the Stats pane's place and Tab skips it.
			s.typeText("t")
			scr = s.waitFor("Timeline: requests and errors per second")
			if tc.single {
				if got := boxes(scr); len(got) != 1 || got[0] != "Timeline:" {
					t.Errorf("t at %dx%d: panes drawn %q, want the timeline alone:\n%s", tc.w, tc.h, got, scr)
				}
				s.waitFocus("Timeline:")
				if !strings.Contains(strings.Split(scr, "\n")[1], "Timeline") {
					t.Errorf("switcher does not name the timeline:\n%s", scr)
				}
			} else {
				if got := boxes(scr); len(got) != 4 || strings.Contains(scr, "Stats: per API") {
					t.Errorf("t at %dx%d: panes drawn %q, want the timeline in place of Stats:\n%s", tc.w, tc.h, got, scr)
				}
				if n := dataRows(scr, "Exchanges: all"); n < tc.minRows-3 {
					t.Errorf("Exchanges shows %d rows with the timeline at %dx%d:\n%s", n, tc.w, tc.h, scr)
				}
				for _, title := range []string{"Exchanges: all", "Findings (", "Connections ("} {
					s.key(tcell.KeyTab)
					s.waitFocus(title)
				}
			}
			s.typeText("t")
			s.waitGone("Timeline: requests")
		})
	}
}

// TestViewFindingToFramesSmall: at 80x24, from a finding to its evidence
// frames with the keys the hint bar shows (Tab, Enter).
func TestViewFindingToFramesSmall(t *testing.T) {
	m, done := realClient(t, "notleader-8s-kgo.pcap")
	s := startUISized(t, Options{Model: m, Done: done}, 80, 24)
	scr := s.waitFor("ENDED", "Connections (5)")
	hints := strings.Split(scr, "\n")[0]
	for _, k := range []string{"Tab", "Enter"} {
		if !strings.Contains(hints, k) {
			t.Fatalf("hint bar %q does not name %s", hints, k)
		}
	}
	s.key(tcell.KeyTab)
	s.key(tcell.KeyTab)
	scr = s.waitFocus("Findings (1)")
	// The list cuts the summary at 80 columns: i, which shows it whole,
	// is named while Findings has the focus.
	if h := strings.Split(scr, "\n")[0]; !strings.Contains(h, "i finding") || !strings.Contains(h, "t timeline") {
		t.Errorf("hint bar on Findings %q lacks i or t", h)
	}
	s.typeText("i")
	full := s.waitFor("Esc closes")
	for _, w := range []string{"metadata names broker 1 as leader of orders-1", "[3 partitions: 0, 1, 2]"} {
		if !strings.Contains(strings.Join(strings.Fields(full), " "), w) {
			t.Errorf("the finding in full lacks %q:\n%s", w, full)
		}
	}
	s.key(tcell.KeyEscape)
	scr = s.waitFocus("Findings (1)")
	if !strings.Contains(scr, "WARNING") || !strings.Contains(scr, "not-leader") {
		t.Fatalf("the finding is not drawn:\n%s", scr)
	}
	s.key(tcell.KeyEnter)
	scr = s.waitFocus("Exchanges: evidence of")
	if got := boxes(scr); len(got) != 0 && len(got) != 1 {
		t.Errorf("panes drawn %q", got)
	}
	if !strings.Contains(box(scr, "Exchanges: evidence of"), "NOT_LEADER_OR_FOLLOWER") {
		t.Errorf("the evidence does not show the refusals:\n%s", scr)
	}
	s.key(tcell.KeyEnter)
	scr = s.waitFor("Decoded", "Frames (hex)", "Produce v")
	hints = strings.Split(scr, "\n")[0]
	for _, want := range []string{"Tab tree/hex", "Esc back", "q quit"} {
		if !strings.Contains(hints, want) {
			t.Errorf("detail's hint bar %q lacks %q", hints, want)
		}
	}
	if !strings.Contains(box(scr, "Frames (hex)"), "0000  ") {
		t.Errorf("no hex rows at 80x24:\n%s", scr)
	}
	s.key(tcell.KeyEscape)
	s.waitFocus("Exchanges: evidence of")
}

// TestScreenGolden80x24 writes what the UI shows at 80x24 on a real
// client's capture, with the Findings pane shown, to
// testdata/screen-80x24.txt for the README; go test ./tui -update
// refreshes it.
func TestScreenGolden80x24(t *testing.T) {
	m, done := realClient(t, "notleader-8s-kgo.pcap")
	s := startUISized(t, Options{Title: "file notleader-8s-kgo.pcap", Model: m, Done: done}, 80, 24)
	s.waitFor("ENDED", "Connections (5)")
	s.key(tcell.KeyTab)
	s.key(tcell.KeyTab)
	got := s.waitFocus("Findings (1)")
	path := filepath.Join("testdata", "screen-80x24.txt")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./tui -update)", err)
	}
	if got != string(want) {
		t.Errorf("screen-80x24.txt differs (go test ./tui -update rewrites it):\ngot:\n%s\nwant:\n%s", got, want)
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), got) {
		t.Errorf("README.md's Terminal UI section does not show testdata/screen-80x24.txt: paste it there")
	}
}

// TestViewResize: a terminal made smaller, then larger, is redrawn in
// the layout that fits, nothing of the previous one left over.
func TestViewResize(t *testing.T) {
	m, done := realClient(t, "notleader-8s-kgo.pcap")
	s := startUISized(t, Options{Model: m, Done: done}, 200, 60)
	s.waitFor("ENDED", "Stats: per API")
	s.key(tcell.KeyTab) // Exchanges
	s.waitFocus("Exchanges: all")
	resize := func(w, h int) string {
		s.onLoop(func() {})
		s.sim.SetSize(w, h)
		if err := s.sim.PostEvent(tcell.NewEventResize(w, h)); err != nil {
			t.Fatal(err)
		}
		var scr string
		for range 500 {
			scr = s.text()
			if lines := strings.Split(strings.TrimSuffix(scr, "\n"), "\n"); len(lines) == h && strings.Contains(lines[0], "q quit") {
				if w < 100 == (len(boxes(scr)) == 1) {
					return scr
				}
			}
			s.onLoop(func() {})
		}
		t.Fatalf("not redrawn at %dx%d:\n%s", w, h, scr)
		return ""
	}
	scr := resize(80, 24)
	if got := boxes(scr); len(got) != 1 || got[0] != "Exchanges: all (" || !focused(scr, "Exchanges: all") {
		t.Errorf("at 80x24 the focused Exchanges should be the pane shown; got %q:\n%s", got, scr)
	}
	if strings.Contains(scr, "Stats: per API") || strings.Count(scr, "└")+strings.Count(scr, "╚") != 1 {
		t.Errorf("the stacked layout is left over:\n%s", scr)
	}
	scr = resize(120, 36)
	if got := boxes(scr); len(got) != 4 || !focused(scr, "Exchanges: all") {
		t.Errorf("at 120x36 all four panes, Exchanges focused; got %q:\n%s", got, scr)
	}
}

// TestViewStatusSaysFilteredAndPartial: the status line says what the
// run left out, whole even at 80 columns.
func TestViewStatusSaysFilteredAndPartial(t *testing.T) {
	m, done := realClient(t, "notleader-8s-kgo.pcap")
	m.SetPartial("stopped after -c 400 packets, before the end of the input")
	s := startUISized(t, Options{Title: "file notleader-8s-kgo.pcap", Filter: "tcp port 9093", Model: m, Done: done}, 80, 24)
	scr := s.waitFor("ENDED")
	lines := strings.Split(strings.TrimSuffix(scr, "\n"), "\n")
	status := strings.Join(lines[len(lines)-5:], "\n")
	for _, want := range []string{"FILTERED  tcp port 9093", "PARTIAL  stopped after -c 400 packets, before the end of the input", "ENDED"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	if bg := s.styles().styleAt(line(scr, "FILTERED"), "FILTERED", 0); bg == tcell.StyleDefault {
		t.Errorf("FILTERED not highlighted")
	}
}
