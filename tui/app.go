package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/kfsniff/kfsniff/report"
)

// Options configure Run.
type Options struct {
	// Title describes the source: "interface lo", "file x.pcap".
	Title string
	// Filter is the filter expression the packets shown were selected
	// by, if any: the status line says FILTERED.
	Filter string
	// Screen is the terminal; nil opens the real one. Tests pass a
	// tcell.NewSimulationScreen. Run initialises it (tview's SetScreen).
	Screen tcell.Screen
	// Model is the state shown, created with NewModel and registered as a
	// pipeline handler by the caller.
	Model *Model
	// SaveTo writes the capture so far to path (the `w` key), and returns
	// what was saved (packets, time span, what was dropped: "" says
	// "saved capture to path"), shown in the header; nil when the source
	// cannot be saved. It runs on its own goroutine.
	SaveTo func(path string) (string, error)
	// Done is closed when the capture ends; the UI stays open until `q`.
	Done <-chan struct{}
	// Refresh is the display's refresh period (default 250ms).
	Refresh time.Duration
}

// DefaultRefresh is how often the display is refreshed from the model.
const DefaultRefresh = 250 * time.Millisecond

// Run shows the UI until the user quits (`q` or Ctrl-C: it returns nil),
// ctx ends (it returns ctx.Err()) or the terminal fails.
func Run(ctx context.Context, opts Options) error {
	if opts.Model == nil {
		return errors.New("tui: Options.Model is nil")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return newUI(opts).run(ctx)
}

type pane int

const (
	paneConns pane = iota
	paneExchanges
	paneFindings
	paneStats
	numPanes
)

var paneNames = [numPanes]string{"Connections", "Exchanges", "Findings", "Stats"}

type promptKind int

const (
	promptNone promptKind = iota
	promptFilter
	promptSave
)

// ui is the tview side. Its fields are touched only on the tview event
// loop's goroutine (inside QueueUpdateDraw or input handlers).
type ui struct {
	opts Options
	m    *Model
	app  *tview.Application

	root     *tview.Flex
	top      *tview.Flex
	main     *tview.Flex
	pages    *tview.Pages
	header   *tview.TextView
	hints    *tview.TextView
	switcher *tview.TextView
	prompt   *tview.InputField
	status   *tview.TextView

	// The layout (layout.go): the screen's height, the layout in use,
	// each pane's rows, the timeline's and the status line's lines, the
	// header's message (empty: the title) and width.
	screenH       int
	layout        layoutKey
	laidOut       bool
	paneRows      [numPanes]int
	timelineLines int
	statusLines   int
	statusW       int
	statusParts   []string
	message       string
	headerLen     int

	tables [numPanes]*tview.Table
	conns  connContent
	xs     exchangeContent
	finds  findingContent
	stats  table[APIStats]
	focus  pane

	detailHead *tview.TextView
	detailBody *tview.Flex
	detailWide int // 0 not laid out, 1 side by side, 2 stacked
	tree       *tview.TreeView
	treeLines  int
	hex        *tview.TextView
	help       *tview.TextView

	findingText *tview.TextView

	lag      table[report.Lag]
	lagTable *tview.Table

	// timeline shows in place of the Stats pane while showTimeline
	// (the `t` key); timelineW is the width it was drawn for.
	timeline     *tview.TextView
	showTimeline bool
	timelineW    int

	promptKind  promptKind
	paused      bool
	ended       bool
	lastVersion uint64
	selecting   bool // a programmatic Select is under way
	scratch     []Exchange

	done   atomic.Bool // Options.Done was closed
	queued atomic.Bool // a refresh is queued
}

func newUI(opts Options) *ui {
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	u := &ui{opts: opts, m: opts.Model, app: tview.NewApplication()}
	u.conns.cols = connColumns
	u.xs.cols = exchangeColumns
	u.finds.cols = findingColumns
	u.stats.cols = statsColumns
	u.lag.cols = lagColumns
	u.xs.follow = true
	if opts.Screen != nil {
		u.app.SetScreen(opts.Screen)
	}
	u.build()
	return u
}

func (u *ui) build() {
	u.header = tview.NewTextView().SetDynamicColors(true)
	u.hints = tview.NewTextView().SetDynamicColors(true).SetTextAlign(tview.AlignRight)
	u.top = tview.NewFlex().AddItem(u.header, 0, 1, false).AddItem(u.hints, 0, 0, false)
	u.switcher = tview.NewTextView().SetDynamicColors(true).SetWrap(false)

	mk := func(p pane, content tview.TableContent) *tview.Table {
		t := tview.NewTable().SetContent(content).SetFixed(1, 0).SetSelectable(true, false)
		t.SetBorder(true).SetBorderColor(colorBlur).SetTitleColor(colorBlur)
		u.tables[p] = t
		return t
	}
	mk(paneConns, &u.conns)
	mk(paneExchanges, &u.xs)
	mk(paneFindings, &u.finds)
	mk(paneStats, &u.stats)

	u.tables[paneConns].SetSelectedFunc(func(row, _ int) { u.openConn(row - 1) })
	u.tables[paneExchanges].SetSelectedFunc(func(row, _ int) { u.openDetail(row - 1) })
	u.tables[paneExchanges].SetSelectionChangedFunc(func(row, _ int) {
		if follow := row >= len(u.xs.rows); !u.selecting && follow != u.xs.follow {
			u.xs.follow = follow
			u.tables[paneExchanges].SetTitle(u.exchangesTitle())
		}
		if u.showTimeline && !u.selecting {
			u.refreshTimeline(0) // the selected exchange's API
		}
	})
	u.tables[paneConns].SetSelectionChangedFunc(func(int, int) {
		if u.showTimeline {
			u.refreshTimeline(0) // the selected connection
		}
	})
	u.tables[paneFindings].SetSelectedFunc(func(row, _ int) { u.openFinding(row - 1) })
	u.tables[paneStats].SetSelectedFunc(func(row, _ int) { u.openAPI(row - 1) })

	// Stacked like termshark's panes; Connections, Findings and Stats are
	// as tall as their rows (up to a cap, then they scroll), Exchanges
	// take the rest.
	focusColors := func(b *tview.Box) {
		b.SetFocusFunc(func() { b.SetBorderColor(colorFocus).SetTitleColor(colorFocus) })
		b.SetBlurFunc(func() { b.SetBorderColor(colorBlur).SetTitleColor(colorBlur) })
		b.SetBorderColor(colorBlur).SetTitleColor(colorBlur)
	}
	u.timeline = tview.NewTextView().SetDynamicColors(true).SetWrap(false)
	u.timeline.SetBorder(true).SetTitle(" Timeline: requests and errors per second (t: stats) ")
	focusColors(u.timeline.Box)
	// Laid out for the screen's height before each draw (layout.go).
	u.main = tview.NewFlex().SetDirection(tview.FlexRow)

	u.detailHead = tview.NewTextView().SetDynamicColors(true)
	u.detailHead.SetBorder(true).SetTitle(" Exchange ")
	u.tree = tview.NewTreeView()
	u.tree.SetBorder(true).SetTitle(" Decoded (Enter folds) ")
	u.tree.SetSelectedFunc(func(n *tview.TreeNode) { n.SetExpanded(!n.IsExpanded()) })
	// tview 0.42 scrolls on Home/End (g/G) but then draws the selection
	// back into view; move the selection instead.
	u.tree.SetInputCapture(func(ev *tcell.EventKey) *tcell.EventKey {
		switch {
		case ev.Key() == tcell.KeyEnd || ev.Key() == tcell.KeyRune && ev.Rune() == 'G':
			u.tree.Move(u.treeLines)
		case ev.Key() == tcell.KeyHome || ev.Key() == tcell.KeyRune && ev.Rune() == 'g':
			u.tree.Move(-u.treeLines)
		default:
			return ev
		}
		return nil
	})
	// The hex view shows wire bytes: no style tags at all.
	u.hex = tview.NewTextView().SetDynamicColors(false).SetWrap(false)
	u.hex.SetBorder(true).SetTitle(" Frames (hex) ")
	focusColors(u.tree.Box)
	focusColors(u.hex.Box)
	// The tree and the hex side by side on a wide terminal (a hex line
	// is 76 columns), stacked as in termshark on a narrow one.
	u.detailBody = tview.NewFlex()
	detail := tview.NewFlex().SetDirection(tview.FlexRow).
		AddItem(u.detailHead, 4, 0, false).
		AddItem(u.detailBody, 0, 1, true)
	u.layoutDetail(true)
	u.app.SetBeforeDrawFunc(func(screen tcell.Screen) bool {
		w, h := screen.Size()
		u.layoutDetail(w >= wideDetail)
		if u.showTimeline && w != u.timelineW {
			u.refreshTimeline(w)
		}
		u.xs.narrow = w < narrowExchanges
		u.layoutStatus(w)
		u.refreshHints(w)
		u.layoutMain(h)
		return false
	})

	u.help = tview.NewTextView().SetDynamicColors(true).SetText(helpText)
	u.help.SetBorder(true).SetTitle(" Help: keys (Esc closes) ").SetBorderColor(colorFocus).SetTitleColor(colorFocus)
	helpBox := tview.NewFlex().
		AddItem(nil, 0, 1, false).
		AddItem(tview.NewFlex().SetDirection(tview.FlexRow).
			AddItem(nil, 0, 1, false).
			AddItem(u.help, strings.Count(helpText, "\n")+3, 0, true).
			AddItem(nil, 0, 1, false), 76, 0, true).
		AddItem(nil, 0, 1, false)

	u.findingText = tview.NewTextView().SetDynamicColors(true).SetWordWrap(true)
	u.findingText.SetBorder(true).SetBorderColor(colorFocus).SetTitleColor(colorFocus)
	findingBox := tview.NewFlex().SetDirection(tview.FlexRow).
		AddItem(nil, 0, 1, false).
		AddItem(tview.NewFlex().
			AddItem(nil, 0, 1, false).
			AddItem(u.findingText, 0, 8, true).
			AddItem(nil, 0, 1, false), 0, 8, true).
		AddItem(nil, 0, 1, false)

	u.pages = tview.NewPages().
		AddPage("main", u.main, true, true).
		AddPage("detail", detail, true, false).
		AddPage("help", helpBox, true, false).
		AddPage("finding", findingBox, true, false).
		AddPage("lag", u.buildLag(), true, false)

	u.prompt = tview.NewInputField().SetFieldBackgroundColor(tcell.ColorDefault)
	u.prompt.SetDoneFunc(u.promptDone)
	u.status = tview.NewTextView().SetDynamicColors(true).SetWrap(false)
	u.statusLines = 1

	u.root = tview.NewFlex().SetDirection(tview.FlexRow).
		AddItem(u.top, 1, 0, false).
		AddItem(u.pages, 0, 1, true).
		AddItem(u.prompt, 0, 0, false).
		AddItem(u.status, 1, 0, false)
	u.setMessage("", false)
	u.app.SetRoot(u.root, true).SetFocus(u.tables[paneConns])
	u.app.SetInputCapture(u.keys)
	u.styleFocus()
}

// wideDetail is the width from which the detail shows the tree and the
// hex side by side.
const wideDetail = 150

func (u *ui) layoutDetail(wide bool) {
	want := 2
	if wide {
		want = 1
	}
	if u.detailWide == want {
		return
	}
	u.detailWide = want
	u.detailBody.Clear()
	if wide {
		u.detailBody.SetDirection(tview.FlexColumn).
			AddItem(u.tree, 0, 1, true).
			AddItem(u.hex, 80, 0, false)
		return
	}
	u.detailBody.SetDirection(tview.FlexRow).
		AddItem(u.tree, 0, 3, true).
		AddItem(u.hex, 0, 2, false)
}

const helpText = `
  [yellow]?[-]            this help
  [yellow]Tab[-] / [yellow]Shift-Tab[-]  next / previous pane (in Detail: tree / hex)
  [yellow]Enter[-]        drill down: a connection's exchanges, an exchange's
               detail, a finding's evidence, an API's exchanges
  [yellow]Esc[-]          back: close detail or help, leave a drill-down,
               clear the filter
  [yellow]/[-]            filter exchanges: words match API, client id, topic,
               error, role; api:Fetch client:raft- topic:orders
               error:NOT_LEADER errors role:raft conn:4 -word
  [yellow]p[-]            pause the display (the capture continues)
  [yellow]w[-]            save the most recent packets (--ui-keep) to a file
  [yellow]1[-]..[yellow]9[-] [yellow]0[-] [yellow]<[-] [yellow]>[-]  Connections: sort by the n-th column, the previous
               or next one; the same digit again reverses
  [yellow]i[-]            Findings: the finding in full
  [yellow]l[-]            lag: each consumer's and follower's high watermark
               minus fetch offset, per partition, over time
  [yellow]t[-]            timeline in place of Stats: requests and errors per
               second, all, of the selected connection and of the
               selected exchange's API, and the findings' spans
  [yellow]j k g G[-]      down, up, first, last (arrows, PgUp, PgDn too);
               Exchanges follow the newest while the last row is selected
  [yellow]q[-]            quit (Ctrl-C too): the report is printed
`

// run shows the UI until it stops.
func (u *ui) run(ctx context.Context) error {
	u.tick(true)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		u.loop(ctx, stop)
	}()
	err := u.app.Run()
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// loop refreshes the display a few times a second from model snapshots,
// never per event, and watches for the end of the capture and of ctx.
func (u *ui) loop(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(u.opts.Refresh)
	defer t.Stop()
	done := u.opts.Done
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			u.app.Stop() // safe from any goroutine
			return
		case <-done:
			done = nil
			u.done.Store(true)
			u.queue()
		case <-t.C:
			u.queue()
		}
	}
}

// queue asks the event loop for a refresh unless one is already waiting,
// so a slow terminal never accumulates refreshes. It does not wait for the
// refresh: tview's QueueUpdate blocks until the event loop runs it, and
// once q has stopped the loop nothing ever does, which left run waiting
// for loop forever (a hang on quitting, one time in a few hundred).
func (u *ui) queue() {
	if u.queued.CompareAndSwap(false, true) {
		go u.app.QueueUpdateDraw(func() {
			u.queued.Store(false)
			u.tick(false)
		})
	}
}

// tick refreshes the status line always, and the panes if the model has
// changed and the display is not paused (or force).
func (u *ui) tick(force bool) {
	if u.done.Load() {
		u.ended = true // the status line says so, even while paused
	}
	if !u.paused || force {
		if v := u.m.Version(); v != u.lastVersion || force {
			u.lastVersion = v
			u.refreshConns()
			u.refreshExchanges()
			u.refreshFindings()
			u.refreshStats()
			if front, _ := u.pages.GetFrontPage(); front == "lag" {
				u.refreshLag()
			}
			if u.showTimeline {
				u.refreshTimeline(0)
			}
		}
	}
	u.refreshStatus()
}

func (u *ui) refreshStatus() {
	st := u.m.Status()
	parts := u.statusParts[:0]
	add := func(format string, a ...any) { parts = append(parts, fmt.Sprintf(format, a...)) }
	if u.opts.Title != "" {
		add("[::b]%s[::-]", safe(u.opts.Title))
	}
	if u.opts.Filter != "" {
		add("[black:orange] FILTERED [-:-] %s", safe(u.opts.Filter))
	}
	if st.Partial != "" {
		add("[black:orange] PARTIAL [-:-] %s", safe(st.Partial))
	}
	add("%d packets", st.Packets)
	if st.Live || st.Drops > 0 {
		add("[%s]%d dropped[-]", redIf(st.Drops), st.Drops)
	}
	if st.Export {
		add("[%s]%d export dropped[-]", redIf(st.ExportDropped), st.ExportDropped)
	}
	if st.SaveDropped > 0 {
		add("[orange]w keeps the last %d MB: %d older packets dropped[-]", st.SaveKeepMB, st.SaveDropped)
	}
	conns := fmt.Sprintf("%d Kafka connections", st.Conns)
	if st.Refused > 0 || st.SYNsLost > 0 {
		conns += fmt.Sprintf(" ([orange]%d refused, %d unanswered SYN[-])", st.Refused, st.SYNsLost)
	}
	parts = append(parts, conns)
	xs := fmt.Sprintf("%d exchanges", st.Exchanges)
	if st.Errors > 0 {
		xs += fmt.Sprintf(" ([red]%d with errors[-])", st.Errors)
	}
	parts = append(parts, xs)
	add("%s/s", rateStr(st.Rate))
	if st.Findings > 0 {
		add("[red]%d findings[-]", st.Findings)
	}
	switch {
	case u.paused:
		add("[black:yellow] PAUSED [-:-] capture continues")
	case u.ended:
		add("[black:gray] ENDED [-:-]")
	default:
		add("[black:green] LIVE [-:-]")
	}
	u.statusParts = parts
	u.layoutStatus(0)
}

// redIf is the colour of a count of losses: red unless it is 0.
func redIf(n int64) string {
	if n > 0 {
		return "red"
	}
	return "-"
}

// layoutStatus writes the status line's parts, wrapped between parts
// onto as many lines as the width w (0: as last drawn) needs: a narrow
// terminal loses none of them.
func (u *ui) layoutStatus(w int) {
	if w > 0 {
		u.statusW = w
	}
	w = u.statusW
	if w <= 0 {
		w = 1 << 20
	}
	const sep = " [gray]│[-] "
	var b strings.Builder
	lines, col := 1, 0
	for i, p := range u.statusParts {
		pw := tview.TaggedStringWidth(p)
		switch {
		case i == 0:
			b.WriteByte(' ')
			col = 1
		case col+3+pw > w:
			b.WriteString("\n ")
			lines, col = lines+1, 1
		default:
			b.WriteString(sep)
			col += 3
		}
		b.WriteString(p)
		col += pw
	}
	u.status.SetText(b.String())
	if lines != u.statusLines {
		u.statusLines = lines
		u.root.ResizeItem(u.status, lines, 0)
	}
}

func (u *ui) refreshConns() {
	t := u.tables[paneConns]
	row, _ := t.GetSelection()
	selID := -1
	if row >= 1 && row-1 < len(u.conns.rows) {
		selID = u.conns.rows[row-1].ID
	}
	u.conns.rows = u.m.Conns()
	u.conns.sort()
	t.SetTitle(fmt.Sprintf(" %s (%d) ", paneNames[paneConns], len(u.conns.rows)))
	u.fit(paneConns, len(u.conns.rows))
	for i := range u.conns.rows {
		if u.conns.rows[i].ID == selID {
			t.Select(i+1, 0)
			return
		}
	}
	if row > len(u.conns.rows) {
		t.Select(len(u.conns.rows), 0)
	}
}

// refreshExchanges appends the exchanges that completed since the last
// refresh (of the scope, through the filter), keeping the list bounded;
// the selection follows the newest unless the user scrolled up.
func (u *ui) refreshExchanges() {
	x := &u.xs
	t := u.tables[paneExchanges]
	row, _ := t.GetSelection()
	dropped := 0
	switch x.scope.kind {
	case scopeEvidence:
		if x.rows == nil {
			for _, r := range x.scope.evidence {
				if x.filter.Match(&r) {
					x.rows = append(x.rows, r)
				}
			}
			if x.rows == nil {
				x.rows = []Exchange{}
			}
		}
	default:
		u.scratch = u.m.AppendExchanges(u.scratch[:0], x.scope.conn, x.since)
		if n := len(u.scratch); n > 0 {
			x.since = u.scratch[n-1].Seq
		}
		for i := range u.scratch {
			if x.filter.Match(&u.scratch[i]) {
				x.rows = append(x.rows, u.scratch[i])
			}
		}
		if limit := u.m.cfg.History; len(x.rows) > limit {
			dropped = len(x.rows) - limit
			n := copy(x.rows, x.rows[dropped:])
			x.rows = x.rows[:n]
		}
		if cap(u.scratch) > 4*u.m.cfg.History {
			u.scratch = nil
		}
	}
	t.SetTitle(u.exchangesTitle())
	u.selecting = true
	defer func() { u.selecting = false }()
	switch {
	case x.follow:
		t.Select(len(x.rows), 0)
	case dropped > 0:
		t.Select(max(1, row-dropped), 0)
	}
}

func (u *ui) exchangesTitle() string {
	x := &u.xs
	var b strings.Builder
	b.WriteString(" Exchanges")
	switch x.scope.kind {
	case scopeConn:
		fmt.Fprintf(&b, " of #%d %s", x.scope.conn, u.connLabel(x.scope.conn))
	case scopeEvidence:
		fmt.Fprintf(&b, ": evidence of %s", safe(x.scope.finding.Detector))
		if x.scope.missing > 0 {
			fmt.Fprintf(&b, " (%d packets no longer kept)", x.scope.missing)
		}
	default:
		b.WriteString(": all")
	}
	fmt.Fprintf(&b, " (%d)", len(x.rows))
	if !x.filter.Empty() {
		fmt.Fprintf(&b, " filter: %s", safe(x.filter.String()))
	}
	if !x.follow && x.scope.kind != scopeEvidence {
		b.WriteString(" [scrolled: G follows]")
	}
	b.WriteByte(' ')
	return b.String()
}

func (u *ui) connLabel(id int) string {
	for i := range u.conns.rows {
		if c := &u.conns.rows[i]; c.ID == id {
			return safe(c.Client) + " -> " + safe(c.Server)
		}
	}
	return ""
}

// fit sizes a pane to its rows, up to its cap (layout.go).
func (u *ui) fit(p pane, rows int) {
	u.paneRows[p] = rows
	u.layoutMain(0)
}

func (u *ui) refreshFindings() {
	u.finds.rows, u.finds.where = u.m.FindingsByIncident()
	u.tables[paneFindings].SetTitle(fmt.Sprintf(" %s (%d) ", paneNames[paneFindings], len(u.finds.rows)))
	u.fit(paneFindings, len(u.finds.rows))
}

func (u *ui) refreshStats() {
	u.stats.rows = u.m.Stats()
	u.tables[paneStats].SetTitle(fmt.Sprintf(" %s: per API ", paneNames[paneStats]))
	u.fit(paneStats, len(u.stats.rows))
}

// styleFocus colours the focused pane's border and title.
func (u *ui) styleFocus() {
	for p, t := range u.tables {
		c := colorBlur
		if pane(p) == u.focus {
			c = colorFocus
		}
		t.SetBorderColor(c).SetTitleColor(c)
	}
}

// setFocus focuses pane p; with one pane at a time, p is the one shown
// (the timeline in the Stats pane's place while it is on).
func (u *ui) setFocus(p pane) {
	u.focus = p
	u.layoutMain(0)
	if p == paneStats && u.showTimeline && u.single() {
		u.app.SetFocus(u.timeline)
	} else {
		u.app.SetFocus(u.tables[p])
	}
	u.styleFocus()
}

// closeKeys are the pages shown over the main one, each with the keys
// that close it besides Esc (those that open it, or the help's '?' and
// the finding's 'i', either closing either).
var closeKeys = map[string]string{"help": "?i", "finding": "?i", "lag": "l"}

// keys handles the global keys; everything else goes to the focused
// widget.
func (u *ui) keys(ev *tcell.EventKey) *tcell.EventKey {
	if u.promptKind != promptNone {
		return ev // the prompt's own keys; Enter and Esc end it
	}
	front, _ := u.pages.GetFrontPage()
	if closers, over := closeKeys[front]; over {
		if ev.Key() == tcell.KeyEscape || ev.Key() == tcell.KeyRune && strings.ContainsRune(closers, ev.Rune()) {
			u.pages.HidePage(front)
			u.restoreFocus()
			return nil
		}
		if ev.Key() == tcell.KeyRune && ev.Rune() == 'q' {
			u.app.Stop()
			return nil
		}
		return ev
	}
	switch ev.Key() {
	case tcell.KeyTab, tcell.KeyBacktab:
		d := 1
		if ev.Key() == tcell.KeyBacktab {
			d = -1
		}
		if front == "detail" {
			if u.tree.HasFocus() {
				u.app.SetFocus(u.hex)
			} else {
				u.app.SetFocus(u.tree)
			}
			return nil
		}
		next := pane((int(u.focus) + d + int(numPanes)) % int(numPanes))
		if next == paneStats && u.showTimeline && !u.single() { // hidden: the timeline is in its place
			next = pane((int(next) + d + int(numPanes)) % int(numPanes))
		}
		u.setFocus(next)
		return nil
	case tcell.KeyEscape:
		u.back()
		return nil
	case tcell.KeyRune:
	default:
		return ev
	}
	switch r := ev.Rune(); r {
	case 'q':
		u.app.Stop()
	case '?':
		u.pages.ShowPage("help")
		u.app.SetFocus(u.help)
	case '/':
		u.openPrompt(promptFilter, "/", u.xs.filter.String())
	case 'l':
		if front != "main" {
			return ev
		}
		u.showLag()
	case 't':
		if front != "main" {
			return ev
		}
		u.toggleTimeline()
	case 'p':
		u.paused = !u.paused
		u.tick(!u.paused)
	case 'w':
		u.openPrompt(promptSave, "save capture to: ", "kfsniff-"+time.Now().Format("20060102-150405")+".pcapng")
	case 'i':
		if front == "main" && u.focus == paneFindings {
			row, _ := u.tables[paneFindings].GetSelection()
			u.showFinding(row - 1)
			return nil
		}
		return ev
	default:
		if front == "main" && u.focus == paneConns {
			switch {
			case r >= '0' && r <= '9':
				u.sortBy(r)
				return nil
			case r == '<' || r == '>':
				u.moveSort(r)
				return nil
			}
		}
		return ev
	}
	return nil
}

// moveSort moves the sort to the previous or next sortable column.
func (u *ui) moveSort(r rune) {
	cols := sortable()
	i := slices.Index(cols, u.conns.sortCol)
	if r == '<' {
		i--
	} else {
		i++
	}
	u.conns.sortCol, u.conns.desc = cols[(i+len(cols))%len(cols)], false
	u.refreshConns()
}

// showFinding shows finding i in full: what, when, the numbers behind it,
// the evidence, what it means and what to check next.
func (u *ui) showFinding(i int) {
	if i < 0 || i >= len(u.finds.rows) {
		return
	}
	var fi FindingIncident
	if i < len(u.finds.where) {
		fi = u.finds.where[i]
	}
	u.findingText.SetText(findingText(&u.finds.rows[i], fi)).ScrollToBeginning()
	u.findingText.SetTitle(fmt.Sprintf(" %s: %s (Esc closes, Enter on the finding shows its evidence) ",
		strings.ToUpper(u.finds.rows[i].Severity.String()), safe(u.finds.rows[i].Detector)))
	u.pages.ShowPage("finding")
	u.app.SetFocus(u.findingText)
}

func (u *ui) restoreFocus() {
	if front, _ := u.pages.GetFrontPage(); front == "detail" {
		u.app.SetFocus(u.tree)
		return
	}
	u.setFocus(u.focus)
}

// sortBy sorts the connections by the n-th sortable column (1..9, 0 for
// the tenth); the same key again reverses the order.
func (u *ui) sortBy(r rune) {
	n := int(r - '1')
	if r == '0' {
		n = 9
	}
	cols := sortable()
	if n >= len(cols) {
		return
	}
	if u.conns.sortCol == cols[n] {
		u.conns.desc = !u.conns.desc
	} else {
		u.conns.sortCol, u.conns.desc = cols[n], false
	}
	u.refreshConns()
}

// back is Esc: close the detail, leave a drill-down, clear the filter.
func (u *ui) back() {
	if front, _ := u.pages.GetFrontPage(); front == "detail" {
		u.pages.SwitchToPage("main")
		u.setFocus(paneExchanges)
		return
	}
	if u.focus != paneExchanges {
		return
	}
	switch {
	case u.xs.scope.kind != scopeAll:
		from := u.xs.scope.from
		u.setScope(scope{kind: scopeAll})
		u.setFocus(from)
	case !u.xs.filter.Empty():
		u.xs.filter = Filter{}
		u.reloadExchanges()
	}
}

func (u *ui) setScope(s scope) {
	u.xs.scope = s
	u.reloadExchanges()
}

// reloadExchanges rebuilds the list for a new scope or filter.
func (u *ui) reloadExchanges() {
	u.xs.rows, u.xs.since = nil, 0
	u.xs.follow = u.xs.scope.kind != scopeEvidence
	u.refreshExchanges()
	if !u.xs.follow {
		u.selecting = true
		u.tables[paneExchanges].Select(1, 0).ScrollToBeginning()
		u.selecting = false
	}
}

func (u *ui) openConn(i int) {
	if i < 0 || i >= len(u.conns.rows) {
		return
	}
	u.setScope(scope{kind: scopeConn, conn: u.conns.rows[i].ID, from: paneConns})
	u.setFocus(paneExchanges)
}

func (u *ui) openFinding(i int) {
	if i < 0 || i >= len(u.finds.rows) {
		return
	}
	f := u.finds.rows[i]
	xs, missing := u.m.Evidence(f.Evidence)
	u.setScope(scope{kind: scopeEvidence, finding: &f, evidence: xs, missing: missing, from: paneFindings})
	u.setFocus(paneExchanges)
}

func (u *ui) openAPI(i int) {
	if i < 0 || i >= len(u.stats.rows) {
		return
	}
	name := u.stats.rows[i].Name
	if u.stats.rows[i].Key < 0 {
		u.xs.filter = ParseFilter("unmatched")
	} else {
		u.xs.filter = ParseFilter("api:=" + name)
	}
	u.reloadExchanges()
	u.setFocus(paneExchanges)
}

// openDetail shows exchange i decoded from its copied frames.
func (u *ui) openDetail(i int) {
	if i < 0 || i >= len(u.xs.rows) {
		return
	}
	x := u.xs.rows[i]
	req, resp := u.m.Frames(&x)
	tree := detailTreeOf(&x, req, resp, u.m.ShowSecrets())
	u.treeLines = tree.Count()
	root := treeView(tree)
	u.tree.SetRoot(root).SetCurrentNode(root)
	u.hex.SetText(hexTextOf(&x, req, resp, u.m.ShowSecrets())).ScrollToBeginning()
	res, color := result(&x)
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s", x.Conn, u.connLabel(x.Conn))
	if x.ClientID != "" {
		fmt.Fprintf(&b, "   client id %s", literal(quote(x.ClientID)))
	}
	if x.Role.String() != "" {
		fmt.Fprintf(&b, "   role [%s]%s[-]", roleColorName(x.Role), x.Role)
	}
	fmt.Fprintf(&b, "\n%s v%d corr %d", safe(x.API()), x.Version, x.Correlation)
	if x.ReqPacket != 0 {
		fmt.Fprintf(&b, "   request packet %s (%d B)", pktStr(x.File, x.ReqPacket), x.ReqSize)
	}
	if x.RespPacket != 0 {
		fmt.Fprintf(&b, "   response packet %s (%d B)", pktStr(x.File, x.RespPacket), x.RespSize)
	}
	if x.State == Answered {
		fmt.Fprintf(&b, "   latency %s ms", msStr(x.Latency))
	}
	if x.Batches > 0 {
		fmt.Fprintf(&b, "   %d batches", x.Batches)
		if x.BadCRC > 0 {
			fmt.Fprintf(&b, " ([red]%d bad CRC[-])", x.BadCRC)
		} else {
			b.WriteString(" ([green]CRC ok[-])")
		}
	}
	fmt.Fprintf(&b, "   [%s]%s[-]", color.String(), literal(res))
	u.detailHead.SetText(b.String())
	u.pages.SwitchToPage("detail")
	u.app.SetFocus(u.tree)
}

func (u *ui) openPrompt(k promptKind, label, text string) {
	u.promptKind = k
	u.prompt.SetLabel(label).SetText(text)
	u.root.ResizeItem(u.prompt, 1, 0)
	u.app.SetFocus(u.prompt)
}

func (u *ui) promptDone(key tcell.Key) {
	k, text := u.promptKind, u.prompt.GetText()
	u.promptKind = promptNone
	u.root.ResizeItem(u.prompt, 0, 0)
	u.restoreFocus()
	if key != tcell.KeyEnter {
		return
	}
	switch k {
	case promptFilter:
		u.xs.filter = ParseFilter(text)
		u.reloadExchanges()
		u.pages.SwitchToPage("main") // also from the detail: show the result
		u.setFocus(paneExchanges)
	case promptSave:
		u.save(strings.TrimSpace(text))
	}
}

// save calls Options.SaveTo off the event loop and shows its result.
func (u *ui) save(path string) {
	switch {
	case u.opts.SaveTo == nil:
		u.setMessage("saving is not available for this source", true)
		return
	case path == "":
		u.setMessage("save: no file name given", true)
		return
	}
	u.setMessage("saving to "+path+" …", false)
	go func() {
		msg := "saved capture to " + path
		what, err := u.opts.SaveTo(path)
		if what != "" {
			msg = what
		}
		u.app.QueueUpdateDraw(func() {
			if err != nil {
				u.setMessage("save failed: "+err.Error(), true)
			} else {
				u.setMessage(msg, false)
			}
		})
	}()
}

// setMessage shows the result of an action (a save) in the header.
func (u *ui) setMessage(s string, bad bool) {
	u.message = s
	if s == "" {
		u.header.SetText("[::b]kfsniff[::-] [gray]Kafka on the wire[-]")
		u.headerLen = len("kfsniff Kafka on the wire")
		return
	}
	c := "green"
	if bad {
		c = "red"
	}
	text := fmt.Sprintf("[::b]kfsniff[::-] [%s]%s[-]", c, safe(s))
	u.header.SetText(text)
	u.headerLen = tview.TaggedStringWidth(text)
}
