package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
)

// The HTML report (--html) is one self-contained page: the report's
// summary, findings and tables, and what only a page can show, charts over
// capture time and a map of who talks to whom. Page is what those charts
// and the map draw, built from the Report alone; html_charts.go and
// html_charts.go draws it as SVG (svg.go), html_page.go writes the page.

// Page is the data the HTML report draws.
type Page struct {
	// Origin is x = 0 on the time axis: the start of the timeline's
	// first bucket (the first Kafka frame's second).
	Origin time.Time `json:"origin"`
	// Bucket is the width of a point, in seconds.
	Bucket float64 `json:"bucket_s"`
	Charts []Chart `json:"charts"`
	// Spans are the findings on the time axis.
	Spans []Span `json:"spans"`
	Map   Map    `json:"map"`
}

// Chart is one chart: lines over capture time.
type Chart struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Unit  string `json:"unit"`
	// Log: the y axis is logarithmic.
	Log   bool   `json:"log,omitempty"`
	Lines []Line `json:"lines"`
}

// Line is one series: points (x in seconds from Origin, y in the chart's
// unit). Dashed lines are drawn dashed (p50 against p99).
type Line struct {
	Name   string       `json:"name"`
	Dashed bool         `json:"dashed,omitempty"`
	Points [][2]float64 `json:"points"`
	// Color is the line's index in the palette, so that an API keeps its
	// colour from chart to chart.
	Color int `json:"color"`
}

// Span is one finding on the time axis: from and to in seconds from Origin.
type Span struct {
	Finding  int     `json:"finding"` // its number on the page, from 1
	Detector string  `json:"detector"`
	Severity string  `json:"severity"`
	From     float64 `json:"from"`
	To       float64 `json:"to"`
}

// chartLines bounds the lines of one chart: the largest have their own,
// the rest are summed into one.
const chartLines = 7

// maxSpans bounds the findings drawn on the charts, a bar each (the first,
// the most severe: findings are sorted; all are listed below the charts).
const maxSpans = 16

// BuildPage makes the charts' series and the map from a report.
func BuildPage(r *Report) *Page {
	p := &Page{Charts: []Chart{}, Spans: []Span{}}
	tl := r.Timeline
	if tl == nil || tl.Buckets == 0 {
		tl = &Timeline{Start: r.Capture.First, Width: time.Second}
	}
	p.Origin, p.Bucket = tl.Start.UTC(), tl.Width.Seconds()
	colors := apiColors(tl)
	p.Charts = append(p.Charts,
		rateChart("requests-by-api", "Requests per second by API", tl, apiSeries(tl, false), colors),
		rateChart("errors-by-api", "Error responses per second by API", tl, apiSeries(tl, true), colors),
		rateChart("requests-by-broker", "Requests per second by broker", tl, brokerSeries(tl, false), nil),
		rateChart("errors-by-broker", "Error responses per second by broker", tl, brokerSeries(tl, true), nil),
		latencyChart(tl, colors),
		bytesChart(tl),
	)
	for i, f := range r.Findings {
		if f.First.IsZero() || len(p.Spans) == maxSpans {
			continue
		}
		last := f.Last
		if last.Before(f.First) {
			last = f.First
		}
		p.Spans = append(p.Spans, Span{Finding: i + 1, Detector: f.Detector, Severity: f.Severity.String(),
			From: round3(f.First.Sub(p.Origin).Seconds()), To: round3(last.Sub(p.Origin).Seconds())})
	}
	p.Map = buildMap(r)
	return p
}

// series is a named count per bucket, before it becomes a line.
type series struct {
	name   string
	counts []int64
	color  int
}

func apiSeries(tl *Timeline, errors bool) []series {
	var out []series
	for _, a := range tl.APIs {
		c := a.Requests
		if errors {
			c = a.Errors
		}
		out = append(out, series{name: a.Name, counts: c})
	}
	return out
}

func brokerSeries(tl *Timeline, errors bool) []series {
	var out []series
	for i, b := range tl.Brokers {
		c := b.Requests
		if errors {
			c = b.Errors
		}
		out = append(out, series{name: brokerName(b), counts: c, color: i})
	}
	return out
}

// brokerName names a server's line: its node id when known (the map and
// the connections table give its address), else its endpoint.
func brokerName(b BrokerLine) string {
	if b.Node >= 0 {
		return fmt.Sprintf("node %d", b.Node)
	}
	return b.Server
}

// apiColors gives each API a palette index by its requests, the busiest
// first, so that it has the same colour in every chart.
func apiColors(tl *Timeline) map[string]int {
	apis := slices.Clone(tl.APIs)
	slices.SortStableFunc(apis, func(a, b APILine) int { return cmp.Compare(total(b.Requests), total(a.Requests)) })
	out := map[string]int{}
	for i, a := range apis {
		out[a.Name] = i
	}
	return out
}

// top keeps the chartLines-1 series with the largest totals (in their
// given order among equals) and sums the rest into "others"; series that
// are all zero are left out.
func top(in []series) []series {
	var live []series
	for _, s := range in {
		if total(s.counts) > 0 {
			live = append(live, s)
		}
	}
	slices.SortStableFunc(live, func(a, b series) int { return cmp.Compare(total(b.counts), total(a.counts)) })
	if len(live) <= chartLines {
		return live
	}
	rest := series{name: "others", counts: make([]int64, len(live[0].counts)), color: -1}
	for _, s := range live[chartLines-1:] {
		for i, v := range s.counts {
			rest.counts[i] += v
		}
	}
	return append(live[:chartLines-1:chartLines-1], rest)
}

func rateChart(id, title string, tl *Timeline, in []series, colors map[string]int) Chart {
	c := Chart{ID: id, Title: title, Unit: "per second", Lines: []Line{}}
	w := tl.Width.Seconds()
	for _, s := range top(in) {
		if i, ok := colors[s.name]; ok {
			s.color = i
		}
		c.Lines = append(c.Lines, rateLine(s, w))
	}
	return c
}

// rateLine is s per second, its buckets w seconds wide.
func rateLine(s series, w float64) Line {
	l := Line{Name: s.name, Color: s.color, Points: make([][2]float64, len(s.counts))}
	for i, v := range s.counts {
		l.Points[i] = [2]float64{round3(float64(i) * w), round3(float64(v) / w)}
	}
	return l
}

// latencyChart draws p99 and p50 of the APIs with the most responses.
func latencyChart(tl *Timeline, colors map[string]int) Chart {
	c := Chart{ID: "latency-by-api", Title: "Latency by API (p99 solid, p50 dashed)", Unit: "ms", Log: true, Lines: []Line{}}
	apis := slices.Clone(tl.APIs)
	responses := func(a APILine) (n int64) {
		for _, p := range a.Latency {
			n += p.Responses
		}
		return n
	}
	slices.SortStableFunc(apis, func(a, b APILine) int { return cmp.Compare(responses(b), responses(a)) })
	const most = 4
	w := tl.Width.Seconds()
	for i, a := range apis {
		if i == most || len(a.Latency) == 0 {
			break
		}
		p99 := Line{Name: a.Name + " p99", Color: colors[a.Name], Points: [][2]float64{}}
		p50 := Line{Name: a.Name + " p50", Color: colors[a.Name], Dashed: true, Points: [][2]float64{}}
		for _, pt := range a.Latency {
			x := round3(float64(pt.Bucket) * w)
			p99.Points = append(p99.Points, [2]float64{x, round3(pt.P99)})
			p50.Points = append(p50.Points, [2]float64{x, round3(pt.P50)})
		}
		c.Lines = append(c.Lines, p99, p50)
	}
	return c
}

func bytesChart(tl *Timeline) Chart {
	c := Chart{ID: "bytes", Title: "Kafka bytes per second (frames)", Unit: "bytes per second", Lines: []Line{}}
	w := tl.Width.Seconds()
	for _, s := range []series{{name: "to brokers (requests)", counts: tl.ToServer}, {name: "to clients (responses)", counts: tl.ToClient, color: 1}} {
		c.Lines = append(c.Lines, rateLine(s, w))
	}
	return c
}

// total is the sum of s.
func total(s []int64) (n int64) {
	for _, v := range s {
		n += v
	}
	return n
}

// round3 keeps three decimals, so that the goldens do not hold float noise.
func round3(v float64) float64 {
	return float64(int64(v*1000+math.Copysign(0.5, v))) / 1000
}

// severityOrder lists severities as the page counts them.
var severityOrder = []detectors.Severity{detectors.Error, detectors.Warning, detectors.Info}
