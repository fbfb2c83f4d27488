package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/rivo/tview"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
)

// The timeline (`t`, in place of the Stats pane): per second of capture
// time, requests and error responses, over all connections, for the
// selected connection and for the API of the selected exchange, as
// sparklines, with the findings' spans beneath on the same time axis. It
// ends at the newest packet, so it follows a live capture.

// DefaultTimeline is how many seconds of per-second counts are kept.
const DefaultTimeline = 300

// secRing counts requests and error responses per second of capture
// time over the last size seconds: a slot is reused when its second has
// gone out of the window. Its slots are allocated at its first count, a
// few, and doubled (up to size) only when a second still in the window
// would take the slot of another: a connection that lives a second costs
// 64 bytes, not size slots (4.8 KB at 300 s: 22 MB for the UI's 4,608
// connections, filling over the first quarter of an hour of the soak;
// TestSecRingSmall). What it holds is what a ring of size slots holds.
type secRing struct {
	slots []secSlot
}

type secSlot struct {
	sec      int64
	req, err uint32
}

// secRingFirst is how many slots a ring starts with.
const secRingFirst = 4

func (r *secRing) add(t time.Time, size int, isErr bool) {
	if t.IsZero() {
		return
	}
	if r.slots == nil {
		r.slots = emptySlots(min(secRingFirst, size))
	}
	s := t.Unix()
	sl := &r.slots[uint64(s)%uint64(len(r.slots))]
	for sl.sec != s && sl.sec >= 0 && len(r.slots) < size && sl.sec > s-int64(size) && sl.sec < s+int64(size) {
		// Another second still in the window: more room.
		r.grow(min(2*len(r.slots), size))
		sl = &r.slots[uint64(s)%uint64(len(r.slots))]
	}
	if sl.sec != s {
		if s < sl.sec {
			return // older than the window
		}
		*sl = secSlot{sec: s}
	}
	if isErr {
		sl.err++
	} else {
		sl.req++
	}
}

func emptySlots(n int) []secSlot {
	slots := make([]secSlot, n)
	for i := range slots {
		slots[i].sec = -1
	}
	return slots
}

// grow moves the slots into n: two seconds meeting in one slot (n not a
// multiple of the old size) keep the newer, as a ring of n would have.
func (r *secRing) grow(n int) {
	slots := emptySlots(n)
	for _, sl := range r.slots {
		if sl.sec < 0 {
			continue
		}
		if to := &slots[uint64(sl.sec)%uint64(n)]; sl.sec > to.sec {
			*to = sl
		}
	}
	r.slots = slots
}

// series fills the counts of the seconds from first to first+n-1.
func (r *secRing) series(first int64, n int) Series {
	out := Series{Requests: make([]int, n), Errors: make([]int, n)}
	if r == nil || r.slots == nil {
		return out
	}
	for i := range n {
		s := first + int64(i)
		sl := &r.slots[uint64(s)%uint64(len(r.slots))]
		if sl.sec == s {
			out.Requests[i], out.Errors[i] = int(sl.req), int(sl.err)
		}
	}
	return out
}

// Series is requests and error responses per second.
type Series struct {
	Requests, Errors []int
}

// Timeline is the per-second counts of the last seconds of capture time.
type Timeline struct {
	// First is the second of the first count (UTC); the counts are of
	// First, First+1s, ... up to the newest packet's second.
	First time.Time
	All   Series
	// Conn and API are the selected connection's and API's (nil when
	// none was asked, or the connection is no longer tracked).
	Conn *Series
	API  *Series
}

// Timeline returns the counts of at most the last seconds seconds (and of
// no more than the model keeps, ModelConfig.Timeline), ending at the
// newest packet's second: overall, of connection conn (0: none) and of
// API key api (hasAPI).
func (m *Model) Timeline(seconds, conn int, api int16, hasAPI bool) Timeline {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.status.Last.IsZero() || seconds <= 0 {
		return Timeline{}
	}
	end := m.status.Last.Unix()
	first := max(end-int64(seconds)+1, end-int64(m.cfg.Timeline)+1, m.status.First.Unix())
	n := int(end - first + 1)
	tl := Timeline{First: time.Unix(first, 0).UTC(), All: m.tl.series(first, n)}
	if cs := m.conns[conn]; conn != 0 && cs != nil {
		s := cs.tl.series(first, n)
		tl.Conn = &s
	}
	if hasAPI {
		var r *secRing // none seen: counts of 0
		if a := *m.apiState(api); a != nil {
			r = &a.tl
		}
		s := r.series(first, n)
		tl.API = &s
	}
	return tl
}

// sparks are the levels of a sparkline, from one event to the maximum.
var sparks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws counts scaled to their maximum, a blank for none.
func sparkline(counts []int) string {
	peak := peakOf(counts)
	var b strings.Builder
	for _, c := range counts {
		if c == 0 {
			b.WriteByte(' ')
			continue
		}
		i := (c*len(sparks) - 1) / peak
		b.WriteRune(sparks[min(i, len(sparks)-1)])
	}
	return b.String()
}

func peakOf(counts []int) int {
	p := 0
	for _, c := range counts {
		p = max(p, c)
	}
	return p
}

// maxTimelineFindings bounds the findings drawn under the sparklines.
const maxTimelineFindings = 6

// timelineLabel is the width of a row's label.
const timelineLabel = 34

// timelineText renders the timeline for a pane width columns wide (the
// label included): rows of sparklines, then a row per finding with its
// span on the same axis. connLabel and api name the selections.
func timelineText(tl Timeline, width int, connLabel, api string, findings []detectors.Finding) string {
	var b strings.Builder
	cols := max(width-timelineLabel-1, 10)
	n := len(tl.All.Requests)
	if n == 0 {
		return " no traffic yet"
	}
	skip := max(n-cols, 0) // the newest seconds that fit
	first := tl.First.Add(time.Duration(skip) * time.Second)
	last := tl.First.Add(time.Duration(n-1) * time.Second)
	fmt.Fprintf(&b, "[gray]%s .. %s UTC, one column a second of capture time[-]\n", first.Format("15:04:05"), last.Format("15:04:05"))
	row := func(color, what, who string, counts []int) {
		counts = counts[skip:]
		label := what + " " + who
		peak := peakOf(counts)
		tail := "none"
		if peak > 0 {
			tail = fmt.Sprintf("max %d/s", peak)
		}
		label = fitLabel(label, timelineLabel-len(tail)-1) + " " + tail
		fmt.Fprintf(&b, "%s│[%s]%s[-]\n", label, color, sparkline(counts))
	}
	series := func(who string, s *Series) {
		row("green", "requests", who, s.Requests)
		row("red", "errors  ", who, s.Errors)
	}
	series("all", &tl.All)
	if tl.Conn != nil {
		series(connLabel, tl.Conn)
	}
	if tl.API != nil {
		series(api, tl.API)
	}
	for i, f := range findings {
		if i == maxTimelineFindings {
			fmt.Fprintf(&b, "[gray]… %d more findings[-]\n", len(findings)-i)
			break
		}
		label := fitLabel(strings.ToUpper(f.Severity.String())+" "+safe(f.Detector), timelineLabel)
		line := make([]rune, len(tl.All.Requests)-skip)
		for c := range line {
			line[c] = ' '
			sec := first.Add(time.Duration(c) * time.Second)
			if !f.First.IsZero() && !sec.After(f.Last) && sec.Add(time.Second).After(f.First) {
				line[c] = '━'
			}
		}
		fmt.Fprintf(&b, "%s│[%s]%s[-]\n", label, severityColor(f.Severity).String(), string(line))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// fitLabel pads or cuts s (already escaped for tview) to n columns.
func fitLabel(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		return string(r[:max(n-1, 0)]) + "…"
	}
	return s + strings.Repeat(" ", n-len(r))
}

// timelineAPI is the API named in the timeline for a key.
func timelineAPI(key int16) string {
	if key < 0 {
		return "unmatched"
	}
	return tview.Escape(decode.Name(key))
}

// toggleTimeline shows the timeline in place of the Stats pane, or the
// Stats pane again.
func (u *ui) toggleTimeline() {
	u.showTimeline = !u.showTimeline
	if u.showTimeline {
		u.refreshTimeline(0)
	}
	u.refreshStats()
	switch {
	case u.single():
		u.setFocus(paneStats) // the timeline, or the Stats back in its place
	case u.showTimeline && u.focus == paneStats:
		u.setFocus(paneConns)
	}
}

// refreshTimeline redraws the timeline for the screen's width (0: as
// last drawn, or the width the pane has) from a model snapshot: all
// connections, the selected connection (the drill-down's, else the
// Connections pane's selection) and the API of the selected exchange.
func (u *ui) refreshTimeline(width int) {
	if width <= 0 {
		width = u.timelineW
	}
	if width <= 0 {
		_, _, width, _ = u.timeline.GetInnerRect()
		width += 2
	}
	if width <= 2 {
		width = 120
	}
	u.timelineW = width
	inner := width - 2
	conn := 0
	if u.xs.scope.kind == scopeConn {
		conn = u.xs.scope.conn
	} else if row, _ := u.tables[paneConns].GetSelection(); row >= 1 && row-1 < len(u.conns.rows) {
		conn = u.conns.rows[row-1].ID
	}
	var api int16
	hasAPI := false
	if row, _ := u.tables[paneExchanges].GetSelection(); row >= 1 && row-1 < len(u.xs.rows) {
		api, hasAPI = u.xs.rows[row-1].Key, true
	}
	tl := u.m.Timeline(inner-timelineLabel-1, conn, api, hasAPI)
	text := timelineText(tl, inner, fmt.Sprintf("#%d", conn), timelineAPI(api), u.finds.rows)
	u.timeline.SetText(text)
	u.timelineLines = strings.Count(text, "\n") + 1
	u.layoutMain(0)
}
