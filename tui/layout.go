package tui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rivo/tview"
)

// The main page fits the terminal it gets. With room, the panes are
// stacked as in termshark: Connections, Findings and Stats as tall as
// their rows up to a cap, Exchanges the rest. With less room the caps
// shrink; below that (80x24, a broker host's SSH session) one pane is
// shown at a time under a pane switcher, as in k9s: Tab and Shift-Tab
// switch, and the focus is always on the pane shown.

type layoutMode int

const (
	layoutStacked layoutMode = iota // caps of maxPaneRows
	layoutShort                     // caps of shortPaneRows
	layoutSingle                    // one pane under the switcher
)

// maxPaneRows caps the rows of the panes sized to their content.
var maxPaneRows = [numPanes]int{paneConns: 10, paneFindings: 6, paneStats: 8}

// shortPaneRows are the caps when maxPaneRows leave Exchanges too little.
var shortPaneRows = [numPanes]int{paneConns: 4, paneFindings: 3, paneStats: 3}

// minExchangeLines is the least height of the Exchanges pane (borders
// and column header included) for the stacked layout: below it, one pane
// at a time.
const minExchangeLines = 10

// layoutKey is what the main page's layout depends on.
type layoutKey struct {
	mode    layoutMode
	shown   pane // layoutSingle: the pane shown
	tl      bool // the timeline in place of Stats
	heights [numPanes + 1]int
}

// mainHeight is the height the main page gets on a screen h rows tall:
// the hint bar, the prompt when open and the status line take the rest.
func (u *ui) mainHeight(h int) int {
	h -= 1 + u.statusLines
	if u.promptKind != promptNone {
		h--
	}
	return h
}

// paneHeight is the height of a pane sized to its rows under caps (the
// Stats pane none while the timeline takes its place).
func (u *ui) paneHeight(p pane, caps *[numPanes]int) int {
	if p == paneStats && u.showTimeline {
		return 0
	}
	return min(u.paneRows[p], caps[p]) + 3
}

// chooseLayout picks the layout for a main page h rows tall.
func (u *ui) chooseLayout(h int) layoutKey {
	tlH := 0
	if u.showTimeline {
		tlH = u.timelineLines + 2
	}
	for _, try := range []struct {
		mode layoutMode
		caps *[numPanes]int
	}{{layoutStacked, &maxPaneRows}, {layoutShort, &shortPaneRows}} {
		k := layoutKey{mode: try.mode, tl: u.showTimeline}
		used := tlH
		for _, p := range []pane{paneConns, paneFindings, paneStats} {
			k.heights[p] = u.paneHeight(p, try.caps)
			used += k.heights[p]
		}
		k.heights[numPanes] = tlH
		if h-used >= minExchangeLines {
			return k
		}
	}
	return layoutKey{mode: layoutSingle, shown: u.focus, tl: u.showTimeline}
}

// layoutMain lays the main page out for the screen's height (0: the
// last one drawn), if what it depends on changed.
func (u *ui) layoutMain(screenH int) {
	if screenH > 0 {
		u.screenH = screenH
	}
	if u.screenH == 0 {
		return
	}
	k := u.chooseLayout(u.mainHeight(u.screenH))
	u.refreshSwitcher(k)
	if k == u.layout && u.laidOut {
		return
	}
	u.layout, u.laidOut = k, true
	u.main.Clear()
	if k.mode == layoutSingle {
		u.main.AddItem(u.switcher, 1, 0, false)
		if k.shown == paneStats && k.tl {
			u.main.AddItem(u.timeline, 0, 1, true)
		} else {
			u.main.AddItem(u.tables[k.shown], 0, 1, true)
		}
		return
	}
	u.main.AddItem(u.tables[paneConns], k.heights[paneConns], 0, u.focus == paneConns).
		AddItem(u.tables[paneExchanges], 0, 1, u.focus == paneExchanges).
		AddItem(u.tables[paneFindings], k.heights[paneFindings], 0, u.focus == paneFindings)
	if k.tl {
		u.main.AddItem(u.timeline, k.heights[numPanes], 0, false)
	} else {
		u.main.AddItem(u.tables[paneStats], k.heights[paneStats], 0, u.focus == paneStats)
	}
}

// single reports whether the main page shows one pane at a time.
func (u *ui) single() bool { return u.layout.mode == layoutSingle && u.laidOut }

// refreshSwitcher writes the pane switcher: every pane by name and
// count, the one shown highlighted.
func (u *ui) refreshSwitcher(k layoutKey) {
	if k.mode != layoutSingle {
		return
	}
	var b strings.Builder
	for p := range numPanes {
		name := paneNames[p]
		switch p {
		case paneConns:
			name += fmt.Sprintf(" %d", len(u.conns.rows))
		case paneExchanges:
			name += fmt.Sprintf(" %d", len(u.xs.rows))
		case paneFindings:
			name += fmt.Sprintf(" %d", len(u.finds.rows))
		case paneStats:
			if k.tl {
				name = "Timeline"
			}
		}
		if p == k.shown {
			fmt.Fprintf(&b, "[black:yellow] %s [-:-]", name)
		} else {
			fmt.Fprintf(&b, " %s ", name)
		}
	}
	b.WriteString(" [gray]Tab ⇆[-]")
	u.switcher.SetText(b.String())
}

// hint is a key the hint bar names; the bar drops the least important
// (highest prio) first when the terminal is narrow.
type hint struct {
	key, what string
	prio      int
}

var (
	mainHints = []hint{{"?", "help", 0}, {"Tab", "pane", 0}, {"Enter", "open", 0}, {"Esc", "back", 1},
		{"/", "filter", 2}, {"t", "timeline", 1}, {"i", "finding", 4}, {"l", "lag", 5},
		{"p", "pause", 6}, {"w", "save", 7}, {"q", "quit", 0}}
	detailHints = []hint{{"?", "help", 0}, {"Tab", "tree/hex", 1}, {"Enter", "fold", 2}, {"Esc", "back", 0},
		{"/", "filter", 3}, {"w", "save", 4}, {"q", "quit", 0}}
	overHints = []hint{{"Esc", "close", 0}, {"j k", "scroll", 1}, {"q", "quit", 0}}
)

// hintText is the hint bar for hints within width columns.
func hintText(hints []hint, width int) (string, int) {
	keep := make([]bool, len(hints))
	wide := 0
	for i, h := range hints {
		keep[i] = true
		wide += len(h.key) + 1 + len(h.what) + 2
	}
	for prio := 7; wide > width && prio > 0; prio-- {
		for i, h := range hints {
			if keep[i] && h.prio == prio {
				keep[i] = false
				wide -= len(h.key) + 1 + len(h.what) + 2
			}
		}
	}
	var b strings.Builder
	for i, h := range hints {
		if keep[i] {
			fmt.Fprintf(&b, "[yellow]%s[-] %s  ", tview.Escape(h.key), h.what)
		}
	}
	return strings.TrimSuffix(b.String(), " "), max(wide-1, 0)
}

// refreshHints fits the hint bar to the page shown and the width the
// header leaves it.
func (u *ui) refreshHints(w int) {
	hints := mainHints
	switch front, _ := u.pages.GetFrontPage(); front {
	case "main":
		if u.focus == paneFindings {
			// The Findings list cuts long summaries; i shows one whole.
			hints = slices.Clone(mainHints)
			hints[slices.IndexFunc(hints, func(h hint) bool { return h.key == "i" })].prio = 1
		}
	case "detail":
		hints = detailHints
	default:
		hints = overHints
	}
	text, wide := hintText(hints, w-u.headerLen-1)
	if u.message == "" {
		// The tagline goes before any key does.
		full, _ := hintText(hints, 1<<20)
		if text != full {
			u.header.SetText("[::b]kfsniff[::-]")
			text, wide = hintText(hints, w-len("kfsniff")-1)
		} else {
			u.header.SetText("[::b]kfsniff[::-] [gray]Kafka on the wire[-]")
		}
	}
	u.hints.SetText(text)
	u.top.ResizeItem(u.hints, wide, 0)
}
