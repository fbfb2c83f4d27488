package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
)

// recordsConfig is what the --records flags ask for.
type recordsConfig struct {
	on         bool
	format     string
	topics     []string
	partitions []int32
	offsets    string
	finding    int
	base64     bool
	maxBytes   int

	fs *pflag.FlagSet
	w  *report.RecordWriter
}

// addRecordFlags registers the --records flags.
func addRecordFlags(fs *pflag.FlagSet) *recordsConfig {
	rc := &recordsConfig{fs: fs}
	fs.BoolVar(&rc.on, "records", false, "print the records of Produce requests and Fetch responses (decompressed) instead of the report; with --json: JSON Lines")
	fs.StringVar(&rc.format, "records-format", "", "with --records: the line `FORMAT`, as kcat -f: "+report.RecordFormatHelp+" (default \""+report.DefaultRecordFormat+"\")")
	fs.StringArrayVar(&rc.topics, "records-topic", nil, "with --records: only the records of `TOPIC`; repeatable")
	fs.Int32SliceVar(&rc.partitions, "records-partition", nil, "with --records: only the records of these `partitions` (comma list)")
	fs.StringVar(&rc.offsets, "records-offsets", "", "with --records: only offsets in `RANGE` (FROM-TO, FROM-, -TO or one offset)")
	fs.IntVar(&rc.finding, "finding", 0, "print the records behind finding `N` of the report (its evidence's exchanges; the duplicated batches of duplicate-batches): analyses the files, then reads them again (implies --records)")
	fs.BoolVar(&rc.base64, "records-base64", false, "with --records: show bytes that are not printable text in base64 instead of hex")
	fs.IntVar(&rc.maxBytes, "records-max-bytes", 4096, "with --records: show at most `N` bytes of each key, value and header value")
	return rc
}

// validate checks the record flags against the rest of the command line
// and builds the writer (nil when --records is off).
func (rc *recordsConfig) validate(cfg *Config, stdout io.Writer) error {
	if rc.fs.Changed("finding") {
		if rc.finding <= 0 {
			return fmt.Errorf("--finding counts from 1 (the report's first finding), got %d", rc.finding)
		}
		rc.on = true
	}
	if !rc.on {
		if rc.format != "" || len(rc.topics) > 0 || len(rc.partitions) > 0 || rc.offsets != "" || rc.base64 {
			return errors.New("--records-format, --records-topic, --records-partition, --records-offsets and --records-base64 go with --records")
		}
		return nil
	}
	switch {
	case cfg.Frames:
		return errors.New("--records and --frames are two views: give one")
	case cfg.TUI:
		return errors.New("--records prints to standard output; the TUI shows the records of an exchange in its detail pane")
	case cfg.Expect.File != "" || cfg.Expect.Write != "":
		return errors.New("--records prints records, --expect and --write-expect compare the report: give one")
	case rc.maxBytes <= 0:
		return fmt.Errorf("--records-max-bytes must be positive, got %d", rc.maxBytes)
	case slices.ContainsFunc(rc.partitions, func(p int32) bool { return p < 0 }):
		return fmt.Errorf("--records-partition takes partition numbers (0 and up), got %v", rc.partitions)
	case rc.finding > 0 && cfg.Live.Interface != "":
		return errors.New("--finding reads the capture twice (analysis, then records): give -r FILE, not -i")
	}
	if rc.finding > 0 {
		for _, f := range cfg.Files {
			if f == "-" {
				return errors.New("--finding reads the capture twice: standard input (-r -) cannot be read again; give a file")
			}
		}
	}
	opt := report.RecordOptions{Format: rc.format, JSON: cfg.JSON, Base64: rc.base64, MaxBytes: rc.maxBytes, MaxFrame: cfg.MaxFrame,
		Stream: cfg.Live.Interface != ""}
	opt.Filter.Topics, opt.Filter.Partitions = rc.topics, rc.partitions
	if rc.offsets != "" {
		if err := report.ParseOffsets(rc.offsets, &opt.Filter); err != nil {
			return fmt.Errorf("--records-offsets: %v", err)
		}
	}
	w, err := report.NewRecordWriter(stdout, opt)
	if err != nil {
		return fmt.Errorf("--records-format: %v", err)
	}
	rc.w = w
	cfg.NoTUI = true
	return nil
}

// handlers are what the first (or only) pass adds: the writer, unless
// --finding waits for the analysis to name the exchanges.
func (rc *recordsConfig) handlers() []flows.Handler {
	if rc.w == nil || rc.finding > 0 {
		return nil
	}
	return []flows.Handler{rc.w}
}

// finish prints the records of finding N (a second pass over the files),
// flushes the output and says on stderr what could not be shown; the
// report itself is not printed. It returns the exit code.
func (rc *recordsConfig) finish(ctx context.Context, cfg *Config, opt pipeline.Options, res *pipeline.Result, stderr io.Writer) int {
	if rc.finding > 0 {
		fs := res.Report.Findings
		if rc.finding > len(fs) {
			fmt.Fprintf(stderr, "kfsniff: --finding %d: the report has %d findings\n", rc.finding, len(fs))
			return exitUsage
		}
		f := &fs[rc.finding-1]
		rc.w.SetFinding(findingFilter(f))
		fmt.Fprintf(stderr, "kfsniff: finding %d (%s): the records of the %d exchanges its evidence names: %s\n",
			rc.finding, report.Clean(f.Detector), len(f.Evidence), report.CleanText(f.Summary))
		files := make([]*capture.File, 0, len(cfg.Files))
		defer func() {
			for _, f := range files {
				f.Close()
			}
		}()
		for i, name := range cfg.Files {
			f, err := capture.Open(name, i)
			if err != nil {
				fmt.Fprintf(stderr, "kfsniff: reading again for --finding: %v\n", err)
				return exitFailure
			}
			files = append(files, f)
		}
		o := opt
		o.Detectors, o.Sinks, o.Progress, o.LiveFindings = nil, nil, nil, nil
		o.Handlers = []flows.Handler{rc.w}
		o.Warn = nil // said in the first pass
		pipeline.Run(ctx, files, o)
	}
	if err := rc.w.Flush(); err != nil {
		fmt.Fprintf(stderr, "kfsniff: writing output: %v\n", err)
		return exitFailure
	}
	st := rc.w.Stats()
	if rc.finding > 0 && st.Records == 0 {
		if len(rc.topics) > 0 || len(rc.partitions) > 0 || rc.offsets != "" {
			fmt.Fprintf(stderr, "kfsniff: finding %d: no record of the exchanges its evidence names passes --records-topic, --records-partition and --records-offsets\n", rc.finding)
		} else {
			fmt.Fprintf(stderr, "kfsniff: finding %d: the exchanges its evidence names carry no records (of its topic and partition)\n", rc.finding)
		}
	}
	if st.NotKept > 0 {
		fmt.Fprintf(stderr, "kfsniff: warning: the records of %d Produce requests are not shown (the first at packet %s): their frames were no longer kept when their responses came (flows' bounds)\n",
			st.NotKept, packetRef(st.FirstNotKept))
	}
	if st.Undecoded > 0 {
		fmt.Fprintf(stderr, "kfsniff: warning: the records of %d batches could not be listed in full (the first at packet %s: %s)\n",
			st.Undecoded, packetRef(st.FirstUndecoded), report.Clean(st.UndecodedErr))
	}
	return failOn(cfg.FailOn, res.Report, stderr)
}

// findingFilter is the records behind a finding: the exchanges of its
// evidence packets, in its topic and partition when it names them.
func findingFilter(f *detectors.Finding) report.RecordFilter {
	var flt report.RecordFilter
	flt.Packets = map[report.PacketRef]bool{}
	for _, e := range f.Evidence {
		flt.Packets[report.PacketRef{File: e.File, Packet: e.Packet}] = true
	}
	if t, ok := f.Fields["topic"].(string); ok && t != "" {
		flt.Topics = []string{t}
	}
	if p, ok := f.Fields["partition"]; ok {
		if n, err := strconv.ParseInt(fmt.Sprint(p), 10, 32); err == nil {
			flt.Partitions = []int32{int32(n)}
		}
	}
	return flt
}

func packetRef(p report.PacketRef) string {
	if p.File > 0 {
		return fmt.Sprintf("%d:%d", p.File, p.Packet)
	}
	return strconv.FormatUint(p.Packet, 10)
}
