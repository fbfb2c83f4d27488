package all_test

import (
	"os"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/detectors/detectortest"
)

// update, set by -update, rewrites docs/detectors.md (detectortest, which this
// binary imports, registers the flag).
var update = detectortest.Update

// policy is the severity policy every rule applies (detectors/policy.go).
const policy = `## Severity policy

Severity follows what clients felt, not what the wire shows:

- **info**: something an operator may want to know. No client was held up, or for less than 3 s;
  or a normal event: a leader election clients follow within a second, the MEMBER_ID_REQUIRED of a
  first JoinGroup, a consumer idle at the high watermark, a periodic metadata refresh.
- **warning**: a failure clients felt (requests failing or waiting) for 3 s or more; or a
  misconfiguration that will bite (a listener advertised by two nodes, a bootstrap server that refuses
  every connection, request versions the next Kafka release removes).
- **error**: a failure that lasted 30 s or more, or that had not healed when the capture ended after
  10 s or more (detectors.Grade).

Intensity and an unknown end (detectors.Episode): a failure still happening when the capture ends has an
unknown length, not a short one. Its finding says so ("still failing at the end (seen for 0.7 s)") and it is
graded on what it shows as well as its length, whatever the error code:

- a client retrying faster than any client's backoff allows, 50 failing answers or more at 100 a second
  or more (the lowest library default backoff, 100 ms, allows a few a second per broker), is a warning
  however short: a client with no backoff loads the broker for every other client;
- three clients or more still failing at the end, after 1 s or more of it, is a warning.

Rules that grade an episode this way say so in their description (error-storm, fetch-session-churn).

A rule's thresholds below say where its boundaries lie; each rule is tested on both sides of them.
`

// TestDetectorsDoc keeps docs/detectors.md equal to what --list-detectors
// prints; refresh with `go test ./detectors/all -run DetectorsDoc -update`.
func TestDetectorsDoc(t *testing.T) {
	const path = "../../docs/detectors.md"
	as := all.Analyzers()
	want := "# kfsniff detectors\n\nGenerated from `kfsniff --list-detectors` (refresh: `go test ./detectors/all -run DetectorsDoc -update`).\n" +
		"Change a parameter with `-o detector.param=value` (a duration as `10s` or `250ms`); `--fail-on warning` makes kfsniff\n" +
		"exit 3 when a finding at or above that severity exists.\n\n" + policy + "\n```\n" + detectors.Describe(as) + "```\n\n" + all.ErrorCodesDoc()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Fatalf("docs/detectors.md is stale (run go test ./detectors/all -run DetectorsDoc -update): %v", err)
	}
	if n := strings.Count(want, " (up to "); n != len(as) || n < 12 {
		t.Errorf("%d detectors documented", n)
	}
	names := map[string]bool{}
	for _, a := range as {
		if a.Doc == "" {
			t.Errorf("%s: every detector documents what it finds", a.Name)
		}
		if names[a.Name] {
			t.Errorf("%s listed twice", a.Name)
		}
		names[a.Name] = true
	}
}

// TestErrorCodesComplete: every code kerr knows has a row, each row a
// rule that exists, and a recording or a reason for none.
func TestErrorCodesComplete(t *testing.T) {
	rules := map[string]bool{}
	for _, a := range all.Analyzers() {
		rules[a.Name] = true
	}
	rows := all.ErrorCodes()
	if len(rows) < 100 {
		t.Fatalf("%d rows: kerr lists more codes", len(rows))
	}
	seen := map[int16]bool{}
	for _, r := range rows {
		seen[r.Code] = true
		if !rules[r.Rule] {
			t.Errorf("code %d: rule %q does not exist", r.Code, r.Rule)
		}
		switch {
		case r.Recording == "" && r.NotRecorded == "":
			t.Errorf("code %d: no recording and no reason", r.Code)
		case r.Recording != "" && r.Severity == "":
			t.Errorf("code %d: a recording without the severity it gives", r.Code)
		}
	}
	for _, code := range []int16{1, 6, 10, 47, 90, 129} {
		if !seen[code] {
			t.Errorf("code %d missing", code)
		}
	}
}
