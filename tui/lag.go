package tui

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/kfsniff/kfsniff/report"
)

// The Lag view: each consumer's and follower's lag per partition (the
// high watermark in Fetch responses minus the fetch offset asked), as the
// report's Lag section shows it, on a page of its own (`l`).

// Lag returns the lag of every consumer and follower per partition, as
// the report lists it. Topics fetched by id are named as known when their
// series began and servers by address: node identities are the analysis's
// and are read on its goroutine only.
func (m *Model) Lag() []report.Lag {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lag.Rows(nil)
}

var lagColumns = []column[report.Lag]{
	{"FETCHER", tview.AlignLeft, func(l *report.Lag) *tview.TableCell {
		if l.ReplicaNode != nil {
			return cell(fmt.Sprintf("follower node %d (%s %s)", *l.ReplicaNode, literal(quote(l.ClientID)), safe(l.Client)), colorText)
		}
		return cell(fmt.Sprintf("consumer %s %s", literal(quote(l.ClientID)), safe(l.Client)), colorText)
	}, nil},
	{"GROUP", tview.AlignLeft, func(l *report.Lag) *tview.TableCell {
		switch {
		case l.ReplicaNode != nil:
			return cell("-", colorDim)
		case len(l.Groups) == 0:
			return cell("unknown group", colorDim)
		}
		gs := make([]string, len(l.Groups))
		for i, g := range l.Groups {
			gs[i] = literal(quote(g))
		}
		return cell(strings.Join(gs, ","), colorText)
	}, nil},
	{"PARTITION", tview.AlignLeft, func(l *report.Lag) *tview.TableCell {
		return cell(safe(l.Topic)+"-"+strconv.Itoa(int(l.Partition)), colorText)
	}, nil},
	{"FROM", tview.AlignLeft, func(l *report.Lag) *tview.TableCell { return cell(safe(l.Server), colorText) }, nil},
	{"SAMPLES", tview.AlignRight, func(l *report.Lag) *tview.TableCell { return countCell(l.Samples, colorText) }, nil},
	{"FIRST", tview.AlignRight, func(l *report.Lag) *tview.TableCell { return countCell(l.First.Lag, colorText) }, nil},
	{"LAST", tview.AlignRight, func(l *report.Lag) *tview.TableCell { return numCell(strconv.FormatInt(l.Last.Lag, 10), lagColor(l)) }, nil},
	{"MIN", tview.AlignRight, func(l *report.Lag) *tview.TableCell { return countCell(l.Min.Lag, colorText) }, nil},
	{"MAX", tview.AlignRight, func(l *report.Lag) *tview.TableCell { return countCell(l.Max.Lag, colorText) }, nil},
	{"OVER TIME", tview.AlignLeft, func(l *report.Lag) *tview.TableCell {
		parts := make([]string, len(l.Points))
		for i, p := range l.Points {
			parts[i] = strconv.FormatInt(p.Lag, 10)
		}
		return cell(strings.Join(parts, " "), colorText)
	}, nil},
}

// lagColor colours the last lag: a follower behind the high watermark is
// out of the ISR (red); a consumer further behind than it began is
// falling behind (orange); at the high watermark, green.
func lagColor(l *report.Lag) tcell.Color {
	switch {
	case l.Last.Lag == 0:
		return colorGood
	case l.ReplicaNode != nil:
		return colorBad
	case l.Last.Lag > l.First.Lag:
		return colorWarn
	}
	return colorText
}

// refreshLag reloads the Lag table from the model.
func (u *ui) refreshLag() {
	u.lag.rows = u.m.Lag()
	u.lagTable.SetTitle(fmt.Sprintf(" Lag: high watermark minus fetch offset, per fetcher and partition (%d) (l or Esc closes) ", len(u.lag.rows)))
}

// buildLag makes the Lag page.
func (u *ui) buildLag() *tview.Table {
	u.lagTable = tview.NewTable().SetContent(&u.lag).SetFixed(1, 0).SetSelectable(true, false)
	u.lagTable.SetBorder(true).SetBorderColor(colorFocus).SetTitleColor(colorFocus)
	return u.lagTable
}

// showLag shows the Lag page (keys closes it, as the other pages over the
// main one).
func (u *ui) showLag() {
	u.refreshLag()
	u.pages.ShowPage("lag")
	u.app.SetFocus(u.lagTable)
}
