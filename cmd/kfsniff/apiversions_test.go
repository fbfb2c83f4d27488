package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/internal/termcheck"
	"github.com/kfsniff/kfsniff/report"
)

// fallbackPcap is kgo (ApiVersions v5 first) recorded against a broker that
// knows ApiVersions up to v3, which refuses v5 in the v0 layout.
var fallbackPcap = fixture("recorded-kgo-kfake-apiversions-fallback.pcap")

// TestApiVersionsFallbackFrames pins the --frames lines of the fallback
// fixture (refresh with `go test ./cmd/kfsniff -update`): each refusal
// shows UNSUPPORTED_VERSION, the v0 layout and the version to retry with,
// under the request's version; the retries and the traffic after them
// show the broker's lower versions.
func TestApiVersionsFallbackFrames(t *testing.T) {
	code, out, errs := kfsniff(t, "-r", fallbackPcap, "--frames")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	path := filepath.Join("testdata", "apiversions-fallback-frames.txt")
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
	if strings.Contains(out, "decode-error") || !strings.Contains(out, "ApiVersions v5 resp corr=0 latency=") ||
		!strings.Contains(out, "err=UNSUPPORTED_VERSION (v0 layout) ApiVersions=v0-v3") {
		t.Errorf("the refusals are not shown as such:\n%s", out)
	}
	if err := termcheck.Safe([]byte(out)); err != nil {
		t.Error(err)
	}
}

// TestApiVersionsFallbackJSONLines: in JSON Lines a refusal keeps the
// request's version and says the layout its body was read in; other
// responses have no layout_version.
func TestApiVersionsFallbackJSONLines(t *testing.T) {
	code, out, errs := kfsniff(t, "-r", fallbackPcap, "--frames", "--json", "-v", "--api", "ApiVersions")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var refused, answered int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var l report.FrameLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if l.Type != "response" {
			continue
		}
		body, _ := l.Body.(map[string]any)
		switch {
		case l.Version == 5 && l.Layout != nil && *l.Layout == 0 && l.Errors["UNSUPPORTED_VERSION"] == 1 &&
			l.DecodeError == "" && body["Version"] == 0.0 && body["ErrorCode"] == 35.0:
			refused++
		case l.Version == 3 && l.Layout == nil && len(l.Errors) == 0 && body["Version"] == 3.0:
			answered++
		default:
			t.Errorf("unexpected response line: %s", line)
		}
	}
	if refused != 4 || answered != 6 {
		t.Errorf("%d refused v5, %d answered v3; want 4 and 6 (the fixture's sidecar)", refused, answered)
	}
}
