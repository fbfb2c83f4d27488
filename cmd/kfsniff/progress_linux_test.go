package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openPty opens a pseudo-terminal: the controlling side, read by the
// test, and the terminal side, given to kfsniff as its stderr.
func openPty(t *testing.T) (ctl, term *os.File) {
	t.Helper()
	ctl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	fd := int(ctl.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	term, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	// Raw output: what kfsniff writes arrives as written (no \n -> \r\n).
	tio, err := unix.IoctlGetTermios(int(term.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(term.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	return ctl, term
}

// onTerminal runs kfsniff with stderr on a pseudo-terminal and returns
// what the terminal received and the standard output.
func onTerminal(t *testing.T, args ...string) (code int, terminal, stdout string) {
	t.Helper()
	ctl, term := openPty(t)
	defer ctl.Close()
	got := make(chan []byte)
	go func() {
		var b bytes.Buffer
		io.Copy(&b, ctl) // until the terminal side is closed (EIO)
		got <- b.Bytes()
	}()
	var out bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, term)
	term.Close()
	return code, string(<-got), out.String()
}

var progressLine = regexp.MustCompile(`\rkfsniff: reading ([0-9.]+ (?:B|KiB|MiB)) of ([0-9.]+ (?:B|KiB|MiB)) \(([0-9]+)%\), ([0-9]+) packets, [0-9.]+ (?:B|KiB|MiB|GiB)/s, [0-9]+:[0-9]{2} left\x1b\[K`)

func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// TestProgressOnTerminal: reading files with stderr on a terminal shows
// how far it has got, of the inputs' total size on disk (a gzip file's
// compressed size), with packets counted up and percentages that only
// grow, and erases the line before the report; the report is whole.
func TestProgressOnTerminal(t *testing.T) {
	plain := fixture(filepath.Join("scenarios", "mm2-replay.pcap"))
	raw, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	gzPath := writeFile(t, "mm2-replay.pcap.gz", gz.Bytes())
	for _, tc := range []struct {
		name  string
		files []string
		total string
	}{
		{"pcap", []string{plain}, mib(int64(len(raw)))},
		{"gzip", []string{gzPath}, kib(int64(gz.Len()))},
		{"two files", []string{gzPath, plain}, mib(int64(gz.Len() + len(raw)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--progress-interval", "1ns"}
			for _, f := range tc.files {
				args = append(args, "-r", f)
			}
			code, term, out := onTerminal(t, args...)
			if code != exitOK || !strings.HasPrefix(out, "kfsniff report") {
				t.Fatalf("exit %d, stdout %q", code, out)
			}
			lines := progressLine.FindAllStringSubmatch(term, -1)
			if len(lines) < 3 {
				t.Fatalf("%d progress lines on the terminal: %q", len(lines), term)
			}
			lastPct, lastPkts := -1, -1
			for _, l := range lines {
				if l[2] != tc.total {
					t.Errorf("total %q, want %q (the inputs on disk)", l[2], tc.total)
				}
				pct, _ := strconv.Atoi(l[3])
				pkts, _ := strconv.Atoi(l[4])
				if pct < lastPct || pct > 100 || pkts <= lastPkts {
					t.Errorf("progress went from %d%%, %d packets to %d%%, %d packets", lastPct, lastPkts, pct, pkts)
				}
				lastPct, lastPkts = pct, pkts
			}
			if lastPct < 50 {
				t.Errorf("the last line said %d%%", lastPct)
			}
			if rest := progressLine.ReplaceAllString(term, ""); rest != "\r\x1b[K" {
				t.Errorf("besides the progress lines the terminal got %q; want only the erasing of the line", rest)
			}
		})
	}
}

// TestNoProgressOffTerminal: no progress with stderr in a pipe, nor with
// --json on a terminal.
func TestNoProgressOffTerminal(t *testing.T) {
	plain := fixture(filepath.Join("scenarios", "mm2-replay.pcap"))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	var out bytes.Buffer
	code := run(context.Background(), []string{"--progress-interval", "1ns", "-r", plain}, strings.NewReader(""), &out, w)
	w.Close()
	if b := <-got; code != exitOK || len(b) != 0 || !strings.HasPrefix(out.String(), "kfsniff report") {
		t.Errorf("stderr in a pipe: exit %d, stderr %q", code, b)
	}
	code, term, out2 := onTerminal(t, "--progress-interval", "1ns", "-r", plain, "--json")
	if code != exitOK || term != "" || !strings.HasPrefix(out2, "{") {
		t.Errorf("--json: exit %d, terminal got %q", code, term)
	}

	// Records printed to the terminal that stderr is on: the line would
	// cut through them.
	ctl, tty := openPty(t)
	defer ctl.Close()
	got = make(chan []byte)
	go func() {
		b, _ := io.ReadAll(ctl)
		got <- b
	}()
	code = run(context.Background(), []string{"--progress-interval", "1ns", "-r", plain, "--records"}, strings.NewReader(""), tty, tty)
	tty.Close()
	if b := <-got; code != exitOK || bytes.Contains(b, []byte("kfsniff: reading")) || !bytes.Contains(b, []byte("Produce src.mm2_src[0]@0 ")) {
		t.Errorf("--records on the terminal: exit %d, terminal got %.300q", code, b)
	}
}
