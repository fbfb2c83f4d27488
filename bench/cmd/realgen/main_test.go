package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
)

// analyse runs what `kfsniff -r path --json` runs and returns the report.
func analyse(t *testing.T, path string) *report.Report {
	t.Helper()
	f, err := capture.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dets, err := detectors.NewSet(all.Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{
		Flows:     flows.DefaultConfig(),
		Detectors: dets,
		Warn:      func(err error) { t.Errorf("warning: %v", err) },
	})
	return res.Report
}

func api(r *report.Report, name string) report.API {
	var sum report.API
	for _, a := range r.APIs {
		if a.Name == name {
			sum.Requests += a.Requests
			sum.Responses += a.Responses
			sum.ErrorResponses += a.ErrorResponses
			if sum.Errors == nil {
				sum.Errors = map[string]int64{}
			}
			for k, v := range a.Errors {
				sum.Errors[k] += v
			}
		}
	}
	return sum
}

// TestRealgen records small versions of both captures and checks, through
// kfsniff's own analysis, that they are what the benchmark says they are:
// bulk has one Produce request per record, every one answered without
// error, and Fetch responses carrying them back; storm has at least the
// asked number of Produce refused with NOT_LEADER_OR_FOLLOWER and the
// clients' Metadata refreshes; both frame and decode cleanly.
func TestRealgen(t *testing.T) {
	if testing.Short() {
		t.Skip("records kgo against kfake")
	}
	dir := t.TempDir()
	const records, refusals = 600, 800
	if code := run([]string{"-o", dir, "-records", "600", "-record-size", "3000", "-storm-produce", "800"}); code != 0 {
		t.Fatalf("realgen exited %d", code)
	}
	for _, name := range []string{"bulk", "storm"} {
		if _, err := os.Stat(filepath.Join(dir, name+".pcap.tmp")); err == nil {
			t.Errorf("%s.pcap.tmp left behind", name)
		}
	}

	bulk := analyse(t, filepath.Join(dir, "bulk.pcap"))
	tot := bulk.Totals
	if tot.DecodeErrors != 0 || tot.FramingErrors != 0 || tot.Gaps != 0 || tot.UnmatchedResponses != 0 {
		t.Errorf("bulk: not clean: %+v", tot)
	}
	if p := api(bulk, "Produce"); p.Requests != records || p.Responses != records || p.ErrorResponses != 0 {
		t.Errorf("bulk: Produce %d requests, %d responses, %d with errors; want %d, one per record, none failed", p.Requests, p.Responses, p.ErrorResponses, records)
	}
	if f := api(bulk, "Fetch"); f.Responses == 0 {
		t.Error("bulk: no Fetch response: the group did not read")
	}
	if j := api(bulk, "JoinGroup"); j.Responses == 0 {
		t.Error("bulk: no JoinGroup: no consumer group")
	}

	storm := analyse(t, filepath.Join(dir, "storm.pcap"))
	tot = storm.Totals
	if tot.DecodeErrors != 0 || tot.FramingErrors != 0 || tot.Gaps != 0 || tot.UnmatchedResponses != 0 {
		t.Errorf("storm: not clean: %+v", tot)
	}
	p := api(storm, "Produce")
	if p.Responses < refusals || p.ErrorResponses < refusals || p.Errors["NOT_LEADER_OR_FOLLOWER"] < refusals {
		t.Errorf("storm: Produce %d responses, %d with errors, errors %v; want at least %d refused with NOT_LEADER_OR_FOLLOWER", p.Responses, p.ErrorResponses, p.Errors, refusals)
	}
	if p.ErrorResponses != p.Responses {
		t.Errorf("storm: %d of %d Produce responses carry no error", p.Responses-p.ErrorResponses, p.Responses)
	}
	if m := api(storm, "Metadata"); m.Responses < 10 {
		t.Errorf("storm: %d Metadata responses: the clients did not refresh", m.Responses)
	}
}
