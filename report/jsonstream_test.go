package report_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/report"
)

// TestWriteJSONStreamsAsEncoder: WriteJSON, which streams the document a
// member and a list element at a time, writes the bytes of a json.Encoder
// with SetEscapeHTML(false) and SetIndent("", "  ") writing the whole
// report through SafeJSONWriter, on the report of every golden capture and
// on one whose lists hold hostile strings, empty and nil lists.
func TestWriteJSONStreamsAsEncoder(t *testing.T) {
	check := func(name string, rep *report.Report) bool {
		var want bytes.Buffer
		enc := json.NewEncoder(report.SafeJSONWriter{W: &want})
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return false // time-range.pcapng: jsonsafe_test.go tests the fallback
		}
		var got bytes.Buffer
		if err := report.WriteJSON(&got, rep); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			i := 0
			for i < got.Len() && i < want.Len() && got.Bytes()[i] == want.Bytes()[i] {
				i++
			}
			t.Errorf("%s: WriteJSON differs at byte %d:\n got ...%.200q\nwant ...%.200q", name, i, got.Bytes()[max(0, i-100):], want.Bytes()[max(0, i-100):])
		}
		return true
	}
	hostile := "<a href=\"x\">&amp;</a> \\\" \x1b[31m \u009b2J \xff\xfe {[,:]} \u2028 日本"
	rep := &report.Report{
		Schema:  report.Schema,
		Capture: report.Capture{Files: []report.File{{Name: hostile, Format: "pcap"}}},
		Connections: []report.Connection{
			{ID: 1, Client: hostile, Roles: []string{}, APIs: map[string]int{hostile: 2}},
			{ID: 2, ClientIDs: []string{hostile, ""}},
		},
		Events:   []report.Event{},
		Findings: []detectors.Finding{{Detector: hostile, Summary: hostile, Fields: map[string]any{hostile: 1.5}}},
		Clients:  []report.ClientEntry{{ClientID: hostile, Connections: []int{1, 2}}},
	}
	check("hostile", rep)
	n := 0
	for _, c := range goldenCases(t, false) {
		_, rep := analyse(t, c, 1)
		if rep != nil && check(c.capture, rep) {
			n++
		}
	}
	if n < 10 {
		t.Fatalf("only %d golden reports compared", n)
	}
}

// errWriter fails every write after the first n bytes.
type errWriter struct{ n int }

func (w *errWriter) Write(p []byte) (int, error) {
	if w.n -= len(p); w.n < 0 {
		return 0, errBroken
	}
	return len(p), nil
}

var errBroken = &json.UnsupportedValueError{Str: "broken"}

// TestWriteJSONStreamError: a write that fails mid-document (a closed
// pipe) is WriteJSON's error.
func TestWriteJSONStreamError(t *testing.T) {
	rep := &report.Report{Schema: report.Schema}
	for i := range 5000 {
		rep.Connections = append(rep.Connections, report.Connection{ID: i + 1, Client: strings.Repeat("x", 40)})
	}
	if err := report.WriteJSON(&errWriter{n: 100 << 10}, rep); err != errBroken {
		t.Errorf("WriteJSON = %v, want the writer's error", err)
	}
}
