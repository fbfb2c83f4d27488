package main

import (
	"context"
	"errors"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
)

// uiSession is everything a terminal UI gets from the command: what is
// analysed, and a way to run the analysis with its own handlers.
type uiSession struct {
	// Source names the input for the status line: "eth0 (live) port
	// 9092" or "a.pcap, b.pcap".
	Source string
	Live   bool
	// Start runs the analysis as configured on the command line (-i or
	// -r, filter, -w, -c, --duration, detectors) with the front end's
	// additions, and returns when the input ends, -c or --duration is
	// reached, or ctx is cancelled (the UI's quit key), with the final
	// result, whose report the command prints after the UI closes.
	Start func(ctx context.Context, add uiAdditions) *pipeline.Result
}

// uiAdditions are what a front end adds to the analysis. Handlers and
// Sinks are called on the goroutine running Start; Progress too, about 4
// times a second and once at the end (Done set).
type uiAdditions struct {
	Handlers []flows.Handler
	Sinks    []capture.Sink // e.g. a spool for the "save the capture so far" key
	Progress func(pipeline.Progress)
}

var errNoTUI = errors.New("TUI not available in this build")

// haveTUI reports whether this build has the terminal UI.
//
// Hook for the tui package: make this return true, and make runTUI call
// tui.Run(ctx, tui.Options{...}) built from s, returning s.Start's result.
func haveTUI() bool { return false }

// runTUI runs the terminal UI until the user quits, and returns the
// analysis result.
func runTUI(ctx context.Context, s uiSession) (*pipeline.Result, error) {
	return nil, errNoTUI
}
