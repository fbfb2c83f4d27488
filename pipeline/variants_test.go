package pipeline

// The harness of the cut, loss and one-sided tests: a capture held in
// memory (internal/captest), variants of it analysed as `kfsniff -r` would
// analyse a file holding those packets, with the packet numbers of the
// whole capture, and the outputs a user reads (the JSON report and
// `--frames --json`) compared with the ground truth of the whole capture.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/captest"
	"github.com/kfsniff/kfsniff/report"
)

// studied is a capture and its truth.
type studied struct {
	name string // the file, from the repository's root
	id   string // a subtest name: "basic.pcap", "clients_notleader-kgo.pcap"
	c    *captest.Capture
	tr   *captest.Truth
}

func study(t *testing.T, path string) *studied {
	t.Helper()
	c, err := captest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(filepath.ToSlash(path), "../")
	id := strings.TrimPrefix(strings.TrimPrefix(name, "fixtures/pcaps/"), "../")
	return &studied{name: name, id: strings.ReplaceAll(id, "/", "_"), c: c, tr: captest.Study(c)}
}

// analysis is what kfsniff says of a set of packets.
type analysis struct {
	raw    []byte // the JSON report
	frames []byte // --frames --json
	rep    seenReport
	lines  []report.FrameLine
	report *report.Report
}

// seenReport is the part of the JSON report (docs/json.md) these tests
// read. Fields not in the schema yet are pointers: nil when absent.
type seenReport struct {
	Totals struct {
		Requests            int64 `json:"requests"`
		Responses           int64 `json:"responses"`
		UnmatchedResponses  int64 `json:"unmatched_responses"`
		UnansweredRequests  int64 `json:"unanswered_requests"`
		KafkaConnections    int   `json:"kafka_connections"`
		OneSidedConnections *int  `json:"one_sided_connections"`
	} `json:"totals"`
	Connections []seenConn `json:"connections"`
}

type seenConn struct {
	ID         int     `json:"id"`
	Client     string  `json:"client"`
	Server     string  `json:"server"`
	ClientBy   string  `json:"client_by"`
	OneSided   *string `json:"one_sided"`
	Requests   int     `json:"requests"`
	Responses  int     `json:"responses"`
	Unmatched  int     `json:"unmatched_responses"`
	Unanswered int     `json:"unanswered_requests"`
}

// analyseVariant runs the analysis of `kfsniff -r F --frames --json` with the
// detectors, on so many workers, over the packets of s that keep accepts.
func analyseVariant(t *testing.T, s *studied, keep func(uint64) bool, workers int) *analysis {
	t.Helper()
	set, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var fb bytes.Buffer
	fw := report.NewFrameWriter(&fb, report.FrameFilter{}, true, false)
	res := RunSource(context.Background(), captest.NewSource(s.c.Keep(keep)), Options{
		Flows: flows.DefaultConfig(), Detectors: set, Handlers: []flows.Handler{fw}, Workers: workers,
	})
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}
	if res.Workers != workers {
		t.Fatalf("ran %d workers, asked for %d", res.Workers, workers)
	}
	a := &analysis{frames: fb.Bytes(), report: res.Report}
	if a.raw, err = json.Marshal(res.Report); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(a.raw, &a.rep); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(a.frames))
	for dec.More() {
		var l report.FrameLine
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		a.lines = append(a.lines, l)
	}
	return a
}

// sameOnWorkers checks that n workers give the report and frames of one.
func sameOnWorkers(t *testing.T, s *studied, what string, keep func(uint64) bool, one *analysis, n int) {
	t.Helper()
	got := analyseVariant(t, s, keep, n)
	if !bytes.Equal(got.raw, one.raw) {
		t.Errorf("%s, %s: the report on %d workers differs from one worker's:\n%s", s.name, what, n, firstDiff(pretty(one.raw), pretty(got.raw)))
	}
	if !bytes.Equal(got.frames, one.frames) {
		t.Errorf("%s, %s: --frames on %d workers differs from one worker's:\n%s", s.name, what, n, firstDiff(one.frames, got.frames))
	}
}

func pretty(b []byte) []byte {
	var out bytes.Buffer
	json.Indent(&out, b, "", " ")
	return out.Bytes()
}

// tally counts what a check looked at, for the closing note.
type tally struct {
	variants  int
	mustReqs  int // requests all in a variant, which must be found
	afterLoss int // of which the request before is not all in the variant
	mustResps int // responses all in a variant with their request, which must be paired
	reported  int // frames reported in variants, checked against the whole capture
	unchecked int // frames reported on connections whose truth is unknown
	conns     int // connections reported, their client side checked
	failed    int // variants with at least one problem
}

func (a *tally) add(b tally) {
	a.variants += b.variants
	a.mustReqs += b.mustReqs
	a.afterLoss += b.afterLoss
	a.mustResps += b.mustResps
	a.reported += b.reported
	a.unchecked += b.unchecked
	a.conns += b.conns
	a.failed += b.failed
}

func (a tally) String() string {
	return fmt.Sprintf("%d variants (%d failing): %d connections' client side, %d requests that must be found (%d right after a request not all there), %d responses that must be paired, %d reported frames checked against the whole capture (%d more on connections without a captured handshake, not checked)",
		a.variants, a.failed, a.conns, a.mustReqs, a.afterLoss, a.mustResps, a.reported, a.unchecked)
}

// checkOpts tune check for a kind of variant.
type checkOpts struct {
	// pairing: every response all in the variant whose request is all
	// there too must be reported paired with it.
	pairing bool
}

// check compares what kfsniff reported on a variant (the packets keep
// accepts) with the truth of the whole capture, and returns what a user
// would see wrong, one line each:
//   - a connection shown with client and server the wrong way round;
//   - a request whose bytes are all in the variant (and after the point
//     where the variant's reassembly of that direction starts) not
//     reported with its key, version, correlation id and completing packet;
//   - a request or response reported that the whole capture does not have
//     (a response read as a request, a frame boundary guessed wrong), or
//     a response paired with a request it does not answer;
//   - with opt.pairing, a response all there with its request, not paired.
func check(s *studied, keep func(uint64) bool, a *analysis, opt checkOpts) (problems problems, n tally) {
	tr := s.tr
	exp := tr.Expect(keep)
	n.variants = 1
	conn := func(client, server string) (*captest.Conn, bool) {
		c, err1 := netip.ParseAddrPort(client)
		sv, err2 := netip.ParseAddrPort(server)
		if err1 != nil || err2 != nil {
			return nil, false
		}
		tc := tr.Conn(c, sv)
		return tc, tc != nil && tc.Client == c && tc.Server == sv
	}
	// (a) every connection the right way round.
	for _, c := range a.rep.Connections {
		tc, right := conn(c.Client, c.Server)
		if tc == nil || !tc.Handshake() {
			continue
		}
		n.conns++
		if !right {
			problems.add(reversed, fmt.Sprintf("connection #%d shown as %s -> %s (client by %s); the handshake says %s is the client",
				c.ID, c.Client, c.Server, c.ClientBy, tc.Client))
		}
	}
	// (c) nothing invented.
	found := map[*captest.Frame]*report.FrameLine{}
	for i := range a.lines {
		l := &a.lines[i]
		tc, right := conn(l.Client, l.Server)
		switch {
		case tc == nil || !tc.Handshake():
			n.unchecked++
			continue
		case !tc.Known && !tc.NotKafka:
			n.unchecked++ // framing of the whole capture lost: Conn.Why
			continue
		}
		n.reported++
		what := fmt.Sprintf("%s -> %s %s v%d %s corr %d at packet %d", l.Client, l.Server, l.API, l.Version, l.Type, l.Correlation, l.Packet)
		if l.Unmatched {
			what = fmt.Sprintf("%s -> %s unmatched response corr %d at packet %d", l.Client, l.Server, l.Correlation, l.Packet)
		}
		if tc.NotKafka {
			problems.add(invented, fmt.Sprintf("%s: invented: this connection does not carry Kafka (%s)", what, tc.Why))
			continue
		}
		if !right {
			if l.Type == "request" {
				problems.add(invented, fmt.Sprintf("%s: server->client bytes read as a request (the handshake says %s is the client)", what, tc.Client))
			} else {
				problems.add(invented, fmt.Sprintf("%s: client->server bytes read as a response (the handshake says %s is the client)", what, tc.Client))
			}
			continue
		}
		d := captest.ToServer
		if l.Type == "response" {
			d = captest.ToClient
		}
		f, why := match(tc, d, l, exp)
		if f == nil {
			problems.add(invented, fmt.Sprintf("%s: invented: %s", what, why))
			continue
		}
		if prev := found[f]; prev != nil {
			problems.add(invented, fmt.Sprintf("%s: reported twice (first at packet %d)", what, prev.Packet))
			continue
		}
		found[f] = l
		if d == captest.ToClient && !l.Unmatched {
			rq := f.Pair
			if e := exp[rq]; rq != nil && e.Must && e.Exact && l.RequestPkt != e.Packet {
				problems.add(invented, fmt.Sprintf("%s: paired with the request at packet %d; it answers %s", what, l.RequestPkt, rq.Name()))
			}
		}
	}
	// (b) every request all there found; with pairing, every response
	// all there with its request paired.
	for _, tc := range tr.Known() {
		for i, f := range tc.Frames[captest.ToServer] {
			e := exp[f]
			if !e.Must {
				continue
			}
			n.mustReqs++
			if i > 0 && !exp[tc.Frames[captest.ToServer][i-1]].Kept {
				n.afterLoss++
			}
			if found[f] == nil {
				problems.add(missing, fmt.Sprintf("%s %s missing: its packets %v are all in the capture; expected at packet %s",
					tc, f.Name(), f.Packets(), expectedAt(e)))
			}
		}
		if !opt.pairing {
			continue
		}
		for _, f := range tc.Frames[captest.ToClient] {
			e := exp[f]
			if !e.Must || f.Pair == nil || !exp[f.Pair].Must {
				continue
			}
			n.mustResps++
			if l := found[f]; l == nil || l.Unmatched {
				problems.add(unpaired, fmt.Sprintf("%s %s not reported paired with its request (at packet %s), though both are all in the capture",
					tc, f.Name(), expectedAt(exp[f.Pair])))
			}
		}
	}
	if problems.n > 0 {
		n.failed = 1
	}
	return problems, n
}

func expectedAt(e captest.Expect) string {
	if e.Exact {
		return fmt.Sprint(e.Packet)
	}
	return fmt.Sprintf("%d or later (bytes before it lost)", e.Packet)
}

// match finds the frame of the whole capture that reported line l is, in
// direction d of connection tc, or says why there is none.
func match(tc *captest.Conn, d int, l *report.FrameLine, exp map[*captest.Frame]captest.Expect) (*captest.Frame, string) {
	var near []string
	for _, f := range tc.Frames[d] {
		if !f.Complete || !f.HeaderKnown {
			continue
		}
		if f.Correlation != l.Correlation || (!l.Unmatched && (f.Key != l.Key || f.Version != l.Version)) {
			if f.Packet == l.Packet {
				near = append(near, "the frame completed there is "+f.Name())
			}
			continue
		}
		e, ok := exp[f]
		switch {
		case !ok:
		case e.Must && e.Exact && l.Packet == e.Packet:
			return f, ""
		case e.Must && !e.Exact && l.Packet >= e.Packet:
			return f, ""
		case e.Kept && !e.Must && l.Packet >= e.Packet:
			// All there, but before where reassembly of the variant
			// starts: a reassembler may still take it.
			return f, ""
		}
		near = append(near, fmt.Sprintf("%s, expected at %s", f.Name(), expectedAt(e)))
	}
	if len(near) == 0 {
		return nil, "no such frame in the whole capture"
	}
	return nil, "the whole capture has " + strings.Join(near, "; ")
}

// cutLabel names a cut for messages.
func cutLabel(s *studied, n uint64, why string) string {
	return fmt.Sprintf("cut at packet %d of %d (%s)", n, len(s.c.Packets), why)
}

// What can be wrong with a variant's analysis, in the order shown.
const (
	reversed = iota // a connection shown with client and server swapped
	invented        // a frame reported that the whole capture does not have
	missing         // a request all in the variant not reported
	unpaired        // a response all there with its request, not paired
	other           // anything else a test adds
	kinds
)

var kindNames = [kinds]string{"connections reversed", "frames invented", "requests missing", "responses not paired", "other"}

// problems are what a user would see wrong in one variant, by kind.
type problems struct {
	by [kinds][]string
	n  int
}

func (p *problems) add(kind int, msg string) {
	p.by[kind] = append(p.by[kind], msg)
	p.n++
}

// String counts the problems by kind and shows the first few of each.
func (p *problems) String() string {
	const show = 3
	var b strings.Builder
	var counts []string
	for k, ms := range p.by {
		if len(ms) > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", len(ms), kindNames[k]))
		}
	}
	b.WriteString(strings.Join(counts, ", "))
	for _, ms := range p.by {
		for i, m := range ms {
			if i == show {
				fmt.Fprintf(&b, "\n    ... and %d more", len(ms)-show)
				break
			}
			b.WriteString("\n    " + m)
		}
	}
	return b.String()
}

// first is the first problem, for a one-line summary.
func (p *problems) first() string {
	for _, ms := range p.by {
		if len(ms) > 0 {
			return ms[0]
		}
	}
	return ""
}

// withHandshakes lists the captures whose connections' truth is known.
func withHandshakes(t *testing.T, patterns ...string) []*studied {
	t.Helper()
	var out []*studied
	for _, pat := range patterns {
		paths, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(paths)
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				continue
			}
			if _, err := capture.Open(p, 0); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			s := study(t, p)
			if len(s.tr.Known()) == 0 {
				t.Logf("%s: no connection with its handshake captured: not used", s.name)
				continue
			}
			out = append(out, s)
		}
	}
	return out
}

// TestCheckCatches: check, which the cut, loss and one-sided tests rely
// on, reports each kind of wrong output: kfsniff's right output for a
// whole capture, altered as a wrong analysis would show it.
func TestCheckCatches(t *testing.T) {
	s := study(t, filepath.Join("..", "fixtures", "pcaps", "basic.pcap"))
	all := func(uint64) bool { return true }
	good := analyseVariant(t, s, all, 1)
	if p, _ := check(s, all, good, checkOpts{pairing: true}); p.n != 0 {
		t.Fatalf("the right analysis has problems: %s", &p)
	}
	alter := func(f func(a *analysis)) problems {
		a := *good
		a.lines = slices.Clone(good.lines)
		a.rep.Connections = slices.Clone(good.rep.Connections)
		f(&a)
		p, _ := check(s, all, &a, checkOpts{pairing: true})
		return p
	}
	firstReq := slices.IndexFunc(good.lines, func(l report.FrameLine) bool { return l.Type == "request" })
	firstResp := slices.IndexFunc(good.lines, func(l report.FrameLine) bool { return l.Type == "response" })
	cases := []struct {
		name  string
		alter func(a *analysis)
		want  [kinds]int
	}{
		{"connection reversed", func(a *analysis) {
			c := &a.rep.Connections[0]
			c.Client, c.Server = c.Server, c.Client
		}, [kinds]int{reversed: 1}},
		{"request not reported", func(a *analysis) {
			a.lines = slices.Delete(a.lines, firstReq, firstReq+1)
		}, [kinds]int{missing: 1}},
		{"request at another packet", func(a *analysis) {
			a.lines[firstReq].Packet++
		}, [kinds]int{invented: 1, missing: 1}},
		{"request with another version", func(a *analysis) {
			a.lines[firstReq].Version++
		}, [kinds]int{invented: 1, missing: 1}},
		{"response read as a request", func(a *analysis) {
			l := &a.lines[firstResp]
			l.Type, l.Client, l.Server = "request", l.Server, l.Client
		}, [kinds]int{invented: 1, unpaired: 1}},
		{"response not paired", func(a *analysis) {
			l := &a.lines[firstResp]
			l.Unmatched, l.Key, l.Version, l.RequestPkt = true, -1, -1, 0
		}, [kinds]int{unpaired: 1}},
		{"response paired with another request", func(a *analysis) {
			a.lines[firstResp].RequestPkt++
		}, [kinds]int{invented: 1}},
		{"request reported twice", func(a *analysis) {
			a.lines = append(a.lines, a.lines[firstReq])
		}, [kinds]int{invented: 1}},
	}
	for _, tc := range cases {
		p := alter(tc.alter)
		var got [kinds]int
		for k := range p.by {
			got[k] = len(p.by[k])
		}
		if got != tc.want {
			t.Errorf("%s: problems by kind %v, want %v: %s", tc.name, got, tc.want, &p)
		}
	}
}
