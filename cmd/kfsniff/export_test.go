package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/export"
)

// shipped is one record read back from the export topic.
type shipped struct {
	key       string
	partition int32
	topic     string
	rec       exportRecord
}

// exportRecord is the schema of docs/export.md, as a reader decodes it.
type exportRecord struct {
	V         int     `json:"v"`
	Type      string  `json:"type"`
	Agent     string  `json:"agent"`
	Run       string  `json:"run"`
	Seq       int64   `json:"seq"`
	Cluster   string  `json:"cluster"`
	TS        int64   `json:"ts_ns"`
	Latency   *int64  `json:"latency_ns"`
	Conn      int     `json:"conn"`
	Client    string  `json:"client"`
	Server    string  `json:"server"`
	Node      *int32  `json:"node"`
	ClientID  *string `json:"client_id"`
	API       int16   `json:"api"`
	Version   int16   `json:"ver"`
	Corr      int32   `json:"corr"`
	Status    string  `json:"status"`
	Event     string  `json:"event"`
	Replica   *int32  `json:"replica"`
	Parts     int     `json:"parts"`
	BatchIdx  int     `json:"batch_index"`
	Topic     string  `json:"topic"`
	Partition *int32  `json:"partition"`
	Error     *int16  `json:"error"`
	HW        *int64  `json:"high_watermark"`
	Batches   []struct {
		Offset      *int64 `json:"offset"`
		BaseOffset  *int64 `json:"base_offset"`
		Records     int32  `json:"records"`
		CRC         uint32 `json:"crc"`
		CRCOK       *bool  `json:"crc_ok"`
		LeaderEpoch int32  `json:"leader_epoch"`
		ProducerID  int64  `json:"producer_id"`
	} `json:"batches"`
	Errors  [][2]int64 `json:"errors"`
	State   string     `json:"state"`
	Finding *struct {
		Detector string         `json:"detector"`
		Summary  string         `json:"summary"`
		Fields   map[string]any `json:"fields"`
	} `json:"finding"`
}

// consumeAll reads topics from the start until n records have come (n <
// 0: until two polls of a second find nothing more), 20 s at most.
func consumeAll(t *testing.T, seeds []string, n int, topics ...string) []shipped {
	t.Helper()
	return consumeWith(t, seeds, n, nil, topics...)
}

func consumeWith(t *testing.T, seeds []string, n int, opts []kgo.Opt, topics ...string) []shipped {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []shipped
	deadline := time.Now().Add(20 * time.Second)
	empty := 0
	for (n < 0 || len(out) < n) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			if empty++; n < 0 && empty >= 2 {
				break // all there is, read
			}
		} else {
			empty = 0
		}
		fs.EachRecord(func(r *kgo.Record) {
			s := shipped{key: string(r.Key), partition: r.Partition, topic: r.Topic}
			if err := json.Unmarshal(r.Value, &s.rec); err != nil {
				t.Errorf("%s/%d@%d: not JSON: %v: %.200s", r.Topic, r.Partition, r.Offset, err, r.Value)
			}
			out = append(out, s)
		})
	}
	return out
}

// reportWithExport is the part of the JSON report these tests read.
type reportWithExport struct {
	Totals struct {
		Requests           int64 `json:"requests"`
		UnmatchedResponses int64 `json:"unmatched_responses"`
		KafkaConnections   int   `json:"kafka_connections"`
	} `json:"totals"`
	Findings []struct {
		Detector string         `json:"detector"`
		Summary  string         `json:"summary"`
		Fields   map[string]any `json:"fields"`
	} `json:"findings"`
	Export *struct {
		Sink     string `json:"sink"`
		Records  int64  `json:"records"`
		Findings int64  `json:"findings"`
		Dropped  int64  `json:"dropped"`
		Failed   int64  `json:"failed"`
	} `json:"export"`
}

// shipScenario runs kfsniff -r capture --export into a fresh kfake
// cluster and reads back everything shipped.
func shipScenario(t *testing.T, capture string, extra ...string) (rep reportWithExport, exch, findings []shipped) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "ship", "ship.findings"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := c.ListenAddrs()
	args := append([]string{"-r", fixture(capture), "--json", "--agent-id", "host-a",
		"--export", "kafka://" + strings.Join(seeds, ",") + "/ship"}, extra...)
	code, stdout, stderr := kfsniff(t, args...)
	if code != exitOK && code != exitFindings {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("not the JSON report: %v\n%.300s", err, stdout)
	}
	if rep.Export == nil {
		t.Fatalf("the JSON report has no export object:\n%s", stderr)
	}
	if rep.Export.Dropped != 0 || rep.Export.Failed != 0 || rep.Export.Records == 0 {
		t.Fatalf("export %+v: want every record delivered to a sink that is up", *rep.Export)
	}
	all := consumeAll(t, seeds, int(rep.Export.Records), "ship", "ship.findings")
	if len(all) != int(rep.Export.Records) {
		t.Fatalf("%d records read back, the report says %d shipped", len(all), rep.Export.Records)
	}
	for _, s := range all {
		if s.rec.V != export.SchemaVersion || s.rec.Agent != "host-a" {
			t.Errorf("%s %q: v %d agent %q; want schema %d and the --agent-id", s.topic, s.key, s.rec.V, s.rec.Agent, export.SchemaVersion)
		}
		if s.topic == "ship.findings" {
			findings = append(findings, s)
		} else {
			exch = append(exch, s)
		}
	}
	if int64(len(findings)) != rep.Export.Findings || len(findings) != len(rep.Findings) {
		t.Errorf("%d findings read back, the export counted %d, the report has %d", len(findings), rep.Export.Findings, len(rep.Findings))
	}
	for i, f := range findings {
		if f.rec.Type != "finding" || f.rec.Finding == nil || f.rec.State != "final" {
			t.Errorf("findings topic record %d: type %q, state %q, finding %v; want the final findings of a file", i, f.rec.Type, f.rec.State, f.rec.Finding)
			continue
		}
		if i < len(rep.Findings) && (f.rec.Finding.Detector != rep.Findings[i].Detector || f.rec.Finding.Summary != rep.Findings[i].Summary) {
			t.Errorf("finding %d shipped as %s %q, the report's is %s %q", i, f.rec.Finding.Detector, f.rec.Finding.Summary, rep.Findings[i].Detector, rep.Findings[i].Summary)
		}
	}
	return rep, exch, findings
}

// checkExchangeRecords: one record per partition of each exchange, keyed
// by the partition's number (the rest by client id, connection events by
// "@" and the server), each key in one Kafka
// partition; every exchange of the report shipped, every connection's
// opening.
func checkExchangeRecords(t *testing.T, rep reportWithExport, exch []shipped) {
	t.Helper()
	type xid struct {
		conn, corr int
		resp       string
	}
	perExchange := map[xid]map[string]bool{}
	records := map[xid]int{}
	wantParts := map[xid]int{}
	keyPartition := map[string]int32{}
	opened, ends := 0, 0
	for _, s := range exch {
		if p, ok := keyPartition[s.key]; ok && p != s.partition {
			t.Errorf("key %q in Kafka partitions %d and %d", s.key, p, s.partition)
		}
		keyPartition[s.key] = s.partition
		r := s.rec
		switch r.Type {
		case "conn":
			if r.Event == "opened" {
				opened++
			}
			if r.Event == "end" {
				ends++
				if s.key != "@end" || r.Server != "" || r.TS <= 0 {
					t.Errorf("end of the capture keyed %q, server %q, at %d", s.key, r.Server, r.TS)
				}
				continue
			}
			if s.key != "@"+r.Server {
				t.Errorf("connection event to %s keyed %q", r.Server, s.key)
			}
			continue
		case "exchange":
		default:
			t.Errorf("record type %q", r.Type)
			continue
		}
		id := xid{r.Conn, int(r.Corr), ""}
		if r.Status == "unmatched" {
			// Responses without a request: one exchange each.
			id.resp = fmt.Sprint(r.TS)
		}
		if perExchange[id] == nil {
			perExchange[id] = map[string]bool{}
		}
		if r.Partition != nil {
			want := r.Topic + "/" + strconv.Itoa(int(*r.Partition))
			if s.key != strconv.Itoa(int(*r.Partition)) {
				t.Errorf("record of %s keyed %q", want, s.key)
			}
			if perExchange[id][want] && r.BatchIdx == 0 {
				t.Errorf("exchange %v: partition %s shipped twice", id, want)
			}
			perExchange[id][want] = true
			records[id]++
			wantParts[id] = r.Parts
		} else {
			if r.ClientID == nil || (s.key != *r.ClientID && !strings.HasPrefix(s.key, "@")) {
				t.Errorf("exchange without partitions keyed %q, client id %v", s.key, r.ClientID)
			}
			perExchange[id]["-"] = true
		}
	}
	for id, n := range wantParts {
		if records[id] != n {
			t.Errorf("exchange %v: %d partition records, its records say parts %d", id, records[id], n)
		}
	}
	if want := rep.Totals.Requests + rep.Totals.UnmatchedResponses; int64(len(perExchange)) != want {
		t.Errorf("%d exchanges shipped; the report has %d requests and %d unmatched responses", len(perExchange), rep.Totals.Requests, rep.Totals.UnmatchedResponses)
	}
	if opened != rep.Totals.KafkaConnections {
		t.Errorf("%d connection openings shipped, the report has %d Kafka connections", opened, rep.Totals.KafkaConnections)
	}
	if ends != 1 {
		t.Errorf("%d records of the capture's end shipped, want 1", ends)
	}
}

// TestExportReplicaDivergence ships the replica divergence scenario and
// finds in the records what a correlator needs to see it across hosts:
// the leader's and the follower's CRCs of the batch at the finding's
// offset, and the corrupt batch flagged.
func TestExportReplicaDivergence(t *testing.T) {
	rep, exch, _ := shipScenario(t, "scenarios/replica-divergence.pcap")
	checkExchangeRecords(t, rep, exch)
	var leaderCRC, replicaCRC, badCRC float64
	var topic string
	var offset float64
	for _, f := range rep.Findings {
		if f.Detector != "replica-divergence" {
			continue
		}
		if v, ok := f.Fields["crc_leader"].(float64); ok {
			leaderCRC, replicaCRC, offset = v, f.Fields["crc_replica"].(float64), f.Fields["base_offset"].(float64)
			topic = f.Fields["topic"].(string)
		}
		if v, ok := f.Fields["crc_valid"].(bool); ok && !v {
			badCRC = f.Fields["crc"].(float64)
		}
	}
	if leaderCRC == 0 || badCRC == 0 {
		t.Fatalf("the scenario's report lacks its divergence findings: %+v", rep.Findings)
	}
	crcsAt := map[uint32]bool{}
	badFlagged := false
	for _, s := range exch {
		if s.rec.Topic != topic {
			continue
		}
		for _, b := range s.rec.Batches {
			at := b.BaseOffset
			if at == nil {
				at = b.Offset
			}
			if at != nil && float64(*at) == offset {
				crcsAt[b.CRC] = true
			}
			if float64(b.CRC) == badCRC && b.CRCOK != nil && !*b.CRCOK {
				badFlagged = true
			}
		}
	}
	if !crcsAt[uint32(leaderCRC)] || !crcsAt[uint32(replicaCRC)] {
		t.Errorf("CRCs shipped at %s offset %v: %v; the finding's leader %v and replica %v", topic, offset, crcsAt, uint32(leaderCRC), uint32(replicaCRC))
	}
	if !badFlagged {
		t.Errorf("no shipped batch with CRC %v marked crc_ok false", uint32(badCRC))
	}
}

// TestExportMirrorReplay ships the MirrorMaker replay (lz4, where the
// others use the default zstd): the produced
// batches of the replayed partition, read back, hold the records and the
// repeated CRCs the duplicate-batches finding counts.
func TestExportMirrorReplay(t *testing.T) {
	rep, exch, _ := shipScenario(t, "scenarios/mm2-replay.pcap", "--export-compression", "lz4")
	checkExchangeRecords(t, rep, exch)
	var topic string
	var part, records, dupBatches float64
	for _, f := range rep.Findings {
		if f.Detector == "duplicate-batches" {
			topic, part = f.Fields["topic"].(string), f.Fields["partition"].(float64)
		}
	}
	if topic == "" {
		t.Fatal("no duplicate-batches finding in the scenario's report")
	}
	// The finding's counts are not in reportWithExport: read them again.
	code, stdout, _ := kfsniff(t, "-r", fixture("scenarios/mm2-replay.pcap"), "--json")
	if code != exitOK && code != exitFindings {
		t.Fatal(code)
	}
	var full struct {
		Findings []struct {
			Detector string           `json:"detector"`
			Counts   map[string]int64 `json:"counts"`
		} `json:"findings"`
	}
	json.Unmarshal([]byte(stdout), &full)
	for _, f := range full.Findings {
		if f.Detector == "duplicate-batches" {
			records, dupBatches = float64(f.Counts["records"]), float64(f.Counts["duplicate_batches"])
		}
	}
	seen := map[uint32]int{}
	var gotRecords int64
	for _, s := range exch {
		if s.rec.Topic != topic || s.rec.Partition == nil || float64(*s.rec.Partition) != part || s.rec.API != 0 {
			continue
		}
		for _, b := range s.rec.Batches {
			seen[b.CRC]++
			gotRecords += int64(b.Records)
		}
	}
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	if float64(gotRecords) != records || float64(dups) != dupBatches {
		t.Errorf("%s/%v: produced batches shipped hold %d records and %d repeated CRCs; the finding counts %v records, %v duplicate batches", topic, part, gotRecords, dups, records, dupBatches)
	}
}

// TestExportSinkUnreachable: a sink that does not answer at the start is
// a one-line error and exit 2 after --export-timeout, with no report (it
// was a report of every record failed, exit 0); a properties file or
// anything else of the run is not the matter. A sink that answers at the
// start and then takes nothing does not stop the analysis: the report is
// the one without --export, plus its line saying that nothing was
// delivered and why, within the flush timeout, of which stderr gives word
// once the wait passes a second.
func TestExportSinkUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	start := time.Now()
	code, out, stderr := kfsniff(t, "-r", fixture("scenarios/mm2-replay.pcap"), "--export", "kafka://"+dead+"/ship", "--export-timeout", "2s")
	took := time.Since(start)
	if code != exitUsage || out != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "did not answer") || !strings.Contains(stderr, "refused") {
		t.Errorf("a dead sink: exit %d, want 2 and one line saying why:\nstdout %q\nstderr %q", code, out, stderr)
	}
	if took < 2*time.Second || took > 10*time.Second {
		t.Errorf("gave up after %s with --export-timeout 2s", took)
	}

	addr := deafSink(t)
	code, plain, _ := kfsniff(t, "-r", fixture("scenarios/mm2-replay.pcap"))
	start = time.Now()
	code2, out, stderr := kfsniff(t, "-r", fixture("scenarios/mm2-replay.pcap"), "--export", "kafka://"+addr+"/ship", "--export-flush-timeout", "2s")
	if code2 != code {
		t.Fatalf("exit %d with a sink taking nothing, %d without --export: %s", code2, code, stderr)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("took %s with a 2 s flush timeout", took)
	}
	if !strings.Contains(stderr, "kfsniff: --export: waiting up to 1s for the sink to take ") {
		t.Errorf("no word of the wait for the sink on stderr: %q", stderr)
	}
	var line string
	rest := out
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  Export to ") {
			line = l
			rest = strings.Replace(out, l+"\n", "", 1)
		}
	}
	want := "  Export to kafka://" + addr + "/ship: 0 records shipped (0 findings to ship.findings), 0 dropped (buffer full), "
	if !strings.HasPrefix(line, want) || strings.Contains(line, " 0 failed") || !strings.Contains(line, "last error: ") {
		t.Errorf("export line %q; want %q, the records failed and the last error", line, want)
	}
	if rest != plain {
		t.Errorf("the report with a sink taking nothing differs from the one without --export beyond the export line")
	}
	// The views that print no report say it on stderr (they said nothing
	// of the records never delivered).
	for _, view := range [][]string{{"--frames"}, {"--records"}, {"--expect", fixture("scenarios/mm2-replay.expect.json")}} {
		args := append([]string{"-r", fixture("scenarios/mm2-replay.pcap"), "--export", "kafka://" + addr + "/ship", "--export-flush-timeout", "1s"}, view...)
		_, _, stderr := kfsniff(t, args...)
		if !strings.Contains(stderr, "kfsniff: --export to kafka://"+addr+"/ship: 0 records shipped") || !strings.Contains(stderr, "last error: ") {
			t.Errorf("%q: stderr %q; want the shipping counts", view, stderr)
		}
		// A flush timeout of 1 s is over when the word of the wait would
		// come: it said "waiting up to 0s".
		if strings.Contains(stderr, "waiting up to") {
			t.Errorf("%q with --export-flush-timeout 1s: stderr %q", view, stderr)
		}
	}
}

// deafSink is a kfake sink that answers everything but Produce, whose
// connections it closes: a sink reachable at the start that takes no
// record.
func deafSink(t *testing.T) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "ship", "ship.findings"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, errors.New("deaf"), true
	})
	return c.ListenAddrs()[0]
}
