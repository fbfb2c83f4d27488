package report

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// The page: html/template escapes everything it is given as text, so
// wire-derived strings (client ids, topics, evidence) stay text; the
// only markup inserted as is, the charts' SVG, is drawn by svg.go, which
// escapes its text. A Content-Security-Policy forbids every fetch and
// every script but the page's own (by its hash), so even markup that got
// through could neither run nor call out.

//go:embed html_page.tmpl
var pageTemplate string

//go:embed html_page.js
var pageScript string

//go:embed html_page.css
var pageStyle string

// pageTmpl is parsed on first use, by --html only: parsing it cost every
// run of the command about a millisecond at start-up.
var pageTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Funcs(template.FuncMap{
		"sev": func(s detectors.Severity) string { return s.String() },
	}).Parse(pageTemplate))
})

// csp is the page's Content-Security-Policy: nothing may be fetched, only
// the page's own script runs (by its hash), styles only inline. Made on
// first use, by --html only (hashing the script at init was 0.3 % of the
// instructions of every run on a small capture).
var csp = sync.OnceValue(func() string {
	h := sha256.Sum256([]byte(pageScript))
	return "default-src 'none'; script-src 'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
})

// maxTableRows bounds the rows of the connection and client tables; the
// JSON report has them all.
const maxTableRows = 2000

type cell struct {
	Text string
	// V is the sort key of a numeric column (Text if empty).
	V string
	// Link is an anchor on the page (without #), if the cell links.
	Link string
	// ID anchors the row.
	ID   string
	Bad  bool // drawn as a problem
	Code bool // monospace
}

type column struct {
	Name string
	Num  bool
}

type table struct {
	ID      string
	Title   string
	Note    string
	Columns []column
	Rows    [][]cell
}

type findingView struct {
	N int
	F detectors.Finding
	// Summary and the texts below are cleaned as the text report cleans
	// a detector's prose (CleanProse).
	Summary     string
	When        string
	Conns       []cell
	Nodes       string
	Counts      string
	Fields      string
	Evidence    []string
	Loss        string
	Explanation string
	Next        string
}

// incidentView is an incident in the summary: its findings' views, the
// cause first.
type incidentView struct {
	N        int
	Severity detectors.Severity
	Detector string
	Story    string
	Facets   []findingView
}

type pageView struct {
	CSP    string
	Style  template.CSS
	Script template.JS
	Title  string
	Files  []string
	Period string
	// Partial and Filter say what the run left out (Capture.Partial,
	// Capture.Filter), empty when nothing.
	Partial string
	Filter  string
	Schema  string
	Totals  []cell
	// Incidents lead the summary: each incident's findings, the cause
	// first (Incidents in report.go).
	Incidents []incidentView
	Severity  string
	Findings  []findingView
	Charts    []template.HTML
	Spans     []Span
	Origin    string
	Map       template.HTML
	MapNote   string
	Tables    []table
	Edges     table
	// Correlation is set for records read back from agents.
	Correlation *corrView
}

// tally counts findings by severity, a summary of findings the bounds did
// not list (detectors' Limits) as the findings it counts.
func tally(fs []detectors.Finding) map[detectors.Severity]int64 {
	out := map[detectors.Severity]int64{}
	for _, f := range fs {
		if cut, _ := f.Fields["not_listed"].(bool); cut {
			for _, s := range severityOrder {
				out[s] += f.Counts[s.String()]
			}
			continue
		}
		out[f.Severity]++
	}
	return out
}

// WriteHTML writes r as one self-contained HTML page.
func WriteHTML(w io.Writer, r *Report) error {
	var b bytes.Buffer
	if err := pageTmpl().Execute(&b, view(r)); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

func view(r *Report) *pageView {
	pg := BuildPage(r)
	v := &pageView{CSP: csp(), Style: template.CSS(pageStyle), Script: template.JS(pageScript), Schema: r.Schema,
		Correlation: correlationView(r.Correlation)}
	for _, f := range r.Capture.Files {
		s := Clean(f.Name) + " (" + f.Format
		if len(f.LinkTypes) > 0 {
			s += ", link " + strings.Join(f.LinkTypes, "+")
		}
		s += fmt.Sprintf(", %d packets)", f.Packets)
		if f.Error != "" {
			s += "; stopped early: " + Clean(f.Error)
		}
		v.Files = append(v.Files, s)
	}
	v.Title = "kfsniff report"
	if len(r.Capture.Files) > 0 {
		v.Title += ": " + Clean(r.Capture.Files[0].Name)
	}
	c := &r.Capture
	if c.Partial != nil {
		v.Partial = Clean(c.Partial.String())
	}
	if c.Filter != nil {
		v.Filter = Clean(c.Filter.String())
	}
	if !c.First.IsZero() {
		v.Period = fmt.Sprintf("%s .. %s UTC (%s)", c.First.UTC().Format(TimeLayout), c.Last.UTC().Format(TimeLayout), seconds(c.Duration))
	}
	t := &r.Totals
	num := func(name string, n int64, bad bool) cell {
		return cell{Text: name, V: strconv.FormatInt(n, 10), Bad: bad && n > 0}
	}
	v.Totals = []cell{
		num("packets", c.Packets, false),
		{Text: "bytes", V: bytesHuman(c.Bytes)},
		num("Kafka connections", int64(t.KafkaConnections), false),
		num("requests", t.Requests, false),
		num("responses", t.Responses, false),
		num("error responses", t.ErrorResponses, true),
		num("unanswered requests", t.UnansweredRequests, true),
		num("unmatched responses", t.UnmatchedResponses, true),
		num("refused connections", t.RefusedConnections, true),
		num("decode errors", t.DecodeErrors, true),
		num("framing errors", t.FramingErrors, true),
		num("gaps", t.Gaps, true),
		{Text: "bytes lost", V: bytesHuman(t.LostBytes), Bad: t.LostBytes > 0},
	}
	if c.Drops != nil {
		v.Totals = append(v.Totals, num("kernel drops", int64(*c.Drops), true))
	}
	if tl := r.TLS; tl != nil {
		v.Totals = append(v.Totals, num("TLS connections", tl.Connections, false), num("TLS decrypted", tl.Decrypted, false),
			num("TLS without keys", tl.NoKeys, true), num("TLS records failing authentication", tl.AuthFailures, true),
			num("key log sessions unused", int64(tl.UnusedSessions), false))
	}
	bySev := tally(r.Findings)
	for i, f := range r.Findings {
		fv := findingView{N: i + 1, F: f, Summary: CleanProse(f.Summary), Explanation: CleanProseText(f.Explanation), Next: CleanProseText(f.Next)}
		if !f.First.IsZero() {
			fv.When = fmt.Sprintf("%s .. %s UTC (%s)", f.First.UTC().Format(TimeLayout), f.Last.UTC().Format(TimeLayout), f.Last.Sub(f.First).Round(time.Millisecond))
		}
		for _, id := range f.Conns {
			fv.Conns = append(fv.Conns, cell{Text: fmt.Sprintf("#%d", id), Link: fmt.Sprintf("conn-%d", id)})
		}
		fv.Nodes = text.IDs(f.Nodes, 0)
		fv.Counts = kv(f.Counts)
		fv.Fields = fieldsText(f.Fields)
		for _, e := range f.Evidence {
			s := "packet " + pkt(e.File, e.Packet)
			if e.Conn > 0 {
				s += fmt.Sprintf(" (connection #%d)", e.Conn)
			}
			fv.Evidence = append(fv.Evidence, s+": "+CleanProse(e.What))
		}
		if l := f.CaptureLoss; l != nil {
			fv.Loss = fmt.Sprintf("capture loss: %d gaps (%s lost) on connections %v during this finding: its counts may be low", l.Gaps, bytesHuman(l.Bytes), l.Conns)
		}
		v.Findings = append(v.Findings, fv)
	}
	for k, in := range incidentsOf(r) {
		iv := incidentView{N: k + 1, Severity: in.Severity, Detector: in.Detector, Story: CleanProse(in.Story)}
		for _, i := range in.Findings {
			iv.Facets = append(iv.Facets, v.Findings[i])
		}
		v.Incidents = append(v.Incidents, iv)
	}
	var sev counts
	for _, s := range severityOrder {
		sev.add(bySev[s], s.String())
	}
	v.Severity = cmp.Or(strings.Join(sev, ", "), "none")

	var xmax float64
	for _, ch := range pg.Charts {
		for _, l := range ch.Lines {
			if n := len(l.Points); n > 0 {
				xmax = max(xmax, l.Points[n-1][0]+pg.Bucket)
			}
		}
	}
	for _, s := range pg.Spans {
		xmax = max(xmax, s.To)
	}
	for _, ch := range pg.Charts {
		v.Charts = append(v.Charts, template.HTML(svgID(drawChart(ch, pg.Spans, xmax, pg.Bucket), "chart-"+ch.ID, "chart", ch.Title)))
	}
	v.Spans = pg.Spans
	v.Origin = pg.Origin.Format(TimeLayout) + " UTC"
	if w := pg.Bucket; w != 1 {
		v.Origin += fmt.Sprintf("; each point is %g s", w)
	}
	v.Map = template.HTML(svgID(drawMap(pg.Map), "map", "map", "who talks to whom"))
	if pg.Map.NodesNotListed > 0 {
		v.MapNote = fmt.Sprintf("%d more clients and servers are folded into \"other clients\" and \"other servers\".", pg.Map.NodesNotListed)
	}
	v.Edges = edgeTable(pg.Map)
	v.Tables = []table{apiTable(r), connTable(r), clientTable(r), eventTable(r)}
	return v
}

func n64(n int64) cell { return cell{Text: strconv.FormatInt(n, 10)} }
func nInt(n int) cell  { return n64(int64(n)) }

func bad(c cell, b bool) cell { c.Bad = b; return c }

func edgeTable(m Map) table {
	t := table{ID: "edges", Title: "Connections between nodes", Columns: []column{{Name: "from"}, {Name: "to"}, {Name: "roles"},
		{Name: "connections", Num: true}, {Name: "requests", Num: true}, {Name: "error responses", Num: true},
		{Name: "unanswered", Num: true}, {Name: "resets", Num: true}, {Name: "refused attempts", Num: true}, {Name: "failing: findings"},
		{Name: "incidents"}}}
	label := map[string]string{}
	for _, n := range m.Nodes {
		label[n.ID] = n.Label
	}
	for _, e := range m.Edges {
		cc := nInt(e.ConnCount)
		if len(e.Conns) > 0 {
			cc.Text = fmt.Sprintf("%d: %s", e.ConnCount, strings.Join(each(e.Conns, ref), " "))
			cc.V = strconv.Itoa(e.ConnCount)
		}
		failing := cell{Text: "no"}
		if e.Failing {
			failing = cell{Text: strings.Join(each(e.Findings, ref), " "), Bad: true}
		}
		incidents := each(e.Incidents, strconv.Itoa)
		t.Rows = append(t.Rows, []cell{{Text: label[e.From]}, {Text: label[e.To]}, {Text: strings.Join(e.Roles, ", ")}, cc,
			n64(e.Requests), bad(n64(e.Errors), e.Errors > 0), bad(n64(e.Unanswered), e.Unanswered > 0),
			bad(nInt(e.Resets), e.Resets > 0), bad(n64(e.Refused), e.Refused > 0), failing,
			bad(cell{Text: strings.Join(incidents, " ")}, len(incidents) > 0)})
	}
	return t
}

func apiTable(r *Report) table {
	t := table{ID: "apis", Title: "APIs", Columns: []column{{Name: "API"}, {Name: "key", Num: true}, {Name: "version", Num: true},
		{Name: "requests", Num: true}, {Name: "responses", Num: true}, {Name: "error responses", Num: true}, {Name: "errors"},
		{Name: "unanswered", Num: true}, {Name: "decode errors", Num: true}, {Name: "p50 ms", Num: true}, {Name: "p99 ms", Num: true}, {Name: "max ms", Num: true}}}
	for _, a := range r.APIs {
		t.Rows = append(t.Rows, []cell{{Text: a.Name}, nInt(int(a.Key)), nInt(int(a.Version)), n64(a.Requests), n64(a.Responses),
			bad(n64(a.ErrorResponses), a.ErrorResponses > 0), {Text: kv(a.Errors), Bad: len(a.Errors) > 0},
			bad(n64(a.Unanswered), a.Unanswered > 0), bad(n64(a.DecodeErrors), a.DecodeErrors > 0),
			msCell(a.Latency.P50, a.Responses), msCell(a.Latency.P99, a.Responses), msCell(a.Latency.Max, a.Responses)})
	}
	return t
}

func msCell(v float64, n int64) cell {
	if n == 0 {
		return cell{Text: "-", V: "-1"}
	}
	return cell{Text: strconv.FormatFloat(v, 'f', 3, 64)}
}

func connTable(r *Report) table {
	t := table{ID: "connections", Title: "Connections", Columns: []column{{Name: "#", Num: true}, {Name: "client"}, {Name: "server"},
		{Name: "client ids"}, {Name: "roles"}, {Name: "requests", Num: true}, {Name: "responses", Num: true}, {Name: "error responses", Num: true},
		{Name: "unanswered", Num: true}, {Name: "to server", Num: true}, {Name: "to client", Num: true}, {Name: "gaps", Num: true},
		{Name: "packets"}, {Name: "first seen"}, {Name: "last seen"}, {Name: "end"}}}
	if r.TLS != nil {
		t.Columns = append(t.Columns, column{Name: "TLS"})
	}
	conns := r.Connections
	if len(conns) > maxTableRows {
		conns = slices.Clone(conns)
		slices.SortStableFunc(conns, func(a, b Connection) int {
			return cmp.Or(cmp.Compare(b.Errors+b.Unanswered, a.Errors+a.Unanswered), cmp.Compare(b.Requests, a.Requests))
		})
		conns = conns[:maxTableRows]
		slices.SortFunc(conns, func(a, b Connection) int { return cmp.Compare(a.ID, b.ID) })
		t.Note = fmt.Sprintf("The %d of %d connections with the most error responses, unanswered requests and requests; the JSON report (--json) lists them all.", maxTableRows, len(r.Connections))
	}
	for _, c := range conns {
		end := "open"
		switch {
		case c.Reset:
			end = "reset"
		case c.Closed:
			end = "closed"
		}
		id := nInt(c.ID)
		id.ID = fmt.Sprintf("conn-%d", c.ID)
		t.Rows = append(t.Rows, []cell{id, {Text: nodeLabel(c.Client, c.ClientNode), Code: true}, {Text: nodeLabel(c.Server, c.ServerNode), Code: true},
			{Text: strings.Join(each(c.ClientIDs, Clean), ", ")}, {Text: strings.Join(c.Roles, ", ")}, nInt(c.Requests), nInt(c.Responses),
			bad(nInt(c.Errors), c.Errors > 0), bad(nInt(c.Unanswered), c.Unanswered > 0),
			{Text: bytesHuman(c.BytesToServer), V: strconv.FormatInt(c.BytesToServer, 10)}, {Text: bytesHuman(c.BytesToClient), V: strconv.FormatInt(c.BytesToClient, 10)},
			bad(nInt(c.Gaps), c.Gaps > 0), {Text: pkt(c.File, c.FirstPacket) + ".." + pkt(c.File, c.LastPacket)},
			{Text: c.FirstSeen.UTC().Format("15:04:05.000000")}, {Text: c.LastSeen.UTC().Format("15:04:05.000000")}, {Text: end, Bad: c.Reset}})
		if r.TLS != nil {
			row := &t.Rows[len(t.Rows)-1]
			tc := cell{Text: "-"}
			if s := c.TLSSession; s != nil {
				tc = cell{Text: s.text(), Bad: !s.Decrypted}
			}
			*row = append(*row, tc)
		}
	}
	return t
}

// firstRows returns the first maxTableRows of rows, noting on t, if it
// cut them, how many of what there were.
func firstRows[T any](rows []T, t *table, what string) []T {
	if len(rows) <= maxTableRows {
		return rows
	}
	t.Note = fmt.Sprintf("The first %d of %d %s; the JSON report (--json) lists them all.", maxTableRows, len(rows), what)
	return rows[:maxTableRows]
}

func clientTable(r *Report) table {
	t := table{ID: "clients", Title: "Clients", Columns: []column{{Name: "client id"}, {Name: "host"}, {Name: "software"},
		{Name: "requests", Num: true}, {Name: "roles"}, {Name: "connections"}, {Name: "servers"}, {Name: "APIs"}, {Name: "topics"},
		{Name: "Kafka 4.0 ready"}, {Name: "first"}, {Name: "last"}}}
	clients := firstRows(r.Clients, &t, "clients")
	if r.ClientsNotListed > 0 {
		t.Note += fmt.Sprintf(" %d requests came from clients past the inventory's bound.", r.ClientsNotListed)
	}
	for _, c := range clients {
		ready := "yes"
		if !c.Kafka40Ready {
			ready = "no"
		}
		t.Rows = append(t.Rows, []cell{{Text: Clean(c.ClientID), Code: true}, {Text: c.Host, Code: true}, {Text: strings.Join(each(c.Software, softwareText), ", ")},
			n64(c.Requests), {Text: strings.Join(c.Roles, ", ")}, {Text: strings.Join(each(c.Connections, ref), " ")}, {Text: strings.Join(c.Servers, ", ")},
			{Text: strings.Join(each(c.APIs, apiText), ", ")}, {Text: strings.Join(each(c.Topics, Clean), ", ")}, {Text: ready, Bad: !c.Kafka40Ready},
			{Text: c.First.UTC().Format("15:04:05.000000")}, {Text: c.Last.UTC().Format("15:04:05.000000")}})
	}
	return t
}

func eventTable(r *Report) table {
	t := table{ID: "attempts", Title: "Connection attempts refused or unanswered", Columns: []column{{Name: "packet"}, {Name: "time"},
		{Name: "client"}, {Name: "server"}, {Name: "what"}, {Name: "SYNs", Num: true}}}
	for _, e := range r.Events {
		t.Rows = append(t.Rows, []cell{{Text: pkt(e.File, e.Packet), V: strconv.FormatUint(e.Packet, 10)}, {Text: e.Time.UTC().Format("15:04:05.000000")},
			{Text: e.Client, Code: true}, {Text: e.Server, Code: true}, {Text: e.Kind, Bad: true}, nInt(e.Attempts)})
	}
	if len(t.Rows) == 0 {
		t.Note = "none"
	}
	return t
}
