package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/fixtures/record"
)

func txnFixture(t *testing.T) (pcap string, sc record.Sidecar) {
	t.Helper()
	base := filepath.Join("..", "..", "fixtures", "pcaps", record.CompressedDir, record.TransactionsFile)
	sc, err := record.ReadSidecar(base + ".counts.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Sent.Markers) != 3 || len(sc.Sent.Records) != 7 {
		t.Fatalf("sidecar: %d markers, %d records; want 3 and 7", len(sc.Sent.Markers), len(sc.Sent.Records))
	}
	return base + ".pcap", sc
}

// TestRecordsTransactions: kgo's transactions against kfake (3 records
// committed, 2 aborted, 2 committed; fixtures/record.Transactions). By
// default each record prints once, from its Produce, at the offset the
// broker gave, and the broker's transaction markers print as markers
// (COMMIT/ABORT with producer id and epoch) at their offsets, as the
// producer's sidecar lists them; not as data records
// (key=0x00000001 value=0x000000000000, as before).
// --records-hide-control leaves the markers out; --records-from chooses.
func TestRecordsTransactions(t *testing.T) {
	pcap, sc := txnFixture(t)
	var records, markers []string
	for _, r := range sc.Sent.Records {
		records = append(records, fmt.Sprintf("%s[%d]@%d %d key=%s value=%s headers=", r.Topic, r.Partition, r.Offset, r.Timestamp, r.Key, r.Value))
	}
	for _, m := range sc.Sent.Markers {
		markers = append(markers, fmt.Sprintf("Fetch %s[%d]@%d %s producer_id=%d producer_epoch=%d packet ", m.Topic, m.Partition, m.Offset, m.Type, m.ProducerID, m.ProducerEpoch))
	}
	run := func(args ...string) []string {
		t.Helper()
		code, out, errOut := kfsniff(t, append([]string{"-r", pcap, "--records"}, args...)...)
		if code != exitOK || errOut != "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
		if strings.Contains(out, "key=0x0000000") {
			t.Errorf("%v: a marker printed as a data record:\n%s", args, out)
		}
		return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	}
	check := func(name string, got []string, want []string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d lines, want %d:\n%s", name, len(got), len(want), strings.Join(got, "\n"))
		}
		for i := range want {
			if !strings.HasPrefix(got[i], want[i]) {
				t.Errorf("%s line %d:\n%s\nwant it to begin\n%s", name, i, got[i], want[i])
			}
		}
	}
	var want []string
	for _, r := range records {
		want = append(want, "Produce "+r)
	}
	check("default", run(), append(want, markers...))
	check("--records-hide-control", run("--records-hide-control"), want)
	check("--records-from produce", run("--records-from", "produce"), want)
	// The Fetch: records and markers in offset order, the aborted ones
	// too (a read-uncommitted consumer's fetch), each marker after its
	// transaction.
	var fetch []string
	for i, r := range records {
		fetch = append(fetch, "Fetch "+r)
		if i == 2 || i == 4 || i == 6 {
			fetch = append(fetch, markers[i/2-1])
		}
	}
	check("--records-from fetch", run("--records-from", "fetch"), fetch)
	if got := run("--records-from", "both"); len(got) != 2*len(records)+len(markers) {
		t.Errorf("--records-from both: %d lines, want %d", len(got), 2*len(records)+len(markers))
	}

	// JSON: the markers carry their type, producer id and epoch.
	code, out, errOut := kfsniff(t, "-r", pcap, "--records", "--json", "--records-from", "fetch")
	if code != exitOK || errOut != "" {
		t.Fatalf("--json: exit %d, stderr %q", code, errOut)
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.Contains(l, `"control"`) {
			continue
		}
		m := sc.Sent.Markers[n]
		for _, w := range []string{fmt.Sprintf(`"offset":%d`, m.Offset), fmt.Sprintf(`"control":%q`, m.Type),
			fmt.Sprintf(`"producer_id":%d`, m.ProducerID), fmt.Sprintf(`"producer_epoch":%d`, m.ProducerEpoch)} {
			if !strings.Contains(l, w) {
				t.Errorf("marker line %s lacks %s", l, w)
			}
		}
		n++
	}
	if n != len(sc.Sent.Markers) {
		t.Errorf("%d marker lines in JSON, want %d", n, len(sc.Sent.Markers))
	}
}

// TestRecordsReadCommitted: --records-read-committed prints what kcat
// (librdkafka's read_committed default) consumes: the records of the two
// committed transactions, none of the aborted one, no markers; from the
// Produce (their EndTxn decides) as from the Fetch (its markers decide);
// and says how many it left out.
func TestRecordsReadCommitted(t *testing.T) {
	pcap, sc := txnFixture(t)
	var committed []string
	for _, r := range sc.Sent.Records {
		for _, m := range sc.Sent.Markers {
			if m.Offset > r.Offset { // the marker that ends its transaction
				if m.Type == "COMMIT" {
					committed = append(committed, fmt.Sprintf("%s[%d]@%d %d key=%s value=%s headers=", r.Topic, r.Partition, r.Offset, r.Timestamp, r.Key, r.Value))
				}
				break
			}
		}
	}
	if len(committed) != 5 {
		t.Fatalf("%d committed records in the sidecar, want 5", len(committed))
	}
	for _, from := range []string{"produce", "fetch"} {
		code, out, errOut := kfsniff(t, "-r", pcap, "--records", "--records-read-committed", "--records-from", from)
		if code != exitOK || errOut != "kfsniff: --records-read-committed: 2 records of aborted transactions and 0 of transactions not ended in the capture not printed\n" {
			t.Fatalf("%s: exit %d, stderr %q", from, code, errOut)
		}
		got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(got) != len(committed) {
			t.Fatalf("%s: %d lines, want %d:\n%s", from, len(got), len(committed), out)
		}
		api := map[string]string{"produce": "Produce ", "fetch": "Fetch "}[from]
		for i, w := range committed {
			if !strings.HasPrefix(got[i], api+w) {
				t.Errorf("%s line %d:\n%s\nwant it to begin\n%s", from, i, got[i], api+w)
			}
		}
	}
}

// TestRecordsFromUsage: --records-from takes produce, fetch or both, and
// goes with --records, as --records-hide-control does.
func TestRecordsFromUsage(t *testing.T) {
	pcap, _ := txnFixture(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-r", pcap, "--records", "--records-from", "consume"}, `--records-from "consume": want produce, fetch or both`},
		{[]string{"-r", pcap, "--records-from", "fetch"}, "go with --records"},
		{[]string{"-r", pcap, "--records-hide-control"}, "go with --records"},
		{[]string{"-r", pcap, "--records-read-committed"}, "go with --records"},
	} {
		code, out, errOut := kfsniff(t, tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestRecordsFindingSample: a finding that names no offsets has its
// evidence, a sample, printed, and says so; one that names them
// (duplicate-batches on a real MM2 replay through kgo) has every record
// at those offsets printed once.
func TestRecordsFindingSample(t *testing.T) {
	code, out, errOut := kfsniff(t, "-r", filepath.Join("..", "..", "fixtures", "pcaps", "clients", "notleader-8s-kgo.pcap"), "--finding", "1")
	if code != exitOK || out == "" || !strings.Contains(errOut, "the records of the 6 exchanges its evidence names, a sample of those it covers") {
		t.Errorf("not-leader-loop: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut = kfsniff(t, "-r", filepath.Join("..", "..", "fixtures", "pcaps", "clients", "mm2-replay-kgo.pcap"), "--finding", "1", "--json")
	if code != exitOK || !strings.Contains(errOut, "every record at the offsets it covers, offsets 80-239 and offsets 240-399 of primary.orders-0") ||
		strings.Contains(errOut, "not in the capture") {
		t.Fatalf("duplicate-batches: exit %d, stderr %q", code, errOut)
	}
	seen := map[int64]int{}
	for _, l := range recordLines(t, out) {
		if l.Offset == nil || l.Topic != "primary.orders" || l.Partition != 0 || *l.Offset < 80 || *l.Offset > 399 {
			t.Fatalf("record outside the finding: %+v", l)
		}
		seen[*l.Offset]++
	}
	for o := int64(80); o <= 399; o++ {
		if seen[o] != 1 {
			t.Errorf("offset %d printed %d times, want once", o, seen[o])
		}
	}
}

// TestRecordsReadCommittedStable: real Kafka's transactions span several
// partitions (kraft-healthy-load-client: a producer commits orders-0..2
// and words-0..2 at once). With --records-read-committed the lines of a
// committed transaction print in the order their partitions' first lines
// waited, the same every run; they printed in map order, a different
// output each run (4 runs, 4 outputs).
func TestRecordsReadCommittedStable(t *testing.T) {
	pcap := filepath.Join("..", "..", "fixtures", "pcaps", "kafka", "kraft-healthy-load-client.pcap.gz")
	var first string
	for i := range 4 {
		code, out, _ := kfsniff(t, "-r", pcap, "--records", "--records-read-committed")
		if code != exitOK || !strings.Contains(out, "words[") {
			t.Fatalf("run %d: exit %d, %d bytes of records", i, code, len(out))
		}
		if i == 0 {
			first = out
		} else if out != first {
			t.Fatalf("run %d printed other records or another order than run 0", i)
		}
	}
}
