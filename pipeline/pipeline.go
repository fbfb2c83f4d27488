// Package pipeline wires the parts together: capture files into the flows
// analyzer, its events into the report collector and any extra handlers,
// and out comes a Report. The command, the tests and the benchmarks all run
// the analysis through it, so they run the same code.
package pipeline

import (
	"context"
	"errors"
	"io"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// Options configure a run.
type Options struct {
	Flows flows.Config
	// Handlers receive the analyzer's events besides the collector.
	Handlers []flows.Handler
	// Detectors, if set, receive every event and report findings at
	// the end.
	Detectors *detectors.Set
	// Warn is called for each input that broke before its end (the
	// packets before the break are analysed). May be nil.
	Warn func(error)
}

// Result is what a run produced.
type Result struct {
	Report      *report.Report
	Analyzer    *flows.Analyzer
	Interrupted bool
}

// Run reads every packet of files (merged by time when there are several),
// analyses them and builds the report. It stops early, still reporting,
// when ctx is cancelled.
func Run(ctx context.Context, files []*capture.File, opt Options) *Result {
	collector := report.NewCollector()
	handlers := append([]flows.Handler{collector}, opt.Handlers...)
	if opt.Detectors != nil {
		handlers = append(handlers, opt.Detectors)
	}
	an := flows.New(opt.Flows, handlers...)
	perFile := make([]int64, len(files))
	fileErr := make([]string, len(files))
	var src capture.Source
	if len(files) == 1 {
		src = files[0]
	} else {
		srcs := make([]capture.Source, len(files))
		for i, f := range files {
			srcs[i] = f
		}
		src = capture.Merge(srcs...)
	}
	res := &Result{Analyzer: an}
	var p capture.Packet
	for n := 0; len(files) > 0; n++ {
		if n&1023 == 0 && ctx.Err() != nil {
			res.Interrupted = true
			break
		}
		err := src.Next(&p)
		if err == io.EOF {
			break
		}
		if err != nil {
			var re *capture.ReadError
			if errors.As(err, &re) && re.File < len(fileErr) && fileErr[re.File] == "" {
				fileErr[re.File] = err.Error()
			}
			if opt.Warn != nil {
				opt.Warn(err)
			}
			if len(files) == 1 {
				break
			}
			continue
		}
		perFile[p.File]++
		an.Packet(&p)
	}
	an.Close()
	rfiles := make([]report.File, len(files))
	for i, f := range files {
		links := make([]string, len(f.Links))
		for j, l := range f.Links {
			links[j] = l.String()
		}
		rfiles[i] = report.File{Name: f.Name, Format: f.Format, LinkTypes: links, Packets: perFile[i], Error: fileErr[i]}
	}
	var findings []detectors.Finding
	if opt.Detectors != nil {
		st := an.Stats()
		findings = opt.Detectors.Findings(&detectors.Env{Nodes: an.Nodes(), Conns: an.Conns(), Ports: opt.Flows.Ports, Start: st.FirstTime, End: st.LastTime})
	}
	res.Report = collector.Build(rfiles, an.Stats(), an.Conns(), an.Nodes(), findings)
	return res
}
