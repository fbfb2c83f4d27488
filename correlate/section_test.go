package correlate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/report"
)

// update, set by -update, rewrites the golden files under testdata (detectortest, which this
// binary imports, registers the flag).
var update = detectortest.Update

// TestSectionGolden: the correlation section, text and JSON, of a real
// client's capture dealt to three agents: two sharing connections, one
// clock 1.234567 s ahead, and a third that shares none (its clock
// unknown, its batches across agents not measured). Refreshed with
// go test ./correlate -run SectionGolden -update.
func TestSectionGolden(t *testing.T) {
	by := splitCapture(t, "../fixtures/pcaps/clients/mm2-replay-kgo.pcap", 30,
		agentView{"host-a", func(s int) bool { return s%4 == 0 || s%4 == 1 }, none},
		agentView{"host-b", func(s int) bool { return s%4 == 0 || s%4 == 2 }, ahead(1234567 * time.Microsecond)},
		agentView{"host-c", func(s int) bool { return s%4 == 3 }, func(int, bool) time.Duration { return -time.Hour }})
	st := NewStats(Limits{})
	recs := merged(t, by)
	for i := range recs {
		st.Add(&recs[i])
	}
	st.Unreadable(ErrVersion)
	st.Unreadable(ErrMalformed)
	rep := &report.Report{Correlation: st.Section()}
	var text, js bytes.Buffer
	if err := report.WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	s := text.String()
	i, j := strings.Index(s, "\nCorrelation"), strings.Index(s, "\nFindings")
	if i < 0 || j < i {
		t.Fatalf("no Correlation section before Findings:\n%s", s)
	}
	golden(t, "section.txt", []byte(s[i+1:j]))
	// The report's "correlation" object, as WriteJSON wrote it (the
	// rest of this empty report is not this package's).
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var obj bytes.Buffer
	if err := json.Indent(&obj, doc["correlation"], "", "  "); err != nil {
		t.Fatal(err)
	}
	golden(t, "section.json", append(obj.Bytes(), '\n'))
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./correlate -run SectionGolden -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden:\n%s", name, got)
	}
}

// TestSectionHostileNames: agent, cluster and topic names come from the
// records: the text report escapes them (no terminal control reaches
// it), the JSON keeps them.
func TestSectionHostileNames(t *testing.T) {
	evil := "\x1b[2J\u202eagent\u009b"
	st := NewStats(Limits{})
	for _, a := range []string{evil, "plain"} {
		p, c := newBuilder(t, a, "10.0.0.1:4000"), newBuilder(t, a, "10.0.0.2:4000")
		p.produce(0, 10, batchAt(0, 7))
		c.fetch(20, batchAt(10, 7))
		for _, rs := range [][]Record{p.records(), c.records()} {
			for i := range rs {
				st.Add(&rs[i])
			}
		}
	}
	rep := &report.Report{Correlation: st.Section()}
	var text, js bytes.Buffer
	if err := report.WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(text.String(), "\x1b\u202e\u009b") {
		t.Errorf("control characters reach the text report:\n%q", text.String())
	}
	if err := report.WriteJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Correlation struct {
			Agents []struct{ Agent string }
		}
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Correlation.Agents) != 2 || back.Correlation.Agents[0].Agent != evil {
		t.Errorf("JSON agents %+v (%v); want the name kept", back.Correlation.Agents, err)
	}
}
