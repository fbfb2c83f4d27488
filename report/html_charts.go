package report

import (
	"bytes"
	"fmt"
	"html"
	"image/color"
	"math"
	"slices"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Charts and the map are drawn by gonum/plot (BSD-3-Clause) into SVG
// (vg/vgsvg), which the page holds inline: no script draws them and they
// need nothing from the network. vgsvg escapes text (html.EscapeString),
// and every wire-derived label is Clean'ed before it gets there.

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
	grey     = color.NRGBA{0x79, 0x70, 0x6e, 0xff}
	failRed  = color.NRGBA{0xd6, 0x27, 0x28, 0xff}
	severity = map[string]color.NRGBA{
		"error":   {0xd6, 0x27, 0x28, 0xd0},
		"warning": {0xf2, 0x8e, 0x2b, 0xd0},
		"info":    {0x4e, 0x79, 0xa7, 0xb0},
	}
)

func colorOf(i int) color.Color {
	if i < 0 {
		return grey
	}
	return palette[i%len(palette)]
}

// newPlot is a plot in the page's sans-serif face.
func newPlot() *plot.Plot {
	p := plot.New()
	f := font.Font{Typeface: "Liberation", Variant: "Sans"}
	for _, s := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		size := s.Size
		*s = f
		s.Size = size
	}
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.X.Tick.Label.Font.Size = vg.Points(9)
	p.Y.Tick.Label.Font.Size = vg.Points(9)
	p.X.Label.TextStyle.Font.Size = vg.Points(10)
	p.Y.Label.TextStyle.Font.Size = vg.Points(10)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p
}

// drawChart renders one chart with the findings' spans as SVG: the data
// below, one bar per finding above it (a Gantt strip over the same time
// axis, so that "when did it start" lines up with the traffic), the
// legend on the right.
// step is the width of a point (the timeline's bucket, in seconds): points
// further apart than that have no data between them, and no line joins
// them.
func drawChart(c Chart, spans []Span, xmax, step float64) ([]byte, error) {
	p := newPlot()
	p.Title.Text = c.Title
	p.X.Label.Text = "seconds from the first Kafka frame"
	p.Y.Label.Text = c.Unit
	p.X.Min, p.X.Max = 0, math.Max(xmax, 1)
	top, lo := 0.0, math.Inf(1)
	for _, l := range c.Lines {
		for _, pt := range l.Points {
			top = math.Max(top, pt[1])
			if pt[1] > 0 {
				lo = math.Min(lo, pt[1])
			}
		}
	}
	// band(i) is finding i's bar: from y0 to y1.
	var ymin float64
	var band func(i int) (y0, y1 float64)
	if c.Log {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		if math.IsInf(lo, 1) {
			lo, top = 0.1, 1
		}
		ymin, top = lo/2, math.Max(top*2, lo*10)
		band = func(i int) (float64, float64) {
			return top * math.Pow(1.4, float64(i)+0.15), top * math.Pow(1.4, float64(i)+0.85)
		}
	} else {
		top = math.Max(top*1.08, 1)
		band = func(i int) (float64, float64) {
			h := top * 0.07
			return top + (float64(i)+0.15)*h, top + (float64(i)+0.85)*h
		}
	}
	p.Y.Min, p.Y.Max = ymin, top
	if len(spans) > 0 {
		_, p.Y.Max = band(len(spans) - 1)
		y0, _ := band(0)
		// The ticks stop at the data's top: the bars above are not a
		// quantity.
		p.Y.Tick.Marker = cappedTicks{p.Y.Tick.Marker, y0}
	}
	if err := addSpans(p, spans, xmax, ymin, band); err != nil {
		return nil, err
	}
	leg := newLegend()
	for _, l := range c.Lines {
		if len(l.Points) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(l.Points))
		for i, pt := range l.Points {
			y := pt[1]
			if c.Log && y <= 0 {
				y = ymin
			}
			xys[i] = plotter.XY{X: pt[0], Y: y}
		}
		style := draw.LineStyle{Color: colorOf(l.Color), Width: vg.Points(1.5)}
		if l.Dashed {
			style.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		for _, run := range runs(xys, step) {
			// A run of one point (a capture of one second, a bucket
			// with responses between buckets without) is a dot: a
			// line through one point draws nothing.
			if len(run) == 1 {
				s, err := plotter.NewScatter(run)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", c.ID, err)
				}
				s.GlyphStyle = draw.GlyphStyle{Shape: draw.CircleGlyph{}, Color: style.Color, Radius: vg.Points(1.8)}
				p.Add(s)
				continue
			}
			line, err := plotter.NewLine(run)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.ID, err)
			}
			line.LineStyle = style
			p.Add(line)
		}
		leg.Add(cut(Clean(l.Name), 24), lineThumb(style))
	}
	if len(c.Lines) == 0 {
		p.Title.Text += ": none"
	}
	return render(p, leg, ChartWidth, ChartHeight)
}

// runs splits points into runs of consecutive buckets (at most step
// apart).
func runs(xys plotter.XYs, step float64) []plotter.XYs {
	var out []plotter.XYs
	from := 0
	for i := 1; i <= len(xys); i++ {
		if i == len(xys) || xys[i].X-xys[i-1].X > step*1.001 {
			out = append(out, xys[from:i])
			from = i
		}
	}
	return out
}

// lineThumb is a legend entry drawn as a short line in style.
type lineThumb draw.LineStyle

func (l lineThumb) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(draw.LineStyle(l), c.Min.X, y, c.Max.X, y)
}

// cappedTicks are the ticks of the axis up to max: chosen for that range
// (ticks chosen for the whole axis, bars included, may all fall among the
// bars, leaving the data without a labelled tick).
type cappedTicks struct {
	plot.Ticker
	max float64
}

func (c cappedTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range c.Ticker.Ticks(min, math.Min(max, c.max)) {
		if t.Value <= c.max {
			out = append(out, t)
		}
	}
	return out
}

func newLegend() plot.Legend {
	l := plot.NewLegend()
	l.TextStyle.Font = font.Font{Typeface: "Liberation", Variant: "Sans", Size: vg.Points(8)}
	l.Top, l.Left = true, true
	l.ThumbnailWidth = vg.Points(14)
	return l
}

// addSpans draws each finding as a bar over its span, labelled with its
// number, and a dotted line down to the data where it starts.
func addSpans(p *plot.Plot, spans []Span, xmax, ymin float64, band func(int) (float64, float64)) error {
	min := math.Max(xmax, 1) / 150 // a span of an instant is still seen
	var xys plotter.XYs
	var labels []string
	for i, s := range spans {
		from, to := s.From, s.To
		if to-from < min {
			to = from + min
		}
		y0, y1 := band(i)
		poly, err := plotter.NewPolygon(plotter.XYs{{X: from, Y: y0}, {X: to, Y: y0}, {X: to, Y: y1}, {X: from, Y: y1}})
		if err != nil {
			return err
		}
		col := severity[s.Severity]
		poly.Color = col
		poly.LineStyle.Width = 0
		p.Add(poly)
		start, err := plotter.NewLine(plotter.XYs{{X: from, Y: ymin}, {X: from, Y: y0}})
		if err != nil {
			return err
		}
		col.A = 0x90
		start.LineStyle.Color = col
		start.LineStyle.Width = vg.Points(0.8)
		start.LineStyle.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		p.Add(start)
		xys = append(xys, plotter.XY{X: from, Y: (y0 + y1) / 2})
		labels = append(labels, fmt.Sprintf("#%d", s.Finding))
	}
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font = font.Font{Typeface: "Liberation", Variant: "Sans", Size: vg.Points(7)}
		l.TextStyle[i].Handler = p.Title.TextStyle.Handler
		l.TextStyle[i].Color = color.White
		l.TextStyle[i].YAlign = draw.YCenter
	}
	l.Offset = vg.Point{X: vg.Points(2)}
	p.Add(l)
	return nil
}

// legendWidth is the part of a chart's width its legend takes, on the
// right, beside the plot rather than over the data.
const legendWidth = 0.27

// render draws p and its legend on an SVG canvas of w x h points and
// returns the <svg> element alone (vgsvg writes an XML declaration and a
// comment first).
func render(p *plot.Plot, leg plot.Legend, w, h float64) (out []byte, err error) {
	defer func() {
		// gonum/plot panics on some inputs (vgsvg on a font it cannot
		// name): one chart must not take the report down.
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("drawing a chart: %v", r)
		}
	}()
	c := vgsvg.New(vg.Points(w), vg.Points(h))
	dc := draw.New(c)
	side := vg.Points(w * legendWidth)
	p.Draw(draw.Crop(dc, 0, -side, 0, 0))
	leg.Draw(draw.Crop(dc, vg.Points(w)-side+vg.Points(6), 0, 0, -vg.Points(22)))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, err
	}
	s := b.Bytes()
	i := bytes.Index(s, []byte("<svg"))
	if i < 0 {
		return nil, fmt.Errorf("drawing a chart: no <svg> element")
	}
	return s[i:], nil
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

// drawMap draws the map: nodes in columns by kind, edges coloured by their
// main role, failing ones red and dashed; returns the SVG and its height.
func drawMap(m Map) ([]byte, float64, error) {
	p := newPlot()
	p.HideAxes()
	p.Title.Text = "Who talks to whom"
	leg := newLegend()
	cols := [3][]MapNode{}
	for _, n := range m.Nodes {
		c := mapColumn(n.Kind)
		cols[c] = append(cols[c], n)
	}
	rows := max(len(cols[0]), len(cols[1]), len(cols[2]), 1)
	at := map[string]plotter.XY{}
	for c, ns := range cols {
		for i, n := range ns {
			at[n.ID] = plotter.XY{X: float64(c), Y: float64(rows) - (float64(i)+0.5)*float64(rows)/float64(len(ns))}
		}
	}
	firstCol, lastCol := 0.0, 1.0
	if len(cols[2]) > 0 {
		lastCol = 2
	}
	if len(cols[0]) == 0 {
		firstCol = 1
	}
	// Room on the left for the clients' labels (right-aligned), on the
	// right for the servers'.
	p.X.Min, p.X.Max = firstCol-1.1, lastCol+0.9
	p.Y.Min, p.Y.Max = -0.2, float64(rows)+0.2
	// Edges: failing ones last, on top.
	for _, failing := range []bool{false, true} {
		for _, e := range m.Edges {
			if e.Failing != failing {
				continue
			}
			a, b := at[e.From], at[e.To]
			xys := plotter.XYs{a, b}
			if a.X == b.X { // within a column: an arc to the right
				xys = arc(a, b)
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, 0, err
			}
			l.LineStyle.Color = colorOf(roleColor[e.mainRole()])
			l.LineStyle.Width = vg.Points(1 + math.Min(4, math.Log10(float64(e.Requests)+1)))
			if failing {
				l.LineStyle.Color = failRed
				l.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(l)
		}
	}
	kinds := []struct {
		kind  string
		shape draw.GlyphDrawer
		color color.Color
	}{
		{"client", draw.CircleGlyph{}, palette[0]},
		{"broker", draw.BoxGlyph{}, palette[2]},
		{"broker+controller", draw.BoxGlyph{}, palette[1]},
		{"controller", draw.PyramidGlyph{}, palette[1]},
	}
	for _, k := range kinds {
		var xys plotter.XYs
		var labels []string
		for _, n := range m.Nodes {
			if n.Kind == k.kind {
				xys = append(xys, at[n.ID])
				labels = append(labels, short(n.Label))
			}
		}
		if len(xys) == 0 {
			continue
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, 0, err
		}
		s.GlyphStyle = draw.GlyphStyle{Shape: k.shape, Color: k.color, Radius: vg.Points(6)}
		p.Add(s)
		leg.Add(k.kind, s)
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return nil, 0, err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Font = font.Font{Typeface: "Liberation", Variant: "Sans", Size: vg.Points(9)}
			l.TextStyle[i].Handler = p.Title.TextStyle.Handler
			l.TextStyle[i].YAlign = draw.YCenter
			if k.kind == "client" {
				l.TextStyle[i].XAlign = draw.XRight
			}
		}
		l.Offset = vg.Point{X: vg.Points(10)}
		if k.kind == "client" {
			l.Offset.X = -vg.Points(10)
		}
		p.Add(l)
	}
	for _, role := range roleOrder {
		for _, e := range m.Edges {
			if e.mainRole() == role {
				l, _ := plotter.NewLine(plotter.XYs{{}, {}})
				l.LineStyle.Color = colorOf(roleColor[role])
				l.LineStyle.Width = vg.Points(2)
				leg.Add(role, l)
				break
			}
		}
	}
	if slices.ContainsFunc(m.Edges, func(e MapEdge) bool { return e.Failing }) {
		l, _ := plotter.NewLine(plotter.XYs{{}, {}})
		l.LineStyle.Color = failRed
		l.LineStyle.Width = vg.Points(2)
		l.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		leg.Add("failing", l)
	}
	h := math.Min(math.Max(90+34*float64(rows), 260), 1600)
	svg, err := render(p, leg, MapWidth, h)
	return svg, h, err
}

// arc joins two nodes of one column by a curve bulging to the right.
func arc(a, b plotter.XY) plotter.XYs {
	const n = 16
	bulge := 0.25 + 0.1*math.Abs(a.Y-b.Y)
	ctrl := plotter.XY{X: a.X + math.Min(bulge, 0.9), Y: (a.Y + b.Y) / 2}
	out := make(plotter.XYs, n+1)
	for i := range out {
		t := float64(i) / n
		out[i] = plotter.XY{
			X: (1-t)*(1-t)*a.X + 2*(1-t)*t*ctrl.X + t*t*b.X,
			Y: (1-t)*(1-t)*a.Y + 2*(1-t)*t*ctrl.Y + t*t*b.Y,
		}
	}
	return out
}
