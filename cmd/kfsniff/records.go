package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"syscall"

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
	from       string
	hideCtl    bool
	committed  bool

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
	fs.StringVar(&rc.from, "records-from", "", "with --records: take records from `produce`, fetch or both (default: each record once, from its Produce where the capture holds one for its partition, else from the Fetch)")
	fs.BoolVar(&rc.hideCtl, "records-hide-control", false, "with --records: leave out transaction markers (control batches), otherwise shown as COMMIT/ABORT lines with producer id and epoch")
	fs.BoolVar(&rc.committed, "records-read-committed", false, "with --records: as a read_committed consumer (kcat's default) reads them: a transaction's records when it commits, none of aborted or unfinished ones, no markers")
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
		if rc.format != "" || len(rc.topics) > 0 || len(rc.partitions) > 0 || rc.offsets != "" || rc.base64 || rc.from != "" || rc.hideCtl || rc.committed {
			return errors.New("--records-format, --records-topic, --records-partition, --records-offsets, --records-base64, --records-from, --records-hide-control and --records-read-committed go with --records")
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
	if rc.finding > 0 && slices.Contains(cfg.Files, "-") {
		return errors.New("--finding reads the capture twice: standard input (-r -) cannot be read again; give a file")
	}
	from, err := report.ParseRecordsFrom(rc.from)
	if err != nil {
		return fmt.Errorf("--records-from %v", err)
	}
	opt := report.RecordOptions{Format: rc.format, JSON: cfg.JSON, Base64: rc.base64, MaxBytes: rc.maxBytes, MaxFrame: cfg.MaxFrame,
		Stream: cfg.Live.Interface != "", From: from, HideControl: rc.hideCtl, ReadCommitted: rc.committed}
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
			return exitWith(stderr, usagef("--finding %d: the report has %d findings", rc.finding, len(fs)))
		}
		f := &fs[rc.finding-1]
		flt := findingFilter(f)
		rc.w.SetFinding(flt)
		if len(flt.Ranges) > 0 {
			fmt.Fprintf(stderr, "kfsniff: finding %d (%s): every record at the offsets it covers, %s of %s-%d: %s\n",
				rc.finding, report.Clean(f.Detector), rangesText(flt.Ranges), report.Clean(flt.Topics[0]), flt.Partitions[0], report.CleanText(f.Summary))
		} else {
			fmt.Fprintf(stderr, "kfsniff: finding %d (%s): the records of the %d exchanges its evidence names, a sample of those it covers (the first, the last and a few between): %s\n",
				rc.finding, report.Clean(f.Detector), len(f.Evidence), report.CleanText(f.Summary))
		}
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
	if err := rc.w.Flush(); errors.Is(err, syscall.EPIPE) {
		// kfsniff --records | head: the reader took what it wanted.
		fmt.Fprintf(stderr, "kfsniff: standard output closed by its reader during the records (%d packets analysed)\n", res.Report.Capture.Packets)
		return failOn(cfg.FailOn, res.Report, stderr)
	} else if err != nil {
		fmt.Fprintf(stderr, "kfsniff: writing output: %v\n", err)
		return exitFailure
	}
	st := rc.w.Stats()
	if st.Aborted > 0 || st.Open > 0 {
		fmt.Fprintf(stderr, "kfsniff: --records-read-committed: %d records of aborted transactions and %d of transactions not ended in the capture not printed\n", st.Aborted, st.Open)
	}
	if st.Overflow > 0 {
		fmt.Fprintf(stderr, "kfsniff: warning: --records-read-committed: %d records printed before their transaction ended (more than 64 MiB waited)\n", st.Overflow)
	}
	if rc.finding > 0 {
		rc.sayLeftOut(&res.Report.Findings[rc.finding-1], st, stderr)
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

// findingFilter is the records behind a finding: those at the offsets it
// covers where it names them (first_offset..last_offset and
// repeat_first_offset..repeat_last_offset of one topic and partition),
// else the exchanges of its evidence packets (a sample), in its topic and
// partition when it names them.
func findingFilter(f *detectors.Finding) report.RecordFilter {
	var flt report.RecordFilter
	if t, ok := f.Fields["topic"].(string); ok && t != "" {
		flt.Topics = []string{t}
	}
	if n, ok := intField(f, "partition"); ok {
		flt.Partitions = []int32{int32(n)}
	}
	if len(flt.Topics) == 1 && len(flt.Partitions) == 1 {
		for _, pre := range []string{"", "repeat_"} {
			from, ok1 := intField(f, pre+"first_offset")
			to, ok2 := intField(f, pre+"last_offset")
			if ok1 && ok2 && from >= 0 && from <= to {
				flt.Ranges = append(flt.Ranges, report.OffsetRange{From: from, To: to})
			}
		}
		if len(flt.Ranges) > 0 {
			return flt
		}
	}
	flt.Packets = map[report.PacketRef]bool{}
	for _, e := range f.Evidence {
		flt.Packets[report.PacketRef{File: e.File, Packet: e.Packet}] = true
	}
	return flt
}

// intField is a finding's integer field.
func intField(f *detectors.Finding, name string) (int64, bool) {
	v, ok := f.Fields[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(fmt.Sprint(v), 10, 64)
	return n, err == nil
}

func rangesText(rs []report.OffsetRange) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("offsets %d-%d", r.From, r.To))
	}
	return strings.Join(parts, " and ")
}

// sayLeftOut says how many of the records a finding covers were not
// printed: none (what kept them out), or at its offsets, those the
// capture does not hold; from its evidence, those its counts number
// beyond the ones printed.
func (rc *recordsConfig) sayLeftOut(f *detectors.Finding, st report.RecordStats, stderr io.Writer) {
	flt := findingFilter(f)
	filtered := len(rc.topics) > 0 || len(rc.partitions) > 0 || rc.offsets != ""
	switch {
	case st.Records == 0 && filtered:
		what := "of the exchanges its evidence names"
		if len(flt.Ranges) > 0 {
			what = "at the offsets it covers"
		}
		fmt.Fprintf(stderr, "kfsniff: finding %d: no record %s passes --records-topic, --records-partition and --records-offsets\n", rc.finding, what)
	case st.Records == 0:
		fmt.Fprintf(stderr, "kfsniff: finding %d: the exchanges its evidence names carry no records (of its topic and partition)\n", rc.finding)
	case len(flt.Ranges) > 0:
		var covered int64
		for _, r := range flt.Ranges {
			covered += r.To - r.From + 1
		}
		if !filtered && st.Records < covered {
			fmt.Fprintf(stderr, "kfsniff: finding %d: %d records printed of the %d its offsets cover; the other %d are not in the capture\n",
				rc.finding, st.Records, covered, covered-st.Records)
		}
	default:
		var most int64
		for k, n := range f.Counts {
			if (k == "records" || strings.HasSuffix(k, "_records")) && n > most {
				most = n
			}
		}
		if most > st.Records {
			fmt.Fprintf(stderr, "kfsniff: finding %d: %d records printed, a sample: the finding counts %d, %d not printed\n",
				rc.finding, st.Records, most, most-st.Records)
		}
	}
}

func packetRef(p report.PacketRef) string {
	if p.File > 0 {
		return fmt.Sprintf("%d:%d", p.File, p.Packet)
	}
	return strconv.FormatUint(p.Packet, 10)
}
