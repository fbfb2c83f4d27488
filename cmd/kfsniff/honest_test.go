package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHonestHeaders: a run that read less than its input (-c, a broken
// file) or a filtered one says so at the top of the text report, in the
// HTML banner and in JSON (capture.partial, capture.filter); a whole,
// unfiltered run says nothing of the kind.
func TestHonestHeaders(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		partial string // capture.partial.stop, "-" for none
		filter  string
		text    []string
	}{
		{"whole", []string{"-r", fixture("basic.pcap")}, "-", "", nil},
		{"count", []string{"-r", fixture("basic.pcap"), "-c", "10"}, "count", "",
			[]string{"PARTIAL: stopped after -c 10 packets, before the end of the input."}},
		{"filter", []string{"-r", fixture("sll.pcap"), "ip"}, "-", "ip",
			[]string{`FILTERED: only packets matching "ip" were analysed.`}},
		{"count and filter", []string{"-r", fixture("basic.pcap"), "-c", "5", "port 9092"}, "count", "port 9092",
			[]string{"PARTIAL: stopped after -c 5 packets", `FILTERED: only packets matching "port 9092" were analysed.`}},
		{"broken file", []string{"-r", fixture("hostile/truncated.pcap")}, "input error", "",
			[]string{"PARTIAL: an input broke before its end (see Capture)."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			html := filepath.Join(t.TempDir(), "r.html")
			code, out, errs := kfsniff(t, append([]string{"--html", html}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			head := strings.SplitN(out, "\n\n", 3)
			top := ""
			if len(head) > 1 {
				top = head[1]
			}
			for _, want := range tc.text {
				if !strings.Contains(top, want) {
					t.Errorf("report's top %q lacks %q", top, want)
				}
			}
			if len(tc.text) == 0 && (strings.Contains(out, "PARTIAL") || strings.Contains(out, "FILTERED")) {
				t.Errorf("a whole, unfiltered run says PARTIAL or FILTERED:\n%s", out)
			}
			page, err := os.ReadFile(html)
			if err != nil {
				t.Fatal(err)
			}
			banner := string(page[:strings.Index(string(page), "</header>")])
			if got := strings.Contains(banner, `id="partial"`); got != (tc.partial != "-") {
				t.Errorf("HTML banner partial %v, want %v", got, tc.partial != "-")
			}
			if got := strings.Contains(banner, `id="filter"`); got != (tc.filter != "") {
				t.Errorf("HTML banner filter %v, want %v", got, tc.filter != "")
			}

			_, js, errs := kfsniff(t, append([]string{"--json"}, tc.args...)...)
			var doc struct {
				Capture struct {
					Partial *struct {
						Stop  string `json:"stop"`
						Count int64  `json:"count"`
					} `json:"partial"`
					Filter *struct {
						Expression string `json:"expression"`
					} `json:"filter"`
				} `json:"capture"`
			}
			if err := json.Unmarshal([]byte(js), &doc); err != nil {
				t.Fatalf("%v: %s", err, errs)
			}
			switch p := doc.Capture.Partial; {
			case tc.partial == "-" && p != nil:
				t.Errorf("capture.partial %+v on a whole run", *p)
			case tc.partial != "-" && (p == nil || p.Stop != tc.partial):
				t.Errorf("capture.partial %+v, want stop %q", p, tc.partial)
			}
			switch f := doc.Capture.Filter; {
			case tc.filter == "" && f != nil:
				t.Errorf("capture.filter %+v on an unfiltered run", *f)
			case tc.filter != "" && (f == nil || f.Expression != tc.filter):
				t.Errorf("capture.filter %+v, want %q", f, tc.filter)
			}
		})
	}
}
