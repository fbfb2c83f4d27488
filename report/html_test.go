package report_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/net/html"

	"github.com/kfsniff/kfsniff/collect"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
	"github.com/kfsniff/kfsniff/report"
)

// hostile is a client id, topic and finding text that would be markup and
// script if a page took it as HTML.
const hostile = `</title></style></script><script>alert(1)</script><img src=x onerror=alert(2)><svg onload=alert(3)>"'&amp;`

// hostileReport is the report of one client whose client id and topic are
// hostile, with a finding quoting them, built as the pipeline builds one.
func hostileReport(t *testing.T) *report.Report {
	t.Helper()
	t0 := time.Date(2026, 7, 20, 3, 0, 0, 0, time.UTC)
	col := collect.NewCollector()
	dl := flows.NewDelivery(col)
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.1:50000"), netip.MustParseAddrPort("10.0.0.2:9092"))
	dl.Deliver(&flows.Event{Conn: &flows.ConnEvent{Kind: flows.ConnOpened, Conn: c, Client: c.Client, Server: c.Server, Time: t0}})
	for i := range 5 {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		tp := kmsg.NewMetadataRequestTopic()
		tp.Topic = kmsg.StringPtr(hostile)
		req.Topics = append(req.Topics, tp)
		at := t0.Add(time.Duration(i) * time.Second)
		q := flowstest.MakeRequest(c, at, int32(i), hostile, req)
		dl.Deliver(&flows.Event{Req: q})
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 12
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.ErrorCode = kmsg.StringPtr(hostile), 3
		resp.Topics = append(resp.Topics, rt)
		dl.Deliver(&flows.Event{X: &flows.Exchange{Conn: c, Req: q, Resp: flowstest.MakeResponse(q, at.Add(time.Millisecond), resp)}})
	}
	c.ClientIDs = []string{hostile}
	c.Requests, c.Responses, c.ErrorResponses = 5, 5, 5
	f := detectors.Finding{Detector: "error-storm", Severity: detectors.Warning, Summary: "client " + hostile, First: t0, Last: t0.Add(4 * time.Second),
		Conns: []int{c.ID}, Evidence: []detectors.Evidence{{Packet: 3, What: hostile}}, Explanation: hostile, Next: hostile,
		Fields: map[string]any{"client_id": hostile}}
	r := col.Build([]report.File{{Name: hostile + ".pcap", Format: "pcap"}}, &flows.Stats{FirstTime: t0, LastTime: t0.Add(5 * time.Second)},
		[]*flows.Conn{c}, dl.Nodes(), []detectors.Finding{f})
	return r
}

// A hostile client id, topic and finding text stay text: the page parses
// to exactly one script (its own), no element carries an event handler,
// no element the wire could have named (img, iframe...) exists, and the
// strings are there as text, in the tables, the findings and the map.
func TestHTMLHostileStaysText(t *testing.T) {
	var b bytes.Buffer
	if err := report.WriteHTML(&b, hostileReport(t)); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	scripts, texts, svgTexts := 0, 0, 0
	var walk func(n *html.Node, inSVGText bool)
	walk = func(n *html.Node, inSVGText bool) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script":
				scripts++
			case "img", "iframe", "object", "embed", "link", "base", "form", "image", "foreignObject", "foreignobject":
				t.Errorf("page has a <%s> element", n.Data)
			case "text":
				inSVGText = true
			}
			for _, a := range n.Attr {
				if strings.HasPrefix(strings.ToLower(a.Key), "on") {
					t.Errorf("<%s> has an event handler %s=%q", n.Data, a.Key, a.Val)
				}
				if strings.Contains(a.Val, "alert(") {
					t.Errorf("<%s %s> holds the hostile string", n.Data, a.Key)
				}
			}
		}
		if n.Type == html.TextNode && strings.Contains(n.Data, "alert(") {
			if n.Parent != nil && n.Parent.Data == "script" {
				t.Errorf("the hostile string is inside a script: %.80q", n.Data)
			}
			texts++
			if inSVGText {
				svgTexts++
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inSVGText)
		}
	}
	walk(doc, false)
	if scripts != 1 {
		t.Errorf("%d script elements, want the page's own one", scripts)
	}
	// Title, file, summary, finding (summary, fields, evidence,
	// explanation, next), connections, clients (id, topic), map table,
	// and the map's label in the SVG.
	if texts < 10 {
		t.Errorf("the hostile string is text %d times, want it in the title, findings, tables and map", texts)
	}
	if svgTexts == 0 {
		t.Errorf("the hostile client id is not a label of the map")
	}
	if !strings.Contains(b.String(), `content="default-src &#39;none&#39;; script-src &#39;sha256-`) {
		t.Errorf("no Content-Security-Policy forbidding fetches and foreign scripts")
	}
}

// The page's data (the charts' series) adds up to the report's own
// counts: a reader comparing a chart with the APIs table sees the same
// traffic. Checked on every scenario capture.
func TestHTMLDataAgreesWithReport(t *testing.T) {
	for _, capture := range captures(t, fixtures+"/scenarios") {
		t.Run(capture, func(t *testing.T) {
			_, rep := analyse(t, goldenCase{capture: capture}, 1)
			var b bytes.Buffer
			if err := report.WriteHTMLData(&b, rep); err != nil {
				t.Fatal(err)
			}
			var pg report.Page
			if err := json.Unmarshal(b.Bytes(), &pg); err != nil {
				t.Fatal(err)
			}
			var reqs, errs int64
			for _, a := range rep.APIs {
				reqs += a.Requests
				errs += a.ErrorResponses
			}
			for _, ch := range pg.Charts {
				var n float64
				for _, l := range ch.Lines {
					for _, p := range l.Points {
						n += p[1] * pg.Bucket
					}
				}
				var want int64
				switch ch.ID {
				case "requests-by-api", "requests-by-broker":
					want = reqs
				case "errors-by-api", "errors-by-broker":
					want = errs
				default:
					continue
				}
				if int64(n+0.5) != want {
					t.Errorf("chart %s counts %.0f, the report %d", ch.ID, n, want)
				}
			}
			var edgeReqs int64
			for _, e := range pg.Map.Edges {
				edgeReqs += e.Requests
				if e.Failing != (len(e.Findings) > 0) {
					t.Errorf("edge %s -> %s failing=%v with findings %v", e.From, e.To, e.Failing, e.Findings)
				}
				for _, n := range e.Findings {
					if n < 1 || n > len(rep.Findings) || rep.Findings[n-1].Severity < detectors.Warning {
						t.Errorf("edge %s -> %s names finding %d, not one at warning or above", e.From, e.To, n)
					}
				}
			}
			if edgeReqs != rep.Totals.Requests {
				t.Errorf("map edges carry %d requests, the report %d", edgeReqs, rep.Totals.Requests)
			}
			if len(pg.Spans) != len(rep.Findings) {
				t.Errorf("%d spans for %d findings", len(pg.Spans), len(rep.Findings))
			}
		})
	}
}

// A finding's prose reads on the page as in the text report: its summary
// is cleaned like the rest (a right-to-left override from the wire does
// not turn the line around, an escape byte is shown as \x1b), and wire
// strings the detector quoted keep their single backslashes (summary,
// evidence, explanation and next steps as the text report prints them).
func TestHTMLFindingProseAsText(t *testing.T) {
	r := hostileReport(t)
	quoted := fmt.Sprintf("%q", `a\b`)
	f := &r.Findings[0]
	f.Summary = "client " + quoted + " on topic \u202eexe.txt\x1b[31m"
	f.Evidence[0].What = "request from " + quoted
	f.Explanation = "the client " + quoted + " is refused"
	f.Next = "check " + quoted
	var page, text bytes.Buffer
	if err := report.WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&page)
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			all.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if strings.ContainsAny(all.String(), "\u202e\x1b") {
		t.Errorf("the page's text holds a right-to-left override or an escape byte from a finding")
	}
	for _, want := range []string{`client "a\\b" on topic \u202eexe.txt\x1b[31m`, `request from "a\\b"`, `the client "a\\b" is refused`, `check "a\\b"`} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("the text report does not print %q", want)
		}
		if !strings.Contains(all.String(), want) {
			t.Errorf("the text report prints %q, the page does not", want)
		}
	}
}

// The counts of findings on the page and in the text report's overview
// include the findings the bounds did not list (their summary finding
// counts them): a capture with 40,000 NOT_LEADER findings under
// --max-findings-per-rule 1 said "2 warning".
func TestFindingCountsIncludeNotListed(t *testing.T) {
	r := hostileReport(t) // one warning
	r.Findings = append(r.Findings, detectors.Finding{Detector: "not-leader", Severity: detectors.Warning,
		Summary: "39999 more not-leader findings not listed (0 error, 39999 warning, 0 info)",
		Counts:  map[string]int64{"not_listed": 39999, "error": 0, "warning": 39999, "info": 0},
		Fields:  map[string]any{"not_listed": true, "per_rule": 1, "total": 1000}})
	var page, text bytes.Buffer
	if err := report.WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	if want := "Findings: 40000 warning"; !strings.Contains(page.String(), want) {
		i := strings.Index(page.String(), "Findings: ")
		t.Errorf("page: want %q, got %.40q", want, page.String()[i:])
	}
	if want := "What is wrong (40000 findings"; !strings.Contains(text.String(), want) {
		t.Errorf("text: want %q, got %.40q", want, text.String())
	}
}

// The page shows the correlation section of records read back from
// agents (kfsniff -r kafka://...) as the text report does: each agent with
// its records and its clock's offset (the reference's, an estimate, or
// unknown, marked), and each topic's producer-to-consumer latency with
// what was not measured; names from the records stay text. A capture
// file's page has no such section.
func TestHTMLCorrelation(t *testing.T) {
	r := hostileReport(t)
	var plain bytes.Buffer
	if err := report.WriteHTML(&plain, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), `id="correlation"`) {
		t.Errorf("a capture file's page has a correlation section")
	}
	first, last := time.Date(2026, 1, 1, 0, 0, 0, 18913000, time.UTC), time.Date(2026, 1, 1, 0, 0, 1, 69300000, time.UTC)
	r.Correlation = &report.Correlation{Records: 219, Unreadable: report.Unreadable{Version: 1, Malformed: 2}, Reference: "host-a",
		Agents: []report.CorrelationAgent{
			{Agent: "host-a", Records: 91, Exchanges: 72, Conns: 18, Findings: 1, First: &first, Last: &last, Clock: &report.ClockOffset{}},
			{Agent: "host-b", Records: 90, Exchanges: 74, Conns: 16, First: &first, Last: &last,
				Clock: &report.ClockOffset{OffsetNs: 1234701000, SpreadNs: 71000, Samples: 36, Connections: 4}},
			{Agent: hostile, Records: 38, Exchanges: 32, Conns: 6},
		},
		Skew: report.SkewCounts{Exchanges: 178, Matched: 36, Window: 16384},
		E2E: report.E2E{Produced: 64, Fetched: 104, Window: 262144, Topics: []report.E2ETopic{
			{Cluster: "kfake", Topic: "orders", Batches: 24, Latency: report.Latency{P50: 37.376, P99: 72.465, Max: 72.465}, SkewUnknown: 16},
			{Topic: hostile, Unmatched: 5},
		}}}
	var page, text bytes.Buffer
	if err := report.WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(page.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	// The rows of a table by id: each cell's text, and whether it is
	// marked bad.
	type td struct {
		text string
		bad  bool
	}
	var find func(n *html.Node, id string) *html.Node
	find = func(n *html.Node, id string) *html.Node {
		for _, a := range n.Attr {
			if a.Key == "id" && a.Val == id {
				return n
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if f := find(c, id); f != nil {
				return f
			}
		}
		return nil
	}
	var textOf func(n *html.Node) string
	textOf = func(n *html.Node) string {
		if n.Type == html.TextNode {
			return n.Data
		}
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			b.WriteString(textOf(c))
		}
		return b.String()
	}
	rows := func(id string) [][]td {
		tb := find(doc, id)
		if tb == nil {
			t.Fatalf("no table %s on the page", id)
		}
		var out [][]td
		var walk func(n *html.Node)
		walk = func(n *html.Node) {
			if n.Type == html.ElementNode && n.Data == "tr" && n.Parent.Data == "tbody" {
				var row []td
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					if c.Type == html.ElementNode && c.Data == "td" {
						bad := false
						for _, a := range c.Attr {
							bad = bad || a.Key == "class" && strings.Contains(a.Val, "bad")
						}
						row = append(row, td{textOf(c), bad})
					}
				}
				out = append(out, row)
			}
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				walk(c)
			}
		}
		walk(tb)
		return out
	}
	sec := find(doc, "correlation")
	if sec == nil {
		t.Fatal("no correlation section on the page")
	}
	if s := textOf(sec); !strings.Contains(s, "219 records read; 3 unreadable: 1 of another schema version, 2 malformed") ||
		!strings.Contains(s, "Clocks are relative to agent host-a's") || !strings.Contains(s, "36 exchanges seen by two agents, of 178") ||
		!strings.Contains(s, "64 batches produced, 104 fetched by consumers") {
		t.Errorf("the section's counts are not the report's:\n%s", s)
	}
	agents := rows("table-agents")
	if len(agents) != 3 {
		t.Fatalf("%d agent rows, want 3", len(agents))
	}
	offset := "+1.234701s ±71µs (spread; 36 samples, 4 connections)"
	if !strings.Contains(text.String(), offset) {
		t.Fatalf("the text report does not say host-b's offset %q", offset)
	}
	for i, want := range []struct {
		agent, records, clock string
		bad                   bool
	}{{"host-a", "91", "reference", false}, {"host-b", "90", offset, false}, {hostile, "38", "unknown (no connection seen", true}} {
		row := agents[i]
		if row[0].text != want.agent || row[1].text != want.records || !strings.HasPrefix(row[7].text, want.clock) || row[7].bad != want.bad {
			t.Errorf("agent row %d: %+v: want %s, %s records, clock %q (marked %v)", i, row, want.agent, want.records, want.clock, want.bad)
		}
	}
	if agents[0][5].text != "2026-01-01 00:00:00.018913" || agents[2][5].text != "-" {
		t.Errorf("first record times %q, %q: want host-a's and none for an agent without times", agents[0][5].text, agents[2][5].text)
	}
	topics := rows("table-e2e")
	if len(topics) != 2 {
		t.Fatalf("%d topic rows, want 2", len(topics))
	}
	if o := topics[0]; o[0].text != "kfake" || o[1].text != "orders" || o[2].text != "24" || o[3].text != "37.376" || o[4].text != "72.465" ||
		o[6].text != "16 clock offset unknown" || !o[6].bad {
		t.Errorf("orders: %+v: want 24 batches, p50 37.376 ms, p99 72.465 ms, 16 not measured (clock offset unknown)", o)
	}
	if h := topics[1]; h[1].text != hostile || h[2].text != "0" || h[3].text != "-" || h[6].text != "5 no produce seen" {
		t.Errorf("a topic with no latency: %+v: want its name as text, 0 batches, no latency, 5 without their produce", h)
	}
	if n := strings.Count(page.String(), "<script"); n != 1 {
		t.Errorf("%d scripts on the page: the names from the records are not text", n)
	}
}
