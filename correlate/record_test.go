package correlate

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// fields is a Record back in the schema's JSON, the fields present only,
// numbers as json.Number: what the exporter wrote, if Parse lost nothing.
func fields(r *Record) map[string]any {
	m := map[string]any{}
	num := func(k string, v int64) { m[k] = json.Number(strconv.FormatInt(v, 10)) }
	str := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	nz := func(k string, v int64) {
		if v != 0 {
			num(k, v)
		}
	}
	o64 := func(k string, o Opt[int64]) {
		if o.Set {
			num(k, o.V)
		}
	}
	o32 := func(k string, o Opt[int32]) { o64(k, Opt[int64]{int64(o.V), o.Set}) }
	o16 := func(k string, o Opt[int16]) { o64(k, Opt[int64]{int64(o.V), o.Set}) }
	num("v", int64(r.V))
	str("type", r.Type)
	str("agent", r.Agent)
	str("cluster", r.Cluster)
	str("run", r.Run)
	nz("seq", r.Seq)
	if r.Type == TypeFinding {
		str("state", r.State)
		if r.Finding != nil {
			var f any
			dec := json.NewDecoder(bytes.NewReader(r.Finding))
			dec.UseNumber()
			if err := dec.Decode(&f); err == nil {
				m["finding"] = f
			}
		}
		return m
	}
	num("ts_ns", r.TS)
	if r.ReqBody != nil {
		m["req_body"] = base64.StdEncoding.EncodeToString(r.ReqBody)
	}
	if r.RespBody != nil {
		m["resp_body"] = base64.StdEncoding.EncodeToString(r.RespBody)
	}
	o64("latency_ns", r.Latency)
	nz("conn", int64(r.Conn))
	str("client", r.Client)
	str("server", r.Server)
	o32("node", r.Node)
	if r.ClientID.Set {
		m["client_id"] = r.ClientID.V
	}
	nz("file", int64(r.File))
	if r.Type == TypeConn {
		str("event", r.Event)
		nz("attempts", int64(r.Attempts))
		num("pkt", r.Pkt)
		if r.Handshake {
			m["handshake"] = true
		}
		if r.Last.Set {
			num("last_ns", r.Last.V)
		}
		if r.First.Set {
			num("first_ns", r.First.V)
		}
		if r.MidStream {
			m["midstream"] = true
		}
		return m
	}
	num("api", int64(r.API))
	num("ver", int64(r.Ver))
	num("corr", int64(r.Corr))
	str("role", r.Role)
	str("status", r.Status)
	o64("end_ns", r.End)
	nz("conn_gaps", int64(r.ConnGaps))
	nz("req_pkt", r.ReqPkt)
	nz("resp_pkt", r.RespPkt)
	o32("replica", r.Replica)
	o32("max_wait_ms", r.MaxWait)
	o32("throttle_time_ms", r.Throttle)
	o16("acks", r.Acks)
	if r.TxnID.Set {
		m["txn_id"] = r.TxnID.V
	}
	str("group", r.Group)
	str("fp_fn", r.PrintFn)
	if r.Errors != nil {
		var es []any
		for _, e := range r.Errors {
			es = append(es, []any{json.Number(strconv.Itoa(int(e.Code))), json.Number(strconv.FormatInt(e.Count, 10))})
		}
		m["errors"] = es
	}
	if r.Parts == 0 {
		return m
	}
	num("parts", int64(r.Parts))
	o64("batch_index", Opt[int64]{int64(r.BatchIndex.V), r.BatchIndex.Set})
	str("topic", r.Topic)
	if r.TopicID != "" {
		str("topic_id", r.TopicID)
	}
	num("partition", int64(r.Partition))
	o64("fetch_offset", r.FetchOffset)
	o64("timestamp", r.Timestamp)
	o64("offset", r.Offset)
	o64("committed_offset", r.CommittedOffset)
	o32("offset_leader_epoch", r.OffsetEpoch)
	o16("error", r.Error)
	o64("high_watermark", r.HighWatermark)
	o64("last_stable_offset", r.LastStableOffset)
	o64("log_start_offset", r.LogStartOffset)
	o64("base_offset", r.BaseOffset)
	o32("leader", r.Leader)
	o32("leader_epoch", r.LeaderEpoch)
	if r.Batches != nil {
		var bs []any
		for _, b := range r.Batches {
			bm := map[string]any{}
			bn := func(k string, v int64) { bm[k] = json.Number(strconv.FormatInt(v, 10)) }
			if b.Offset.Set {
				bn("offset", b.Offset.V)
			}
			if b.BaseOffset.Set {
				bn("base_offset", b.BaseOffset.V)
			}
			bn("last_offset_delta", int64(b.LastOffsetDelta))
			bn("records", int64(b.Records))
			bn("crc", int64(b.CRC))
			if b.CRCBad {
				bm["crc_ok"] = false
				bn("crc_computed", int64(b.ComputedCRC))
			}
			bn("magic", int64(b.Magic))
			bn("leader_epoch", int64(b.LeaderEpoch))
			bn("producer_id", b.ProducerID)
			bn("producer_epoch", int64(b.ProducerEpoch))
			bn("base_sequence", int64(b.BaseSequence))
			bn("attributes", int64(b.Attributes))
			bn("bytes", int64(b.Bytes))
			bn("first_ts", b.FirstTS)
			bn("max_ts", b.MaxTS)
			if b.Prints != nil {
				var raw []byte
				seq := true
				var ds []any
				for i, p := range b.Prints {
					raw = binary.BigEndian.AppendUint64(raw, p.Sum)
					raw = binary.BigEndian.AppendUint64(raw, p.Hi)
					seq = seq && p.Delta == int32(i)
					ds = append(ds, json.Number(strconv.Itoa(int(p.Delta))))
				}
				bm["fp"] = base64.StdEncoding.EncodeToString(raw)
				if !seq {
					bm["fp_deltas"] = ds
				}
			}
			if b.PrintErr != "" {
				bm["fp_err"] = b.PrintErr
			}
			bs = append(bs, bm)
		}
		m["batches"] = bs
	}
	return m
}

// differ names the fields two records do not agree on.
func differ(got, want map[string]any) string {
	var d []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			d = append(d, k+" lost")
		} else if !reflect.DeepEqual(g, w) {
			d = append(d, fmt.Sprintf("%s %.100v, want %.100v", k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			d = append(d, k+" not written")
		}
	}
	sort.Strings(d)
	return strings.Join(d, "; ")
}

// generic decodes a value with encoding/json, numbers kept exact.
func generic(t testing.TB, v []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("encoding/json: %v: %.200s", err, v)
	}
	return m
}

// keysOf lists the keys of a record and of its batches ("batches.crc").
func keysOf(m map[string]any, into map[string]bool) {
	for k, v := range m {
		into[k] = true
		if k == "batches" {
			for _, b := range v.([]any) {
				for bk := range b.(map[string]any) {
					into["batches."+bk] = true
				}
			}
		}
	}
}

// documented are the fields docs/export.md lists (version 3).
var documented = strings.Fields(`v type agent run seq cluster ts_ns latency_ns conn client server node client_id req_body resp_body
	api ver corr role status end_ns conn_gaps req_pkt resp_pkt file replica max_wait_ms throttle_time_ms acks txn_id group errors
	parts batch_index topic topic_id partition fetch_offset timestamp offset committed_offset offset_leader_epoch error
	high_watermark last_stable_offset log_start_offset base_offset leader leader_epoch batches
	batches.offset batches.base_offset batches.last_offset_delta batches.records batches.crc batches.crc_ok batches.crc_computed
	batches.magic batches.leader_epoch batches.producer_id batches.producer_epoch batches.base_sequence
	batches.attributes batches.bytes batches.first_ts batches.max_ts fp_fn batches.fp batches.fp_deltas batches.fp_err
	event attempts pkt handshake midstream last_ns first_ns state finding`)

// TestRoundTrip: every record the real exporter ships from the scenario
// captures, and from exchanges built for the fields they lack, parses to
// a Record that holds every field as written: the fields present, their
// values exact (ts_ns past 2^53 too), the absent ones absent. And every
// field of the schema was seen at least once.
func TestRoundTrip(t *testing.T) {
	caps, err := filepath.Glob("../fixtures/pcaps/scenarios/*.pcap")
	if err != nil || len(caps) == 0 {
		t.Fatalf("no scenario captures: %v", err)
	}
	var vals [][]byte
	for _, c := range caps {
		vals = append(vals, shipCapture(t, c, "host-"+filepath.Base(c))...)
	}
	vals = append(vals, shipBuilt(t)...)
	seen := map[string]bool{}
	types := map[string]int{}
	ids := map[string]bool{}
	for _, v := range vals {
		r, err := Parse(v)
		if err != nil {
			t.Fatalf("%v: %.300s", err, v)
		}
		if r.Type == TypeExchange || r.Type == TypeConn {
			// Every record its own identity: the correlator drops one it
			// has read (the records of an exchange split by partition
			// shared theirs at first).
			id := fmt.Sprintf("%s/%s/%d", r.Agent, r.Run, r.Seq)
			if r.Run == "" || r.Seq <= 0 || ids[id] {
				t.Fatalf("identity %s missing or taken twice: %.300s", id, v)
			}
			ids[id] = true
		}
		want := generic(t, v)
		keysOf(want, seen)
		types[r.Type]++
		if got := fields(&r); !reflect.DeepEqual(got, want) {
			t.Fatalf("record read back differs: %s\nfrom %.500s", differ(got, want), v)
		}
	}
	var missing []string
	for _, k := range documented {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	var extra []string
	for k := range seen {
		if !strings.Contains(" "+strings.Join(documented, " ")+" ", " "+k+" ") {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("fields never shipped: %v; shipped, not in docs/export.md: %v", missing, extra)
	}
	doc, err := os.ReadFile("../docs/export.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range documented {
		if name := strings.TrimPrefix(k, "batches."); !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/export.md does not name %s", name)
		}
	}
	if types[TypeExchange] == 0 || types[TypeConn] == 0 || types[TypeFinding] == 0 {
		t.Errorf("record types read: %v; want exchanges, connection events and findings", types)
	}
	t.Logf("%d records: %v", len(vals), types)
}

// TestParseErrors: another version, no version, malformed JSON, a field
// of the wrong type or range, trailing data: errors the caller can tell
// apart (ErrVersion, ErrMalformed); unknown fields and an unknown type
// are accepted.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     error
	}{
		{"version 4", `{"v":4,"type":"exchange"}`, ErrVersion},
		{"version 0", `{"v":0,"type":"exchange"}`, ErrVersion},
		{"body not base64", `{"v":2,"type":"exchange","req_body":"a*=="}`, ErrMalformed},
		{"body too large", `{"v":2,"type":"exchange","req_body":"` + strings.Repeat("A", MaxBody*4/3+8) + `"}`, ErrTooLarge},
		{"no version", `{"type":"exchange","agent":"a"}`, ErrVersion},
		{"version a string", `{"v":"1","type":"exchange"}`, ErrMalformed},
		{"not JSON", `v=1 type=exchange`, ErrMalformed},
		{"cut short", `{"v":1,"type":"exchange","agent":"a`, ErrMalformed},
		{"array", `[1]`, ErrMalformed},
		{"empty", ``, ErrMalformed},
		{"trailing", `{"v":1,"type":"conn"} x`, ErrMalformed},
		{"two objects", `{"v":1,"type":"conn"}{"v":1,"type":"conn"}`, ErrMalformed},
		{"api past int16", `{"v":1,"type":"exchange","api":40000}`, ErrMalformed},
		{"fraction", `{"v":1,"type":"exchange","ts_ns":1.5}`, ErrMalformed},
		{"negative crc", `{"v":1,"type":"exchange","parts":1,"batches":[{"crc":-1}]}`, ErrMalformed},
		{"crc past uint32", `{"v":1,"type":"exchange","parts":1,"batches":[{"crc":4294967296}]}`, ErrMalformed},
		{"ts past int64", `{"v":1,"type":"exchange","ts_ns":9223372036854775808}`, ErrMalformed},
		{"leading zero", `{"v":1,"type":"exchange","corr":01}`, ErrMalformed},
		{"errors not pairs", `{"v":1,"type":"exchange","errors":[[1,2,3]]}`, ErrMalformed},
		{"bad escape", `{"v":1,"type":"exchange","agent":"a\x"}`, ErrMalformed},
		{"raw control", "{\"v\":1,\"type\":\"exchange\",\"agent\":\"a\x01\"}", ErrMalformed},
		{"unknown bad", `{"v":1,"type":"exchange","new":[1,}`, ErrMalformed},
		{"deep", `{"v":1,"type":"exchange","new":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, ErrMalformed},
		{"no type", `{"v":1}`, ErrMalformed},
		{"unknown fields", `{"v":1,"type":"exchange","new":{"a":[1,2.5e3,true,null,"x"]},"agent":"a"}`, nil},
		{"unknown type", `{"v":1,"type":"heartbeat","agent":"a"}`, nil},
		{"nulls absent", `{"v":1,"type":"exchange","latency_ns":null,"node":null,"client_id":null}`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Parse([]byte(c.in))
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Parse(%s) = %v; want %v", c.in, err, c.want)
			}
			if err == nil && (r.V != 1 || r.Latency.Set || r.Node.Set || r.ClientID.Set) {
				t.Errorf("Parse(%s) = %+v", c.in, r)
			}
		})
	}
}

// TestParseStrings: escapes decode as encoding/json decodes them,
// surrogate pairs, lone surrogates and invalid UTF-8 included.
func TestParseStrings(t *testing.T) {
	for _, s := range []string{`plain`, `a\"b\\c\/d\n\t\r\b\f`, `\u00e9\u001b[31m`, `\ud83d\ude00 x`, `\ud83d alone`, "caf\xc3\xa9 \xff\xfe", `\u202e`} {
		in := `{"v":1,"type":"exchange","agent":"` + s + `"}`
		r, err := Parse([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		var want struct{ Agent string }
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if r.Agent != want.Agent {
			t.Errorf("%s: agent %q; encoding/json reads %q", s, r.Agent, want.Agent)
		}
	}
}

// TestParseKeepsNoReference: the caller may reuse the buffer at once.
func TestParseKeepsNoReference(t *testing.T) {
	in := []byte(`{"v":1,"type":"finding","agent":"a","state":"final","finding":{"detector":"x"}}`)
	r, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = ' '
	}
	if r.Agent != "a" || r.State != "final" || string(r.Finding) != `{"detector":"x"}` {
		t.Errorf("record changed with its buffer: %+v", r)
	}
}
