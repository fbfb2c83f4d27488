package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
)

// svgTexts decodes an SVG as strict XML (failing the test when it is not
// well-formed) and returns the root's name and its texts' contents.
func svgTexts(t *testing.T, svg []byte) (root string, texts []string) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	depth := 0
	var cur *strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, svg)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				root = e.Name.Local
			}
			depth++
			if e.Name.Local == "text" {
				cur = &strings.Builder{}
			}
		case xml.EndElement:
			depth--
			if e.Name.Local == "text" && cur != nil {
				texts = append(texts, cur.String())
				cur = nil
			}
		case xml.CharData:
			if cur != nil {
				cur.Write(e)
			}
		}
	}
	if depth != 0 {
		t.Fatalf("the SVG ends with %d elements open", depth)
	}
	return root, texts
}

// hostileLabel would be markup if the writer let it through, and holds
// what XML cannot (a control character, a byte that is not UTF-8).
const hostileLabel = `</text></svg><script>alert(1)</script><a href="x" onclick='y'>&amp;` + "\x01\xff"

// The charts and the map are well-formed XML that a browser and
// encoding/xml read alike, a hostile name or label stays one text with
// its characters (nothing is markup), and the y axis of a log chart is
// labelled with its ticks.
func TestSVGWellFormedAndEscaped(t *testing.T) {
	chart := Chart{ID: "latency-by-api", Title: "Latency", Unit: "ms", Log: true, Lines: []Line{
		{Name: hostileLabel, Points: [][2]float64{{0, 0.9}, {1, 3}, {2, 0}, {5, 2}}},
		{Name: "Fetch p50", Dashed: true, Points: [][2]float64{{0, 0.5}, {1, 0.6}}, Color: 1},
	}}
	spans := []Span{{Finding: 1, Severity: "error", From: 0, To: 5}, {Finding: 2, Severity: "info", From: 5, To: 5}}
	m := Map{Nodes: []MapNode{{ID: "c", Kind: "client", Label: hostileLabel}, {ID: "b", Kind: "broker", Label: "node 1"},
		{ID: "b2", Kind: "broker", Label: "node 2"}, {ID: "k", Kind: "controller", Label: "node 3000"}},
		Edges: []MapEdge{{From: "c", To: "b", Roles: []string{"producer"}, Requests: 10}, {From: "b", To: "b2", Roles: []string{"replication"}, Requests: 5},
			{From: "b", To: "k", Roles: []string{"liveness"}, Failing: true}}}
	chartSVG := drawChart(chart, spans, 6, 1)
	mapSVG := drawMap(m)
	for name, svg := range map[string][]byte{"chart": chartSVG, "map": mapSVG} {
		t.Run(name, func(t *testing.T) {
			if bytes.Contains(svg, []byte("<script")) || bytes.Contains(svg, []byte("onclick=")) || bytes.Contains(svg, []byte("</svg><")) {
				t.Errorf("the hostile label is markup in the SVG:\n%s", svg)
			}
			root, texts := svgTexts(t, svg)
			if root != "svg" {
				t.Errorf("root element %q", root)
			}
			// The label as Clean'ed (the chart's legend is also cut
			// to 24 characters, the map's to 40) is one text.
			want := Clean(hostileLabel)
			if !slices.ContainsFunc(texts, func(s string) bool {
				return len(s) > 10 && strings.HasPrefix(want, strings.TrimSuffix(s, "…"))
			}) {
				t.Errorf("no text holds the hostile label %q: %q", want, texts)
			}
		})
	}
	_, texts := svgTexts(t, chartSVG)
	for _, l := range []string{"0.5", "1", "2", "5"} { // 0.25 .. 9 ms: one power of ten, so 2 and 5 too
		if !slices.Contains(texts, l) {
			t.Errorf("the log axis has no label %q: texts %q", l, texts)
		}
	}

	// Nothing to draw: a chart without lines says so, a map without
	// nodes is still its frame and title; a map of brokers alone (no
	// client, no controller) puts them in one column with their arcs.
	empty := drawChart(Chart{ID: "errors-by-api", Title: "Error responses per second by API", Unit: "per second"}, nil, 0, 1)
	if _, texts := svgTexts(t, empty); !slices.Contains(texts, "Error responses per second by API: none") {
		t.Errorf("an empty chart's texts %q", texts)
	}
	for _, m := range []Map{{}, {Nodes: []MapNode{{ID: "1", Kind: "broker", Label: "node 1"}, {ID: "2", Kind: "broker", Label: "node 2"}},
		Edges: []MapEdge{{From: "1", To: "2", Roles: []string{"replication"}, Requests: 3}}}} {
		svg := drawMap(m)
		_, texts := svgTexts(t, svg)
		for _, want := range []string{"Who talks to whom", "node 1", "node 2", "replication"}[:1+3*min(len(m.Nodes), 1)] {
			if !slices.Contains(texts, want) {
				t.Errorf("map of %d nodes: no text %q in %q", len(m.Nodes), want, texts)
			}
		}
		if len(m.Edges) > 0 && !bytes.Contains(svg, []byte("Q")) {
			t.Errorf("brokers in one column are not joined by an arc:\n%s", svg)
		}
	}

	// Straight through the writer: what XML 1.0 cannot hold becomes
	// U+FFFD, the markup characters stay characters.
	s := newSVG(10, 10)
	s.text(1, 1, textStyle{size: 9, halo: true, up: true}, "a\x00b\x1b\xfe<&>\"'\t\uffffz")
	if _, texts := svgTexts(t, s.bytes()); len(texts) != 1 || texts[0] != "a\ufffdb\ufffd\ufffd<&>\"'\t\ufffdz" {
		t.Errorf("escaped text reads back as %q", texts)
	}
}

func labels(ts []tick) (out []string) {
	for _, t := range ts {
		if t.label != "" {
			out = append(out, t.label)
		}
	}
	return out
}

// The axes are labelled at nice values (1, 2 or 5 times a power of ten)
// written without float noise, thousands with SI suffixes once an axis
// reaches 10000; a log axis at its powers of ten, with 2 and 5 when fewer
// than two powers fall in its range.
func TestAxisTicks(t *testing.T) {
	for _, c := range []struct {
		name     string
		min, max float64
		log      bool
		want     []string
	}{
		{"a rate peaking at 2/s", 0, 2.16, false, []string{"0", "0.5", "1", "1.5", "2"}},
		{"a rate at 50/s", 0, 54, false, []string{"0", "10", "20", "30", "40", "50"}},
		{"40 s of capture", 0, 41, false, []string{"0", "10", "20", "30", "40"}},
		{"an hour of capture", 0, 3601, false, []string{"0", "1000", "2000", "3000"}},
		{"8 kB/s", 0, 8640, false, []string{"0", "2000", "4000", "6000", "8000"}},
		{"1.3 MB/s", 0, 1.3e6, false, []string{"0", "500k", "1M"}},
		{"2.7 GB/s", 0, 2.7e9, false, []string{"0", "500M", "1G", "1.5G", "2G", "2.5G"}},
		{"a tenth of a request per second", 0, 0.108, false, []string{"0", "0.02", "0.04", "0.06", "0.08", "0.1"}},
		{"the least range", 0, 1, false, []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}},
		{"log: 0.45 to 9 ms", 0.45, 9, true, []string{"0.5", "1", "2", "5"}},
		{"log: 0.25 to 20 ms", 0.25, 20, true, []string{"1", "10"}},
		{"log: 2 to 8 ms, no power of ten", 2, 8, true, []string{"2", "5"}},
		{"log: 0.0005 to 12000 ms", 0.0005, 12000, true, []string{"0.001", "0.01", "0.1", "1", "10", "100", "1k", "10k"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ts []tick
			if c.log {
				ts = logTicks(c.min, c.max)
			} else {
				ts = linearTicks(c.min, c.max, 4)
			}
			if got := labels(ts); !slices.Equal(got, c.want) {
				t.Errorf("labels %q, want %q", got, c.want)
			}
			for i, tk := range ts {
				if tk.v < c.min*(1-1e-9) || tk.v > c.max*(1+1e-9) {
					t.Errorf("tick %g outside %g..%g", tk.v, c.min, c.max)
				}
				if i > 0 && tk.v <= ts[i-1].v {
					t.Errorf("ticks not increasing: %g after %g", tk.v, ts[i-1].v)
				}
			}
			if len(ts) <= len(c.want) {
				t.Errorf("%d ticks for %d labels: no minor ticks between them", len(ts), len(c.want))
			}
		})
	}
}

// A scale puts its range's ends at its ends, and a log scale's middle
// at the geometric mean; values at or below a log scale's minimum (a
// latency of 0) at its bottom.
func TestScale(t *testing.T) {
	lin := scale{min: 0, max: 50, p0: 200, p1: 20}
	log := scale{min: 0.1, max: 10, p0: 200, p1: 20, log: true}
	for _, c := range []struct {
		s    scale
		v    float64
		want float64
	}{{lin, 0, 200}, {lin, 50, 20}, {lin, 25, 110}, {log, 0.1, 200}, {log, 10, 20}, {log, 1, 110}, {log, 0, 200}} {
		if got := c.s.at(c.v); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%+v at %g = %g, want %g", c.s, c.v, got, c.want)
		}
	}
}
