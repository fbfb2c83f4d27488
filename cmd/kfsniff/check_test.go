package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/expect"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// validateJUnit validates a JUnit file against the published schemas
// (testdata/junit: Jenkins xunit's junit-10.xsd and Ant's as
// windyroad/JUnit-Schema has it) with xmllint, which the script installs
// when it is missing.
func validateJUnit(t *testing.T, path string) {
	t.Helper()
	out, err := exec.Command(filepath.Join("testdata", "junit", "validate.sh"), path).CombinedOutput()
	if err != nil {
		t.Fatalf("%s does not validate against the JUnit schemas (%v):\n%s", path, err, out)
	}
}

// readJUnit reads back what kfsniff check wrote: the failures and errors
// by testcase ("classname/name"), and the suites' counts.
func readJUnit(t *testing.T, path string) (cases map[string]string, tests, failures, errors int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Errors   int `xml:"errors,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Class   string `xml:"classname,attr"`
				Failure *struct {
					Text string `xml:",chardata"`
				} `xml:"failure"`
				Error *struct {
					Text string `xml:",chardata"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	cases = map[string]string{}
	for _, s := range doc.Suites {
		tests, failures, errors = tests+s.Tests, failures+s.Failures, errors+s.Errors
		for _, c := range s.Cases {
			v := "ok"
			if c.Failure != nil {
				v = "failure: " + c.Failure.Text
			}
			if c.Error != nil {
				v = "error: " + c.Error.Text
			}
			cases[c.Class+"/"+c.Name] = v
		}
	}
	return cases, tests, failures, errors
}

// TestCheckFixtures: kfsniff check holds over kfsniff's own fixtures
// (what make test runs): every incident scenario, every catalogue capture
// and the recorded healthy and injected ones have an expectation, each
// holds, and the JUnit file says so and validates.
func TestCheckFixtures(t *testing.T) {
	dir := fixture("")
	junit := filepath.Join(t.TempDir(), "junit.xml")
	start := time.Now()
	code, out, errs := kfsniff(t, "check", "--junit", junit, dir)
	t.Logf("kfsniff check %s: %.1fs", dir, time.Since(start).Seconds())
	if code != exitOK {
		t.Fatalf("exit %d, want 0:\n%s%s", code, out, errs)
	}
	// Every capture of these folders is checked, none skipped for want
	// of an expectation.
	cases, _, err := findCases(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, c := range cases {
		checked[c.Capture] = true
	}
	var want []string
	for _, sc := range gen.Scenarios() {
		want = append(want, fixture(filepath.Join(gen.ScenarioDir, sc.Name)))
	}
	for _, f := range gen.Catalogue() {
		want = append(want, fixture(f.Name))
	}
	for _, pat := range []string{"recorded-*.pcap", "injected/*.pcap"} {
		ps, _ := filepath.Glob(fixture(pat))
		want = append(want, ps...)
	}
	for _, p := range want {
		if !checked[p] {
			t.Errorf("%s has no expectation: kfsniff check does not hold it to anything", p)
		}
	}
	if len(want) < 40 {
		t.Errorf("only %d captures expected to be checked", len(want))
	}
	for _, c := range cases {
		if !strings.Contains(out, c.Capture) {
			t.Errorf("the table does not list %s:\n%s", c.Capture, out)
		}
	}
	if strings.Contains(out, "FAIL") || strings.Contains(out, "ERROR") || !strings.Contains(out, "0 did not hold, 0 could not be checked") {
		t.Errorf("output:\n%s", out)
	}
	validateJUnit(t, junit)
	got, tests, failures, errors := readJUnit(t, junit)
	if tests != len(cases) || failures != 0 || errors != 0 || len(got) != len(cases) {
		t.Errorf("JUnit: %d tests (%d cases), %d failures, %d errors; want %d, 0, 0", tests, len(got), failures, errors, len(cases))
	}
	if got[fixture("scenarios")+"/observer-fetch-loop.pcap"] != "ok" {
		t.Errorf("JUnit does not name scenarios/observer-fetch-loop.pcap as held: %v", got)
	}
}

// copyDir copies the regular files of src (not recursively) into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// editExpect rewrites an expectation file through edit, on the JSON as a
// generic document (what a person editing it sees).
func editExpect(t *testing.T, path string, edit func(doc map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	if b, err = json.MarshalIndent(doc, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// findingOf returns the expectation of detector in doc's findings.
func findingOf(t *testing.T, doc map[string]any, detector string) map[string]any {
	t.Helper()
	for _, f := range doc["findings"].([]any) {
		if m := f.(map[string]any); m["detector"] == detector {
			return m
		}
	}
	t.Fatalf("no expectation of %s", detector)
	return nil
}

// TestCheckReportsEachWayOfFailing: a copy of the scenarios with one
// expectation made wrong in each way: each is reported with exit 4, with
// what is wrong, and named in the JUnit file (which validates); the
// others still hold.
func TestCheckReportsEachWayOfFailing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "incidents")
	copyDir(t, fixture(gen.ScenarioDir), dir)
	type broken struct {
		capture string
		edit    func(doc map[string]any)
		want    []string // in the output and in the JUnit failure
	}
	cases := []broken{
		{"observer-fetch-loop.pcap", func(doc map[string]any) {
			// A finding the capture does not have.
			doc["findings"] = append(doc["findings"].([]any), map[string]any{"detector": "throttled", "severity": "warning"})
		}, []string{"missing:    throttled at warning or above", "no finding of that detector"}},
		{"mm2-replay.pcap", func(doc map[string]any) {
			// Its one finding no longer listed: under the strict rule
			// it is unexpected.
			doc["findings"] = []any{}
		}, []string{"unexpected: error duplicate-batches: src.mm2_src-0: 257 batches", "no duplicate-batches finding at warning or above is expected"}},
		{"election-stall.pcap", func(doc map[string]any) {
			findingOf(t, doc, "leader-election-stall")["fields"].(map[string]any)["topic"] = "other-topic"
		}, []string{"mismatch:   leader-election-stall error", "nearest: error leader-election-stall: test-topic partitions", `field topic = "test-topic", want "other-topic"`}},
		{"healthy-group.pcap", func(doc map[string]any) {
			// 116 Produce requests were sent: 100 is 16% off, more than
			// the 10% allowed; 110 of the 117 Fetch requests is within.
			doc["totals"] = map[string]any{"requests": map[string]any{"Produce": 100, "Fetch": 110}, "tolerance": 0.1}
		}, []string{"totals:     Produce requests: 100 ± 10%: 116 in the capture"}},
	}
	for _, b := range cases {
		editExpect(t, filepath.Join(dir, strings.TrimSuffix(b.capture, ".pcap")+expect.Suffix), b.edit)
	}

	junit := filepath.Join(t.TempDir(), "report.xml")
	code, out, errs := kfsniff(t, "check", "--junit", junit, dir)
	if code != exitExpect {
		t.Fatalf("exit %d, want %d:\n%s%s", code, exitExpect, out, errs)
	}
	validateJUnit(t, junit)
	got, tests, failures, errors := readJUnit(t, junit)
	n := len(gen.Scenarios())
	if tests != n || failures != len(cases) || errors != 0 {
		t.Errorf("JUnit: %d tests, %d failures, %d errors; want %d, %d, 0", tests, failures, errors, n, len(cases))
	}
	if strings.Contains(out, "Fetch requests") {
		t.Errorf("Fetch requests within the tolerance reported:\n%s", out)
	}
	if !strings.Contains(out, "4 held, 4 did not hold, 0 could not be checked") {
		t.Errorf("summary line:\n%s", out)
	}
	for _, b := range cases {
		key := dir + "/" + b.capture
		if !strings.HasPrefix(got[key], "failure: ") {
			t.Errorf("JUnit: %s is %q, want a failure", key, got[key])
		}
		if !strings.Contains(out, "--- FAIL "+key) {
			t.Errorf("output does not name %s as failed:\n%s", key, out)
		}
		for _, w := range b.want {
			if !strings.Contains(got[key], w) {
				t.Errorf("JUnit failure of %s lacks %q:\n%s", b.capture, w, got[key])
			}
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q", w)
			}
		}
	}
	for _, sc := range gen.Scenarios() {
		if slices.ContainsFunc(cases, func(b broken) bool { return b.capture == sc.Name }) {
			continue
		}
		if key := dir + "/" + sc.Name; got[key] != "ok" {
			t.Errorf("JUnit: %s is %q, want ok", key, got[key])
		}
	}
	// --expect alone says the same, with exit 4.
	code, out, _ = kfsniff(t, "--expect", filepath.Join(dir, "election-stall"+expect.Suffix), "-r", filepath.Join(dir, "election-stall.pcap"))
	if code != exitExpect || !strings.Contains(out, "does not hold") || !strings.Contains(out, `field topic = "test-topic", want "other-topic"`) {
		t.Errorf("--expect: exit %d:\n%s", code, out)
	}
}

// TestCheckCannotCheck: an expectation without its capture, one that
// does not parse, a capture that is a Git LFS pointer: each could not be
// checked (an error in JUnit, exit 4), the rest still is.
func TestCheckCannotCheck(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, fixture(gen.ScenarioDir), dir)
	if err := os.Remove(filepath.Join(dir, "mm2-replay.pcap")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "healthy-group"+expect.Suffix), []byte(`{"format": "kfsniff-expect/v1", "findings": [], "others": {"strict": "warning"}, "tolerate": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	pointer := "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n"
	if err := os.WriteFile(filepath.Join(dir, "election-stall.pcap"), []byte(pointer), 0o644); err != nil {
		t.Fatal(err)
	}
	junit := filepath.Join(dir, "junit.xml")
	code, out, errs := kfsniff(t, "check", "--junit", junit, dir)
	if code != exitExpect {
		t.Fatalf("exit %d, want %d:\n%s%s", code, exitExpect, out, errs)
	}
	validateJUnit(t, junit)
	got, _, failures, errors := readJUnit(t, junit)
	if failures != 0 || errors != 3 {
		t.Errorf("JUnit: %d failures, %d errors; want 0, 3", failures, errors)
	}
	for key, want := range map[string]string{
		dir + "/mm2-replay" + expect.Suffix:    "no capture beside it",
		dir + "/healthy-group.pcap":            `unknown field "tolerate"`,
		dir + "/election-stall.pcap":           "Git LFS pointer",
		dir + "/observer-fetch-loop.pcap":      "ok",
		dir + "/replica-divergence.pcap":       "ok",
		dir + "/kraft-fenced-while-alive.pcap": "ok",
	} {
		if !strings.Contains(got[key], want) {
			t.Errorf("JUnit: %s is %q, want %q", key, got[key], want)
		}
	}
}

// TestCheckUsage: what kfsniff check refuses before analysing anything.
func TestCheckUsage(t *testing.T) {
	empty := t.TempDir()
	paired := t.TempDir()
	orig, err := os.ReadFile(fixture("scenarios/mm2-replay.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	exp, err := os.ReadFile(fixture("scenarios/mm2-replay.expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(paired, "a.pcap"), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(paired, "a.expect.json"), exp, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no directory", []string{"check"}, "no directory"},
		{"missing directory", []string{"check", filepath.Join(empty, "nope")}, "no such file"},
		{"a file", []string{"check", fixture("basic.pcap")}, "not a directory"},
		{"no expectation", []string{"check", empty}, "no NAME.expect.json"},
		{"bad jobs", []string{"check", "--jobs", "0", empty}, "--jobs"},
		{"unknown flag", []string{"check", "--nope", empty}, "unknown flag"},
		// It replaced the capture with the XML, exit 0.
		{"junit over a capture", []string{"check", "--junit", filepath.Join(paired, "a.pcap"), paired}, "--junit"},
		{"junit over an expectation", []string{"check", "--junit", filepath.Join(paired, "a.expect.json"), paired}, "--junit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := kfsniff(t, tc.args...)
			if code != exitUsage || out != "" || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, out, errs, tc.want)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(paired, "a.pcap")); !bytes.Equal(b, orig) {
		t.Error("check --junit changed the capture it checked")
	}
	code, out, _ := kfsniff(t, "check", "--help")
	if code != exitOK || !strings.Contains(out, "--junit") || !strings.Contains(out, "NAME.expect.json") {
		t.Errorf("check --help: exit %d\n%s", code, out)
	}
}

// TestCheckSharedHealthy: the public captures of ../shared/captures are
// healthy traffic (pipeline's TestHealthyTrafficIsQuiet): given healthy
// expectations beside links to them, kfsniff check holds; the three whose
// clients use versions Kafka 4.0 removed must show that warning, and
// only that.
func TestCheckSharedHealthy(t *testing.T) {
	shared, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "captures"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(shared); err != nil {
		t.Skipf("no shared captures: %v", err)
	}
	kafka40 := map[string]bool{"go-sniffer/kafka.pcap": true, "deepflow/00-produce-v2.pcap": true, "arkime/kafka.pcap": true}
	dir := t.TempDir()
	paths, _ := filepath.Glob(filepath.Join(shared, "*", "*.pcap*"))
	for _, p := range paths {
		rel, _ := filepath.Rel(shared, p)
		link := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, link); err != nil {
			t.Fatal(err)
		}
		f := &expect.File{Format: expect.Format, Capture: rel, Findings: []expect.Finding{}, Others: expect.Others{Strict: "warning"},
			Totals: &expect.Totals{Counts: map[string]int64{"decode_errors": 0}}}
		if kafka40[filepath.ToSlash(rel)] {
			f.Findings = append(f.Findings, expect.Finding{Detector: "kafka40-removed-versions", Severity: "warning", SeverityMax: "warning"})
		}
		b, err := f.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		stem := strings.TrimSuffix(strings.TrimSuffix(link, ".pcap"), ".pcapng")
		if err := os.WriteFile(stem+expect.Suffix, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(paths) < 14 {
		t.Fatalf("only %d shared captures", len(paths))
	}
	code, out, errs := kfsniff(t, "check", dir)
	if code != exitOK || !strings.Contains(out, "0 did not hold, 0 could not be checked") {
		t.Errorf("exit %d:\n%s%s", code, out, errs)
	}
}

// A file name under the checked folder never drives the terminal: an
// expectation without its capture was named raw in the details line.
func TestCheckCleansFileNames(t *testing.T) {
	dir := t.TempDir()
	exp, err := os.ReadFile(fixture("scenarios/mm2-replay.expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x\x1b[31mred"+expect.Suffix), exp, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := kfsniff(t, "check", dir)
	if code != exitExpect || !strings.Contains(out, "no capture beside it") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 4 and the missing capture", code, out, errs)
	}
	if strings.ContainsRune(out+errs, 0x1b) {
		t.Errorf("an escape reached the terminal:\n%q", out)
	}
}
