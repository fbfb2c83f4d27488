package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/pipeline"
)

// progress is the line that says, on a terminal, how far the reading of
// capture files has got: bytes of the inputs as they are on disk (the
// compressed bytes of a gzip file), packets read, the rate and the time
// left. It is redrawn in place and erased before the report.
type progress struct {
	w     io.Writer
	files []*capture.File
	total int64 // bytes of all the inputs; 0 when one's size is unknown
	drawn bool
	line  []byte
}

// newProgress returns the progress line for reading files, or nil when
// none is wanted: stderr is not a terminal, the output is JSON, the
// input is live, or records or frames stream to the same terminal as
// they are decoded (the line would cut through them).
func newProgress(cfg *Config, recs *recordsConfig, files []*capture.File, stdout, stderr io.Writer) *progress {
	if len(files) == 0 || cfg.JSON || !isTerminal(stderr) {
		return nil
	}
	if (cfg.Frames || recs.w != nil && recs.finding == 0) && isTerminal(stdout) {
		return nil
	}
	p := &progress{w: stderr, files: files}
	for _, name := range cfg.Files {
		var st os.FileInfo
		var err error
		if name == "-" {
			st, err = os.Stdin.Stat()
		} else {
			st, err = os.Stat(name)
		}
		if err != nil || !st.Mode().IsRegular() {
			p.total = 0
			break
		}
		p.total += st.Size()
	}
	return p
}

// callback is the pipeline's Progress function (nil for no line).
func (p *progress) callback() func(pipeline.Progress) {
	if p == nil {
		return nil
	}
	return p.update
}

// update redraws the line, or erases it when the run is done. It runs on
// the pipeline's reading goroutine, as the files' counters require.
func (p *progress) update(pr pipeline.Progress) {
	if pr.Done {
		p.clear()
		return
	}
	var packets uint64
	var read int64
	for _, f := range p.files {
		n, b := f.Read()
		packets += n
		read += b
	}
	if packets == 0 {
		return // nothing to say yet
	}
	l := fmt.Appendf(p.line[:0], "\rkfsniff: reading %s", sizeStr(read))
	if p.total > 0 {
		read = min(read, p.total)
		l = fmt.Appendf(l, " of %s (%d%%)", sizeStr(p.total), read*100/p.total)
	}
	l = fmt.Appendf(l, ", %d packets", packets)
	if s := pr.Elapsed.Seconds(); s > 0 && read > 0 {
		rate := float64(read) / s
		l = fmt.Appendf(l, ", %s/s", sizeStr(int64(rate)))
		if p.total > 0 {
			left := time.Duration(float64(p.total-read) / rate * float64(time.Second))
			l = fmt.Appendf(l, ", %s left", clockStr(left))
		}
	}
	l = append(l, "\x1b[K"...) // erase the rest of a longer previous line
	p.line = l
	p.w.Write(l)
	p.drawn = true
}

// clear erases the line, if it was drawn.
func (p *progress) clear() {
	if p == nil || !p.drawn {
		return
	}
	io.WriteString(p.w, "\r\x1b[K")
	p.drawn = false
}

// sizeStr is a byte count as people read it: 512 B, 3.4 MiB, 1.2 GiB.
func sizeStr(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, i := float64(n)/unit, 0
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + [...]string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i]
}

// clockStr is a duration as m:ss (or h:mm:ss).
func clockStr(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// around erases the line before warn writes its own (a file that broke),
// so that the warning does not run on from the line.
func (p *progress) around(warn func(error)) func(error) {
	if p == nil || warn == nil {
		return warn
	}
	return func(err error) {
		p.clear()
		warn(err)
	}
}
