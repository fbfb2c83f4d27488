package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/fixtures/record"
	"github.com/kfsniff/kfsniff/internal/termcheck"
)

// recordLine is one line of --records --json, as a reader decodes it.
type recordLine struct {
	API       string  `json:"api"`
	Packet    uint64  `json:"packet"`
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    *int64  `json:"offset"`
	Timestamp int64   `json:"timestamp"`
	Codec     string  `json:"codec"`
	Key       *string `json:"key"`
	KeyB64    string  `json:"key_base64"`
	Value     *string `json:"value"`
	ValueB64  string  `json:"value_base64"`
	BadCRC    bool    `json:"bad_crc"`
	Headers   []struct {
		Key      string  `json:"key"`
		Value    *string `json:"value"`
		ValueB64 string  `json:"value_base64"`
	} `json:"headers"`
}

// bytesOf is the bytes a line's text-or-base64 pair stands for (nil for
// null).
func bytesOf(t *testing.T, text *string, b64 string) []byte {
	t.Helper()
	if b64 != "" {
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatalf("base64 %q: %v", b64, err)
		}
		return b
	}
	if text == nil {
		return nil
	}
	return []byte(*text)
}

// recordLines parses JSON Lines, failing on any line that is not a JSON
// object.
func recordLines(t *testing.T, out string) []recordLine {
	t.Helper()
	var lines []recordLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l recordLine
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("not JSON: %s", sc.Text())
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		lines = append(lines, l)
	}
	return lines
}

func compressedFixture(codec string) (pcap, sidecar string) {
	base := filepath.Join("..", "..", "fixtures", "pcaps", record.CompressedDir, "compressed-kgo-"+codec)
	return base + ".pcap", base + ".counts.json"
}

// TestRecordsEveryCodec: kgo produced records with each codec to kfake
// and read them back (fixtures/record.CompressedRecords); --records
// --json shows every record of the Produce request and of the Fetch
// response as the producer wrote it (its sidecar), at the offset the
// broker gave, with the batch's codec: text as text, bytes that are not
// UTF-8 in base64, nulls as null.
func TestRecordsEveryCodec(t *testing.T) {
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			pcap, side := compressedFixture(codec)
			sc, err := record.ReadSidecar(side)
			if err != nil {
				t.Fatal(err)
			}
			want := sc.Sent.Records
			if len(want) == 0 {
				t.Fatalf("%s lists no records", side)
			}
			// By default each record once: from the Produce.
			code, out, errOut := kfsniff(t, "-r", pcap, "--records", "--json")
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if got := recordLines(t, out); len(got) != len(want) || got[0].API != "Produce" || got[len(got)-1].API != "Produce" {
				t.Errorf("default: %d records, want %d, all from the Produce", len(got), len(want))
			}
			code, out, errOut = kfsniff(t, "-r", pcap, "--records", "--json", "--records-from", "both")
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			byAPI := map[string][]recordLine{}
			for _, l := range recordLines(t, out) {
				byAPI[l.API] = append(byAPI[l.API], l)
			}
			for _, api := range []string{"Produce", "Fetch"} {
				got := byAPI[api]
				if len(got) != len(want) {
					t.Fatalf("%s: %d records, want %d", api, len(got), len(want))
				}
				for i, g := range got {
					w := want[i]
					where := fmt.Sprintf("%s record %d", api, i)
					if g.Codec != codec {
						t.Errorf("%s: codec %q", where, g.Codec)
					}
					if g.Topic != w.Topic || g.Partition != w.Partition || g.Offset == nil || *g.Offset != w.Offset || g.Timestamp != w.Timestamp {
						t.Errorf("%s: %s-%d offset %v ts %d, want %s-%d %d %d", where, g.Topic, g.Partition, g.Offset, g.Timestamp, w.Topic, w.Partition, w.Offset, w.Timestamp)
					}
					if k := bytesOf(t, g.Key, g.KeyB64); !bytes.Equal(k, w.Key) || (k == nil) != (w.Key == nil) {
						t.Errorf("%s: key %q, want %q", where, k, w.Key)
					}
					if v := bytesOf(t, g.Value, g.ValueB64); !bytes.Equal(v, w.Value) || (v == nil) != (w.Value == nil) {
						t.Errorf("%s: value %q, want %q", where, v, w.Value)
					}
					if len(g.Headers) != len(w.Headers) {
						t.Fatalf("%s: %d headers, want %d", where, len(g.Headers), len(w.Headers))
					}
					for j, h := range g.Headers {
						v := bytesOf(t, h.Value, h.ValueB64)
						if h.Key != w.Headers[j].Key || !bytes.Equal(v, w.Headers[j].Value) || (v == nil) != (w.Headers[j].Value == nil) {
							t.Errorf("%s header %d: %q=%q, want %q=%q", where, j, h.Key, v, w.Headers[j].Key, w.Headers[j].Value)
						}
					}
				}
			}
		})
	}
}

// TestRecordsText: the default line shows text as text and other bytes
// in hex (or base64), and no byte of a record (the fixture's value holds
// an escape sequence and a BEL) reaches the terminal raw.
func TestRecordsText(t *testing.T) {
	pcap, side := compressedFixture("gzip")
	sc, err := record.ReadSidecar(side)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag, bin string
	}{{"", "0x"}, {"--records-base64", "base64:"}} {
		args := []string{"-r", pcap, "--records"}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		code, out, errOut := kfsniff(t, args...)
		if code != exitOK || errOut != "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
		if err := termcheck.Safe([]byte(out)); err != nil {
			t.Errorf("%v: %v", args, err)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != len(sc.Sent.Records) { // each once, from the Produce
			t.Fatalf("%v: %d lines, want %d", args, len(lines), len(sc.Sent.Records))
		}
		for i, w := range sc.Sent.Records {
			l := lines[i]
			if !strings.HasPrefix(l, fmt.Sprintf("Produce %s[%d]@%d %d ", w.Topic, w.Partition, w.Offset, w.Timestamp)) {
				t.Errorf("line %q", l)
			}
			var val string
			switch {
			case w.Value == nil:
				val = "value=(null)"
			case bytes.ContainsAny(w.Value, "\x00\x1b"):
				enc := fmt.Sprintf("%x", w.Value)
				if tc.bin == "base64:" {
					enc = base64.StdEncoding.EncodeToString(w.Value)
				}
				val = "value=" + tc.bin + enc + " "
			default:
				val = "value=" + string(w.Value) + " "
			}
			if !strings.Contains(l, val) {
				t.Errorf("line %q lacks %q", l, val)
			}
		}
	}
}

// TestRecordsFiltersAndFormat: topic, partition and offset range choose
// the records; the kcat-like tokens print what they name.
func TestRecordsFiltersAndFormat(t *testing.T) {
	pcap, _ := compressedFixture("lz4")
	code, out, errOut := kfsniff(t, "-r", pcap, "--records", "--records-topic", "kfsniff-lz4", "--records-partition", "0",
		"--records-offsets", "3-5", "--records-format", `%a %o|%K|%k|%S|%h|%e|%c\t%%\n`)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var produced []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if strings.HasPrefix(l, "Produce ") {
			produced = append(produced, strings.TrimPrefix(l, "Produce "))
		}
	}
	want := []string{
		"3|-1|(null)|97|trace-id=trace-0003|-|3\t%",
		"4|10|order-0004|97|trace-id=trace-0004|-|3\t%",
		"5|10|order-0005|58|trace-id=trace-0005|-|3\t%",
	}
	if strings.Join(produced, "\n") != strings.Join(want, "\n") {
		t.Errorf("Produce lines:\n%s\nwant\n%s\nall output:\n%s", strings.Join(produced, "\n"), strings.Join(want, "\n"), out)
	}
	if n := strings.Count(out, "Fetch "); n != 0 {
		t.Errorf("%d Fetch lines, want none (each record once, from its Produce):\n%s", n, out)
	}
	for _, args := range [][]string{
		{"--records-topic", "other"}, {"--records-partition", "1"}, {"--records-offsets", "16-"},
	} {
		code, out, _ := kfsniff(t, append([]string{"-r", pcap, "--records"}, args...)...)
		if code != exitOK || out != "" {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
	}
}

// TestRecordsFindingDuplicates: on the MM2 replay (fixtures/gen: 20,000
// records mm2_src-%08d written at offsets 0-19999, then again at
// 20000-39999), --finding 1 (duplicate-batches) prints every record at
// the offsets it covers (first_offset..last_offset and the repeat's): each
// record the generator wrote, shown at its first offset and at the offset
// of its copy, 20,000 later, each once (from its Produce).
func TestRecordsFindingDuplicates(t *testing.T) {
	code, out, errOut := kfsniff(t, "-r", fixture(filepath.Join("scenarios", "mm2-replay.pcap")), "--finding", "1", "--json")
	if code != exitOK || !strings.Contains(errOut, "finding 1 (duplicate-batches)") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	src := time.Date(2026, 7, 20, 2, 59, 0, 0, time.UTC).UnixMilli()
	first, again := map[int64]bool{}, map[int64]bool{}
	for _, l := range recordLines(t, out) {
		if l.API != "Produce" || l.Offset == nil || l.Topic != "src.mm2_src" || l.Partition != 0 {
			t.Fatalf("record outside the finding: %+v", l)
		}
		o := *l.Offset
		n := o % 20000
		if v := bytesOf(t, l.Value, l.ValueB64); string(v) != fmt.Sprintf("mm2_src-%08d", n) || l.Key != nil || l.Timestamp != src+n/4 {
			t.Errorf("offset %d: key %v value %q ts %d; the generator wrote null, mm2_src-%08d, %d", o, l.Key, v, l.Timestamp, n, src+n/4)
		}
		if o < 20000 {
			first[n] = true
		} else {
			again[n] = true
		}
	}
	// A finding about exchanges without records says so.
	code, out2, errOut2 := kfsniff(t, "-r", fixture(filepath.Join("scenarios", "observer-fetch-loop.pcap")), "--finding", "1")
	if code != exitOK || out2 != "" || !strings.Contains(errOut2, "finding 1: the exchanges its evidence names carry no records") {
		t.Errorf("a finding without records: exit %d, stdout %q, stderr %q", code, out2, errOut2)
	}
	// Records the user's filter removed are not said to be missing.
	code, out2, errOut2 = kfsniff(t, "-r", fixture(filepath.Join("scenarios", "mm2-replay.pcap")), "--finding", "1", "--records-topic", "other")
	if code != exitOK || out2 != "" || !strings.Contains(errOut2, "finding 1: no record at the offsets it covers passes --records-topic") {
		t.Errorf("a finding whose records the filter removed: exit %d, stdout %q, stderr %q", code, out2, errOut2)
	}
	if len(first) == 0 || len(again) == 0 {
		t.Fatalf("%d records of the first copy, %d of the replay", len(first), len(again))
	}
	for n := range first {
		if !again[n] {
			t.Errorf("record %d shown at its first offset but not at its copy's", n)
		}
	}
}

// TestRecordsUsage: what cannot work is refused before reading.
func TestRecordsUsage(t *testing.T) {
	pcap, _ := compressedFixture("none")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-r", pcap, "--records", "--frames"}, "two views"},
		{[]string{"-r", "-", "--finding", "1"}, "standard input"},
		{[]string{"-r", pcap, "--records", "--records-format", "%t %x"}, "unknown format token %x"},
		{[]string{"-r", pcap, "--records", "--records-offsets", "9-3"}, "ends before it begins"},
		{[]string{"-r", pcap, "--records-topic", "t"}, "go with --records"},
		{[]string{"-r", pcap, "--finding", "7"}, "the report has 0 findings"},
		// --finding 0 printed the report as if --finding were not given.
		{[]string{"-r", pcap, "--finding", "0"}, "--finding counts from 1"},
		{[]string{"-r", pcap, "--finding", "-1"}, "--finding counts from 1"},
		{[]string{"-r", pcap, "--records", "--write-expect", filepath.Join(t.TempDir(), "x.expect.json")}, "compare the report"},
		{[]string{"-r", pcap, "--records", "--records-partition", "0,-1"}, "partition numbers"},
	} {
		code, _, errOut := kfsniff(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestRecordsHostile: on the adversarial corpus --records exits as the
// report does, prints nothing that could drive a terminal, writes valid
// JSON Lines, and says what it could not list: the decompression bomb's
// two Produce requests of four batches each inflate past the bound, and
// are counted with the packet of the first.
func TestRecordsHostile(t *testing.T) {
	files, _ := filepath.Glob(fixture(filepath.Join("hostile", "*.pcap*")))
	if len(files) < 10 {
		t.Fatalf("%d hostile captures", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want, _, _ := kfsniff(t, "-r", f)
			code, out, errOut := kfsniff(t, "-r", f, "--records")
			if code != want {
				t.Errorf("exit %d, the report's %d; stderr %q", code, want, errOut)
			}
			for _, b := range []string{out, errOut} {
				if err := termcheck.Safe([]byte(b)); err != nil {
					t.Error(err)
				}
			}
			_, js, _ := kfsniff(t, "-r", f, "--records", "--json")
			recordLines(t, js)
			if err := termcheck.Safe([]byte(js)); err != nil {
				t.Errorf("--records --json: %v", err) // issue 31: C1 controls and bidi overrides were left raw
			}
			if filepath.Base(f) == "decompression-bomb.pcap" &&
				(out != "" || !strings.Contains(errOut, "the records of 8 batches could not be listed in full (the first at packet ")) {
				t.Errorf("decompression bomb: stdout %q, stderr %q", out, errOut)
			}
		})
	}
}

// TestRecordsBadCRC: in the replica divergence scenario the observer's
// copy of batch 3 (offsets 234-311) has one byte of record 10 changed
// and a CRC that no longer verifies (fixtures/gen, repCorrupt): its
// records are flagged bad_crc, and the changed record is the one whose
// value differs from what the producer wrote ("lifecycle_test-%05d"
// padded with dots to 200 bytes).
func TestRecordsBadCRC(t *testing.T) {
	code, out, errOut := kfsniff(t, "-r", fixture(filepath.Join("scenarios", "replica-divergence.pcap")), "--records", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var bad []int64
	var changed []string
	for _, l := range recordLines(t, out) {
		if l.Offset == nil {
			t.Fatalf("record without an offset: %+v", l)
		}
		o := *l.Offset
		v := string(bytesOf(t, l.Value, l.ValueB64))
		w := fmt.Sprintf("lifecycle_test-%05d", o)
		w += strings.Repeat(".", 200-len(w))
		if v != w {
			changed = append(changed, fmt.Sprintf("%s packet %d offset %d bad_crc %v", l.API, l.Packet, o, l.BadCRC))
		}
		if l.BadCRC {
			bad = append(bad, o)
		}
	}
	if len(bad) != 78 || bad[0] != 234 || bad[77] != 311 {
		t.Errorf("records flagged bad_crc: %v; want offsets 234-311", bad)
	}
	found := false
	for _, c := range changed {
		if strings.Contains(c, "offset 244 bad_crc true") {
			found = true
		}
	}
	if !found {
		t.Errorf("changed records: %v; want offset 244 in the batch whose CRC fails", changed)
	}
}

// TestRecordsUnknownOffsets: a Produce the broker refused or never
// answered has no offset: its records are printed with a null offset
// (and the refusal's error), one Produce request per refusal and per
// unanswered request the recordings' sidecars count (kgo against kfake
// refusing with NOT_LEADER_OR_FOLLOWER; a broker swallowing Produce).
func TestRecordsUnknownOffsets(t *testing.T) {
	var side struct {
		Observed struct {
			NotLeader  int   `json:"not_leader_responses"`
			Other      int   `json:"other_produce_responses"`
			Unanswered []any `json:"unanswered"`
		} `json:"observed"`
	}
	for _, tc := range []struct {
		name, err string
		want      func() int
	}{
		{"notleader-kgo", "NOT_LEADER_OR_FOLLOWER", func() int { return side.Observed.NotLeader }},
		{"unanswered-kgo", "", func() int { return len(side.Observed.Unanswered) }},
	} {
		b, err := os.ReadFile(fixture(filepath.Join("clients", tc.name+".json")))
		if err != nil {
			t.Fatal(err)
		}
		side.Observed.Unanswered = nil
		if err := json.Unmarshal(b, &side); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := kfsniff(t, "-r", fixture(filepath.Join("clients", tc.name+".pcap")), "--records", "--json")
		if code != exitOK {
			t.Fatalf("%s: exit %d, stderr %q", tc.name, code, errOut)
		}
		unknown := map[uint64]bool{}
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%s: %v: %s", tc.name, err, l)
			}
			lines = append(lines, m)
		}
		for _, m := range lines {
			if m["api"] != "Produce" || m["offset"] != nil {
				continue
			}
			if e, _ := m["error"].(string); e != tc.err {
				t.Errorf("%s: a record without an offset has error %q, want %q", tc.name, e, tc.err)
			}
			unknown[uint64(m["packet"].(float64))] = true
		}
		if want := tc.want(); len(unknown) != want || want == 0 {
			t.Errorf("%s: records without an offset in %d Produce requests, the sidecar counts %d", tc.name, len(unknown), want)
		}
	}
}

// TestRecordsJSONEscapes: --records --json left C1 controls (U+009B, the
// 8-bit CSI) and Unicode bidi overrides raw in keys, values and headers;
// every output mode escapes them now, JSON as \uXXXX.
func TestRecordsJSONEscapes(t *testing.T) {
	var b bytes.Buffer
	if err := gen.WriteRecordCapture(&b, []string{"csi\u009b31mred", "bidi\u202egnp.exe", "osc\u009d8;;https://evil.example/\u009c"}); err != nil {
		t.Fatal(err)
	}
	in := writeFile(t, "records.pcap", b.Bytes())
	for _, args := range [][]string{{"--records"}, {"--records", "--json"}} {
		code, out, errOut := kfsniff(t, append([]string{"-r", in}, args...)...)
		if code != exitOK || strings.Count(out, "\n") != 3 {
			t.Fatalf("%v: exit %d, %d lines, want the 3 records: %s%s", args, code, strings.Count(out, "\n"), out, errOut)
		}
		if err := termcheck.Safe([]byte(out)); err != nil {
			t.Errorf("%v: %v\n%q", args, err, out)
		}
		if strings.ContainsAny(out, "\u009b\u202e\u009d\u009c") {
			t.Errorf("%v: a C1 control or bidi override left raw: %q", args, out)
		}
	}
	_, js, _ := kfsniff(t, "-r", in, "--records", "--json")
	for _, l := range strings.Split(strings.TrimSpace(js), "\n") {
		var r struct {
			Key, Value string
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Key != r.Value || !strings.ContainsAny(r.Value, "\u009b\u202e\u009d") {
			t.Errorf("a line that does not read back as the record (%v): %s", err, l)
		}
	}
}
