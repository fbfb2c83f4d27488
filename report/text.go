package report

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/kfsniff/kfsniff/detectors"
)

// TimeLayout is how times are shown: UTC, microseconds, like tcpdump -tttt.
const TimeLayout = "2006-01-02 15:04:05.000000"

// WriteText renders the report for a person.
func WriteText(w io.Writer, r *Report) error {
	p := &printer{w: w}
	p.overview(r)
	p.capture(r)
	p.apis(r)
	p.connections(r)
	p.events(r)
	p.clients(r)
	p.lag(r)
	p.correlation(r.Correlation)
	p.findings(r)
	return p.err
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// overview puts what is wrong first: one line per finding at warning or
// above, for the reader at 3 a.m.; details follow at the end.
func (p *printer) overview(r *Report) {
	p.f("kfsniff report (%s)\n\n", r.Schema)
	if c := &r.Capture; c.Partial != nil || c.Filter != nil || c.Takeover != nil {
		if c.Takeover != nil {
			p.f("TAKEN OVER: %s.\n", Clean(c.Takeover.String()))
		}
		if c.Partial != nil {
			p.f("PARTIAL: %s.\n", Clean(c.Partial.String()))
		}
		if c.Filter != nil {
			p.f("FILTERED: %s.\n", Clean(c.Filter.String()))
		}
		p.f("\n")
	}
	by := tally(r.Findings)
	n := by[detectors.Error] + by[detectors.Warning]
	if n == 0 {
		if c := r.Capture.Partial; c != nil && len(c.Uncovered) > 0 {
			p.f("No problems found in the partitions read (%d informational findings); the others were not analysed.\n\n", by[detectors.Info])
			return
		}
		p.f("No problems found (%d informational findings).\n\n", by[detectors.Info])
		return
	}
	incidents := incidentsOf(r)
	p.f("What is wrong (%d finding%s in %d incident%s; details under Findings)\n", n, plural(int(n)), len(incidents), plural(len(incidents)))
	for k, in := range incidents {
		if len(in.Findings) == 1 {
			f := &r.Findings[in.Cause]
			p.wrap(fmt.Sprintf("  %-7s ", strings.ToUpper(f.Severity.String())), "          ", CleanProse(f.Summary))
			continue
		}
		// An incident of several findings: its story, then its
		// findings, the cause first.
		p.f("  %-7s incident %d: %d findings, caused by %s\n", strings.ToUpper(in.Severity.String()), k+1, len(in.Findings), in.Detector)
		p.wrap("          ", "          ", CleanProse(in.Story))
		for x, i := range in.Findings {
			f := &r.Findings[i]
			role := "effect"
			if x == 0 {
				role = "cause"
			}
			p.wrap(fmt.Sprintf("    %-6s %-7s %s: ", role, strings.ToUpper(f.Severity.String()), f.Detector), "                   ", CleanProse(f.Summary))
		}
	}
	p.f("\n")
}

// proseWidth is the width the report's prose is wrapped to.
const proseWidth = 100

// wrap prints text after first, wrapped between words to proseWidth, the
// lines after the first indented by indent; a word longer than a line
// (an address, a topic) is never broken.
func (p *printer) wrap(first, indent, text string) {
	line := first
	fresh := true
	for _, w := range strings.Fields(text) {
		switch {
		case fresh:
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) > proseWidth:
			p.f("%s\n", line)
			line = indent
		default:
			line += " "
		}
		line += w
		fresh = false
	}
	p.f("%s\n", line)
}

// para prints a labelled paragraph wrapped to the terminal width, indented
// under the finding.
func (p *printer) para(label, text string) {
	const width, indent = 100, "      "
	line := "    " + label
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > width && strings.TrimSpace(line) != strings.TrimSpace(label) {
			p.f("%s\n", line)
			line = indent
		} else if !strings.HasSuffix(line, " ") {
			line += " "
		}
		line += w
	}
	p.f("%s\n", line)
}

func (p *printer) capture(r *Report) {
	c := &r.Capture
	p.f("Capture\n")
	for _, f := range c.Files {
		p.f("  %s: %s, link %s, %d packets\n", Clean(f.Name), f.Format, strings.Join(f.LinkTypes, "+"), f.Packets)
		if f.Error != "" {
			p.f("    stopped early: %s\n", Clean(f.Error))
		}
	}
	p.f("  %d packets, %s", c.Packets, bytesHuman(c.Bytes))
	if !c.First.IsZero() {
		p.f(", %s .. %s UTC (%s)", c.First.UTC().Format(TimeLayout), c.Last.UTC().Format(TimeLayout), seconds(c.Duration))
	}
	p.f("\n")
	if c.Drops != nil {
		p.f("  kernel dropped %d packets during the capture\n", *c.Drops)
	}
	p.export(r.Export)
	t := &r.Totals
	p.f("  Kafka: %d connections, %d requests, %d responses (%d with errors), %d unmatched responses, %d unanswered requests",
		t.KafkaConnections, t.Requests, t.Responses, t.ErrorResponses, t.UnmatchedResponses, t.UnansweredRequests)
	if t.NoResponseExpected > 0 {
		p.f(", %d acks=0 produce", t.NoResponseExpected)
	}
	p.f("\n")
	if t.OneSidedConnections > 0 {
		p.f("  One-sided: %d connections with packets of one direction only; %d requests whose responses were not captured (neither answered nor unanswered)\n",
			t.OneSidedConnections, t.NotCaptured)
	}
	p.f("  Problems: %d framing errors, %d decode errors, %d gaps", t.FramingErrors, t.DecodeErrors, t.Gaps)
	if t.LostBytes > 0 {
		p.f(" (%s lost)", bytesHuman(t.LostBytes))
	}
	if len(t.UnknownAPIs) > 0 {
		apis := each(t.UnknownAPIs, func(u UnknownAPI) string { return fmt.Sprintf("key %d v%d x%d", u.Key, u.Version, u.Count) })
		p.f(", unknown APIs: %s", strings.Join(apis, ", "))
		if n := t.BoundsReached["unknown_apis_not_listed"]; n > 0 {
			p.f(" and %d requests of further pairs not listed", n)
		}
	}
	if len(t.SkippedBytes) > 0 {
		p.f(", skipped bytes: %s", kv(t.SkippedBytes))
	}
	p.f("\n")
	if r.TLS != nil {
		p.f("  %s\n", r.TLS.text())
	}
	var other counts
	other.add(t.OtherTCP, "non-Kafka TCP connections")
	other.add(t.RefusedConnections, "refused connections")
	other.add(int64(t.EvictedConnections), "connections folded into the totals (table full; --max-conns)")
	other.add(int64(t.ClosedFolded), "closed connections folded into the totals (closed for longer than --keep-closed)")
	other.add(t.IdleEvicted, "connections idle past the idle timeout")
	other.add(t.UnansweredSYNs, "unanswered SYNs")
	other.add(t.NonIP, "non-IP packets")
	other.add(t.NonTCP, "non-TCP packets")
	other.add(t.Fragments, "IP fragments")
	other.add(t.Reassembled, "IP datagrams reassembled from fragments")
	if n := total(slices.Collect(maps.Values(t.DatagramsLost))); n > 0 {
		other = append(other, fmt.Sprintf("%d IP datagrams not reassembled (%s; %s of fragments dropped)", n, kv(t.DatagramsLost), bytesHuman(t.FragmentBytesLost)))
	}
	other.add(t.Truncated, "packets cut by snaplen")
	if t.BadPackets > 0 {
		other = append(other, fmt.Sprintf("%d undecodable packets (first: %s)", t.BadPackets, problemText(t.FirstBadPacket)))
	}
	if t.InternalErrors > 0 {
		what := "internal errors (kfsniff bugs: please report them with the packet numbers)"
		if t.FirstInternalError != nil {
			what += "; first outside any connection: " + problemText(t.FirstInternalError)
		}
		other.add(t.InternalErrors, what)
	}
	other.add(t.FingerprintsDropped, "Produce requests whose record fingerprints were dropped before their response (too many waiting: duplicate-batches compared those by CRC only)")
	if len(other) > 0 {
		p.f("  Other: %s\n", strings.Join(other, ", "))
	}
	if len(t.BoundsReached) > 0 {
		p.f("  Bounds reached (kept out to bound memory and time; ROBUSTNESS.md): %s\n", kv(t.BoundsReached))
	}
}

func (p *printer) apis(r *Report) {
	p.f("\nAPIs\n")
	if len(r.APIs) == 0 {
		p.f("  none\n")
		return
	}
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  API\tKEY\tVER\tREQS\tRESPS\tERR RESPS\tP50 ms\tP99 ms\tMAX ms\t  ERRORS\t\n")
	for _, a := range r.APIs {
		errs := "-"
		if len(a.Errors) > 0 {
			errs = kv(a.Errors)
		}
		if a.DecodeErrors > 0 {
			errs += fmt.Sprintf(" (%d undecodable)", a.DecodeErrors)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t  %s\t\n", a.Name, a.Key, a.Version, a.Requests, a.Responses,
			a.ErrorResponses, msStr(a.Latency.P50, a.Responses), msStr(a.Latency.P99, a.Responses), msStr(a.Latency.Max, a.Responses), errs)
	}
	p.flush(tw)
}

// table prints the first most of n rows (row(i), cells ending in tabs)
// under header, aligned, and how many more the JSON report lists.
func (p *printer) table(header string, n, most int, what string, row func(i int) string) {
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, header)
	for i := range min(n, most) {
		fmt.Fprint(tw, row(i))
	}
	p.flush(tw)
	if n > most {
		p.f("  ... and %d more %s (--json lists them all)\n", n-most, what)
	}
}

// flush flushes an aligned table, keeping the first error.
func (p *printer) flush(tw *tabwriter.Writer) {
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
}

func (p *printer) connections(r *Report) {
	p.f("\nConnections\n")
	if len(r.Connections) == 0 {
		p.f("  none\n")
		return
	}
	for _, c := range r.Connections {
		ids := each(c.ClientIDs, quoted)
		if len(ids) == 0 {
			ids = []string{"(none)"}
		}
		p.f("  #%d %s -> %s  client-id %s\n", c.ID, nodeLabel(c.Client, c.ClientNode), nodeLabel(c.Server, c.ServerNode), strings.Join(ids, ","))
		if c.Agent != "" {
			p.f("     seen by agent %q\n", Clean(c.Agent))
		}
		if len(c.Roles) > 0 {
			p.f("     roles: %s\n", strings.Join(c.Roles, ", "))
		}
		p.f("     %d reqs, %d resps, %d error resps", c.Requests, c.Responses, c.Errors)
		if c.Unmatched > 0 {
			p.f(", %d unmatched", c.Unmatched)
		}
		if c.Unanswered > 0 {
			p.f(", %d unanswered", c.Unanswered)
		}
		if c.NoResponse > 0 {
			p.f(", %d acks=0", c.NoResponse)
		}
		if c.NotCaptured > 0 {
			p.f(", %d not captured", c.NotCaptured)
		}
		p.f("; %s to server, %s to client\n", bytesHuman(c.BytesToServer), bytesHuman(c.BytesToClient))
		if c.OneSided != "" {
			p.f("     one-sided: the capture holds %s packets only\n", c.OneSided)
		}
		p.f("     APIs: %s\n", kv(c.APIs))
		how := "by " + c.Recognised + ", client by " + c.ClientBy
		if c.MidStream {
			how += ", capture began mid-connection"
		}
		if c.TLSSession != nil {
			how += ", " + c.TLSSession.text()
		} else if c.TLS {
			how += ", TLS"
		}
		end := "open at end"
		switch {
		case c.Reset:
			end = "reset"
		case c.Closed:
			end = "closed"
		}
		p.f("     packets %s..%d, %s .. %s, %s; %s\n", pkt(c.File, c.FirstPacket), c.LastPacket,
			c.FirstSeen.UTC().Format("15:04:05.000000"), c.LastSeen.UTC().Format("15:04:05.000000"), how, end)
		if c.Gaps+c.FramingErrors+c.DecodeErrors+c.DatagramsLost > 0 || len(c.SkippedBytes) > 0 || len(c.Problems) > 0 {
			p.f("     problems: %d gaps, %d framing errors, %d decode errors", c.Gaps, c.FramingErrors, c.DecodeErrors)
			if l := c.Loss; l != nil {
				var parts []string
				if l.ToServer+l.ToClient > 0 {
					parts = append(parts, fmt.Sprintf("lost %s to server, %s to client", bytesHuman(l.ToServer), bytesHuman(l.ToClient)))
				}
				if l.Snaplen > 0 {
					parts = append(parts, bytesHuman(l.Snaplen)+" cut by the snaplen")
				}
				parts = append(parts, fmt.Sprintf("packets %s..%d", pkt(l.File, l.FirstPacket), l.LastPacket))
				p.f(" (%s)", strings.Join(parts, ", "))
			}
			if len(c.SkippedBytes) > 0 {
				p.f(", skipped bytes: %s", kv(c.SkippedBytes))
			}
			if c.DatagramsLost > 0 {
				p.f(", %d IP datagrams not reassembled (%s of fragments)", c.DatagramsLost, bytesHuman(c.FragBytesLost))
			}
			p.f("\n")
			for _, pr := range c.Problems {
				p.f("       packet %s: %s\n", pkt(pr.File, pr.Packet), Clean(pr.What))
			}
		}
	}
}

func (p *printer) events(r *Report) {
	if len(r.Events) == 0 {
		return
	}
	p.f("\nConnection attempts\n")
	for _, e := range r.Events {
		p.f("  packet %s %s %s -> %s %s (%d SYNs)\n", pkt(e.File, e.Packet), e.Time.UTC().Format("15:04:05.000000"), e.Client, e.Server, e.Kind, e.Attempts)
	}
}

func (p *printer) findings(r *Report) {
	p.f("\nFindings\n")
	if len(r.Findings) == 0 {
		p.f("  none\n")
		return
	}
	for _, f := range r.Findings {
		p.wrap(fmt.Sprintf("  [%s] %s: ", strings.ToUpper(f.Severity.String()), f.Detector), "      ", CleanProse(f.Summary))
		if !f.First.IsZero() {
			p.f("    when: %s .. %s UTC (%s)\n", f.First.UTC().Format(TimeLayout), f.Last.UTC().Format(TimeLayout), f.Last.Sub(f.First).Round(time.Millisecond))
		}
		if len(f.Counts) > 0 {
			p.f("    counts: %s\n", kv(f.Counts))
		}
		if len(f.Fields) > 0 {
			p.f("    fields: %s\n", fieldsText(f.Fields))
		}
		for _, e := range f.Evidence {
			p.f("    packet %s: %s\n", pkt(e.File, e.Packet), CleanProse(e.What))
		}
		if l := f.CaptureLoss; l != nil {
			p.f("    capture loss: %d gaps (%s lost) on connection %s during this finding: its counts may be low and what it missed may be in the bytes lost\n",
				l.Gaps, bytesHuman(l.Bytes), strings.Join(each(l.Conns, ref), ", "))
		}
		if f.Explanation != "" {
			p.para("what it means: ", CleanProseText(f.Explanation))
		}
		if f.Next != "" {
			p.para("check next: ", CleanProseText(f.Next))
		}
	}
}

// nodeLabel shows an address with its node id: "node 1003 (10.30.7.85:8081)".
func nodeLabel(addr string, node *int32) string {
	if node == nil {
		return addr
	}
	return fmt.Sprintf("node %d (%s)", *node, addr)
}

// pkt renders a packet number, prefixed with the file index when there
// are several files ("2:1234").
func pkt(file int, n uint64) string {
	if file > 0 {
		return strconv.Itoa(file) + ":" + strconv.FormatUint(n, 10)
	}
	return strconv.FormatUint(n, 10)
}

// kv shows counts by name, "a=1 b=2", in the names' order.
func kv[V int | int64](m map[string]V) string {
	return strings.Join(each(slices.Sorted(maps.Keys(m)), func(k string) string { return fmt.Sprintf("%s=%d", k, m[k]) }), " ")
}

// fieldsText shows a finding's fields, "k=v ...", in the keys' order.
func fieldsText(fields map[string]any) string {
	return strings.Join(each(slices.Sorted(maps.Keys(fields)), func(k string) string { return k + "=" + Clean(fmt.Sprint(fields[k])) }), " ")
}

// each is f of every item of xs.
func each[T any](xs []T, f func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// counts lists "n what" for each count above zero.
type counts []string

func (c *counts) add(n int64, what string) {
	if n > 0 {
		*c = append(*c, fmt.Sprintf("%d %s", n, what))
	}
}

// quoted is a wire string cleaned and quoted as %q quotes.
func quoted(s string) string { return strconv.Quote(Clean(s)) }

// itoa is n in decimal.
func itoa[N ~int | ~int32 | ~int64](n N) string { return strconv.FormatInt(int64(n), 10) }

// ref shows a connection's or finding's number: "#3".
func ref(n int) string { return "#" + strconv.Itoa(n) }

func msStr(v float64, n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

func seconds(s float64) string {
	if math.Abs(s) >= math.MaxInt64/float64(time.Second) {
		// As long as a Duration holds (292 years; pcapng offsets can put
		// packets further apart): the conversion would wrap to a
		// negative one.
		return "more than 292 years"
	}
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
}

func bytesHuman(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// problemText is a problem's place and what it was.
func problemText(p *Problem) string {
	if p == nil {
		return "not placed"
	}
	return "packet " + pkt(p.File, p.Packet) + ": " + Clean(p.What)
}
