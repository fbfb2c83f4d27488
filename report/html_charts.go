package report

import (
	"bytes"
	"fmt"
	"html"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Charts and the map are drawn into SVG by our own writer (svg.go), which
// the page holds inline: no script draws them and they need nothing from
// the network. The writer escapes text, and every wire-derived label is
// Clean'ed before it gets there.

// Chart sizes, in points (the SVG's width and height attributes; a CSS
// pixel is 3/4 of a point).
const (
	ChartWidth  = 450
	ChartHeight = 240
	MapWidth    = 720
)

// palette: Tableau 10, distinguishable by most colour-blind readers.
var palette = []color.NRGBA{
	{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0x59, 0xa1, 0x4f, 0xff}, {0xb0, 0x7a, 0xa1, 0xff},
	{0x76, 0xb7, 0xb2, 0xff}, {0xed, 0xc9, 0x48, 0xff}, {0xff, 0x9d, 0xa7, 0xff}, {0x9c, 0x75, 0x5f, 0xff},
	{0xba, 0xb0, 0xac, 0xff}, {0x49, 0x4f, 0x9a, 0xff},
}

var (
	grey      = color.NRGBA{0x79, 0x70, 0x6e, 0xff}
	failRed   = color.NRGBA{0xd6, 0x27, 0x28, 0xff}
	axisColor = color.NRGBA{0x44, 0x44, 0x44, 0xff}
	gridColor = color.NRGBA{0xe8, 0xe8, 0xe8, 0xff}
	white     = color.NRGBA{0xff, 0xff, 0xff, 0xff}
	severity  = map[string]color.NRGBA{
		"error":   {0xd6, 0x27, 0x28, 0xd0},
		"warning": {0xf2, 0x8e, 0x2b, 0xd0},
		"info":    {0x4e, 0x79, 0xa7, 0xb0},
	}
)

func colorOf(i int) color.NRGBA {
	if i < 0 {
		return grey
	}
	return palette[i%len(palette)]
}

// Text sizes, in points.
const (
	titleSize  = 12
	labelSize  = 10 // an axis's name
	tickSize   = 9
	legendSize = 8
	spanSize   = 7
	nodeSize   = 9
)

// legendWidth is the part of a chart's width its legend takes, on the
// right, beside the plot rather than over the data.
const legendWidth = 0.27

// legend is the list of entries beside a plot: a thumbnail drawn by the
// caller, then the name.
type legend struct {
	x, y float64
	size float64 // of its text
}

// entry draws one row: thumb draws the thumbnail in the box from (x, y-4)
// to (x+14, y+4); the name follows.
func (l *legend) entry(s *svgDoc, name string, thumb func(x, y float64)) {
	thumb(l.x, l.y)
	s.text(l.x+18, l.y, textStyle{size: l.size, middle: true}, name)
	l.y += l.size + 3
}

func lineThumb(s *svgDoc, p pen) func(x, y float64) {
	return func(x, y float64) { s.polyline([][2]float64{{x, y}, {x + 14, y}}, p) }
}

// drawChart renders one chart with the findings' spans as SVG: the data
// below, one bar per finding above it (a Gantt strip over the same time
// axis, so that "when did it start" lines up with the traffic), the
// legend on the right.
// step is the width of a point (the timeline's bucket, in seconds): points
// further apart than that have no data between them, and no line joins
// them.
func drawChart(c Chart, spans []Span, xmax, step float64) []byte {
	const w, h = ChartWidth, ChartHeight
	xmax = math.Max(xmax, 1)
	top, lo := 0.0, math.Inf(1)
	for _, l := range c.Lines {
		for _, pt := range l.Points {
			top = math.Max(top, pt[1])
			if pt[1] > 0 {
				lo = math.Min(lo, pt[1])
			}
		}
	}
	ys := scale{log: c.Log}
	var yticks []tick
	if c.Log {
		if math.IsInf(lo, 1) {
			lo, top = 0.1, 1
		}
		ys.min, ys.max = lo/2, math.Max(top*2, lo*10)
		yticks = logTicks(ys.min, ys.max)
	} else {
		ys.min, ys.max = 0, math.Max(top*1.08, 1)
		yticks = linearTicks(ys.min, ys.max, 4)
	}

	// The plot's box: room on the left for the y axis's name and its
	// labels, below for the x axis's, above for the title; the legend
	// to the right.
	legendX := w * (1 - legendWidth)
	labelW := 0.0
	for _, t := range yticks {
		labelW = math.Max(labelW, textWidth(t.label, tickSize))
	}
	left, right := 18+labelW+7, legendX-8
	boxTop, bottom := 24.0, h-34.0
	// The findings' bars take the top of the box, a row each, at most
	// half of it; the data and the y axis the rest: the bars are not a
	// quantity.
	rowH := 0.0
	if len(spans) > 0 {
		rowH = math.Min(10.5, 0.5*(bottom-boxTop)/float64(len(spans)))
	}
	dataTop := boxTop + rowH*float64(len(spans))
	if len(spans) > 0 {
		dataTop += 4
	}
	const pad = 4 // between the axes and the data
	xs := scale{min: 0, max: xmax, p0: left + pad, p1: right}
	ys.p0, ys.p1 = bottom-pad, dataTop

	s := newSVG(w, h)
	title := c.Title
	if len(c.Lines) == 0 {
		title += ": none"
	}
	s.text(legendX/2, 15, textStyle{size: titleSize, anchor: "middle"}, title)

	// Axes: grid lines at the labelled values, ticks, labels, names.
	axis := pen{color: axisColor, width: 0.6}
	for _, t := range yticks {
		y := ys.at(t.v)
		if t.label == "" {
			s.polyline([][2]float64{{left - 2, y}, {left, y}}, axis)
			continue
		}
		s.polyline([][2]float64{{left + 0.5, y}, {right, y}}, pen{color: gridColor, width: 0.6})
		s.polyline([][2]float64{{left - 4, y}, {left, y}}, axis)
		s.text(left-6, y, textStyle{size: tickSize, anchor: "end", middle: true}, t.label)
	}
	s.polyline([][2]float64{{left, dataTop}, {left, bottom}, {right, bottom}}, axis)
	for _, t := range linearTicks(0, xmax, 4) {
		x := xs.at(t.v)
		if t.label == "" {
			s.polyline([][2]float64{{x, bottom}, {x, bottom + 2}}, axis)
			continue
		}
		s.polyline([][2]float64{{x, bottom}, {x, bottom + 4}}, axis)
		s.text(x, bottom+13, textStyle{size: tickSize, anchor: "middle"}, t.label)
	}
	s.text((left+right)/2, h-6, textStyle{size: labelSize, anchor: "middle"}, "seconds from the first Kafka frame")
	s.text(11, (dataTop+bottom)/2, textStyle{size: labelSize, anchor: "middle", up: true}, c.Unit)

	drawSpans(s, spans, xs, dataTop, bottom-pad, rowH)

	// The legend's text is smaller when a name would not fit at
	// legendSize, down to 6.5 points.
	leg := legend{x: legendX + 6, y: 30, size: legendSize}
	for _, l := range c.Lines {
		room := w - (leg.x + 18) - 2
		leg.size = math.Max(6.5, math.Min(leg.size, room/textWidth(cut(Clean(l.Name), 24), 1)))
	}
	for _, l := range c.Lines {
		if len(l.Points) == 0 {
			continue
		}
		p := pen{color: colorOf(l.Color), width: 1.5}
		if l.Dashed {
			p.dash = "4,3"
		}
		for _, run := range runs(l.Points, step) {
			pts := make([][2]float64, len(run))
			for i, pt := range run {
				pts[i] = [2]float64{xs.at(pt[0]), ys.at(pt[1])} // at puts y <= 0 of a log axis at its bottom
			}
			// A run of one point (a capture of one second, a bucket
			// with responses between buckets without) is a dot: a
			// line through one point draws nothing.
			if len(pts) == 1 {
				s.circle(pts[0][0], pts[0][1], 1.8, p.color)
				continue
			}
			s.polyline(pts, p)
		}
		leg.entry(s, cut(Clean(l.Name), 24), lineThumb(s, p))
	}
	return s.bytes()
}

// drawSpans draws each finding as a bar over its span in a row of the
// strip above the data (the first nearest the data), labelled with its
// number, and a dotted line down to the data where it starts.
func drawSpans(s *svgDoc, spans []Span, xs scale, stripBottom, dataBottom, rowH float64) {
	min := xs.max / 150 // a span of an instant is still seen
	barH := rowH * 0.75
	// A label inside its bar fits its height; beside a short or thin
	// bar, in the bar's colour, it may take the row's.
	inside, beside := math.Min(spanSize, barH+0.5), math.Min(spanSize, rowH*0.95)
	for i, sp := range spans {
		from, to := sp.From, sp.To
		if to-from < min {
			to = from + min
		}
		x0, x1 := xs.at(from), xs.at(to)
		y := stripBottom - 4 - float64(i+1)*rowH
		col := severity[sp.Severity]
		s.rect(x0, y, x1-x0, barH, col)
		line := col
		line.A = 0x90
		s.polyline([][2]float64{{x0, y + barH}, {x0, dataBottom}}, pen{color: line, width: 0.8, dash: "1,2"})
		label := fmt.Sprintf("#%d", sp.Finding)
		st := textStyle{size: inside, middle: true, color: white}
		x := x0 + 2
		if inside < 6 || x1-x0 < textWidth(label, inside)+4 {
			st.size, st.color = beside, opaque(col)
			if x = x1 + 2; x+textWidth(label, beside) > xs.p1 { // at the right edge: before the bar
				x, st.anchor = x0-2, "end"
			}
		}
		s.text(x, y+barH/2, st, label)
	}
}

func opaque(c color.NRGBA) color.NRGBA {
	c.A = 0xff
	return c
}

// runs splits points into runs of consecutive buckets (at most step
// apart).
func runs(pts [][2]float64, step float64) [][][2]float64 {
	var out [][][2]float64
	from := 0
	for i := 1; i <= len(pts); i++ {
		if i == len(pts) || pts[i][0]-pts[i-1][0] > step*1.001 {
			out = append(out, pts[from:i])
			from = i
		}
	}
	return out
}

// svgID gives a rendered <svg> an id and class for the page.
func svgID(svg []byte, id, class, label string) []byte {
	attrs := fmt.Sprintf(`<svg id="%s" class="%s" role="img" aria-label="%s" `, html.EscapeString(id), html.EscapeString(class), html.EscapeString(label))
	return append([]byte(attrs), bytes.TrimPrefix(svg, []byte("<svg "))...)
}

// roleColor is the palette index of an edge's main role.
var roleColor = map[string]int{"producer": 0, "raft": 1, "consumer": 2, "replication": 3, "group": 4, "liveness": 7, "transactions": 9, "admin": -1, "metadata": -1, "": -1}

// short cuts a label for the map.
func short(s string) string { return cut(s, 40) }

// cut keeps the first most runes of s, marking the cut with "…".
func cut(s string, most int) string {
	if utf8.RuneCountInString(s) <= most {
		return s
	}
	r := []rune(s)
	return string(r[:most-1]) + "…"
}

// mapColumn places kinds of node left to right: clients, brokers,
// controllers.
func mapColumn(kind string) int {
	switch kind {
	case "client":
		return 0
	case "controller":
		return 2
	}
	return 1
}

// mapKinds are the kinds of node: how each is drawn and named.
var mapKinds = []struct {
	kind  string
	glyph func(s *svgDoc, x, y, r float64, c color.NRGBA)
	color color.NRGBA
}{
	{"client", func(s *svgDoc, x, y, r float64, c color.NRGBA) { s.circle(x, y, r, c) }, palette[0]},
	{"broker", square, palette[2]},
	{"broker+controller", square, palette[1]},
	{"controller", triangle, palette[1]},
}

func square(s *svgDoc, x, y, r float64, c color.NRGBA) {
	r *= 0.9
	s.rect(x-r, y-r, 2*r, 2*r, c)
}

func triangle(s *svgDoc, x, y, r float64, c color.NRGBA) {
	s.polygon([][2]float64{{x, y - r*1.1}, {x + r, y + r*0.7}, {x - r, y + r*0.7}}, c)
}

// drawMap draws the map: nodes in columns by kind, edges coloured by their
// main role, failing ones red and dashed.
func drawMap(m Map) []byte {
	cols := [3][]MapNode{}
	for _, n := range m.Nodes {
		c := mapColumn(n.Kind)
		cols[c] = append(cols[c], n)
	}
	rows := max(len(cols[0]), len(cols[1]), len(cols[2]), 1)
	h := math.Min(math.Max(90+34*float64(rows), 260), 1600)
	firstCol, lastCol := 0, 1
	if len(cols[2]) > 0 {
		lastCol = 2
	}
	if len(cols[0]) == 0 {
		firstCol = 1
	}
	// Room on the left for the first column's labels (right-aligned:
	// clients', or brokers' when there are none), after each other column
	// for its labels, at least minGap between columns; what is left
	// spread between the columns, and when there is not enough, labels
	// cut to what they have.
	const width, minGap, minRoom = MapWidth * (1 - legendWidth), 110.0, 60.0
	labels := map[string]string{}
	labelRoom := func(ns []MapNode) (w float64) {
		for _, n := range ns {
			labels[n.ID] = short(n.Label)
			w = math.Max(w, textWidth(labels[n.ID], nodeSize))
		}
		return w + 24 // the glyph, the gap, a margin
	}
	// room[firstCol] is left of the first column, room[c+1] right of
	// column c.
	var room [4]float64
	room[firstCol] = labelRoom(cols[firstCol])
	room[firstCol+1] = minGap
	for c := firstCol + 1; c <= lastCol; c++ {
		room[c+1] = labelRoom(cols[c])
		if c < lastCol {
			room[c+1] = math.Max(minGap, room[c+1]+10)
		}
	}
	least := func(i int) float64 {
		if i == firstCol || i == lastCol+1 {
			return minRoom
		}
		return minGap
	}
	var total, excess float64
	for i := firstCol; i <= lastCol+1; i++ {
		room[i] = math.Max(room[i], least(i))
		total += room[i]
		excess += room[i] - least(i)
	}
	if over := total - width; over > 0 {
		for i := firstCol; i <= lastCol+1; i++ {
			room[i] -= over * (room[i] - least(i)) / excess
		}
	} else {
		for i := firstCol + 1; i <= lastCol; i++ {
			room[i] -= over / float64(lastCol-firstCol)
		}
	}
	colX := func(c int) float64 {
		x := 0.0
		for i := firstCol; i <= c; i++ {
			x += room[i]
		}
		return x
	}
	// gap scales the arcs within a column.
	gap := room[firstCol+1]
	y0, y1 := 34.0, h-14
	at := map[string][2]float64{}
	for c, ns := range cols {
		for i, n := range ns {
			at[n.ID] = [2]float64{colX(c), y0 + (float64(i)+0.5)*(y1-y0)/float64(len(ns))}
		}
	}
	rowPx := (y1 - y0) / float64(rows)

	s := newSVG(MapWidth, h)
	s.text(width/2, 15, textStyle{size: titleSize, anchor: "middle"}, "Who talks to whom")
	// Edges: failing ones last, on top.
	for _, failing := range []bool{false, true} {
		for _, e := range m.Edges {
			if e.Failing != failing {
				continue
			}
			p := pen{color: colorOf(roleColor[e.mainRole()]), width: 1 + math.Min(4, math.Log10(float64(e.Requests)+1))}
			if failing {
				p.color, p.dash = failRed, "5,3"
			}
			a, b := at[e.From], at[e.To]
			mid := [2]float64{(a[0] + b[0]) / 2, (a[1] + b[1]) / 2}
			if a[0] != b[0] {
				s.polyline([][2]float64{a, b}, p)
			} else {
				// Within a column: an arc to the right.
				bulge := math.Min(0.25+0.1*math.Abs(a[1]-b[1])/rowPx, 0.9) * gap
				c := [2]float64{a[0] + bulge, (a[1] + b[1]) / 2}
				s.curve(a, c, b, p)
				mid = [2]float64{(a[0] + 2*c[0] + b[0]) / 4, mid[1]}
			}
			if failing {
				// The incidents the failing findings belong to, by number
				// (their findings' numbers if none).
				nums := each(e.Incidents, func(n int) string { return "incident " + strconv.Itoa(n) })
				if len(nums) == 0 {
					nums = each(e.Findings, ref)
				}
				s.text(mid[0], mid[1], textStyle{size: nodeSize, anchor: "middle", middle: true, halo: true, bold: true, color: failRed},
					fit(strings.Join(nums, " "), 80))
			}
		}
	}
	leg := legend{x: width + 6, y: 30, size: legendSize}
	for _, k := range mapKinds {
		drawn := false
		for _, n := range m.Nodes {
			if n.Kind != k.kind {
				continue
			}
			drawn = true
			xy := at[n.ID]
			k.glyph(s, xy[0], xy[1], 6, k.color)
			label := labels[n.ID]
			st := textStyle{size: nodeSize, middle: true, halo: true}
			if c := mapColumn(k.kind); c == firstCol {
				st.anchor = "end"
				s.text(xy[0]-10, xy[1], st, fit(label, room[c]-24))
			} else {
				w := room[c+1] - 24
				if c < lastCol {
					w -= 10
				}
				s.text(xy[0]+10, xy[1], st, fit(label, w))
			}
		}
		if drawn {
			leg.entry(s, k.kind, func(x, y float64) { k.glyph(s, x+7, y, 4.5, k.color) })
		}
	}
	for _, role := range roleOrder {
		if slices.ContainsFunc(m.Edges, func(e MapEdge) bool { return e.mainRole() == role }) {
			leg.entry(s, role, lineThumb(s, pen{color: colorOf(roleColor[role]), width: 2}))
		}
	}
	if slices.ContainsFunc(m.Edges, func(e MapEdge) bool { return e.Failing }) {
		leg.entry(s, "failing", lineThumb(s, pen{color: failRed, width: 2, dash: "5,3"}))
	}
	return s.bytes()
}

// fit cuts a map's label to the width w it has (at least 12 characters).
func fit(label string, w float64) string {
	return cut(label, max(12, int(w/(0.6*nodeSize)+0.01)))
}
