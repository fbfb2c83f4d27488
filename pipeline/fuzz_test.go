package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/fuzzing"
	"github.com/kfsniff/kfsniff/internal/termcheck"
	"github.com/kfsniff/kfsniff/report"
)

// FuzzPipeline runs the whole analysis, detectors included, over arbitrary
// capture bytes, as kfsniff -r does. Besides not panicking and finishing:
// an input that cannot be opened fails with a one-line ErrUnusable; a
// warning is given if and only if the report says where the file broke;
// the report's packet count is the packets read; skipped byte counts are
// positive; the report encodes to valid JSON; and the text report and the
// --frames lines (text and JSON Lines) contain no byte that drives a
// terminal (see termcheck.Safe).
func FuzzPipeline(f *testing.F) {
	for _, seed := range fuzzing.FixtureSeeds(f, filepath.Join("..", "fixtures", "pcaps"), 64<<10) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer fuzzing.Input("FuzzPipeline", data)()
		file, err := capture.NewFile("fuzz.pcap", 0, bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, capture.ErrUnusable) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("NewFile: %q is not a one-line ErrUnusable", err)
			}
			return
		}
		out := analyse(t, file)
		for name, b := range map[string][]byte{"text report": out.text, "--frames": out.frames, "--frames -v": out.verbose} {
			if err := termcheck.Safe(b); err != nil {
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
	dets, err := detectors.NewSet(all.Analyzers(), nil)
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
	checkBounds(t, r)
	// As --json writes it: whole whatever the values (NaN, times outside
	// years 0-9999 are written otherwise, report/jsonsafe.go).
	var doc bytes.Buffer
	if err = report.WriteJSON(&doc, r); err != nil {
		t.Fatalf("report does not encode to JSON: %v", err)
	}
	out.json = doc.Bytes()
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

// checkBounds checks what the bounds on wire-multiplied tables promise,
// for any input: an API row per known (key, version) pair at most and one
// for all unknown ones, whose requests are the unknown pairs listed plus
// those counted as not listed; at most the limits' findings of a rule and
// in all, plus one summary per rule cut, whose counts are the findings not
// listed; evidence of a finding sampled; nothing counted under
// bounds_reached is zero.
func checkBounds(t testing.TB, r *report.Report) {
	const maxEvidence = 32
	t.Helper()
	seen := map[[2]int16]bool{}
	var unknown int64
	for _, a := range r.APIs {
		k := [2]int16{a.Key, a.Version}
		if seen[k] {
			t.Fatalf("two API rows for key %d v%d", a.Key, a.Version)
		}
		seen[k] = true
		switch {
		case a.Name == report.UnknownAPIName && a.Key == -1 && a.Version == -1:
			unknown = a.Requests
		case !decode.KnownVersion(a.Key, a.Version):
			t.Fatalf("an API row of its own for the unknown pair key %d v%d", a.Key, a.Version)
		}
	}
	listed := r.Totals.BoundsReached["unknown_apis_not_listed"]
	for _, u := range r.Totals.UnknownAPIs {
		listed += int64(u.Count)
	}
	if len(r.Totals.UnknownAPIs) > flows.MaxUnknownAPIs || listed != unknown {
		t.Fatalf("%d unknown pairs listed, %d requests counted; the unknown row has %d", len(r.Totals.UnknownAPIs), listed, unknown)
	}
	l := detectors.DefaultLimits
	perRule := map[string]int{}
	var findings int
	var notListed int64
	for _, f := range r.Findings {
		// Evidence is sampled (detectors.Sampler: the first, the last,
		// a few between), with a few more of a rule's own at most.
		if len(f.Evidence) > maxEvidence {
			t.Fatalf("%s finding with %d pieces of evidence", f.Detector, len(f.Evidence))
		}
		if f.Fields["not_listed"] == true {
			notListed += f.Counts["not_listed"]
			continue
		}
		findings++
		if perRule[f.Detector]++; perRule[f.Detector] > l.PerRule {
			t.Fatalf("more than %d %s findings listed", l.PerRule, f.Detector)
		}
	}
	if findings > l.Total || notListed != r.Totals.BoundsReached["findings_not_listed"] {
		t.Fatalf("%d findings listed, %d counted by summaries, %d findings_not_listed", findings, notListed, r.Totals.BoundsReached["findings_not_listed"])
	}
	for k, n := range r.Totals.BoundsReached {
		if n <= 0 {
			t.Fatalf("bounds_reached %s: %d", k, n)
		}
	}
}
