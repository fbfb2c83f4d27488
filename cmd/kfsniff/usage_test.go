package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrorsGolden pins, for each bad combination of flags, the exit
// code and every byte kfsniff writes: which check speaks first, in what
// words, and with which code. testdata/usage-errors.txt is the golden
// (-update rewrites it); the temporary directory reads as $TMP.
func TestUsageErrorsGolden(t *testing.T) {
	tmp := t.TempDir()
	in := fixture("basic.pcap")
	at := func(name string) string { return filepath.Join(tmp, name) }
	exp := at("basic.expect.json")
	if b, err := os.ReadFile(fixture("basic.expect.json")); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(exp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	badExp := at("bad.expect.json")
	if err := os.WriteFile(badExp, []byte(`{"format":"kfsniff-expect/v1","analysis":{"options":["nosuch.rule=1"]},"findings":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	kafka := "kafka://127.0.0.1:1/t"
	cases := []struct {
		name string
		args []string
	}{
		{"no input", nil},
		{"unknown flag", []string{"--no-such-flag"}},
		{"flag without value", []string{"-r"}},
		{"bad flag value", []string{"-r", in, "-c", "many"}},
		{"file as argument", []string{"-r", in, in}},
		{"bad filter", []string{"-r", in, "port", "nine"}},
		{"fail-on", []string{"-r", in, "--fail-on", "panic"}},
		{"read and live", []string{"-r", in, "-i", "lo"}},
		{"negative snaplen", []string{"-r", in, "-s", "-1"}},
		{"negative buffer", []string{"-r", in, "-B", "-1"}},
		{"negative count", []string{"-r", in, "-c", "-1"}},
		{"negative duration", []string{"-r", in, "--duration", "-1s"}},
		{"write stdout", []string{"-r", in, "-w", "-"}},
		{"tui and no-tui", []string{"-r", in, "--tui", "--no-tui"}},
		{"max-frame", []string{"-r", in, "--max-frame", "0"}},
		{"workers", []string{"-r", in, "--workers", "-1"}},
		{"budgets", []string{"-r", in, "--buffer-budget", "-1"}},
		{"stdin twice", []string{"-r", "-", "-r", "-"}},
		{"metrics form", []string{"-r", in, "--metrics-addr", "nowhere"}},
		{"metrics port", []string{"-r", in, "--metrics-addr", ":99999"}},
		{"expect and write-expect", []string{"-r", in, "--expect", exp, "--write-expect", at("w.json")}},
		{"expect missing", []string{"-r", in, "--expect", at("none.json")}},
		{"expect bad options", []string{"-r", in, "--expect", badExp}},
		{"write-expect live", []string{"-i", "lo", "--write-expect", at("w.json")}},
		{"write-expect frames", []string{"-r", in, "--frames", "--write-expect", at("w.json")}},
		{"write-expect count", []string{"-r", in, "-c", "5", "--write-expect", at("w.json")}},
		{"write-expect stdout", []string{"-r", in, "--write-expect", "-"}},
		{"expect json", []string{"-r", in, "--expect", exp, "--json"}},
		{"write-expect onto input", []string{"-r", in, "--write-expect", in}},
		{"html stdout", []string{"-r", in, "--html", "-"}},
		{"html no dir", []string{"-r", in, "--html", at("no/dir/x.html")}},
		{"html onto input", []string{"-r", in, "--html", in}},
		{"html a directory", []string{"-r", in, "--html", tmp}},
		{"tui frames", []string{"-r", in, "--tui", "--frames"}},
		{"tui json", []string{"-r", in, "--tui", "--json"}},
		{"frames filters without frames", []string{"-r", in, "-v", "--api", "Fetch", "--errors"}},
		{"live settings without -i", []string{"-r", in, "-s", "100", "-p"}},
		{"write onto input", []string{"-r", in, "-w", in}},
		{"two outputs one file", []string{"-r", in, "-w", at("x"), "--html", at("x")}},
		{"write-expect onto expect", []string{"-r", in, "--write-expect", exp, "-w", exp}},
		{"write-expect no dir", []string{"-r", in, "--write-expect", at("no/dir/x.json")}},
		{"finding zero", []string{"-r", in, "--finding", "0"}},
		{"records flags without records", []string{"-r", in, "--records-topic", "t"}},
		{"records frames", []string{"-r", in, "--records", "--frames"}},
		{"records expect", []string{"-r", in, "--records", "--write-expect", at("w.json")}},
		{"records max bytes", []string{"-r", in, "--records", "--records-max-bytes", "0"}},
		{"records partition", []string{"-r", in, "--records", "--records-partition", "-1"}},
		{"finding live", []string{"-i", "lo", "--finding", "1"}},
		{"finding stdin", []string{"-r", "-", "--finding", "1"}},
		{"records from", []string{"-r", in, "--records", "--records-from", "nowhere"}},
		{"records offsets", []string{"-r", in, "--records", "--records-offsets", "x-y"}},
		{"records format", []string{"-r", in, "--records", "--records-format", "%Q"}},
		{"finding beyond", []string{"-r", in, "--finding", "99"}},
		{"export flag without export", []string{"-r", in, "--agent-id", "a"}},
		{"export url", []string{"-r", in, "--export", "http://x/t"}},
		{"export findings topic name", []string{"-r", in, "--export", kafka, "--export-findings-topic", "a b"}},
		{"export findings topic same", []string{"-r", in, "--export", kafka, "--export-findings-topic", "t"}},
		{"export buffer", []string{"-r", in, "--export", kafka, "--export-buffer", "0"}},
		{"export codec", []string{"-r", in, "--export", kafka, "--export-compression", "brotli"}},
		{"export flush", []string{"-r", in, "--export", kafka, "--export-flush-timeout", "-1s"}},
		{"export config missing", []string{"-r", in, "--export", kafka, "--agent-id", "a", "--export-config", at("none.properties")}},
		{"export sasl", []string{"-r", in, "--export", kafka, "--agent-id", "a", "--export-sasl-mechanism", "GSSAPI"}},
		{"correlate flag without kafka", []string{"-r", in, "--group", "g"}},
		{"correlate and file", []string{"-r", kafka, "-r", in}},
		{"correlate url", []string{"-r", "kafka://"}},
		{"correlate filter", []string{"-r", kafka, "port", "9092"}},
		{"correlate write", []string{"-r", kafka, "-w", at("x.pcap")}},
		{"correlate records", []string{"-r", kafka, "--records"}},
		{"correlate export", []string{"-r", kafka, "--export", "kafka://127.0.0.1:1/u"}},
		{"correlate window", []string{"-r", kafka, "--reorder-window", "-1s"}},
		{"correlate session", []string{"-r", kafka, "--group-session-timeout", "0s"}},
		{"correlate timeout", []string{"-r", kafka, "--read-timeout", "0s"}},
		{"correlate config", []string{"-r", kafka, "--read-config", at("none.properties")}},
		{"ports", []string{"-r", in, "--ports", "99999"}},
		{"tls keylog missing", []string{"-r", in, "--tls-keylog", at("none.keys")}},
		{"api", []string{"-r", in, "--frames", "--api", "NoSuchAPI"}},
		{"option form", []string{"-r", in, "-o", "bogus"}},
		{"option rule", []string{"-r", in, "-o", "nosuch.rule=1"}},
		{"option value", []string{"-r", in, "-o", "not-leader-loop.min-duration=abc"}},
		{"max findings", []string{"-r", in, "--max-findings", "0"}},
		{"missing capture", []string{"-r", at("none.pcap")}},
		{"writer dir", []string{"-r", in, "-w", at("no/dir/x.pcap")}},
		{"several errors: count, workers", []string{"-r", in, "-c", "-1", "--workers", "-1"}},
		{"several errors: modes, records", []string{"-r", in, "-v", "--records-topic", "t"}},
		{"several errors: export, correlate", []string{"-r", in, "--agent-id", "a", "--group", "g"}},
		{"several errors: option, ports", []string{"-r", in, "-o", "bogus", "--ports", "99999"}},
		{"several errors: records format, export", []string{"-r", in, "--records", "--records-format", "%Q", "--export", "http://x"}},
		{"fail-on met", []string{"-r", fixture("refused.pcap"), "--fail-on", "info"}},
		{"finding beyond the report", []string{"-r", fixture("refused.pcap"), "--finding", "3"}},
	}
	var b strings.Builder
	for _, tc := range cases {
		code, stdout, stderr := kfsniff(t, tc.args...)
		fmt.Fprintf(&b, "## %s\n$ kfsniff %s\nexit %d\n", tc.name, strings.Join(tc.args, " "), code)
		if tc.name != "fail-on met" {
			fmt.Fprintf(&b, "stdout:\n%s", stdout)
		}
		fmt.Fprintf(&b, "stderr:\n%s\n", stderr)
	}
	got := strings.ReplaceAll(b.String(), tmp, "$TMP")
	golden := filepath.Join("testdata", "usage-errors.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestUsageErrorsGolden -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("usage errors differ from %s (go test -update rewrites it; read the diff first):\n%s", golden, firstLineDiff(string(want), got))
	}
}

// firstLineDiff is the first differing line of two texts, with its neighbours.
func firstLineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			lo := max(0, i-3)
			return fmt.Sprintf("line %d:\nwant %q\ngot  %q\ncontext (want):\n%s", i+1, wl, gl, strings.Join(w[lo:min(len(w), i+3)], "\n"))
		}
	}
	return "(same lines)"
}
