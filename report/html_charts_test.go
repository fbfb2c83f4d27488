package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// strokes counts the SVG paths stroked in colour col that draw a segment
// (a path with only a move draws nothing), and the dots filled in it.
func strokes(t *testing.T, svg []byte, col string) (lines, dots int) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return lines, dots
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed: %v", err)
		}
		e, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		a := map[string]string{}
		for _, at := range e.Attr {
			a[at.Name.Local] = at.Value
		}
		switch {
		case e.Name.Local == "path" && strings.EqualFold(a["stroke"], col) && strings.ContainsAny(a["d"], "LQ"):
			lines++
		case e.Name.Local == "circle" && strings.EqualFold(a["fill"], col):
			dots++
		}
	}
}

// A series is drawn where it has data: a capture of one second (one point)
// shows its point, and a latency series with buckets without responses
// between two of its points is not joined across them (the legend's
// thumbnail is the one line drawn).
func TestChartDrawsLoneAndSeparatePoints(t *testing.T) {
	const blue = "#4E79A7" // palette[0]
	one := Chart{ID: "requests-by-api", Unit: "per second", Lines: []Line{{Name: "ApiVersions", Points: [][2]float64{{0, 1}}}}}
	svg := drawChart(one, nil, 1, 1)
	if lines, dots := strokes(t, svg, blue); dots == 0 {
		t.Errorf("one point: %d lines (the legend's), %d dots: the point is not drawn", lines, dots)
	}
	gap := Chart{ID: "latency-by-api", Unit: "ms", Log: true, Lines: []Line{{Name: "Produce p99", Points: [][2]float64{{0, 1.2}, {1, 1.2}, {3600, 1.2}}}}}
	svg = drawChart(gap, nil, 3601, 1)
	if lines, dots := strokes(t, svg, blue); lines != 2 || dots != 1 {
		t.Errorf("points at 0, 1 and 3600 s: %d lines, %d dots; want 2 (the legend's and 0-1) and 1 (3600)", lines, dots)
	}
}

// svgNumbers are the texts of an SVG that are numbers (the axes' labels).
func svgNumbers(svg []byte) []float64 {
	var out []float64
	for _, m := range regexp.MustCompile(`(?s)<text[^>]*>([^<]*)</text>`).FindAllSubmatch(svg, -1) {
		if v, err := strconv.ParseFloat(string(m[1]), 64); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// The y axis of a chart with findings' bars above the data is labelled
// within the data's range: a rate peaking at 2/s under four bars had
// only "0.00" on its axis (the labelled ticks fell among the bars and
// were dropped), so a reader could not tell 2/s from 2000/s.
func TestChartYAxisLabelledUnderSpans(t *testing.T) {
	var pts [][2]float64
	for i := range 190 {
		pts = append(pts, [2]float64{float64(i) * 8, 2})
	}
	c := Chart{ID: "requests-by-api", Unit: "per second", Lines: []Line{{Name: "Metadata", Points: pts}}}
	spans := []Span{{Finding: 1, Severity: "error", From: 10, To: 600}, {Finding: 2, Severity: "error", From: 900, To: 1500},
		{Finding: 3, Severity: "warning", From: 900, To: 1500}, {Finding: 4, Severity: "info", From: 900, To: 1500}}
	svg := drawChart(c, spans, 1520, 8)
	var y []float64
	for _, v := range svgNumbers(svg) {
		if v > 0 && v <= 2*1.08 { // the x axis's labels are 0 and 500 up
			y = append(y, v)
		}
	}
	if len(y) == 0 {
		t.Errorf("the y axis has no label above 0 within the data (0..2/s); labels %v", svgNumbers(svg))
	}
}
