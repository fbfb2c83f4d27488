package expect

import (
	"strings"
	"testing"
)

// report is a JSON report as kfsniff --json writes one, cut to what a
// comparison reads.
const report = `{
  "schema": "kfsniff/v1",
  "totals": {"requests": 2021, "decode_errors": 0, "skipped_bytes": {"gap": 0}},
  "apis": [
    {"key": 1, "name": "Fetch", "version": 12, "requests": 1000},
    {"key": 1, "name": "Fetch", "version": 17, "requests": 1000},
    {"key": 63, "name": "BrokerHeartbeat", "version": 1, "requests": 21}
  ],
  "connections": [
    {"client": "10.0.0.1:5000", "server": "10.0.0.2:9092", "roles": ["raft", "metadata"]}
  ],
  "findings": [
    {"detector": "not-leader-loop", "severity": "error", "summary": "loops on node 1",
     "nodes": [68, 1003], "counts": {"requests": 2000},
     "fields": {"topic": "__cluster_metadata", "partition": 0, "leader_id": 1003, "offset": 9007199254740993,
                "servers": ["a:1", "b:1"], "rate_per_s": 50.4, "client_id": "raft-client-68"}},
    {"detector": "not-leader-loop", "severity": "warning", "summary": "loops on node 2",
     "nodes": [69], "counts": {"requests": 30},
     "fields": {"topic": "__cluster_metadata", "partition": 0, "leader_id": 1002}},
    {"detector": "error-storm", "severity": "info", "summary": "NOT_LEADER_OR_FOLLOWER 2000 times"},
    {"detector": "slow-responses", "severity": "warning", "summary": "24 slow BrokerHeartbeat"}
  ]
}`

func readReport(t *testing.T) *Report {
	t.Helper()
	r, err := ReadReport(strings.NewReader(report))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func parse(t *testing.T, s string) *File {
	t.Helper()
	f, err := Parse([]byte(s))
	if err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	return f
}

// kinds are the kinds of a result's problems, in order.
func kinds(r Result) string {
	var k []string
	for _, p := range r.Problems {
		k = append(k, p.Kind)
	}
	return strings.Join(k, " ")
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"no format", `{"findings": []}`, `no "format"`},
		{"other format", `{"format": "kfsniff-expect/v2"}`, `this kfsniff reads "kfsniff-expect/v1"`},
		{"unknown field", `{"format": "kfsniff-expect/v1", "tolerate": ["x"]}`, `unknown field "tolerate"`},
		{"typo in a finding", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "x", "severity": "error", "feilds": {}}]}`, `unknown field "feilds"`},
		{"severity", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "x", "severity": "fatal"}]}`, `severity "fatal"`},
		{"no detector", `{"format": "kfsniff-expect/v1", "findings": [{"severity": "info"}]}`, "no detector"},
		{"max below", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "x", "severity": "error", "severity_max": "info"}]}`, "not below severity"},
		{"strict", `{"format": "kfsniff-expect/v1", "others": {"strict": "warn"}}`, `others.strict "warn"`},
		{"two values", `{"format": "kfsniff-expect/v1"} {}`, "more than one"},
		{"connection", `{"format": "kfsniff-expect/v1", "connections": [{"client": "a:1"}]}`, "client and server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	rep := readReport(t)
	for _, tc := range []struct {
		name, doc string
		want      string // problem kinds
		line      string // in Lines
	}{
		{"holds", `{"format": "kfsniff-expect/v1",
			"findings": [{"detector": "not-leader-loop", "severity": "error", "nodes": [1003],
			              "fields": {"leader_id": 1003, "topic": "__cluster_metadata", "servers": ["a:1", "b:1"], "offset": 9007199254740993},
			              "counts": {"requests": 2000}, "approx": {"rate_per_s": 50}}],
			"others": {"strict": "error", "allow": []}}`, "", ""},
		// Numbers compare by value, exactly beyond float64's 2^53.
		{"number forms", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "not-leader-loop", "severity": "error",
			"fields": {"leader_id": 1003.0, "partition": 0e0}}], "others": {"strict": "none"}}`, "", ""},
		{"big number off by one", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "not-leader-loop", "severity": "error",
			"fields": {"offset": 9007199254740992}}], "others": {"strict": "none"}}`, Mismatch, "field offset = 9007199254740993, want 9007199254740992"},
		{"list order", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "not-leader-loop", "severity": "error",
			"fields": {"servers": ["b:1", "a:1"]}}], "others": {"strict": "none"}}`, Mismatch, `field servers = ["a:1","b:1"]`},
		// The default others rule: nothing else at warning or above.
		{"default strict", `{"format": "kfsniff-expect/v1", "findings": [
			{"detector": "not-leader-loop", "severity": "error"}, {"detector": "not-leader-loop", "severity": "warning"}]}`,
			Unexpected, "unexpected: warning slow-responses: 24 slow BrokerHeartbeat"},
		{"allow", `{"format": "kfsniff-expect/v1", "findings": [
			{"detector": "not-leader-loop", "severity": "error"}, {"detector": "not-leader-loop", "severity": "warning"}],
			"others": {"strict": "info", "allow": ["slow-responses", "error-storm"]}}`, "", ""},
		{"strict info", `{"format": "kfsniff-expect/v1", "findings": [
			{"detector": "not-leader-loop", "severity": "error"}, {"detector": "not-leader-loop", "severity": "warning"}],
			"others": {"strict": "info", "allow": ["slow-responses"]}}`, Unexpected, "info error-storm"},
		// Severity is a floor; severity_max a ceiling.
		{"severity floor", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "slow-responses", "severity": "info"}], "others": {"strict": "none"}}`, "", ""},
		{"severity ceiling", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "slow-responses", "severity": "info", "severity_max": "info"}], "others": {"strict": "none"}}`,
			Mismatch, "severity warning, want info"},
		{"severity too low", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "slow-responses", "severity": "error"}], "others": {"strict": "none"}}`,
			Mismatch, "severity warning, want error"},
		// Each expectation takes its own finding: the loose one must
		// leave node 68's to the precise one, whatever the order.
		{"distinct findings", `{"format": "kfsniff-expect/v1", "findings": [
			{"detector": "not-leader-loop", "severity": "warning"},
			{"detector": "not-leader-loop", "severity": "error", "nodes": [68]}], "others": {"strict": "none"}}`, "", ""},
		{"one finding for two", `{"format": "kfsniff-expect/v1", "findings": [
			{"detector": "slow-responses", "severity": "warning"}, {"detector": "slow-responses", "severity": "warning"}], "others": {"strict": "none"}}`,
			Missing, "missing:    slow-responses at warning or above"},
		{"nearest of two", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "not-leader-loop", "severity": "warning",
			"fields": {"leader_id": 1002, "topic": "x"}}], "others": {"strict": "none"}}`, Mismatch, `nearest: warning not-leader-loop: loops on node 2`},
		{"no such field", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "error-storm", "severity": "info",
			"fields": {"client_id": "x"}, "counts": {"responses": 1}}], "others": {"strict": "none"}}`, Mismatch, `no count responses, want 1; no field client_id, want "x"`},
		{"approx out", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "not-leader-loop", "severity": "error",
			"approx": {"rate_per_s": 45}}], "others": {"strict": "none"}}`, Mismatch, "rate_per_s = 50.4, want 45 ± 5%"},
		{"approx tolerance", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "not-leader-loop", "severity": "error",
			"approx": {"rate_per_s": 45, "requests": 1900}, "tolerance": 0.12}], "others": {"strict": "none"}}`, "", ""},
		{"approx of a string", `{"format": "kfsniff-expect/v1", "findings": [{"detector": "not-leader-loop", "severity": "error",
			"approx": {"topic": 1}}], "others": {"strict": "none"}}`, Mismatch, "is not a number"},
		{"totals hold", `{"format": "kfsniff-expect/v1", "others": {"strict": "none"},
			"totals": {"requests": {"Fetch": 2000, "Fetch v17": 1000, "BrokerHeartbeat": 20}, "counts": {"decode_errors": 0, "requests": 2000}, "tolerance": 0.05}}`, "", ""},
		{"totals out", `{"format": "kfsniff-expect/v1", "others": {"strict": "none"},
			"totals": {"requests": {"Fetch": 1900, "Fetch v12": 1001, "Produce": 0}, "counts": {"decode_errors": 0}}}`,
			Total + " " + Total, "totals:     Fetch requests: 1900: 2000 in the capture"},
		{"totals unknown", `{"format": "kfsniff-expect/v1", "others": {"strict": "none"},
			"totals": {"counts": {"decode_erors": 0, "skipped_bytes": 0}}}`, Total + " " + Total, "the report has no such total"},
		{"connections", `{"format": "kfsniff-expect/v1", "others": {"strict": "none"}, "connections": [
			{"client": "10.0.0.1:5000", "server": "10.0.0.2:9092", "roles": ["metadata", "raft"]},
			{"client": "10.0.0.1:5001", "server": "10.0.0.2:9092", "roles": []}]}`, Conn, "no such connection"},
		{"roles", `{"format": "kfsniff-expect/v1", "others": {"strict": "none"}, "connections": [
			{"client": "10.0.0.1:5000", "server": "10.0.0.2:9092", "roles": ["raft"]}]}`, Conn, "roles [raft metadata]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(parse(t, tc.doc), rep)
			if got := kinds(res); got != tc.want {
				t.Errorf("problems %q, want %q:\n%s", got, tc.want, strings.Join(res.Lines(), "\n"))
			}
			if res.Held() != (tc.want == "") {
				t.Errorf("Held = %v", res.Held())
			}
			if lines := strings.Join(res.Lines(), "\n"); !strings.Contains(lines, tc.line) {
				t.Errorf("lines lack %q:\n%s", tc.line, lines)
			}
		})
	}
}

// TestFromReport: what --write-expect writes holds for the report it was
// written from, names every finding, keeps fractions approximate, and
// fails when a finding changes.
func TestFromReport(t *testing.T) {
	rep := readReport(t)
	f := FromReport(rep, "x.pcap", nil)
	b, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back := parse(t, string(b))
	if res := Check(back, rep); !res.Held() {
		t.Fatalf("does not hold for its own report:\n%s\n%s", strings.Join(res.Lines(), "\n"), b)
	}
	if len(back.Findings) != 4 || back.Findings[0].Approx["rate_per_s"] != 50.4 || back.Findings[0].Fields["rate_per_s"] != nil {
		t.Errorf("findings written: %+v", back.Findings)
	}
	if back.Totals.Requests["Fetch v17"] != 1000 || back.Totals.Counts["decode_errors"] != 0 || back.Totals.Counts["requests"] != 2021 {
		t.Errorf("totals written: %+v", back.Totals)
	}
	rep.Findings[1].Fields["leader_id"] = 1001
	if res := Check(back, rep); kinds(res) != Mismatch {
		t.Errorf("a changed field: %q", kinds(res))
	}
}
