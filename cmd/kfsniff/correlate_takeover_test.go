package main

import (
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestCorrelateGroupTakeover: three correlators of a group with
// --until-end (issue 28 point 3); A, a process of its own, is SIGKILLed
// at a moment of the group's life; B and C, the survivors, take over its
// partitions once the session timeout evicts it: before its mark by the
// rebalance, after it (A's partitions marked read, its report never
// written) in a report of their own after theirs. Both exit 0, and
// every finding is reported once across them.
func TestCorrelateGroupTakeover(t *testing.T) {
	t.Parallel()
	url, _ := newSink(t, 6)
	shipAll(t, url)
	solo, _ := correlateJSON(t, groupArgs(url, "solo")[:7]...)
	want := summaries(solo.Findings)
	if len(want) < 2 {
		t.Fatalf("one correlator alone found %v: want the divergence and the replay", want)
	}
	bin := buildKfsniff(t)
	for _, moment := range []string{"before its first records", "mid-way", "after reading to the end, before its report"} {
		t.Run(strings.ReplaceAll(moment, " ", "-"), func(t *testing.T) {
			t.Parallel()
			group := "take-" + strings.Fields(moment)[0]
			args := append(groupArgs(url, group), "--group-wait", "10s")
			var outs, errs [2]syncBuffer
			codes := make([]int, 2)
			var wg sync.WaitGroup
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					codes[i] = run(context.Background(), args, strings.NewReader(""), &outs[i], &errs[i])
				}()
				waitFor(t, &errs[i], "reading partitions", 20*time.Second)
			}
			var outA, errA syncBuffer
			a := exec.Command(bin, args...)
			a.Stdout, a.Stderr = &outA, &errA
			if err := a.Start(); err != nil {
				t.Fatal(err)
			}
			defer a.Process.Kill()
			waitFor(t, &errA, "reading partitions", 20*time.Second)
			switch moment {
			case "mid-way":
				time.Sleep(300 * time.Millisecond)
			case "after reading to the end, before its report":
				waitFor(t, &errA, "read to their end", 30*time.Second)
			}
			if err := a.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			a.Wait()
			held := regexp.MustCompile(`reading partitions ([0-9,]+)`).FindStringSubmatch(errA.String())[1]
			ended := make(chan struct{})
			go func() { wg.Wait(); close(ended) }()
			select {
			case <-ended:
			case <-time.After(90 * time.Second):
				t.Fatalf("the survivors did not end:\nB: %s\nC: %s", errs[0].String(), errs[1].String())
			}
			// A, killed after its mark, may have written its report
			// already (and committed its offsets, or the survivors
			// would take its partitions over and report them twice:
			// the window docs/export.md states): what it reported
			// counts.
			var got []corrFinding
			aReported := false
			if out := outA.String(); out != "" {
				var r corrReport
				if err := json.Unmarshal([]byte(out), &r); err == nil {
					got = append(got, r.Findings...)
					aReported = true
					t.Logf("A wrote its report before it was killed: %d findings", len(r.Findings))
				}
			}
			// Each survivor's output: its report, then one for each
			// member's partitions it took over.
			taken := 0
			for i := range 2 {
				dec := json.NewDecoder(strings.NewReader(outs[i].String()))
				for n := 0; ; n++ {
					var r corrReport
					if err := dec.Decode(&r); err == io.EOF && n > 0 {
						break
					} else if err != nil {
						t.Fatalf("survivor %d: report %d: not JSON: %v\n%s", i, n, err, errs[i].String())
					}
					if (r.Capture.Takeover != nil) != (n > 0) {
						t.Errorf("survivor %d: report %d: takeover %+v", i, n, r.Capture.Takeover)
					}
					if n > 0 {
						taken++
						t.Logf("survivor %d took over %+v", i, *r.Capture.Takeover)
					}
					got = append(got, r.Findings...)
				}
			}
			if codes[0] != exitOK || codes[1] != exitOK {
				t.Errorf("A killed %s (held %s): exit %v\nB: %s\nC: %s", moment, held, codes, errs[0].String(), errs[1].String())
			}
			if !slices.Equal(summaries(got), want) {
				t.Errorf("A killed %s (held %s); A, B and C reported:\n  %s\nwant every finding once:\n  %s\nB: %s\nC: %s", moment, held,
					strings.Join(summaries(got), "\n  "), strings.Join(want, "\n  "), errs[0].String(), errs[1].String())
			}
			// Killed after its mark and before its report, A's
			// partitions can only come back by a takeover.
			if moment == "after reading to the end, before its report" && !aReported && taken == 0 {
				t.Errorf("A killed before its report, and no survivor took its partitions over:\nB: %s\nC: %s", errs[0].String(), errs[1].String())
			}
		})
	}
}

// TestCorrelateGroupUncovered: a member that never ends by itself (no
// --until-end) holds partitions; B, with --until-end, reads its own and
// waits --group-wait for the others, then names them on stderr and in
// the report and exits 1, not "No problems found".
func TestCorrelateGroupUncovered(t *testing.T) {
	t.Parallel()
	url, _ := newSink(t, 6)
	shipAll(t, url)
	bin := buildKfsniff(t)
	var errA syncBuffer
	a := exec.Command(bin, "-r", url, "--group", "stay", "--group-session-timeout", "2s", "--json", "--duration", "2m")
	a.Stderr = &errA
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { a.Process.Kill(); a.Wait() }()
	waitFor(t, &errA, "reading partitions", 20*time.Second)

	var outB, errB syncBuffer
	code := run(context.Background(), append(groupArgs(url, "stay"), "--group-wait", "3s"), strings.NewReader(""), &outB, &errB)
	if code != exitFailure {
		t.Fatalf("B: exit %d, want %d:\n%s", code, exitFailure, errB.String())
	}
	kept := regexp.MustCompile(`reading partitions ([0-9,]+)`).FindStringSubmatch(errA.String())[1]
	gone := regexp.MustCompile(`partitions ([0-9,]+) of corr went to another`).FindStringSubmatch(errA.String())
	if gone == nil {
		t.Fatalf("A gave B nothing:\n%s", errA.String())
	}
	// A's partitions now: those it was given less those it gave B.
	var left []string
	for _, p := range strings.Split(kept, ",") {
		if !slices.Contains(strings.Split(gone[1], ","), p) {
			left = append(left, p)
		}
	}
	leftS := strings.Join(left, ",")
	if !strings.Contains(errB.String(), "partitions "+leftS+" of corr were read to their end by no member") {
		t.Errorf("B's stderr does not name A's partitions %s:\n%s", leftS, errB.String())
	}
	if !strings.Contains(outB.String(), `"uncovered_partitions": [`) {
		t.Errorf("B's report does not name the partitions not covered:\n%.600s", outB.String())
	}
	var rep struct {
		Capture struct {
			Partial struct {
				Uncovered []int32 `json:"uncovered_partitions"`
			} `json:"partial"`
		} `json:"capture"`
	}
	if err := json.Unmarshal([]byte(outB.String()), &rep); err != nil {
		t.Fatal(err)
	}
	if got := partList(rep.Capture.Partial.Uncovered); got != leftS {
		t.Errorf("report: uncovered_partitions %s, want %s", got, leftS)
	}
	// The text report says so too, not "No problems found".
	var outT, errT syncBuffer
	if code := run(context.Background(), append(groupArgs(url, "stay")[:7], "--group-wait", "2s"), strings.NewReader(""), &outT, &errT); code != exitFailure {
		t.Fatalf("text: exit %d:\n%s", code, errT.String())
	}
	if strings.Contains(outT.String(), "No problems found (") || !strings.Contains(outT.String(), "PARTIAL: export partitions") {
		t.Errorf("text report:\n%.600s", outT.String())
	}
}
