package legacy_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
)

// analyseBytes runs a capture through the whole analysis with every
// detector, thresholds changed by overrides (nil: the defaults).
func analyseBytes(t *testing.T, pcap []byte, overrides map[string]float64) *report.Report {
	t.Helper()
	f, err := capture.NewFile("test.pcap", 0, bytes.NewReader(pcap))
	if err != nil {
		t.Fatal(err)
	}
	set, err := detectors.NewSet(all.Analyzers(), settingsOf(overrides))
	if err != nil {
		t.Fatal(err)
	}
	return pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{Flows: flows.DefaultConfig(), Detectors: set}).Report
}

// analyseScript writes the traffic script into an in-memory pcap and
// analyses it as analyseBytes does.
func analyseScript(t *testing.T, overrides map[string]float64, script func(w *gen.Writer)) *report.Report {
	t.Helper()
	var buf bytes.Buffer
	w, err := gen.NewWriter(&buf, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	script(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return analyseBytes(t, buf.Bytes(), overrides)
}

// findingsOf returns the findings of detector id.
func findingsOf(r *report.Report, id string) []detectors.Finding {
	var out []detectors.Finding
	for _, f := range r.Findings {
		if f.Detector == id {
			out = append(out, f)
		}
	}
	return out
}

// settingsOf turns "detector.param" thresholds into -o settings.
func settingsOf(overrides map[string]float64) map[string]map[string]string {
	out := map[string]map[string]string{}
	for k, v := range overrides {
		if err := detectors.ParseSetting(k+"="+strconv.FormatFloat(v, 'f', -1, 64), out); err != nil {
			panic(err)
		}
	}
	return out
}
