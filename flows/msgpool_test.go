package flows_test

import (
	"bytes"
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/metrics"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
	"github.com/kfsniff/kfsniff/tui"
)

// TestMessagesGivenBackAfterUse holds flows and every handler to not
// using a message once it is given back for reuse (msgpool.go): every
// committed capture is analysed with 1 and 2 workers twice, the second
// time with each message spoiled (every field changed) where it would be
// given back; the JSON report and the verbose --frames lines must not
// change. A request given back at its own delivery instead of its
// exchange's, a handler keeping a message to read later, flows reading a
// message after handing its exchange over: each changes them.
func TestMessagesGivenBackAfterUse(t *testing.T) {
	if testing.Short() {
		t.Skip("every committed capture through every handler, four times")
	}
	var caps []string
	root := filepath.Join("..", "fixtures", "pcaps")
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".pcap") || strings.HasSuffix(p, ".pcapng") || strings.HasSuffix(p, ".gz")) {
			caps = append(caps, p)
		}
		return nil
	})
	if len(caps) < 50 {
		t.Fatalf("%d captures under %s", len(caps), root)
	}
	defer flows.SetMsgPoison(false)
	exchanges := 0
	for _, p := range caps {
		for _, workers := range []int{1, 2} {
			flows.SetMsgPoison(false)
			rep, frames, n, ok := pooledRun(t, p, workers)
			if !ok {
				continue // the hostile corpus's unusable files
			}
			exchanges += n
			flows.SetMsgPoison(true)
			rep2, frames2, _, _ := pooledRun(t, p, workers)
			if !bytes.Equal(rep, rep2) {
				t.Errorf("%s, %d workers: the report changes when messages are spoiled as they are given back:\n%s", p, workers, firstLineDiff(rep, rep2))
			}
			if !bytes.Equal(frames, frames2) {
				t.Errorf("%s, %d workers: --frames -v changes when messages are spoiled as they are given back:\n%s", p, workers, firstLineDiff(frames, frames2))
			}
		}
	}
	if exchanges < 10000 {
		t.Errorf("only %d exchanges compared", exchanges)
	}
}

// pooledRun analyses a capture as kfsniff -r does, with the other
// handlers of a run beside the detectors, and returns its JSON report,
// its verbose JSON frame lines and its exchanges.
func pooledRun(t *testing.T, path string, workers int) (rep, frames []byte, exchanges int, ok bool) {
	t.Helper()
	f, err := capture.Open(path, 0)
	if err != nil {
		return nil, nil, 0, false
	}
	defer f.Close()
	dets, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var fb bytes.Buffer
	lines := report.NewFrameWriter(&fb, report.FrameFilter{}, true, true)
	var h exchangeCounter
	opt := pipeline.Options{
		Flows:     flows.DefaultConfig(),
		Detectors: dets,
		Handlers:  []flows.Handler{lines, metrics.New(metrics.Config{}), tui.NewModel(tui.ModelConfig{}), &h},
		Workers:   workers,
	}
	res := pipeline.Run(context.Background(), []*capture.File{f}, opt)
	if err := lines.Flush(); err != nil {
		t.Fatal(err)
	}
	if res.Report == nil {
		t.Fatalf("%s: no report", path)
	}
	var doc bytes.Buffer
	if err := report.WriteJSON(&doc, res.Report); err != nil {
		t.Fatal(err)
	}
	return doc.Bytes(), fb.Bytes(), h.exchanges, true
}

// firstLineDiff shows the first line where a and b differ.
func firstLineDiff(a, b []byte) string {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return "line " + itoa(i+1) + ":\n  " + string(trim(la[i])) + "\n  " + string(trim(lb[i]))
		}
	}
	return "one is a prefix of the other"
}

func trim(b []byte) []byte {
	if len(b) > 400 {
		return b[:400]
	}
	return b
}

func itoa(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		if n /= 10; n == 0 {
			return string(b)
		}
	}
}
