package tui

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
)

// Colours.
var (
	colorFocus   = tcell.ColorYellow
	colorBlur    = tcell.ColorGray
	colorHeader  = tcell.ColorYellow
	colorBad     = tcell.ColorRed
	colorWarn    = tcell.ColorOrange
	colorGood    = tcell.ColorGreen
	colorDim     = tcell.ColorGray
	colorInfo    = tcell.ColorDodgerBlue
	colorText    = tcell.ColorWhite
	colorHeading = tcell.ColorAqua
)

// roleColors are the roles' colours, by name for style tags.
var roleColors = [...]string{
	cluster.RoleLiveness:     "yellow",
	cluster.RoleRaft:         "fuchsia",
	cluster.RoleReplication:  "dodgerblue",
	cluster.RoleConsumer:     "green",
	cluster.RoleProducer:     "aqua",
	cluster.RoleGroup:        "teal",
	cluster.RoleTransactions: "purple",
	cluster.RoleAdmin:        "orange",
	cluster.RoleMetadata:     "silver",
}

// roleColorName is the colour of a role, by name for style tags.
func roleColorName(r cluster.Role) string {
	if int(r) < len(roleColors) && roleColors[r] != "" {
		return roleColors[r]
	}
	return "white"
}

func roleColor(r cluster.Role) tcell.Color { return tcell.GetColor(roleColorName(r)) }

func severityColor(s detectors.Severity) tcell.Color {
	switch s {
	case detectors.Error:
		return colorBad
	case detectors.Warning:
		return colorWarn
	}
	return colorInfo
}

func headerCell(text string) *tview.TableCell {
	return tview.NewTableCell(text).SetTextColor(colorHeader).SetSelectable(false).
		SetAttributes(tcell.AttrBold)
}

func cell(text string, color tcell.Color) *tview.TableCell {
	return tview.NewTableCell(text).SetTextColor(color)
}

func numCell(text string, color tcell.Color) *tview.TableCell {
	return cell(text, color).SetAlign(tview.AlignRight)
}

func bytesStr(n int64) string {
	for _, u := range [...]struct {
		shift uint
		unit  string
	}{{30, "G"}, {20, "M"}, {10, "K"}} {
		switch {
		case n >= 10<<u.shift:
			return fmt.Sprintf("%.0f%s", float64(n)/float64(int64(1)<<u.shift), u.unit)
		case n >= 1<<u.shift:
			return fmt.Sprintf("%.1f%s", float64(n)/float64(int64(1)<<u.shift), u.unit)
		}
	}
	return strconv.FormatInt(n, 10)
}

func rateStr(r float64) string {
	if r >= 100 {
		return strconv.FormatFloat(r, 'f', 0, 64)
	}
	return strconv.FormatFloat(r, 'f', 1, 64)
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}

func msStr(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 3, 64)
}

// column is a column of a table: its title, alignment and cell, and the
// order it sorts the rows in (Connections; nil: it does not sort).
type column[T any] struct {
	title string
	align int
	cell  func(r *T) *tview.TableCell
	less  func(a, b *T) int
}

// table is the shape of every table: a tview.TableContent over a snapshot
// of rows under a header of its columns, so that only the rows shown are
// drawn.
type table[T any] struct {
	tview.TableContentReadOnly
	rows []T
	cols []column[T]
}

func (c *table[T]) GetRowCount() int    { return len(c.rows) + 1 }
func (c *table[T]) GetColumnCount() int { return len(c.cols) }

func (c *table[T]) GetCell(row, col int) *tview.TableCell {
	if col < 0 || col >= len(c.cols) {
		return nil
	}
	if row == 0 {
		return headerCell(c.cols[col].title).SetAlign(c.cols[col].align)
	}
	if row-1 >= len(c.rows) {
		return nil
	}
	return c.cols[col].cell(&c.rows[row-1])
}

// --- Connections ---

var connColumns = []column[Conn]{
	{"#", tview.AlignRight, func(c *Conn) *tview.TableCell { return numCell(strconv.Itoa(c.ID), colorText) },
		func(a, b *Conn) int { return cmp.Compare(a.ID, b.ID) }},
	{"CLIENT", tview.AlignLeft, func(c *Conn) *tview.TableCell { return cell(safe(c.Client), colorText) },
		func(a, b *Conn) int { return strings.Compare(a.Client, b.Client) }},
	{"", tview.AlignLeft, func(c *Conn) *tview.TableCell { return cell("->", colorDim) }, nil},
	{"SERVER", tview.AlignLeft, func(c *Conn) *tview.TableCell { return cell(safe(c.Server), colorText) },
		func(a, b *Conn) int { return strings.Compare(a.Server, b.Server) }},
	{"ROLES", tview.AlignLeft, rolesCell,
		func(a, b *Conn) int { return slices.Compare(a.Roles, b.Roles) }},
	{"CLIENT ID", tview.AlignLeft, func(c *Conn) *tview.TableCell { return cell(clientIDs(c.ClientIDs), colorText) },
		func(a, b *Conn) int { return slices.Compare(a.ClientIDs, b.ClientIDs) }},
	{"SOFTWARE", tview.AlignLeft, softwareCell, nil},
	{"REQS", tview.AlignRight, func(c *Conn) *tview.TableCell { return numCell(strconv.Itoa(c.Requests), colorText) },
		func(a, b *Conn) int { return cmp.Compare(a.Requests, b.Requests) }},
	{"REQ/S", tview.AlignRight, func(c *Conn) *tview.TableCell { return numCell(rateStr(c.Rate), colorText) },
		func(a, b *Conn) int { return cmp.Compare(a.Rate, b.Rate) }},
	{"ERRORS", tview.AlignRight, func(c *Conn) *tview.TableCell {
		if c.Errors > 0 {
			return numCell(strconv.Itoa(c.Errors), colorBad).SetAttributes(tcell.AttrBold)
		}
		return numCell("0", colorGood)
	}, func(a, b *Conn) int { return cmp.Compare(a.Errors, b.Errors) }},
	{"UNANS", tview.AlignRight, func(c *Conn) *tview.TableCell { return countCell(int64(c.Unanswered), colorWarn) },
		func(a, b *Conn) int { return cmp.Compare(a.Unanswered, b.Unanswered) }},
	{"BYTES ->/<-", tview.AlignRight, func(c *Conn) *tview.TableCell {
		return numCell(bytesStr(c.BytesToServer)+"/"+bytesStr(c.BytesToClient), colorText)
	}, func(a, b *Conn) int {
		return cmp.Compare(a.BytesToServer+a.BytesToClient, b.BytesToServer+b.BytesToClient)
	}},
	{"LAST SEEN", tview.AlignLeft, func(c *Conn) *tview.TableCell { return cell(clock(c.LastSeen), colorText) },
		func(a, b *Conn) int { return a.LastSeen.Compare(b.LastSeen) }},
	{"STATE", tview.AlignLeft, func(c *Conn) *tview.TableCell {
		tls := ""
		if c.TLS != "" {
			tls = ", " + c.TLS
		}
		switch {
		case c.Reset:
			return cell("reset"+tls, colorWarn)
		case c.Closed:
			return cell("closed"+tls, colorDim)
		}
		return cell("open"+tls, colorGood)
	}, func(a, b *Conn) int { return cmp.Compare(stateRank(a), stateRank(b)) }},
}

func stateRank(c *Conn) int {
	switch {
	case c.Reset:
		return 2
	case c.Closed:
		return 1
	}
	return 0
}

func rolesCell(c *Conn) *tview.TableCell {
	if len(c.Roles) == 0 {
		return cell("-", colorDim)
	}
	var b strings.Builder
	for i, r := range c.Roles {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "[%s]%s[-]", roleColorName(r), r)
	}
	// The cell's own colour is the first role's, for terminals that
	// cannot show the tags.
	return cell(b.String(), roleColor(c.Roles[0]))
}

// softwareCell shows the client software told in ApiVersions v3+, and
// warns when the connection used a request version Kafka 4.0 removed.
func softwareCell(c *Conn) *tview.TableCell {
	sw := "-"
	if c.Software != "" {
		sw = safe(c.Software)
	}
	if c.Removed40 != "" {
		old := c.Removed40 + ": not in Kafka 4.0"
		if c.Software != "" {
			old = sw + " · " + old
		}
		return cell(old, colorWarn)
	}
	if c.Software == "" {
		return cell(sw, colorDim)
	}
	return cell(sw, colorText)
}

func clientIDs(ids []string) string {
	if len(ids) == 0 {
		return "-"
	}
	s := safe(ids[0])
	if len(ids) > 1 {
		s += fmt.Sprintf(" (+%d)", len(ids)-1)
	}
	return s
}

// connContent is the Connections table: rows sorted by a column.
type connContent struct {
	table[Conn]
	sortCol int
	desc    bool
}

// GetCell marks the sort column's title, and dims the rows of closed
// connections but for their errors and state.
func (c *connContent) GetCell(row, col int) *tview.TableCell {
	cl := c.table.GetCell(row, col)
	switch {
	case cl == nil:
	case row == 0 && col == c.sortCol && c.desc:
		cl.SetText(cl.Text + "▼")
	case row == 0 && col == c.sortCol:
		cl.SetText(cl.Text + "▲")
	case row > 0 && (c.rows[row-1].Closed || c.rows[row-1].Reset):
		if t := c.cols[col].title; t != "ERRORS" && t != "STATE" {
			cl.SetTextColor(colorDim)
		}
	}
	return cl
}

// sortable lists the columns that sort, for the digit keys.
func sortable() []int {
	var out []int
	for i, c := range connColumns {
		if c.less != nil {
			out = append(out, i)
		}
	}
	return out
}

// sort orders the rows by the column, then by connection number. It
// compares rows in place: a comparison of the copies SortStableFunc hands
// its function allocated both (their addresses escape into less), two
// Conns a comparison, tens of megabytes of garbage a refresh of a few
// thousand rows.
func (c *connContent) sort() {
	less := connColumns[c.sortCol].less
	sort.SliceStable(c.rows, func(i, j int) bool {
		a, b := &c.rows[i], &c.rows[j]
		n := less(a, b)
		if n == 0 {
			return a.ID < b.ID
		}
		if c.desc {
			n = -n
		}
		return n < 0
	})
}

// --- Exchanges ---

type scopeKind int

const (
	scopeAll scopeKind = iota
	scopeConn
	scopeEvidence
)

type scope struct {
	kind     scopeKind
	conn     int
	finding  *detectors.Finding
	from     pane
	missing  int
	evidence []Exchange
}

type exchangeContent struct {
	table[Exchange]
	since  uint64
	follow bool
	scope  scope
	filter Filter
	// narrow: a terminal under narrowExchanges columns, where the
	// columns are narrowColumns (the detail shows the rest).
	narrow bool
}

// narrowExchanges is the width under which Exchanges shows narrowColumns.
const narrowExchanges = 120

// narrowColumns are the columns of Exchanges on a narrow terminal, by
// index in exchangeColumns: the result before the topic, so that an
// 80-column terminal shows what happened.
var narrowColumns = []int{0, 2, 3, 4, 5, 11, 10, 9}

var exchangeColumns = []column[Exchange]{
	{"PKT", tview.AlignRight, func(x *Exchange) *tview.TableCell { return pktCell(x.File, x.ReqPacket) }, nil},
	{"RESP", tview.AlignRight, func(x *Exchange) *tview.TableCell { return pktCell(x.File, x.RespPacket) }, nil},
	{"TIME", tview.AlignLeft, func(x *Exchange) *tview.TableCell { return cell(clock(x.Time), colorText) }, nil},
	{"CONN", tview.AlignRight, func(x *Exchange) *tview.TableCell { return numCell("#"+strconv.Itoa(x.Conn), colorText) }, nil},
	{"API", tview.AlignLeft, func(x *Exchange) *tview.TableCell { return cell(safe(x.API()), roleColor(x.Role)) }, nil},
	{"VER", tview.AlignRight, func(x *Exchange) *tview.TableCell {
		if x.Key < 0 {
			return numCell("-", colorDim)
		}
		return numCell(strconv.Itoa(int(x.Version)), colorText)
	}, nil},
	{"CORR", tview.AlignRight, func(x *Exchange) *tview.TableCell { return numCell(strconv.Itoa(int(x.Correlation)), colorText) }, nil},
	{"ROLE", tview.AlignLeft, func(x *Exchange) *tview.TableCell {
		if x.Role == cluster.RoleNone {
			return cell("-", colorDim)
		}
		return cell(x.Role.String(), roleColor(x.Role))
	}, nil},
	{"CLIENT ID", tview.AlignLeft, func(x *Exchange) *tview.TableCell {
		if x.ClientID == "" {
			return cell("-", colorDim)
		}
		return cell(safe(x.ClientID), colorText).SetMaxWidth(24)
	}, nil},
	{"TOPIC", tview.AlignLeft, func(x *Exchange) *tview.TableCell {
		if x.Topic == "" {
			return cell("-", colorDim)
		}
		t := safe(x.Topic)
		if x.Topics > 1 {
			t += fmt.Sprintf(" (+%d)", x.Topics-1)
		}
		return cell(t, colorText).SetMaxWidth(32)
	}, nil},
	{"LATENCY", tview.AlignRight, func(x *Exchange) *tview.TableCell {
		if x.State != Answered {
			return numCell("-", colorDim)
		}
		return numCell(msStr(x.Latency)+" ms", colorText)
	}, nil},
	{"RESULT", tview.AlignLeft, func(x *Exchange) *tview.TableCell {
		text, color := result(x)
		return cell(literal(text), color)
	}, nil},
	{"SIZE", tview.AlignRight, func(x *Exchange) *tview.TableCell {
		return numCell(sizeStr(x.ReqSize)+"/"+sizeStr(x.RespSize), colorText)
	}, nil},
}

func (c *exchangeContent) GetColumnCount() int {
	if c.narrow {
		return len(narrowColumns)
	}
	return len(c.cols)
}

// GetCell shows the narrowColumns only on a narrow terminal.
func (c *exchangeContent) GetCell(row, col int) *tview.TableCell {
	if c.narrow {
		if col < 0 || col >= len(narrowColumns) {
			return nil
		}
		col = narrowColumns[col]
	}
	return c.table.GetCell(row, col)
}

// pktCell is a packet's number, "-" for none.
func pktCell(file int, n uint64) *tview.TableCell {
	if n == 0 {
		return numCell("-", colorDim)
	}
	return numCell(pktStr(file, n), colorText)
}

// sizeStr is a frame's size, "-" for none.
func sizeStr(n int32) string {
	if n <= 0 {
		return "-"
	}
	return bytesStr(int64(n))
}

// result is the outcome of an exchange in a few words.
func result(x *Exchange) (string, tcell.Color) {
	var parts []string
	color := colorGood
	switch x.State {
	case Unanswered:
		parts, color = append(parts, "unanswered"), colorWarn
	case NoResponse:
		parts, color = append(parts, "no response (acks=0)"), colorDim
	case Unmatched:
		parts, color = append(parts, "unmatched response"), colorWarn
	case NotCaptured:
		parts, color = append(parts, "response not captured (one-sided)"), colorDim
	}
	if x.Errors > 0 {
		e := decode.ErrorName(x.ErrorCode)
		if x.Errors > 1 {
			e += fmt.Sprintf(" x%d", x.Errors)
		}
		parts, color = append(parts, e), colorBad
	}
	if x.BadCRC > 0 {
		parts, color = append(parts, fmt.Sprintf("%d bad CRC", x.BadCRC)), colorBad
	}
	if x.DecodeError {
		parts, color = append(parts, "decode error"), colorBad
	}
	if len(parts) == 0 {
		return "ok", colorGood
	}
	return strings.Join(parts, ", "), color
}

// --- Findings ---

type findingContent struct {
	table[detectors.Finding]
	// where is each row's place in the incidents (Model.FindingsByIncident).
	where []FindingIncident
}

var findingColumns = []column[detectors.Finding]{
	{"INCIDENT", tview.AlignLeft, nil, nil}, // the row's place in the incidents: findingContent.GetCell
	{"SEVERITY", tview.AlignLeft, func(f *detectors.Finding) *tview.TableCell {
		return cell(strings.ToUpper(f.Severity.String()), severityColor(f.Severity)).SetAttributes(tcell.AttrBold)
	}, nil},
	{"DETECTOR", tview.AlignLeft, func(f *detectors.Finding) *tview.TableCell {
		return cell(safe(f.Detector), severityColor(f.Severity))
	}, nil},
	{"EVIDENCE", tview.AlignLeft, func(f *detectors.Finding) *tview.TableCell {
		return numCell(strconv.Itoa(len(f.Evidence)), colorText)
	}, nil},
	{"SUMMARY", tview.AlignLeft, func(f *detectors.Finding) *tview.TableCell { return cell(safeText(f.Summary), colorText) }, nil},
}

func (c *findingContent) GetCell(row, col int) *tview.TableCell {
	if col != 0 || row == 0 || row-1 >= len(c.rows) {
		return c.table.GetCell(row, col)
	}
	var fi FindingIncident
	if row-1 < len(c.where) {
		fi = c.where[row-1]
	}
	return cell(fi.Label(), severityColor(c.rows[row-1].Severity))
}

// --- Stats ---

var statsColumns = []column[APIStats]{
	{"API", tview.AlignLeft, func(s *APIStats) *tview.TableCell { return cell(safe(s.Name), colorText) }, nil},
	{"REQS", tview.AlignRight, func(s *APIStats) *tview.TableCell { return countCell(s.Requests, colorText) }, nil},
	{"RESPS", tview.AlignRight, func(s *APIStats) *tview.TableCell { return countCell(s.Responses, colorText) }, nil},
	{"ERR RESPS", tview.AlignRight, func(s *APIStats) *tview.TableCell { return countCell(s.ErrorResponses, colorBad) }, nil},
	{"UNANS", tview.AlignRight, func(s *APIStats) *tview.TableCell { return countCell(s.Unanswered, colorWarn) }, nil},
	{"P50 ms", tview.AlignRight, func(s *APIStats) *tview.TableCell { return numCell(msStr(s.P50), colorText) }, nil},
	{"P99 ms", tview.AlignRight, func(s *APIStats) *tview.TableCell { return numCell(msStr(s.P99), colorText) }, nil},
	{"MAX ms", tview.AlignRight, func(s *APIStats) *tview.TableCell { return numCell(msStr(s.Max), colorText) }, nil},
	{"ERRORS", tview.AlignLeft, func(s *APIStats) *tview.TableCell {
		if len(s.Errors) == 0 {
			return cell("-", colorDim)
		}
		parts := make([]string, 0, len(s.Errors))
		for _, e := range s.Errors {
			parts = append(parts, fmt.Sprintf("%s=%d", safe(e.Name), e.Count))
		}
		return cell(strings.Join(parts, " "), colorBad)
	}, nil},
}

// countCell is a count, in color unless it is 0.
func countCell(n int64, color tcell.Color) *tview.TableCell {
	if n == 0 {
		color = colorText
	}
	return numCell(strconv.FormatInt(n, 10), color)
}

// --- Detail ---

// treeView converts the detail tree to tview nodes, escaping every line.
func treeView(n *treeNode) *tview.TreeNode {
	t := tview.NewTreeNode(literal(n.Text)).SetExpanded(true).SetReference(n)
	switch n.Kind {
	case kindHeading:
		t.SetColor(colorHeading)
	case kindGood:
		t.SetColor(colorGood)
	case kindBad:
		t.SetColor(colorBad)
	case kindDim:
		t.SetColor(colorDim)
	default:
		t.SetColor(colorText)
	}
	for _, c := range n.Children {
		t.AddChild(treeView(c))
	}
	return t
}

// maxHex bounds the bytes of one frame shown in hex.
const maxHex = 64 << 10

// hexTextOf dumps an exchange's frames in hex; unless secrets, the frames of an API whose
// bodies may carry credentials (decode.SecretKey) are not dumped.
func hexTextOf(x *Exchange, req, resp []byte, secrets bool) string {
	var b strings.Builder
	side := func(name string, pkt uint64, size int32, frame []byte) {
		switch {
		case pkt == 0:
			return
		case frame == nil:
			fmt.Fprintf(&b, "%s frame, packet %s, %d bytes: no longer kept\n\n", name, pktStr(x.File, pkt), size)
			return
		}
		fmt.Fprintf(&b, "%s frame, packet %s, %d bytes\n", name, pktStr(x.File, pkt), size)
		if !secrets && x.Key >= 0 && decode.SecretKey(x.Key) {
			fmt.Fprintf(&b, "not shown: %s frames may carry credentials (--show-secrets shows them)\n\n", x.API())
			return
		}
		hexDump(&b, frame, int(size)-decode.SizeLen, maxHex)
		b.WriteByte('\n')
	}
	side("Request", x.ReqPacket, x.ReqSize, req)
	side("Response", x.RespPacket, x.RespSize, resp)
	return b.String()
}

// findingText is a finding in full, as the text report shows it.
func findingText(f *detectors.Finding, fi FindingIncident) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s::b]%s[-::-] %s\n\n", severityColor(f.Severity).String(), strings.ToUpper(f.Severity.String()), safeText(f.Summary))
	if fi.Story != "" {
		fmt.Fprintf(&b, "[yellow]incident %d[-]  %s\n\n", fi.N, safeText(fi.Story))
	}
	if !f.First.IsZero() {
		fmt.Fprintf(&b, "[yellow]when[-]  %s .. %s UTC (%.3fs)\n", f.First.UTC().Format("2006-01-02 15:04:05.000000"),
			f.Last.UTC().Format("15:04:05.000000"), f.Last.Sub(f.First).Seconds())
	}
	if len(f.Nodes) > 0 {
		fmt.Fprintf(&b, "[yellow]nodes[-]  %v\n", f.Nodes)
	}
	if len(f.Conns) > 0 {
		fmt.Fprintf(&b, "[yellow]connections[-]  %v\n", f.Conns)
	}
	if len(f.Counts) > 0 {
		b.WriteString("[yellow]counts[-] ")
		for _, k := range slices.Sorted(maps.Keys(f.Counts)) {
			fmt.Fprintf(&b, " %s=%d", safe(k), f.Counts[k])
		}
		b.WriteByte('\n')
	}
	if len(f.Fields) > 0 {
		b.WriteString("[yellow]fields[-] ")
		for _, k := range slices.Sorted(maps.Keys(f.Fields)) {
			fmt.Fprintf(&b, " %s=%s", safe(k), safe(fmt.Sprint(f.Fields[k])))
		}
		b.WriteByte('\n')
	}
	if len(f.Evidence) > 0 {
		b.WriteString("\n[yellow]evidence[-] (Enter on the finding lists these exchanges)\n")
		for _, e := range f.Evidence {
			fmt.Fprintf(&b, "  packet %s: %s\n", pktStr(e.File, e.Packet), safeText(e.What))
		}
	}
	if f.Explanation != "" {
		fmt.Fprintf(&b, "\n[yellow]what it means[-]\n%s\n", safeText(f.Explanation))
	}
	if f.Next != "" {
		fmt.Fprintf(&b, "\n[yellow]check next[-]\n%s\n", safeText(f.Next))
	}
	return b.String()
}
