package pipeline

import (
	"math"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
)

// Real clients kept waiting by a broker, recorded by fixtures/clients/waits
// against kfake: throttled by quota, never answered, answered slowly. Each
// capture must give its rule's finding at the severity the policy gives
// how long the clients waited, with the counts the recorder decoded from
// the same bytes with kmsg (the sidecar's "observed"), not from kfsniff.

// felt is the policy's grade of a wait clients felt: info under 3 s.
func felt(d time.Duration, ongoing bool) detectors.Severity { return detectors.Grade(d, ongoing) }

func TestThrottledRecordings(t *testing.T) {
	for _, name := range []string{"throttled-kgo", "throttled-sarama"} {
		t.Run(name, func(t *testing.T) {
			var o struct {
				ClientID  string  `json:"client_id"`
				Throttled int64   `json:"throttled_responses"`
				TotalMs   int64   `json:"throttle_ms_total"`
				MaxMs     int64   `json:"throttle_ms_max"`
				HeldS     float64 `json:"held_s"`
				Ongoing   bool    `json:"ongoing"`
				Pauses    int     `json:"pauses_900ms"`
			}
			path := faultSidecar(t, name, &o)
			if o.Throttled == 0 || o.Pauses == 0 {
				t.Fatalf("the recording is not of a client waiting out throttles: %+v", o)
			}
			r := analyseWithDetectors(t, path)
			f := &findingsOf(t, r.Findings, "throttled", 1)[0]
			if want := felt(seconds(o.HeldS), o.Ongoing); f.Severity != want {
				t.Errorf("severity %s, want %s (held up %.3f s, ongoing %v): %s", f.Severity, want, o.HeldS, o.Ongoing, f.Summary)
			}
			for k, n := range map[string]int64{"throttled_responses": o.Throttled, "throttle_ms_total": o.TotalMs, "throttle_ms_max": o.MaxMs} {
				if f.Counts[k] != n {
					t.Errorf("%s = %d, the sidecar says %d", k, f.Counts[k], n)
				}
			}
			if held := f.Counts["held_ms"]; math.Abs(float64(held)-o.HeldS*1000) > 2 {
				t.Errorf("held up %d ms, the sidecar says %.3f s", held, o.HeldS)
			}
			var id string
			var ongoing bool
			fieldAs(t, f, "client_id", &id)
			fieldAs(t, f, "ongoing", &ongoing)
			if id != o.ClientID || ongoing != o.Ongoing {
				t.Errorf("client id %q ongoing %v, the sidecar says %q %v", id, ongoing, o.ClientID, o.Ongoing)
			}
			onlyInfoBesides(t, r.Findings, "throttled")
		})
	}
}

func TestUnansweredRecordings(t *testing.T) {
	for _, name := range []string{"unanswered-kgo", "unanswered-sarama"} {
		t.Run(name, func(t *testing.T) {
			var o struct {
				Unanswered []struct {
					WaitedS float64 `json:"waited_s"`
				} `json:"unanswered"`
				LongestS      float64 `json:"longest_wait_s"`
				AnsweredAfter int     `json:"answered_after"`
			}
			path := faultSidecar(t, name, &o)
			if len(o.Unanswered) == 0 || o.AnsweredAfter == 0 {
				t.Fatalf("the recording is not of a client giving up on requests never answered and going on: %+v", o)
			}
			r := analyseWithDetectors(t, path)
			var f *detectors.Finding
			for _, x := range findingsOf(t, r.Findings, "unanswered-requests", 1) {
				if _, ok := x.Fields["server"]; ok {
					f = &x
				}
			}
			if f == nil {
				t.Fatalf("no unanswered-requests finding for a server:%s", describe(r.Findings))
			}
			// Each waited until its connection closed: healed by the
			// close, not ongoing at the end.
			if want := felt(seconds(o.LongestS), false); f.Severity != want {
				t.Errorf("severity %s, want %s (waited %.3f s): %s", f.Severity, want, o.LongestS, f.Summary)
			}
			n := int64(len(o.Unanswered))
			if f.Counts["requests"] != n || f.Counts["closed"] != n {
				t.Errorf("requests %d closed %d, the sidecar has %d unanswered until their connection closed", f.Counts["requests"], f.Counts["closed"], n)
			}
			var waited float64
			fieldAs(t, f, "waited_s", &waited)
			if !near(waited, o.LongestS) {
				t.Errorf("waited %.3f s, the sidecar says %.3f s", waited, o.LongestS)
			}
			onlyInfoBesides(t, r.Findings, "unanswered-requests")
		})
	}
}

func TestSlowRecordings(t *testing.T) {
	for _, name := range []string{"slow-kgo", "slow-sarama"} {
		t.Run(name, func(t *testing.T) {
			var o struct {
				Slow     int64   `json:"slow_3s"`
				LongestS float64 `json:"longest_s"`
				MedianS  float64 `json:"median_s"`
			}
			path := faultSidecar(t, name, &o)
			if o.Slow < 3 {
				t.Fatalf("the recording has %d Produce answered after 3 s or more, want a pattern of 3", o.Slow)
			}
			r := analyseWithDetectors(t, path)
			f := &findingsOf(t, r.Findings, "slow-responses", 1)[0]
			// Produce is held for nothing: the whole latency is waited.
			if want := felt(seconds(o.LongestS), false); f.Severity != want {
				t.Errorf("severity %s, want %s (longest %.3f s): %s", f.Severity, want, o.LongestS, f.Summary)
			}
			if f.Counts["slow"] < o.Slow {
				t.Errorf("%d slow, the sidecar has %d Produce answered after 3 s or more", f.Counts["slow"], o.Slow)
			}
			var waited, median float64
			var api string
			fieldAs(t, f, "waited_ms", &waited)
			fieldAs(t, f, "p50_ms", &median)
			fieldAs(t, f, "api", &api)
			if api != "Produce" || !near(waited/1000, o.LongestS) || math.Abs(median/1000-o.MedianS) > 0.001 {
				t.Errorf("%s waited %.3f ms median %.3f ms, the sidecar says Produce, %.3f s, %.3f s", api, waited, median, o.LongestS, o.MedianS)
			}
			onlyInfoBesides(t, r.Findings, "slow-responses")
		})
	}
}
