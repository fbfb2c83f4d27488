package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/kfsniff/kfsniff/expect"
	"github.com/kfsniff/kfsniff/report"
)

// captureSuffixes are the names a capture beside NAME.expect.json may
// have: NAME plus one of these.
var captureSuffixes = []string{".pcap", ".pcapng", ".cap", ".pcap.gz", ".pcapng.gz", ".cap.gz"}

// checkCase is one capture and its expectation, and how the check went.
type checkCase struct {
	Suite   int    // index of the DIR argument
	Name    string // the capture's path as shown: DIR joined with its path under DIR
	Capture string
	Expect  string
	// Problem is set when the pair cannot be checked at all (no capture
	// beside the expectation).
	Problem string

	Code     int // run's exit code
	Out, Err string
	Time     time.Duration
}

// Result is the case's result as the table and the JUnit file say it.
func (c *checkCase) Result() string {
	switch {
	case c.Problem == "" && c.Code == exitOK:
		return "ok"
	case c.Problem == "" && c.Code == exitExpect:
		return "FAIL"
	}
	return "ERROR"
}

const checkUsage = `Usage: kfsniff check [--junit FILE] [--jobs N] DIR...

Checks every capture under each DIR (searched recursively) that has an
expectation file beside it: NAME.pcap, NAME.pcapng, NAME.cap, or the same
gzip-compressed (.gz), with NAME.expect.json (docs/expect.md). Each capture
is analysed as "kfsniff --expect NAME.expect.json -r CAPTURE" does, with the
expectation's settings, several at once. Prints the differences of those
that do not hold, then a table (capture, result, time).

Exit codes: 0 every expectation holds; 4 one does not hold or could not be
checked (a capture unreadable, an expectation invalid or without its
capture); 2 usage error, or no expectation found; 1 the JUnit file could not
be written.

Flags:
`

// runCheck is kfsniff check.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("kfsniff check", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	junit := fs.String("junit", "", "also write the results as JUnit XML to `FILE`, for CI servers")
	jobs := fs.IntP("jobs", "j", runtime.NumCPU(), "analyse `N` captures at once")
	help := fs.BoolP("help", "h", false, "show this help")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), checkUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "kfsniff check: %v (see kfsniff check --help)\n", err)
		return exitUsage
	}
	if *help {
		fs.SetOutput(stdout)
		fs.Usage()
		return exitOK
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "kfsniff check: no directory: give the DIR holding NAME.pcap and NAME.expect.json (see kfsniff check --help)")
		return exitUsage
	}
	if *jobs < 1 {
		fmt.Fprintf(stderr, "kfsniff check: --jobs must be at least 1, got %d\n", *jobs)
		return exitUsage
	}
	var cases []*checkCase
	unpaired := 0
	for i, dir := range fs.Args() {
		cs, n, err := findCases(dir, i)
		if err != nil {
			fmt.Fprintf(stderr, "kfsniff check: %v\n", err)
			return exitUsage
		}
		cases, unpaired = append(cases, cs...), unpaired+n
	}
	if len(cases) == 0 {
		fmt.Fprintf(stderr, "kfsniff check: no NAME%s beside a capture in %s (docs/expect.md; kfsniff --write-expect writes one)\n",
			expect.Suffix, strings.Join(fs.Args(), ", "))
		return exitUsage
	}
	if *junit != "" {
		if err := refuseJUnitOver(*junit, cases); err != nil {
			fmt.Fprintf(stderr, "kfsniff check: %v\n", err)
			return exitUsage
		}
	}

	start := time.Now()
	work := make(chan *checkCase)
	var wg sync.WaitGroup
	for range min(*jobs, len(cases)) {
		wg.Go(func() {
			for c := range work {
				c.check(ctx)
			}
		})
	}
	for _, c := range cases {
		work <- c
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)

	held, failed, errored := 0, 0, 0
	for _, c := range cases {
		switch c.Result() {
		case "ok":
			held++
			continue
		case "FAIL":
			failed++
		default:
			errored++
		}
		fmt.Fprintf(stdout, "--- %s %s\n", c.Result(), report.Clean(c.Name))
		for _, l := range strings.Split(strings.TrimRight(c.details(), "\n"), "\n") {
			fmt.Fprintf(stdout, "    %s\n", l)
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CAPTURE\tRESULT\tTIME")
	for _, c := range cases {
		fmt.Fprintf(tw, "%s\t%s\t%.2fs\n", report.Clean(c.Name), c.Result(), c.Time.Seconds())
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d held, %d did not hold, %d could not be checked: %d capture(s) in %.1fs on %d job(s)",
		held, failed, errored, len(cases), elapsed.Seconds(), min(*jobs, len(cases)))
	if unpaired > 0 {
		fmt.Fprintf(stdout, "; %d capture(s) without an expectation not checked", unpaired)
	}
	fmt.Fprintln(stdout)

	if *junit != "" {
		if err := writeJUnit(*junit, fs.Args(), cases, start); err != nil {
			fmt.Fprintf(stderr, "kfsniff check: --junit: %v\n", err)
			return exitFailure
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "kfsniff check: interrupted")
	}
	if held != len(cases) {
		return exitExpect
	}
	return exitOK
}

// refuseJUnitOver refuses a --junit file that is one of the captures or
// expectations checked: check --junit DIR/x.pcap DIR replaced the capture
// with the XML, exit 0.
func refuseJUnitOver(name string, cases []*checkCase) error {
	for _, c := range cases {
		for _, in := range []string{c.Capture, c.Expect} {
			if sameFile(in, name) {
				return fmt.Errorf("--junit %s is %s, which the check reads: writing the results would destroy it; give another file name", report.Clean(name), report.Clean(in))
			}
		}
	}
	return nil
}

// findCases lists the expectations under dir and the captures beside
// them, sorted by path, and counts the captures without one.
func findCases(dir string, suite int) ([]*checkCase, int, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, 0, err
	}
	if !st.IsDir() {
		return nil, 0, fmt.Errorf("%s is not a directory", dir)
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir // .git and the like
		}
		if !d.IsDir() {
			files = append(files, p) // FIFOs and devices too: check says it will not read them
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	slices.Sort(files)
	var cases []*checkCase
	paired := map[string]bool{}
	for _, p := range files {
		stem, ok := strings.CutSuffix(p, expect.Suffix)
		if !ok {
			continue
		}
		n := len(cases)
		for _, suf := range captureSuffixes {
			if slices.Contains(files, stem+suf) {
				cases = append(cases, &checkCase{Suite: suite, Name: stem + suf, Capture: stem + suf, Expect: p})
				paired[stem+suf] = true
			}
		}
		if len(cases) == n {
			cases = append(cases, &checkCase{Suite: suite, Name: p, Expect: p,
				Problem: fmt.Sprintf("no capture beside it: %s with %s", filepath.Base(stem), strings.Join(captureSuffixes, ", "))})
		}
	}
	unpaired := 0
	for _, p := range files {
		if !paired[p] && isCaptureName(p) {
			unpaired++
		}
	}
	return cases, unpaired, nil
}

func isCaptureName(p string) bool {
	return slices.ContainsFunc(captureSuffixes, func(s string) bool { return strings.HasSuffix(p, s) })
}

// check analyses the case's capture as kfsniff --expect does.
func (c *checkCase) check(ctx context.Context) {
	if c.Problem != "" {
		return
	}
	if ctx.Err() != nil {
		c.Problem = "not checked: interrupted"
		return
	}
	// A FIFO would be waited on past Ctrl-C, /dev/zero read without end.
	for _, p := range []string{c.Expect, c.Capture} {
		if st, err := os.Stat(p); err == nil && !st.Mode().IsRegular() {
			c.Problem = fmt.Sprintf("%s is not a regular file (%s): not read", p, expect.FileKind(st.Mode()))
			return
		}
	}
	t := time.Now()
	var out, errb bytes.Buffer
	c.Code = run(ctx, []string{"--expect", c.Expect, "-r", c.Capture, "--workers", "1"}, strings.NewReader(""), &out, &errb)
	c.Time = time.Since(t)
	c.Out, c.Err = out.String(), errb.String()
	if c.Code != exitOK && c.Code != exitExpect && lfsPointer(c.Capture) {
		c.Err += "kfsniff: " + report.Clean(c.Capture) + " is a Git LFS pointer, not the capture: fetch it (git lfs pull) before the check\n"
	}
}

// details is what the case printed: the differences, or why it could
// not be checked.
func (c *checkCase) details() string {
	if c.Problem != "" {
		return report.Clean(c.Expect) + ": " + report.CleanText(c.Problem)
	}
	if c.Code != exitOK && c.Code != exitExpect {
		return strings.TrimRight(c.Out+c.Err, "\n") + fmt.Sprintf("\n(exit %d)", c.Code)
	}
	return c.Out + c.Err
}

// lfsPointer reports whether the file is a Git LFS pointer (the capture
// was not fetched).
func lfsPointer(name string) bool {
	f, err := os.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 64)
	n, _ := io.ReadFull(f, b)
	return bytes.HasPrefix(b[:n], []byte("version https://git-lfs.github.com/spec/"))
}
