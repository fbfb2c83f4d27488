package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/report"
)

// Issue 16 items 3-5 at the command line: JSON that never aborts, files
// never destroyed, pipes handled, usage errors at parse time.

func hostileFixture(name string) string { return fixture(filepath.Join(gen.HostileDir, name)) }

// TestHostileNaNQuotas: a DescribeClientQuotas response with NaN and
// infinite values stopped --frames --json -v after 3 of 8 lines (exit 1);
// every line is written now, the values as strings, exit 0.
func TestHostileNaNQuotas(t *testing.T) {
	path := hostileFixture("nan-quotas.pcap")
	_, all, _ := kfsniff(t, "-r", path, "--frames")
	want := strings.Count(all, "\n")
	if want != 10 {
		t.Fatalf("nan-quotas.pcap has %d frames, want 10 (5 exchanges)", want)
	}
	for _, mode := range [][]string{{"--json"}, {"--json", "-v"}} {
		code, out, errs := kfsniff(t, append([]string{"-r", path, "--frames"}, mode...)...)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if code != exitOK || errs != "" || len(lines) != want {
			t.Fatalf("%v: exit %d, stderr %q, %d lines; want exit 0, nothing, %d lines", mode, code, errs, len(lines), want)
		}
		var values []any
		for _, l := range lines {
			var fl struct {
				API  string `json:"api"`
				Body struct {
					Entries []struct {
						Values []struct{ Value any }
						Ops    []struct{ Value any }
					}
				} `json:"body"`
			}
			if err := json.Unmarshal([]byte(l), &fl); err != nil {
				t.Fatalf("%v: not JSON: %v\n%s", mode, err, l)
			}
			for _, e := range fl.Body.Entries {
				for _, v := range e.Values {
					values = append(values, v.Value)
				}
				for _, v := range e.Ops {
					values = append(values, v.Value)
				}
			}
		}
		if len(mode) == 1 {
			if len(values) != 0 {
				t.Errorf("without -v, no body: %v", values)
			}
			continue
		}
		if got := fmt.Sprint(values); got != "[NaN +Inf -Inf 1.048576e+06 NaN]" {
			t.Errorf("quota values %s; want the response's NaN, +Inf, -Inf, 1048576 and the request's NaN", got)
		}
	}
	// The text -v output printed no body for these (the marshal error
	// was dropped); its field tree prints them.
	_, out, _ := kfsniff(t, "-r", path, "--frames", "-v")
	if !strings.Contains(out, "\n                Value: NaN\n") || !strings.Contains(out, "\n                Value: -Inf\n") {
		t.Errorf("--frames -v lacks the quota values:\n%s", out)
	}
}

// TestHostileTimeRange: pcapng timestamps in years 11530 and -194 made
// --json print nothing (exit 1); the document is whole, the times clamped,
// and each clamped value is a warning naming where it is (with its
// packet number in --frames --json), at most 10 and a count.
func TestHostileTimeRange(t *testing.T) {
	path := hostileFixture("time-range.pcapng")
	code, out, errs := kfsniff(t, "-r", path, "--json")
	var doc struct {
		Capture struct{ First, Last string }
		Totals  struct{ Requests int }
	}
	if code != exitOK || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("--json: exit %d, stderr %q, stdout %.300s", code, errs, out)
	}
	if doc.Capture.First != "0000-01-01T00:00:00Z" || doc.Capture.Last != "9999-12-31T23:59:59.999999999Z" || doc.Totals.Requests != 18 {
		t.Errorf("capture %+v, %d requests; want the times clamped and the 18 requests", doc.Capture, doc.Totals.Requests)
	}
	lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
	if len(lines) != maxJSONWarnings+1 || lines[0] != "kfsniff: warning: JSON: report capture.first: time in year -194, before JSON's 0; written as 0000-01-01T00:00:00Z" ||
		!regexp.MustCompile(`^kfsniff: warning: JSON: \d+ values written otherwise than they were, 10 shown$`).MatchString(lines[maxJSONWarnings]) {
		t.Errorf("stderr:\n%s\nwant 10 warnings naming each value, then the count", errs)
	}
	code, out, errs = kfsniff(t, "-r", path, "--frames", "--json")
	if n := strings.Count(out, "\n"); code != exitOK || n != 36 {
		t.Errorf("--frames --json: exit %d, %d lines; want every one of the 36", code, n)
	}
	if !strings.HasPrefix(errs, "kfsniff: warning: JSON: packet 4 (ApiVersions v3 request): time: time in year 11530, after JSON's 9999; written as 9999-12-31T23:59:59.999999999Z\n") ||
		!strings.HasSuffix(errs, "kfsniff: warning: JSON: 36 values written otherwise than they were, 10 shown\n") {
		t.Errorf("--frames --json stderr:\n%s", errs)
	}
}

// TestHostileTagStringsText: the text report quotes a client id such as
// ["region1"]region once, as the connections list does (it was escaped
// twice in the What is wrong lines and the findings).
func TestHostileTagStringsText(t *testing.T) {
	_, out, _ := kfsniff(t, "-r", hostileFixture("tui-tags.pcap"))
	once := `client "[\"region1\"]region" throttled`
	if strings.Count(out, once) != 2 || strings.Contains(out, `[\\"region1`) {
		t.Errorf("the report does not quote the client id once in both the summary line and the finding (%q):\n%s", once, out)
	}
	if !strings.Contains(out, `client-id "[\"region1\"]region"`) {
		t.Errorf("the connections list no longer quotes it the same way")
	}
}

// TestWriteOntoInput: -w onto an input is refused before anything is
// opened for writing, under any name: the same path, another path, a
// hard link, a symbolic link, and standard input redirected from it.
func TestWriteOntoInput(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(fixture("basic.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "in.pcap")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	hard, sym := filepath.Join(dir, "hard.pcap"), filepath.Join(dir, "sym.pcap")
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("in.pcap", sym); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	unchanged := func(what string) {
		t.Helper()
		got, err := os.ReadFile(in)
		if err != nil || sha256.Sum256(got) != sum {
			t.Fatalf("%s: the input changed (%d bytes, %v)", what, len(got), err)
		}
	}
	for _, tc := range []struct{ read, write string }{
		{in, in},
		{in, filepath.Join(dir, ".", "sub", "..", "in.pcap")},
		{in, hard},
		{hard, sym},
		{sym, in},
		{fixture("basic.pcap"), in}, // the second -r
	} {
		args := []string{"-r", tc.read, "-w", tc.write}
		if tc.read == fixture("basic.pcap") {
			args = []string{"-r", tc.read, "-r", in, "-w", tc.write}
		}
		os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
		code, out, errs := kfsniff(t, args...)
		if code != exitUsage || out != "" || strings.Count(errs, "\n") != 1 ||
			!strings.HasPrefix(errs, "kfsniff: -w "+tc.write+": that file is the input ") || !strings.Contains(errs, "would destroy") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line", args, code, out, errs)
		}
		unchanged(strings.Join(args, " "))
	}
	// Standard input redirected from the file (kfsniff -r - -w in.pcap < in.pcap).
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-r", "-", "-w", hard}, f, &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "that file is the input - (standard input)") {
		t.Errorf("-r - -w hard.pcap < in.pcap: exit %d, stderr %q", code, errb.String())
	}
	unchanged("stdin")
	// The UI's save key: the same check, its own words.
	if err := refuseSave(hard, []string{sym}, nil); err == nil || !strings.Contains(err.Error(), "is the input "+sym+": saving there would destroy it") {
		t.Errorf("save onto the input: %v", err)
	}
	if err := refuseSave(filepath.Join(dir, "new.pcap"), []string{in}, nil); err != nil {
		t.Errorf("save to a new file refused: %v", err)
	}
	// Another file is written as before.
	other := filepath.Join(dir, "out.pcap")
	if code, _, errs := kfsniff(t, "-r", in, "-w", other); code != exitOK || errs != "" {
		t.Errorf("-w another file: exit %d, %q", code, errs)
	}
}

// TestUsageAtParseTime: values and combinations that were accepted and
// failed later, or were silently wrong, are usage errors (exit 2, one
// line naming the flag), before any input is read.
func TestUsageAtParseTime(t *testing.T) {
	basic := fixture("basic.pcap")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--frames", "--api", "65537"}, "unknown API key 65537"}, // wrapped through int16 to Fetch
		{[]string{"--frames", "--api", "99999"}, "unknown API key 99999"},
		{[]string{"--frames", "--api", "-1"}, "unknown API key -1"},
		{[]string{"--frames", "--api", "1000"}, "unknown API key 1000"},
		{[]string{"--frames", "--api", "Fetch,99999999999999999999"}, "unknown API key 99999999999999999999"},
		{[]string{"--frames", "--api", "Fetch,NoSuch"}, `unknown API "NoSuch"`},
		{[]string{"--frames", "--tui"}, "--tui and --frames are two different outputs"},
		{[]string{"--json", "--tui"}, "--tui and --json are two different outputs"},
		{[]string{"--frames", "--json", "--tui"}, "--tui and --frames"},
		{[]string{"-v"}, "-v: only with --frames"},
		{[]string{"--api", "Fetch", "--errors"}, "--api, --errors: only with --frames"},
		{[]string{"--client-id", "x"}, "--client-id: only with --frames"},
		{[]string{"--conn", "1", "--json"}, "--conn: only with --frames"},
		{[]string{"-s", "96"}, "-s: only with -i"},
		{[]string{"-B", "1024", "-p"}, "-B, -p: only with -i"},
		{[]string{"-o", "throttled.min-total=NaN"}, "out of range"},
		{[]string{"-o", "throttled.min-total=-1s"}, "out of range"},
		{[]string{"-o", "throttled.min-total-ms=-5"}, "out of range"},
		{[]string{"-o", "throttled.min-total=1e300"}, "too long for a duration"},
		{[]string{"-o", "error-storm.window=Inf"}, "out of range"},
		{[]string{"-o", "error-storm.min-rate=NaN"}, "out of range: want a number of at least 0"},
		{[]string{"-o", "error-storm.min-rate=+Inf"}, "out of range"},
		{[]string{"-o", "error-storm.min-rate=-1"}, "out of range"},
		{[]string{"-o", "error-storm.min-responses=-3"}, "out of range: want a count of at least 0"},
		{[]string{"-o", "broker-fenced-while-alive.near=2"}, "want a number from 0 to 1"},
		{[]string{"-o", "reconnect-storm.min-churn=-0.5"}, "want a number of at least 0"},
		{[]string{"-o", "duplicate-batches.max-decompressed=NaN"}, "not a size"},
	} {
		args := append([]string{"-r", basic}, tc.args...)
		code, out, errs := kfsniff(t, args...)
		if code != exitUsage || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "kfsniff: ") || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stdout %.80q, stderr %q; want exit 2 and one line saying %q", tc.args, code, out, errs, tc.want)
		}
	}
	// Near misses: the edges of the ranges and the keys kmsg knows.
	for _, args := range [][]string{
		{"--frames", "--api", "0"},
		{"--frames", "--api", "Fetch,3"},
		{"-o", "broker-fenced-while-alive.near=1"},
		{"-o", "broker-fenced-while-alive.near=0"},
		{"-o", "throttled.min-total=0"},
		{"-o", "error-storm.min-responses=0"},
	} {
		if code, _, errs := kfsniff(t, append([]string{"-r", basic}, args...)...); code != exitOK {
			t.Errorf("%v: exit %d, %q; want accepted", args, code, errs)
		}
	}
	// --api 65537 used to select Fetch (key 1): the same frames as --api 1
	// would now be a usage error, and --api 1 still selects Fetch.
	_, fetch, _ := kfsniff(t, "-r", basic, "--frames", "--api", "1")
	if !strings.Contains(fetch, " Fetch ") || strings.Contains(fetch, " Metadata ") {
		t.Errorf("--api 1 does not select Fetch:\n%s", fetch)
	}
}

// TestHelperKfsniffMain is not a test: the pipe tests run the test binary
// as kfsniff's main (with its SIGPIPE handling) on a real pipe.
func TestHelperKfsniffMain(t *testing.T) {
	if os.Getenv("KFSNIFF_HELPER_MAIN") != "1" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	catchSIGPIPE()
	code := run(ctx, strings.Split(os.Getenv("KFSNIFF_ARGS"), "\x1f"), os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// pipeRun runs kfsniff (as main) with args, reads the first line of its
// standard output and closes the pipe, as `| head -1` does; it returns
// the line, the exit code and stderr. ready, if set, is called once
// kfsniff says it is listening.
func pipeRun(t *testing.T, ready func(), args ...string) (first string, code int, stderr string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestHelperKfsniffMain$")
	cmd.Env = append(os.Environ(), "KFSNIFF_HELPER_MAIN=1", "KFSNIFF_ARGS="+strings.Join(args, "\x1f"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan string, 1)
	listening := make(chan struct{})
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(errPipe)
		once := false
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "listening on") {
				once = true
				close(listening)
			}
		}
		errc <- b.String()
	}()
	if ready != nil {
		select {
		case <-listening:
			go ready()
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("kfsniff %v: not listening after 10 s", args)
		}
	}
	first, err = bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Errorf("reading the first line: %v", err)
	}
	stdout.Close() // the reader goes away, as head -1 does
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	stderr = <-errc
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("kfsniff %v killed by %v; stderr:\n%s", args, ws.Signal(), stderr)
		}
	default:
		t.Fatal(err)
	}
	return first, code, stderr
}

// readBack reads a capture file to its end and returns its packets; any
// error (a record cut short) fails the test.
func readBack(t *testing.T, path string) int {
	t.Helper()
	f, err := capture.Open(path, 0)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	n := 0
	var p capture.Packet
	for {
		err := f.Next(&p)
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatalf("%s: after %d packets: %v", path, n, err)
		}
		n++
	}
}

var stoppedRe = regexp.MustCompile(`kfsniff: standard output closed by its reader; stopped after (\d+) packets analysed \((\d+) written to `)

// checkPipeClosed: exit 0, the message with the counts, and a -w file
// that reads back whole, holding the packets said written (at least those
// analysed: several workers skip what is queued at the stop), which
// kfsniff reads without a warning. It returns the packets written.
func checkPipeClosed(t *testing.T, code int, stderr, out string) int {
	t.Helper()
	n := checkPipeClosedQuiet(t, code, stderr, out)
	if !strings.Contains(stderr, "kfsniff report (kfsniff/v1)") {
		t.Errorf("stderr lacks the report (--frames prints none on stdout):\n%.500s", stderr)
	}
	return n
}

// checkPipeClosedQuiet is checkPipeClosed without the report on stderr.
func checkPipeClosedQuiet(t *testing.T, code int, stderr, out string) int {
	t.Helper()
	m := stoppedRe.FindStringSubmatch(stderr)
	if code != exitOK || m == nil {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 0 and the reader's going away said", code, stderr)
	}
	analysed, _ := strconv.Atoi(m[1])
	n, _ := strconv.Atoi(m[2])
	if got := readBack(t, out); got != n || n == 0 || analysed > n {
		t.Errorf("-w file: %d packets read back; kfsniff said %d written, %d analysed", got, n, analysed)
	}
	code, rep, errs := kfsniff(t, "-r", out)
	if code != exitOK || errs != "" || !strings.Contains(rep, fmt.Sprintf("%d packets", n)) {
		t.Errorf("kfsniff -r %s: exit %d, stderr %q", out, code, errs)
	}
	return n
}

// TestPipeClosedFile: kfsniff -r X --frames -w out | head -1 stops
// reading when head goes away (before the end of X), closes out whole,
// says so and prints the report on stderr, exit 0 (was: exit 141, SIGPIPE).
func TestPipeClosedFile(t *testing.T) {
	in := fixture(filepath.Join("scenarios", "observer-fetch-loop.pcap"))
	out := filepath.Join(t.TempDir(), "out.pcap")
	page := filepath.Join(t.TempDir(), "out.html")
	first, code, stderr := pipeRun(t, nil, "-r", in, "--frames", "-w", out, "--html", page)
	if !strings.Contains(first, "corr=") {
		t.Errorf("first line %q is not a frame", first)
	}
	n := checkPipeClosed(t, code, stderr, out)
	// The other files asked for are written too, of what was analysed.
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), "</html>") {
		t.Errorf("--html page not written when the reader went away: %v", err)
	}
	total := readBack(t, in)
	if n >= total {
		t.Errorf("read all %d packets: the run did not stop when its reader went away", total)
	}
	t.Logf("stopped after %d of %d packets", n, total)
	// The report: the reader took the lines it wanted; exit 0, and one
	// line saying so if the reader had gone before the report was all
	// written (whether the pipe still had room for it is a race).
	first, code, stderr = pipeRun(t, nil, "-r", in)
	if want := fmt.Sprintf("kfsniff: standard output closed by its reader during the report (%d packets analysed)\n", total); code != exitOK ||
		first != "kfsniff report (kfsniff/v1)\n" || stderr != want && stderr != "" {
		t.Errorf("report | head -1: exit %d, first %q, stderr %q; want exit 0 and nothing or %q", code, first, stderr, want)
	}
}

// TestLivePipeClosed: kfsniff -i lo --no-tui --frames -w x.pcap | head -1
// with kgo traffic to kfake left a 0-byte x.pcap and exit 141; now x.pcap
// reads back whole, the kernel's counts and the report are on stderr, exit 0.
func TestLivePipeClosed(t *testing.T) {
	needLive(t)
	c, ports, filter := startKfake(t)
	out := filepath.Join(t.TempDir(), "x.pcap")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	workDone := make(chan error, 1)
	args := append([]string{"-i", "lo", "--no-tui", "--frames", "-w", out, "--ports", ports, "--duration", "50s"}, strings.Fields(filter)...)
	start := time.Now()
	first, code, stderr := pipeRun(t, func() {
		workDone <- workload(ctx, c.ListenAddrs(), &kafkaCounts{writes: map[int16]int{}, reads: map[int16]int{}}, 200)
	}, args...)
	if !strings.Contains(first, "corr=") {
		t.Errorf("first line %q is not a frame", first)
	}
	n := checkPipeClosed(t, code, stderr, out)
	t.Logf("live: stopped after %d packets; stderr begins %.300q", n, stderr)
	if !strings.Contains(stderr, "dropped by kernel") {
		t.Errorf("stderr lacks the kernel's counts:\n%s", stderr)
	}
	if d := time.Since(start); d > 40*time.Second {
		t.Errorf("took %v: kfsniff did not stop when its reader went away (it ran to --duration)", d)
	}
	cancel()
	<-workDone
}

// TestJSONWarnerBound: a warning per value up to maxJSONWarnings, then a
// count, so that a capture of a million bad times prints 11 lines.
func TestJSONWarnerBound(t *testing.T) {
	var b bytes.Buffer
	w := &jsonWarner{w: &b}
	for i := range 1000 {
		w.report(report.JSONIssue{Path: fmt.Sprintf("x[%d]", i), What: "\x1b[2Jbad"})
	}
	w.done()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != maxJSONWarnings+1 || lines[0] != `kfsniff: warning: JSON: report x[0]: \x1b[2Jbad` ||
		lines[maxJSONWarnings] != "kfsniff: warning: JSON: 1000 values written otherwise than they were, 10 shown" {
		t.Errorf("warnings:\n%s", b.String())
	}
}

// TestPipeClosedRecords: kfsniff -r X --records -w out | head -1 stops the
// analysis as --frames does, and says so with the packets written (it said
// "during the report", though no report was being printed and out held
// only part of X), in one line: no report on stderr, as kcat.
func TestPipeClosedRecords(t *testing.T) {
	in := fixture(filepath.Join("scenarios", "mm2-replay.pcap"))
	out := filepath.Join(t.TempDir(), "out.pcap")
	first, code, stderr := pipeRun(t, nil, "-r", in, "--records", "-w", out)
	if !strings.HasPrefix(first, "Produce ") {
		t.Errorf("first line %q is not a record", first)
	}
	checkPipeClosedQuiet(t, code, stderr, out)
	if strings.Contains(stderr, "kfsniff report") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr should be one line:\n%s", stderr)
	}
}
