package report

import (
	"regexp"
	"testing"
)

// strokes counts the SVG paths stroked in colour col that draw a segment
// (a path with only a move draws nothing), and the dots filled in it.
func strokes(svg []byte, col string) (lines, dots int) {
	for _, m := range regexp.MustCompile(`<path d="([^"]*)" style="([^"]*)"`).FindAllSubmatch(svg, -1) {
		d, style := string(m[1]), string(m[2])
		switch {
		case regexp.MustCompile(`stroke:`+col+`\b`).MatchString(style) && regexp.MustCompile(`L`).MatchString(d):
			lines++
		case regexp.MustCompile(`fill:` + col + `\b`).MatchString(style):
			dots++
		}
	}
	return lines, dots
}

// A series is drawn where it has data: a capture of one second (one point)
// shows its point, and a latency series with buckets without responses
// between two of its points is not joined across them (the legend's
// thumbnail is the one line drawn).
func TestChartDrawsLoneAndSeparatePoints(t *testing.T) {
	const blue = "#4E79A7" // palette[0]
	one := Chart{ID: "requests-by-api", Unit: "per second", Lines: []Line{{Name: "ApiVersions", Points: [][2]float64{{0, 1}}}}}
	svg, err := drawChart(one, nil, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if lines, dots := strokes(svg, blue); dots == 0 {
		t.Errorf("one point: %d lines (the legend's), %d dots: the point is not drawn", lines, dots)
	}
	gap := Chart{ID: "latency-by-api", Unit: "ms", Log: true, Lines: []Line{{Name: "Produce p99", Points: [][2]float64{{0, 1.2}, {1, 1.2}, {3600, 1.2}}}}}
	svg, err = drawChart(gap, nil, 3601, 1)
	if err != nil {
		t.Fatal(err)
	}
	if lines, dots := strokes(svg, blue); lines != 2 || dots != 1 {
		t.Errorf("points at 0, 1 and 3600 s: %d lines, %d dots; want 2 (the legend's and 0-1) and 1 (3600)", lines, dots)
	}
}
