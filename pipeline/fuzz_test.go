package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// FuzzPipeline runs the whole analysis, detectors included, over arbitrary
// capture bytes, as kfsniff -r does. Besides not panicking and finishing:
// an input that cannot be opened fails with a one-line ErrUnusable; a
// warning is given if and only if the report says where the file broke;
// the report's packet count is the packets read; skipped byte counts are
// positive; the report encodes to valid JSON; and the text report and the
// --frames lines (text and JSON Lines) contain no byte that drives a
// terminal (see terminalSafe).
func FuzzPipeline(f *testing.F) {
	for _, seed := range fixtureSeeds(f, 64<<10) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer fuzzInput("FuzzPipeline", data)()
		file, err := capture.NewFile("fuzz.pcap", 0, bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, capture.ErrUnusable) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("NewFile: %q is not a one-line ErrUnusable", err)
			}
			return
		}
		out := analyse(t, file)
		for name, b := range map[string][]byte{"text report": out.text, "--frames": out.frames, "--frames -v": out.verbose} {
			if err := terminalSafe(b); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		for name, b := range map[string][]byte{"--frames --json": out.jsonLines, "--frames --json -v": out.jsonVerbose} {
			for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
				if len(line) > 0 && !json.Valid(line) {
					t.Fatalf("%s line %d is not valid JSON: %s", name, i+1, line)
				}
			}
		}
	})
}

// outputs is what kfsniff would print for one capture.
type outputs struct {
	report                      *report.Report
	warnings                    []error
	json, text, frames, verbose []byte
	jsonLines, jsonVerbose      []byte
}

// analyse runs the pipeline over file with the detectors and the four
// --frames writers, renders the report as text and JSON, and checks what
// holds for any input.
func analyse(t testing.TB, file *capture.File) *outputs {
	t.Helper()
	return analyseConfig(t, file, nil)
}

// analyseConfig is analyse with the default flows.Config changed by set.
func analyseConfig(t testing.TB, file *capture.File, set func(*flows.Config)) *outputs {
	t.Helper()
	cfg := flows.DefaultConfig()
	if set != nil {
		set(&cfg)
	}
	dets, err := detectors.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var fr, fv, fj, fjv bytes.Buffer
	writers := []*report.FrameWriter{
		report.NewFrameWriter(&fr, report.FrameFilter{}, false, false),
		report.NewFrameWriter(&fv, report.FrameFilter{}, false, true),
		report.NewFrameWriter(&fj, report.FrameFilter{}, true, false),
		report.NewFrameWriter(&fjv, report.FrameFilter{}, true, true),
	}
	handlers := make([]flows.Handler, len(writers))
	for i, w := range writers {
		handlers[i] = w
	}
	out := &outputs{}
	res := Run(context.Background(), []*capture.File{file}, Options{
		Flows:     cfg,
		Handlers:  handlers,
		Detectors: dets,
		Warn:      func(err error) { out.warnings = append(out.warnings, err) },
	})
	for _, w := range writers {
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	out.frames, out.verbose, out.jsonLines, out.jsonVerbose = fr.Bytes(), fv.Bytes(), fj.Bytes(), fjv.Bytes()
	r := res.Report
	out.report = r
	if len(r.Capture.Files) != 1 {
		t.Fatalf("report lists %d files", len(r.Capture.Files))
	}
	rf := r.Capture.Files[0]
	if (len(out.warnings) > 0) != (rf.Error != "") || len(out.warnings) > 1 {
		t.Fatalf("warnings %v, report says %q", out.warnings, rf.Error)
	}
	for _, w := range out.warnings {
		var re *capture.ReadError
		if !errors.As(w, &re) || strings.Contains(w.Error(), "\n") {
			t.Fatalf("warning %q is not a one-line *capture.ReadError", w)
		}
		if re.Packet != uint64(rf.Packets)+1 {
			t.Fatalf("input broke at packet %d after %d packets were read", re.Packet, rf.Packets)
		}
	}
	if rf.Packets != r.Capture.Packets || r.Capture.Packets != res.Stats.Packets {
		t.Fatalf("file packets %d, capture packets %d, analysed %d", rf.Packets, r.Capture.Packets, res.Stats.Packets)
	}
	for reason, n := range r.Totals.SkippedBytes {
		if n <= 0 {
			t.Fatalf("skipped bytes %q: %d", reason, n)
		}
	}
	if out.json, err = json.Marshal(r); err != nil {
		t.Fatalf("report does not encode to JSON: %v", err)
	}
	if !json.Valid(out.json) || !utf8.Valid(out.json) {
		t.Fatalf("report encodes to invalid JSON")
	}
	var text bytes.Buffer
	if err := report.WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	out.text = text.Bytes()
	return out
}

// terminalSafe reports the first thing in b that could drive or deceive a
// terminal: invalid UTF-8, a C0 control other than newline and tab, DEL, a
// C1 control (U+0080-U+009F: U+009B is CSI on terminals that honour 8-bit
// controls), or any other non-printing rune (bidi overrides such as U+202E
// reorder what is shown).
func terminalSafe(b []byte) error {
	line := 1
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			return fmt.Errorf("line %d: invalid UTF-8 byte %#x: %q", line, b[i], around(b, i))
		case r == '\n':
			line++
		case r == '\t':
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
			return fmt.Errorf("line %d: control character %U: %q", line, r, around(b, i))
		case !unicode.IsPrint(r) && r != ' ':
			return fmt.Errorf("line %d: non-printing character %U: %q", line, r, around(b, i))
		}
		i += n
	}
	return nil
}

func around(b []byte, i int) []byte {
	return b[max(0, i-40):min(len(b), i+40)]
}

// fixtureSeeds returns the committed fixture captures no larger than
// limit, the hostile ones included.
func fixtureSeeds(tb testing.TB, limit int64) [][]byte {
	var out [][]byte
	for _, pattern := range []string{"*.pcap", "*.pcapng", "*.gz", "hostile/*"} {
		names, _ := filepath.Glob(filepath.Join("..", "fixtures", "pcaps", pattern))
		for _, name := range names {
			st, err := os.Stat(name)
			if err != nil || st.IsDir() || st.Size() > limit || strings.HasSuffix(name, ".md") {
				continue
			}
			b, err := os.ReadFile(name)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, b)
		}
	}
	if len(out) < 10 {
		tb.Fatalf("only %d fixture captures found under ../fixtures/pcaps", len(out))
	}
	return out
}

// fuzzInput is called at the start of every fuzz input and returns what
// to defer. It arms a watchdog that ends the process, printing every
// goroutine and the input, if the input runs longer than fuzzDeadline: Go's
// fuzzer has no per-input timeout, and a hang must show up as a failure
// with its input rather than stall the run. With $KFSNIFF_FUZZ_COUNTS set
// to a directory, it also writes the number of inputs this process has run
// to DIR/TARGET.PID every second, because the count the fuzzer prints lags
// far behind (ROBUSTNESS.md quotes these counts).
func fuzzInput(target string, in ...any) func() {
	tm := time.AfterFunc(fuzzDeadline, func() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		fmt.Fprintf(os.Stderr, "%s: input still running after %v: %q\n%s", target, fuzzDeadline, in, buf)
		os.Exit(3)
	})
	fuzzExecs.count(target)
	return func() { tm.Stop() }
}

// fuzzDeadline is how long one fuzz input may run.
const fuzzDeadline = 10 * time.Second

// fuzzExecs counts the inputs a fuzz worker ran (see fuzzInput).
var fuzzExecs execCounter

type execCounter struct {
	n     atomic.Int64
	once  sync.Once
	dir   string
	name  string
	timer *time.Timer
}

func (c *execCounter) count(target string) {
	c.once.Do(func() {
		c.dir = os.Getenv("KFSNIFF_FUZZ_COUNTS")
		c.name = filepath.Join(c.dir, fmt.Sprintf("%s.%d", target, os.Getpid()))
		if c.dir != "" {
			c.timer = time.AfterFunc(time.Second, c.flush)
		}
	})
	c.n.Add(1)
}

func (c *execCounter) flush() {
	os.WriteFile(c.name, []byte(fmt.Sprintln(c.n.Load())), 0o644)
	c.timer.Reset(time.Second)
}
