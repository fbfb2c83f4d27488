package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors/detectortest"
)

// update, set by -update, rewrites golden files under testdata/ (detectortest, which this
// binary imports, registers the flag).
var update = detectortest.Update

func kfsniff(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func fixture(name string) string { return filepath.Join("..", "..", "fixtures", "pcaps", name) }

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// pcapHeader is a classic little-endian pcap header for link type lt.
func pcapHeader(lt uint32) []byte {
	h := make([]byte, 24)
	binary.LittleEndian.PutUint32(h[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], 262144)
	binary.LittleEndian.PutUint32(h[20:], lt)
	return h
}

func TestUnusableInput(t *testing.T) {
	cases := []struct {
		name string
		path string
		want string // in the one-line message
	}{
		{"missing file", filepath.Join(t.TempDir(), "nope.pcap"), "no such file"},
		{"text file", writeFile(t, "notes.txt", []byte("this is not a capture\n")), `not a pcap or pcapng capture (starts with text "this is not a captur")`},
		{"empty file", writeFile(t, "empty.pcap", nil), "empty file"},
		{"bad magic", writeFile(t, "bad.pcap", []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4}), "bytes de ad be ef"},
		{"unsupported link type", writeFile(t, "wifi.pcap", pcapHeader(105)), "unsupported link type 105 (IEEE802_11)"},
		{"directory", t.TempDir(), "is a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := kfsniff(t, "-r", tc.path)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d", code, exitUsage)
			}
			if out != "" {
				t.Errorf("stdout not empty: %q", out)
			}
			lines := strings.Split(strings.TrimRight(errs, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "kfsniff: ") || !strings.Contains(lines[0], tc.want) {
				t.Errorf("stderr = %q; want one line containing %q", errs, tc.want)
			}
			if !strings.Contains(errs, filepath.Base(tc.path)) && tc.name != "directory" {
				t.Errorf("message does not name the file: %q", errs)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--no-such-flag"},
		{"-r", fixture("basic.pcap"), "extra"},
		{"-r", fixture("basic.pcap"), "--ports", "99999"},
		{"-r", fixture("basic.pcap"), "--frames", "--api", "NoSuchAPI"},
		{"-r", "-", "-r", "-"},
	} {
		code, _, errs := kfsniff(t, args...)
		if code != exitUsage || !strings.HasPrefix(errs, "kfsniff: ") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 with a message", args, code, errs)
		}
	}
}

func TestTruncatedCaptureIsAnalysedUpToTheBreak(t *testing.T) {
	data, err := os.ReadFile(fixture("basic.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, "cut.pcap", data[:len(data)-10])
	code, out, errs := kfsniff(t, "-r", p, "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	if !strings.Contains(errs, "truncated capture") || !strings.Contains(errs, "file ends inside packet") {
		t.Errorf("stderr should say where the file broke: %q", errs)
	}
	var r struct {
		Capture struct {
			Files []struct{ Error string } `json:"files"`
		} `json:"capture"`
		Totals struct{ Requests int } `json:"totals"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Capture.Files[0].Error == "" || r.Totals.Requests != 9 {
		t.Errorf("report: file error %q, requests %d; want the break recorded and all 9 requests", r.Capture.Files[0].Error, r.Totals.Requests)
	}
}

// TestReportGolden pins the text report and the JSON document of a fixture;
// refresh with `go test ./cmd/kfsniff -update` and review the diff.
func TestReportGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"basic.txt", []string{"-r", fixture("basic.pcap")}},
		{"basic.json", []string{"-r", fixture("basic.pcap"), "--json"}},
		{"loss-frames.txt", []string{"-r", fixture("loss.pcap"), "--frames"}},
		{"midstream.txt", []string{"-r", fixture("midstream.pcap")}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			code, out, errs := kfsniff(t, tc.args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errs)
			}
			// Paths differ between machines only in the fixture prefix,
			// which is the same relative path everywhere.
			path := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./cmd/kfsniff -update)", err)
			}
			if out != string(want) {
				t.Errorf("output differs from %s (run with -update and review):\n%s", path, out)
			}
		})
	}
}

func TestJSONSchema(t *testing.T) {
	code, out, _ := kfsniff(t, "-r", fixture("pipelining.pcap"), "--json")
	if code != exitOK {
		t.Fatal(code)
	}
	var r struct {
		Schema  string         `json:"schema"`
		Capture map[string]any `json:"capture"`
		Totals  map[string]any `json:"totals"`
		APIs    []struct {
			Key       int16              `json:"key"`
			Name      string             `json:"name"`
			Version   int16              `json:"version"`
			Requests  int                `json:"requests"`
			Responses int                `json:"responses"`
			Errors    map[string]int     `json:"errors"`
			Latency   map[string]float64 `json:"latency_ms"`
		} `json:"apis"`
		Connections []map[string]any `json:"connections"`
		Findings    []any            `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Schema != "kfsniff/v1" || r.Capture == nil || r.Totals == nil || r.Findings == nil || len(r.Connections) != 2 {
		t.Fatalf("schema %q, capture %v, totals %v, findings %v, %d connections", r.Schema, r.Capture != nil, r.Totals != nil, r.Findings, len(r.Connections))
	}
	for _, a := range r.APIs {
		if a.Name == "Produce" && a.Version == 9 && (a.Requests != 7 || a.Responses != 5) {
			t.Errorf("Produce v9: %d requests %d responses, want 7 and 5 (two acks=0)", a.Requests, a.Responses)
		}
		for _, q := range []string{"p50", "p99", "max"} {
			if _, ok := a.Latency[q]; !ok {
				t.Errorf("%s v%d: latency_ms has no %s", a.Name, a.Version, q)
			}
		}
		if a.Errors == nil {
			t.Errorf("%s v%d: errors must be an object, not null", a.Name, a.Version)
		}
	}
	for _, c := range r.Connections {
		if c["client"] == nil || c["server"] == nil {
			t.Errorf("connection without client/server: %v", c)
		}
	}
}

func TestFramesJSONLinesAndFilters(t *testing.T) {
	code, out, _ := kfsniff(t, "-r", fixture("basic.pcap"), "--frames", "--json")
	if code != exitOK {
		t.Fatal(code)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	n := 0
	for sc.Scan() {
		var l struct {
			Type   string `json:"type"`
			Packet uint64 `json:"packet"`
			API    string `json:"api"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %d is not JSON: %v", n+1, err)
		}
		if l.Packet == 0 || l.API == "" || (l.Type != "request" && l.Type != "response") {
			t.Errorf("line %d: %+v", n+1, l)
		}
		n++
	}
	if n != 18 {
		t.Errorf("%d frame lines, want 18 (9 requests, 9 responses)", n)
	}
	_, out, _ = kfsniff(t, "-r", fixture("basic.pcap"), "--frames", "--api", "Fetch")
	if got := strings.Count(out, "\n"); got != 12 || strings.Contains(out, "Produce") {
		t.Errorf("--api Fetch: %d lines, want 12 Fetch lines:\n%s", got, out)
	}
	_, out, _ = kfsniff(t, "-r", fixture("basic.pcap"), "--frames", "--conn", "99")
	if out != "" {
		t.Errorf("--conn 99 should select nothing, got:\n%s", out)
	}
	_, out, _ = kfsniff(t, "-r", fixture("basic.pcap"), "--frames", "--errors")
	if out != "" {
		t.Errorf("--errors on an error-free capture should print nothing, got:\n%s", out)
	}
}

func TestSeveralFilesOneTimeline(t *testing.T) {
	code, out, errs := kfsniff(t, "-r", fixture("basic.pcap"), "-r", fixture("ipv6.pcap"), "--json")
	if code != exitOK {
		t.Fatal(errs)
	}
	var r struct {
		Totals struct {
			KafkaConnections int `json:"kafka_connections"`
			Requests         int `json:"requests"`
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Totals.KafkaConnections != 2 || r.Totals.Requests != 18 {
		t.Errorf("two files: %+v, want 2 connections and 18 requests", r.Totals)
	}
}

func TestStdin(t *testing.T) {
	data, err := os.ReadFile(fixture("basic.pcap.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-r", "-"}, bytes.NewReader(data), &out, &errb)
	if code != exitOK || !strings.Contains(out.String(), "9 requests, 9 responses") {
		t.Errorf("stdin gzip: exit %d, stderr %s\n%s", code, errb.String(), out.String())
	}
}

func TestFailOn(t *testing.T) {
	scenario := func(name string) string { return filepath.Join("..", "..", "fixtures", "pcaps", "scenarios", name) }
	for _, tc := range []struct {
		file  string
		level string
		want  int
	}{
		{scenario("observer-fetch-loop.pcap"), "warning", exitFindings},
		{scenario("mm2-replay.pcap"), "warning", exitFindings},
		{scenario("election-stall.pcap"), "error", exitFindings},
		{scenario("replica-divergence.pcap"), "warning", exitFindings},
		{scenario("healthy-group.pcap"), "warning", exitOK},
		{scenario("replica-identity.pcap"), "warning", exitOK},
		{scenario("replica-identity.pcap"), "info", exitFindings},
		{fixture("recorded-kgo-kfake-group.pcap"), "warning", exitOK},
		{fixture("basic.pcap"), "info", exitOK},
		// Before a Kafka 4.0 upgrade: kafka-python's Produce v1 fails the
		// job, librdkafka's Metadata v2 and Produce v3 pass it.
		{filepath.Join("..", "..", "..", "shared", "captures", "go-sniffer", "kafka.pcap"), "warning", exitFindings},
		{filepath.Join("..", "..", "..", "shared", "captures", "ndpi", "kafka.pcapng"), "warning", exitOK},
	} {
		if strings.Contains(tc.file, filepath.Join("shared", "captures")) {
			if _, err := os.Stat(tc.file); err != nil {
				t.Logf("skipping %s: no shared captures beside the repository (%v)", tc.file, err)
				continue
			}
		}
		code, out, errs := kfsniff(t, "-r", tc.file, "--fail-on", tc.level)
		if code != tc.want {
			t.Errorf("%s --fail-on %s: exit %d, want %d\n%s%s", filepath.Base(tc.file), tc.level, code, tc.want, errs, out)
		}
	}
	if code, _, _ := kfsniff(t, "-r", fixture("basic.pcap"), "--fail-on", "fatal"); code != exitUsage {
		t.Errorf("--fail-on fatal: exit %d, want 2", code)
	}
}

func TestListDetectorsAndSettings(t *testing.T) {
	code, out, _ := kfsniff(t, "--list-detectors")
	if code != exitOK {
		t.Fatal(code)
	}
	for _, id := range []string{"not-leader-loop", "stalled-fetch", "liveness-without-replication", "duplicate-batches",
		"replica-divergence", "leader-election-stall", "connection-refused", "advertised-listener-conflict",
		"error-storm", "throttled", "unanswered-requests", "slow-responses"} {
		if !strings.Contains(out, id+" (up to ") {
			t.Errorf("--list-detectors does not describe %s", id)
		}
	}
	if !strings.Contains(out, "-o ") {
		t.Errorf("--list-detectors shows no thresholds:\n%s", out)
	}
	if code, _, errs := kfsniff(t, "-r", fixture("basic.pcap"), "-o", "no-such.detector=1"); code != exitUsage || !strings.Contains(errs, "unknown detector setting") {
		t.Errorf("-o with an unknown setting: exit %d, %q", code, errs)
	}
	if code, _, _ := kfsniff(t, "-r", fixture("basic.pcap"), "-o", "not-leader-loop"); code != exitUsage {
		t.Errorf("-o without a value: exit %d, want 2", code)
	}
}

// TestSameAsReportGoldens: the command prints, byte for byte, what the
// goldens of report/golden_test.go hold, which that test renders through
// pipeline and report without the command, so those goldens show what
// users see. Run from the repository root, as the goldens name captures.
func TestSameAsReportGoldens(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	slow := []string{"-o", "slow-responses.factor=2", "-o", "slow-responses.min-latency-s=0.001", "-o", "slow-responses.min-count=1"}
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"scenarios/observer-fetch-loop.pcap.report.txt", []string{"-r", "fixtures/pcaps/scenarios/observer-fetch-loop.pcap"}},
		{"scenarios/election-stall.pcap.report.json", []string{"-r", "fixtures/pcaps/scenarios/election-stall.pcap", "--json"}},
		{"scenarios/replica-divergence.pcap.frames.txt", []string{"-r", "fixtures/pcaps/scenarios/replica-divergence.pcap", "--frames"}},
		{"basic.pcap.frames.jsonl", []string{"-r", "fixtures/pcaps/basic.pcap", "--frames", "--json"}},
		{"loss.pcap.frames-v.txt", []string{"-r", "fixtures/pcaps/loss.pcap", "--frames", "-v"}},
		{"basic.pcap.frames-v.jsonl", []string{"-r", "fixtures/pcaps/basic.pcap", "--frames", "--json", "-v"}},
		{"recorded-kgo-kfake-group.pcap.slow-responses.report.txt", append([]string{"-r", "fixtures/pcaps/recorded-kgo-kfake-group.pcap"}, slow...)},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("report", "testdata", "golden", filepath.FromSlash(tc.golden)))
			if err != nil {
				t.Fatalf("%v (go test ./report -update writes it)", err)
			}
			code, out, errs := kfsniff(t, tc.args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if out != string(want) {
				t.Errorf("kfsniff %s differs from report/testdata/golden/%s: the golden test no longer renders as the command does", strings.Join(tc.args, " "), tc.golden)
			}
		})
	}
	code, _, errs := kfsniff(t, "-r", "fixtures/pcaps/hostile/text.pcap")
	want, err := os.ReadFile(filepath.Join("report", "testdata", "golden", "hostile", "text.pcap.error.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if code != exitUsage || errs != "kfsniff: "+string(want) {
		t.Errorf("unusable capture: exit %d, stderr %q; want exit 2 and %q", code, errs, "kfsniff: "+string(want))
	}
}
