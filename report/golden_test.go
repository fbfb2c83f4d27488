package report_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/termcheck"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// Paths. Captures are named as `kfsniff -r` is given them from the root of
// the repository, so the names in the goldens are what a user types there.
const (
	repoRoot   = ".." // this package's directory is one below the root
	goldenRoot = "testdata/golden"
	fixtures   = "fixtures/pcaps"
	// shared holds public captures of other projects; it sits beside the
	// repository for developers and in CI (see pipeline/shared_test.go).
	shared = "../shared/captures"
)

// An output is one thing kfsniff prints for a capture, and the suffix of
// its golden file.
type output struct {
	ext                   string
	frames, json, verbose bool
	html                  bool // the HTML report's data (report.WriteHTMLData)
	limit                 int  // bytes kept in the golden; see fit
}

var (
	textReport  = output{ext: "report.txt", limit: 200 << 10}
	jsonReport  = output{ext: "report.json", json: true, limit: 200 << 10}
	framesText  = output{ext: "frames.txt", frames: true, limit: 48 << 10}
	framesJSON  = output{ext: "frames.jsonl", frames: true, json: true, limit: 48 << 10}
	framesV     = output{ext: "frames-v.txt", frames: true, verbose: true, limit: 64 << 10}
	framesVJSON = output{ext: "frames-v.jsonl", frames: true, json: true, verbose: true, limit: 64 << 10}
	// htmlData: what the HTML report's charts and map draw (series,
	// findings' spans, the map's nodes and edges), for the scenarios.
	htmlData = output{ext: "html.json", html: true, limit: 200 << 10}
)

// What is written beyond the text and JSON reports, which every capture
// gets. Every scenario capture gets its frames (scenarios/ below); these
// are healthy captures of each kind: scripted, recorded kgo/kfake, real
// clients (kafkajs against kfake, and nDPI's capture of real traffic).
var extraOutputs = map[string][]output{
	fixtures + "/basic.pcap":                     {framesText, framesJSON, framesV, framesVJSON},
	fixtures + "/loss.pcap":                      {framesText, framesV},
	fixtures + "/recorded-kgo-kfake-group.pcap":  {framesText, framesJSON},
	fixtures + "/clients/notleader-kafkajs.pcap": {framesText, framesJSON},
	shared + "/ndpi/kafka.pcapng":                {framesText, framesJSON},
}

// A goldenCase is one run of kfsniff over one capture.
type goldenCase struct {
	capture string // as given to kfsniff -r, from the repository root
	// stem names the golden files: the capture's path below fixtures/pcaps
	// (or shared/ and its path below the shared captures); a variant adds
	// a label.
	stem    string
	outputs []output
	// options are -o settings; inject, a handler added to the run (a
	// fresh one per run).
	options []string
	inject  func() flows.Handler
	// workers are the worker counts whose outputs must be equal, byte
	// for byte; the first one's is compared with the goldens.
	workers []int
}

// variants are extra runs of some captures, for detector findings that no
// capture gives with the default thresholds.
var variants = []goldenCase{
	{
		// kgo's group traffic against kfake has no slow response at the
		// defaults (1 s); at 1 ms several APIs have some.
		capture: fixtures + "/recorded-kgo-kfake-group.pcap", stem: "recorded-kgo-kfake-group.pcap.slow-responses",
		options: []string{"slow-responses.factor=2", "slow-responses.min-latency-s=0.001", "slow-responses.min-count=1"},
	},
	{
		// internal-error reports kfsniff's own bugs (recovered panics),
		// which no capture should cause: a handler panics on connection
		// 1's third request, as pipeline's TestPanicIsolatedToOneConnection
		// does. One worker only: with several, by design, the abandoned
		// connection's counters run on.
		capture: fixtures + "/vlan.pcap", stem: "vlan.pcap.internal-error",
		inject:  func() flows.Handler { return &panicky{seen: map[int]int{}} },
		workers: []int{1},
	},
}

// panicky panics on connection 1's third request.
type panicky struct{ seen map[int]int }

func (p *panicky) OnRequest(m *flows.Message) {
	p.seen[m.Conn.ID]++
	if m.Conn.ID == 1 && p.seen[1] == 3 {
		panic("forced by the golden test")
	}
}

// unreachable are the detectors no golden can show a finding of, and why
// (none today: the variants reach those no capture reaches).
var unreachable = map[string]string{}

// isCapture says whether a file name is a capture (pcap, pcapng, gzipped
// or not).
func isCapture(name string) bool {
	name = strings.TrimSuffix(name, ".gz")
	return strings.HasSuffix(name, ".pcap") || strings.HasSuffix(name, ".pcapng")
}

// captures lists the captures under dir (a path from the repository root),
// sorted.
func captures(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(repoRoot, filepath.FromSlash(dir)), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && isCapture(d.Name()) {
			rel, err := filepath.Rel(repoRoot, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// haveShared says whether the shared captures are beside the repository;
// in CI they must be.
func haveShared(t *testing.T) bool {
	_, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(shared)))
	if err != nil && os.Getenv("CI") != "" {
		t.Fatalf("shared captures missing in CI: %v", err)
	}
	return err == nil
}

// goldenCases lists every run: each capture with its text and JSON
// reports, and its frames where chosen; then the variants.
func goldenCases(t *testing.T, withShared bool) []goldenCase {
	t.Helper()
	var cases []goldenCase
	add := func(c string) {
		stem := strings.TrimPrefix(c, fixtures+"/")
		if strings.HasPrefix(c, shared+"/") {
			stem = "shared/" + strings.TrimPrefix(c, shared+"/")
		}
		outs := []output{textReport, jsonReport}
		if strings.HasPrefix(stem, "scenarios/") {
			outs = append(outs, framesText, framesJSON, htmlData)
		}
		outs = append(outs, extraOutputs[c]...)
		cases = append(cases, goldenCase{capture: c, stem: stem, outputs: outs})
	}
	fx := captures(t, fixtures)
	if len(fx) < 40 {
		t.Fatalf("only %d captures under %s", len(fx), fixtures)
	}
	for _, c := range fx {
		add(c)
	}
	if withShared {
		for _, c := range captures(t, shared) {
			add(c)
		}
	}
	for c := range extraOutputs {
		if !slices.ContainsFunc(cases, func(g goldenCase) bool { return g.capture == c }) && (withShared || !strings.HasPrefix(c, shared+"/")) {
			t.Errorf("extraOutputs names %s, which is not a capture", c)
		}
	}
	for _, v := range variants {
		v.outputs = []output{textReport, jsonReport}
		cases = append(cases, v)
	}
	for i := range cases {
		if cases[i].workers == nil {
			cases[i].workers = []int{1, 2}
		}
		if reason, ok := oneWorker[cases[i].capture]; ok && reason != "" {
			cases[i].workers = []int{1}
		}
	}
	return cases
}

// oneWorker are the captures whose report depends on the workers, with
// why (ARCHITECTURE.md, Workers): their goldens are one worker's.
var oneWorker = map[string]string{
	// Most of its packets were dropped by the kernel: many holes are
	// proven lost by an ACK, and the flush that follows pushes through
	// what waits behind holes on every connection of the analyzer (gopacket
	// reassembly flushes all connections or none), so with several
	// workers some holes are noticed a few packets later (gap problems'
	// packet numbers, one latency); the counts are the same.
	"fixtures/pcaps/real/lossy-midstream-tcpdump.pcap.gz": "ACK-proven holes flushed per analyzer",
}

// analyse runs kfsniff's analysis of c on n workers as `kfsniff -r` does
// (cmd/kfsniff/main.go: default flow settings, the detectors with c's -o
// settings, the frame writers as handlers, the report rendered by
// report.WriteText and report.WriteJSON) and returns each output by its
// extension, and the report. A capture kfsniff cannot read at all gives
// only its one-line error, under "error.txt".
func analyse(t *testing.T, c goldenCase, n int) (map[string][]byte, *report.Report) {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, filepath.FromSlash(c.capture)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cf, err := capture.NewFile(c.capture, 0, f)
	if err != nil {
		if !errors.Is(err, capture.ErrUnusable) {
			t.Fatal(err)
		}
		msg := strings.TrimPrefix(err.Error(), capture.ErrUnusable.Error()+": ")
		return map[string][]byte{"error.txt": []byte(msg + "\n")}, nil
	}
	settings := map[string]map[string]string{}
	for _, o := range c.options {
		if err := detectors.ParseSetting(o, settings); err != nil {
			t.Fatal(err)
		}
	}
	set, err := detectors.NewSet(all.Analyzers(), settings)
	if err != nil {
		t.Fatal(err)
	}
	opt := pipeline.Options{Flows: flows.DefaultConfig(), Detectors: set, Workers: n}
	bufs := map[string]*bytes.Buffer{}
	var writers []*report.FrameWriter
	for _, o := range c.outputs {
		if o.frames {
			b := new(bytes.Buffer)
			bufs[o.ext] = b
			fw := report.NewFrameWriter(b, report.FrameFilter{}, o.json, o.verbose)
			writers = append(writers, fw)
			opt.Handlers = append(opt.Handlers, fw)
		}
	}
	if c.inject != nil {
		opt.Handlers = append(opt.Handlers, c.inject())
	}
	res := pipeline.Run(context.Background(), []*capture.File{cf}, opt)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Workers != n {
		t.Fatalf("ran %d workers, asked for %d", res.Workers, n)
	}
	for _, fw := range writers {
		if err := fw.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string][]byte{}
	for _, o := range c.outputs {
		var b bytes.Buffer
		switch {
		case o.frames:
			out[o.ext] = bufs[o.ext].Bytes()
			continue
		case o.html:
			err = report.WriteHTMLData(&b, res.Report)
		case o.json:
			err = report.WriteJSON(&b, res.Report)
		default:
			err = report.WriteText(&b, res.Report)
		}
		if err != nil {
			t.Fatal(err)
		}
		out[o.ext] = b.Bytes()
	}
	return out, res.Report
}

// fit returns what the golden keeps of an output: all of it up to limit
// bytes; beyond, its first lines within the limit and a last line with
// the output's size and SHA-256, so that any change anywhere still fails
// the comparison while the file stays small.
func fit(out []byte, limit int) []byte {
	if len(out) <= limit {
		return out
	}
	cut := bytes.LastIndexByte(out[:limit], '\n') + 1
	kept := bytes.Count(out[:cut], []byte("\n"))
	return fmt.Appendf(out[:cut:cut], "[golden ends here: the output goes on; %d of its %d lines above, %d bytes in all, sha256 %x]\n",
		kept, bytes.Count(out, []byte("\n")), len(out), sha256.Sum256(out))
}

// TestGolden pins the text report, the JSON report and --frames of the
// committed captures and the shared ones (see goldenCases) to the files
// under testdata/golden, and checks that every detector has a finding in
// some golden. The outputs of one and two workers must be equal, byte for
// byte, and safe on a terminal. `go test ./report -update` rewrites the goldens (and removes those
// no capture gives any more); review the diff before committing.
func TestGolden(t *testing.T) {
	withShared := haveShared(t)
	cases := goldenCases(t, withShared)

	var (
		mu      sync.Mutex
		want    = map[string]bool{} // golden files written or compared
		found   = map[string]bool{} // detectors with a finding
		checked int                 // cases run to the end (failed or not)
	)
	t.Run("captures", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.stem, func(t *testing.T) {
				t.Parallel()
				var first map[string][]byte
				var rep *report.Report
				for i, n := range c.workers {
					out, r := analyse(t, c, n)
					if i == 0 {
						first, rep = out, r
						continue
					}
					for ext, b := range first {
						if !bytes.Equal(out[ext], b) {
							t.Errorf("%s with %d workers differs from %d worker's:\n%s", ext, n, c.workers[0],
								diff(fmt.Sprintf("%d worker(s)", c.workers[0]), fmt.Sprintf("%d workers", n), b, out[ext]))
						}
					}
				}
				names := make([]string, 0, len(first))
				for ext := range first {
					names = append(names, ext)
				}
				slices.Sort(names)
				for _, ext := range names {
					name := path.Join(goldenRoot, c.stem+"."+ext)
					if err := termcheck.Safe(first[ext]); err != nil {
						t.Errorf("%s: %v", name, err)
					}
					mu.Lock()
					want[name] = true
					mu.Unlock()
					compare(t, name, fit(first[ext], limitOf(c, ext)))
				}
				mu.Lock()
				defer mu.Unlock()
				if rep != nil {
					for _, f := range rep.Findings {
						found[f.Detector] = true
					}
				}
				checked++
			})
		}
	})
	if checked != len(cases) {
		return // some case stopped or was not run (-run): the checks below need them all
	}
	t.Run("every detector has a finding", func(t *testing.T) {
		for _, a := range all.Analyzers() {
			why, excused := unreachable[a.Name]
			switch {
			case !found[a.Name] && !excused:
				t.Errorf("no golden shows a finding of %s: add a capture or a variant (golden_test.go) that gives one", a.Name)
			case found[a.Name] && excused:
				t.Errorf("%s has a finding in a golden now; remove it from unreachable (%s)", a.Name, why)
			}
		}
	})
	t.Run("no stale golden", func(t *testing.T) {
		err := filepath.WalkDir(goldenRoot, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			p = filepath.ToSlash(p)
			if want[p] || !withShared && strings.HasPrefix(p, goldenRoot+"/shared/") {
				return nil
			}
			if *update {
				return os.Remove(p)
			}
			t.Errorf("report/%s: no capture gives it any more (go test ./report -update removes it)", p)
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	})
}

func limitOf(c goldenCase, ext string) int {
	for _, o := range c.outputs {
		if o.ext == ext {
			return o.limit
		}
	}
	return 1 << 10 // error.txt
}

// compare checks got against the golden file name, or rewrites it with
// -update.
func compare(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.FromSlash(name)
	if *update {
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, got) {
			return
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Errorf("%v (go test ./report -update writes it)", err)
		return
	}
	if !bytes.Equal(want, got) {
		t.Errorf("report/%s differs from the output (if the change is meant: go test ./report -update, then review git diff):\n%s", name, diff("golden", "output", want, got))
	}
}

// diff shows the first run of differing lines between want and got, with
// three lines of context, in unified style, at most 12 lines a side.
func diff(wantName, gotName string, want, got []byte) string {
	const context, most, width = 3, 12, 240
	a, b := lines(want), lines(got)
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	if pre == len(a) && pre == len(b) {
		return "(the same lines; they differ in the final newline)"
	}
	start := max(0, pre-context)
	delA, addB := a[pre:len(a)-suf], b[pre:len(b)-suf]
	after := a[len(a)-suf : min(len(a), len(a)-suf+context)]
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n@@ -%d,%d +%d,%d @@\n", wantName, gotName,
		start+1, pre-start+len(delA)+len(after), start+1, pre-start+len(addB)+len(after))
	line := func(mark, s string) {
		if len(s) > width {
			s = s[:width] + "…"
		}
		sb.WriteString(mark + s + "\n")
	}
	for _, s := range a[start:pre] {
		line(" ", s)
	}
	for _, side := range []struct {
		mark string
		ls   []string
	}{{"-", delA}, {"+", addB}} {
		for i, s := range side.ls {
			if i == most {
				fmt.Fprintf(&sb, "%s... %d more lines\n", side.mark, len(side.ls)-most)
				break
			}
			line(side.mark, s)
		}
	}
	for _, s := range after {
		line(" ", s)
	}
	return sb.String()
}

func lines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}
