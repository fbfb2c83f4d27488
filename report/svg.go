package report

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"unicode/utf8"
)

// A small SVG writer for the HTML report's charts and map (html_charts.go):
// paths, circles and text in the SVG's own units (points), and the axes'
// scales and ticks. The page holds the SVG inline, so it draws without a
// script and fetches nothing. Text is escaped here, whatever it holds;
// wire-derived labels are also Clean'ed before they get here.
//
// It replaced gonum/plot, whose fonts, LaTeX tables and PDF/EPS/PNG
// back ends cost every run of kfsniff about 5 % of a small capture's CPU
// at start-up and 8 MB of the binary, for the few charts only --html
// draws. Without font metrics, a label's width is estimated
// (textWidth) and alignment is left to text-anchor.

// svgDoc is one <svg> element being written.
type svgDoc struct {
	b []byte
}

// newSVG starts an SVG of w x h points (CSS pixels are 3/4 of a point),
// its user units the points.
func newSVG(w, h float64) *svgDoc {
	s := &svgDoc{b: make([]byte, 0, 16<<10)}
	s.add(`<svg width="`).num(w).add(`pt" height="`).num(h).add(`pt" viewBox="0 0 `).num(w).add(" ").num(h).
		add(`" xmlns="http://www.w3.org/2000/svg" font-family="Liberation Sans, Arial, Helvetica, sans-serif">` + "\n")
	s.add(`<rect width="100%" height="100%" fill="#fff"/>` + "\n")
	return s
}

// bytes ends the element and returns it.
func (s *svgDoc) bytes() []byte {
	return append(s.b, "</svg>\n"...)
}

func (s *svgDoc) add(str string) *svgDoc {
	s.b = append(s.b, str...)
	return s
}

// num writes v with at most two decimals (a hundredth of a point).
func (s *svgDoc) num(v float64) *svgDoc {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0
	}
	v = math.Round(v*100) / 100
	if v == 0 {
		v = 0 // not -0
	}
	s.b = strconv.AppendFloat(s.b, v, 'f', -1, 64)
	return s
}

// color writes a colour attribute (fill or stroke) and its opacity when
// not opaque.
func (s *svgDoc) color(attr string, c color.NRGBA) *svgDoc {
	s.b = fmt.Appendf(s.b, ` %s="#%02x%02x%02x"`, attr, c.R, c.G, c.B)
	if c.A != 0xff {
		s.add(" " + attr + `-opacity="`).num(float64(c.A) / 255).add(`"`)
	}
	return s
}

// pen is how a line is stroked.
type pen struct {
	color color.NRGBA
	width float64
	// dash is a stroke-dasharray ("4,3"), or empty for a solid line.
	dash string
}

func (s *svgDoc) stroke(p pen) *svgDoc {
	s.add(` fill="none"`).color("stroke", p.color).add(` stroke-width="`).num(p.width).add(`"`)
	if p.dash != "" {
		s.add(` stroke-dasharray="` + p.dash + `"`)
	}
	return s
}

// polyline strokes a line through pts; fewer than two points draw nothing.
func (s *svgDoc) polyline(pts [][2]float64, p pen) {
	if len(pts) < 2 {
		return
	}
	s.path(pts).add(`"`).stroke(p).add("/>\n")
}

// path opens a path element through pts, its d attribute left open.
func (s *svgDoc) path(pts [][2]float64) *svgDoc {
	s.add(`<path d="`)
	for i, pt := range pts {
		if i == 0 {
			s.add("M")
		} else {
			s.add("L")
		}
		s.num(pt[0]).add(",").num(pt[1])
	}
	return s
}

// curve strokes a quadratic Bézier curve from a to b pulled towards ctrl.
func (s *svgDoc) curve(a, ctrl, b [2]float64, p pen) {
	s.add(`<path d="M`).num(a[0]).add(",").num(a[1]).add("Q").num(ctrl[0]).add(",").num(ctrl[1]).
		add(" ").num(b[0]).add(",").num(b[1]).add(`"`).stroke(p).add("/>\n")
}

// polygon fills the polygon of pts.
func (s *svgDoc) polygon(pts [][2]float64, fill color.NRGBA) {
	s.path(pts).add(`Z"`).color("fill", fill).add("/>\n")
}

// rect fills the rectangle from (x, y) w wide and h high.
func (s *svgDoc) rect(x, y, w, h float64, fill color.NRGBA) {
	s.polygon([][2]float64{{x, y}, {x + w, y}, {x + w, y + h}, {x, y + h}}, fill)
}

// circle fills a circle.
func (s *svgDoc) circle(x, y, r float64, fill color.NRGBA) {
	s.add(`<circle cx="`).num(x).add(`" cy="`).num(y).add(`" r="`).num(r).add(`"`).color("fill", fill).add("/>\n")
}

// textStyle is how a text is set.
type textStyle struct {
	size float64
	// anchor is the text-anchor: start (the default), middle or end.
	anchor string
	// middle: y is the text's vertical middle rather than its baseline.
	middle bool
	// up: written upwards (rotated a quarter turn anticlockwise about
	// x, y), as a y axis's label.
	up   bool
	bold bool
	// halo: a white outline behind the glyphs, so that a label stays
	// readable over the lines it crosses.
	halo  bool
	color color.NRGBA // the zero value is the page's text colour
}

// text writes str at (x, y), escaped.
func (s *svgDoc) text(x, y float64, st textStyle, str string) {
	s.add(`<text x="`).num(x).add(`" y="`).num(y).add(`" font-size="`).num(st.size).add(`"`)
	if st.anchor != "" && st.anchor != "start" {
		s.add(` text-anchor="` + st.anchor + `"`)
	}
	if st.middle {
		// dominant-baseline is not honoured everywhere; a third of an
		// em down centres Latin text on y.
		s.add(` dy="0.35em"`)
	}
	if st.up {
		s.add(` transform="rotate(-90 `).num(x).add(" ").num(y).add(`)"`)
	}
	if st.bold {
		s.add(` font-weight="bold"`)
	}
	if st.halo {
		s.add(` stroke="#fff" stroke-width="3" stroke-linejoin="round" paint-order="stroke"`)
	}
	if st.color == (color.NRGBA{}) {
		st.color = textColor
	}
	s.color("fill", st.color).add(">")
	s.b = appendEscaped(s.b, str)
	s.add("</text>\n")
}

var textColor = color.NRGBA{0x22, 0x22, 0x22, 0xff}

// appendEscaped appends str as XML (and HTML) character data: the
// markup characters as entities, and what XML 1.0 cannot hold (control
// characters, invalid UTF-8, non-characters) as U+FFFD.
func appendEscaped(b []byte, str string) []byte {
	for i := 0; i < len(str); {
		r, size := utf8.DecodeRuneInString(str[i:])
		i += size
		switch {
		case r == '&':
			b = append(b, "&amp;"...)
		case r == '<':
			b = append(b, "&lt;"...)
		case r == '>':
			b = append(b, "&gt;"...)
		case r == '"':
			b = append(b, "&#34;"...)
		case r == '\'':
			b = append(b, "&#39;"...)
		case r == utf8.RuneError && size == 1, r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0xfffe, r == 0xffff:
			b = utf8.AppendRune(b, utf8.RuneError)
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return b
}

// textWidth estimates the width of str set in a sans-serif face of size
// points: 0.6 em a character, a little wide for most Latin text, so that
// what is placed by it does not collide.
func textWidth(str string, size float64) float64 {
	return 0.6 * size * float64(utf8.RuneCountInString(str))
}

// scale maps a data range onto a span of the page: from min at p0 to max
// at p1 (p1 < p0 for a y axis, whose page coordinates grow downwards),
// linearly or by the logarithm (min > 0).
type scale struct {
	min, max float64
	p0, p1   float64
	log      bool
}

func (a scale) at(v float64) float64 {
	lo, hi := a.min, a.max
	if a.log {
		v, lo, hi = math.Log10(math.Max(v, a.min)), math.Log10(lo), math.Log10(hi)
	}
	if hi <= lo {
		return a.p0
	}
	return a.p0 + (v-lo)/(hi-lo)*(a.p1-a.p0)
}

// tick is a tick of an axis: a labelled one, or a minor one without.
type tick struct {
	v     float64
	label string
}

// linearTicks are the ticks of a linear axis from min to max: n or so
// labelled ones at a nice step (1, 2 or 5 times a power of ten), minor
// ones between them.
func linearTicks(min, max float64, n int) []tick {
	if !(max > min) || n < 1 {
		return []tick{{min, tickLabel(min, false)}}
	}
	step := niceStep((max - min) / float64(n))
	minor := step / 5
	if m := step / math.Pow(10, math.Floor(math.Log10(step))); m > 1.5 && m < 3 {
		minor = step / 4
	}
	big := math.Max(math.Abs(min), math.Abs(max)) >= 1e4
	var out []tick
	for k := math.Ceil(min/minor - 1e-9); k*minor <= max+minor*1e-9; k++ {
		v := k * minor
		if math.Abs(math.Remainder(v, step)) < minor*1e-6 {
			out = append(out, tick{v, tickLabel(v, big)})
		} else {
			out = append(out, tick{v: v})
		}
	}
	return out
}

// niceStep is 1, 2 or 5 times a power of ten, the nearest to raw (by
// Heckbert's thresholds, "Nice numbers for graph labels", Graphics Gems
// 1990).
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / p; {
	case f < 1.5:
		return p
	case f < 3:
		return 2 * p
	case f < 7:
		return 5 * p
	}
	return 10 * p
}

// logTicks are the ticks of a logarithmic axis from min to max (min >
// 0): the powers of ten labelled, 2 to 9 times them as minor ticks; when
// fewer than two powers of ten fall in the range, 2 and 5 times them are
// labelled too, so that the axis has a scale to read.
func logTicks(min, max float64) []tick {
	if !(min > 0) || !(max > min) {
		return nil
	}
	lo, hi := int(math.Floor(math.Log10(min))), int(math.Ceil(math.Log10(max)))
	in := func(v float64) bool { return v >= min*(1-1e-9) && v <= max*(1+1e-9) }
	powers := 0
	for e := lo; e <= hi; e++ {
		if in(pow10(e)) {
			powers++
		}
	}
	big := max >= 1e4
	var out []tick
	for e := lo; e <= hi; e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * pow10(e)
			if !in(v) {
				continue
			}
			t := tick{v: v}
			if m == 1 || powers < 2 && (m == 2 || m == 5) {
				t.label = tickLabel(v, big)
			}
			out = append(out, t)
		}
	}
	return out
}

// pow10 is 10^e, exact for the decimal powers (math.Pow(10, -3) is not
// 0.001).
func pow10(e int) float64 {
	if e < 0 {
		return 1 / math.Pow10(-e)
	}
	return math.Pow10(e)
}

// tickLabel writes a tick's value as short as it reads: no float noise,
// and on an axis that reaches 10000 (big), thousands and up with k, M, G.
func tickLabel(v float64, big bool) string {
	suffix := ""
	if big {
		for _, u := range []struct {
			s string
			f float64
		}{{"G", 1e9}, {"M", 1e6}, {"k", 1e3}} {
			if math.Abs(v) >= u.f {
				v, suffix = v/u.f, u.s
				break
			}
		}
	}
	// Nine significant digits drop the noise of k*step (0.30000000000000004).
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 9, 64), 64)
	if r == 0 {
		return "0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64) + suffix
}
