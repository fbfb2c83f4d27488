package main

import (
	"context"
	"os"
	"testing"
)

// TestTerminalThroughPipeWatch: standard output watched for its reader
// going away is still the terminal it wraps, so a live capture on a
// terminal opens the TUI and --frames on the terminal hides progress; a
// pipe stays a pipe.
func TestTerminalThroughPipeWatch(t *testing.T) {
	_, term := openPty(t)
	_, out := watchPipe(context.Background(), term)
	if !isTerminal(out) {
		t.Error("a terminal behind the pipe watch is not taken for a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, out := watchPipe(context.Background(), w); isTerminal(out) {
		t.Error("a pipe behind the pipe watch is taken for a terminal")
	}
}
