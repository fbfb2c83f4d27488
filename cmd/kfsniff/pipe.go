package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/kfsniff/kfsniff/capture"
	"io"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
)

// catchSIGPIPE makes a write to a standard output whose reader has gone
// (kfsniff ... | head -1) fail with EPIPE instead of killing kfsniff with
// SIGPIPE (exit 141, the -w file cut mid-record and no report): Go kills
// a program that writes to a broken stdout unless the signal is ignored
// or asked for. The signal itself needs nothing more: stdout's next write
// fails and pipeOut ends the run. Ignored rather than asked for (Notify):
// asking is a round trip with the runtime's signal thread at start-up,
// and kfsniff starts no process that would inherit the ignoring.
func catchSIGPIPE() {
	signal.Ignore(syscall.SIGPIPE)
}

// pipeOut is standard output as run writes to it: the first write that
// fails with EPIPE (the reader went away) cancels the analysis, as
// tcpdump stops when its reader does.
type pipeOut struct {
	w      io.Writer
	cancel context.CancelFunc
	closed atomic.Bool
}

// watchPipe returns ctx, cancelled when stdout's reader goes away, and
// stdout to write to.
func watchPipe(ctx context.Context, stdout io.Writer) (context.Context, *pipeOut) {
	ctx, cancel := context.WithCancel(ctx)
	return ctx, &pipeOut{w: stdout, cancel: cancel}
}

func (p *pipeOut) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if err != nil && errors.Is(err, syscall.EPIPE) {
		p.closed.Store(true)
		p.cancel()
	}
	return n, err
}

// broken reports whether stdout's reader went away.
func (p *pipeOut) broken() bool { return p.closed.Load() }

// pipeClosed ends a run whose stdout's reader went away: what was read
// is said on stderr (the -w file, already closed whole, holds those
// packets), with tcpdump's counts when live and, since --frames prints no
// report, the report. The run then exits 0, as tcpdump does, unless the
// -w file could not be written.
// A reader that goes away while the report is written (its first lines
// were all it wanted) gets one line.
// The -w file holds every packet read past the filter, also those read but
// not analysed when the stop came (several workers skip what is queued).
//
// --records streams as --frames does (it stopped the analysis, which the
// message called "during the report") but says no more than that line,
// as kcat; --finding's records come after the analysis.
func pipeClosed(stderr io.Writer, cfg Config, recs *recordsConfig, res *pipeline.Result, w *capture.Writer, live bool) {
	if !cfg.Frames && (recs.w == nil || recs.finding > 0) {
		what := "the report"
		if recs.w != nil {
			what = "the records"
		}
		fmt.Fprintf(stderr, "kfsniff: standard output closed by its reader during %s (%d packets analysed)\n", what, res.Report.Capture.Packets)
		return
	}
	fmt.Fprintf(stderr, "kfsniff: standard output closed by its reader; stopped after %d packets analysed", res.Report.Capture.Packets)
	if w != nil {
		fmt.Fprintf(stderr, " (%d written to %s)", w.Packets(), report.Clean(cfg.Write))
	}
	fmt.Fprintln(stderr)
	if live {
		liveSummary(stderr, res)
	}
	if recs.w != nil {
		// kfsniff --records | head: the records were what was asked for;
		// as kcat, nothing more.
		return
	}
	report.WriteText(stderr, res.Report)
}
