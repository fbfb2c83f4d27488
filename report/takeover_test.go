package report

import (
	"bytes"
	"strings"
	"testing"
)

// TestTextTakeover: the report a correlator of a group writes for the
// partitions it took over says so at its top, with the member and the
// offsets, the member's id sanitised.
func TestTextTakeover(t *testing.T) {
	r := &Report{Schema: "test"}
	r.Capture.Takeover = &Takeover{Group: "corr", Member: "kfsniff-correlate-1\x1b[2J",
		Partitions: []TakenOver{{Partition: 2, From: 0, To: 533}, {Partition: 5, From: 10, To: 14}}}
	var b bytes.Buffer
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	want := "TAKEN OVER: export partitions 2 (offsets 0-533), 5 (offsets 10-14), read to their end by member kfsniff-correlate-1"
	if out := b.String(); !strings.Contains(out, want) || strings.Contains(out, "\x1b") {
		t.Errorf("text report:\n%s\nwant a line beginning %q, sanitised", out, want)
	}
}
