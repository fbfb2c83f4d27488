package correlate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse: whatever the bytes, Parse returns a version 1 record or one
// of its two errors, never panics; what it accepts is JSON encoding/json
// accepts too, whose reading of the common fields it agrees with; and
// Stats takes any record it returns. Seeded with real shipped records.
func FuzzParse(f *testing.F) {
	for i, v := range shipCapture(f, "../fixtures/pcaps/scenarios/replica-divergence.pcap", "fuzz") {
		if i%7 == 0 {
			f.Add(v)
		}
	}
	for _, s := range []string{exchangeWith(`,"batches":[{},{},{}]`), exchangeWith(`,"agent":"` + strings.Repeat("\\u00e9", 600) + `"`),
		`{"v":1,"type":"exchange","agent":"\ud83d\ude00","errors":[[1,2]]}`, `{"v":1,"type":"finding","finding":{"a":[1,{"b":null}]}}`, `{"v":3}`, `{"v":2,"type":"exchange","api":3,"ver":9,"req_body":"AAAAAQ=="}`, `[]`} {
		f.Add([]byte(s))
	}
	st := NewStats(Limits{Window: 64, Batches: 64})
	n := 0
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrVersion) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is neither ErrVersion nor ErrMalformed", err)
			}
			st.Unreadable(err)
			return
		}
		if r.V < MinSchemaVersion || r.V > SchemaVersion || r.Type == "" {
			t.Fatalf("accepted v %d type %q", r.V, r.Type)
		}
		// encoding/json's reading of the same keys (exactly: a struct
		// would match "Agent" too), the last of duplicates winning.
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("Parse accepted what encoding/json refuses (%v): %q", err, b)
		}
		var typ, agent string
		var ts int64
		json.Unmarshal(doc["type"], &typ)
		json.Unmarshal(doc["agent"], &agent)
		json.Unmarshal(doc["ts_ns"], &ts)
		if len(agent) > MaxAgent && strings.HasPrefix(agent, r.Agent) && len(r.Agent) > MaxAgent-utf8.UTFMax && r.Clipped > 0 {
			agent = r.Agent // cut to MaxAgent
		}
		if typ != r.Type || agent != r.Agent || ts != r.TS {
			t.Fatalf("Parse read %q %q %d, encoding/json %q %q %d", r.Type, r.Agent, r.TS, typ, agent, ts)
		}
		// Structure-size invariants (issue 31): bounded counts, strings
		// cut, and no more than maxRecordSize decoded.
		if len(r.Batches) > MaxBatches || len(r.Errors) > MaxErrors || len(b) > MaxRecordBytes {
			t.Fatalf("accepted %d batches, %d error codes, %d bytes", len(r.Batches), len(r.Errors), len(b))
		}
		for _, s := range []string{r.Type, r.Agent, r.Run, r.Cluster, r.Client, r.Server, r.ClientID.V, r.Role, r.Status,
			r.TxnID.V, r.Group, r.Topic, r.TopicID, r.Event, r.State} {
			if len(s) > MaxString {
				t.Fatalf("a string of %d bytes kept", len(s))
			}
		}
		if size := r.Size(); size > maxRecordSize(len(b)) {
			t.Fatalf("%d bytes decoded to %d", len(b), size)
		}
		st.Add(&r)
		if n++; n%256 == 0 {
			st.Section()
		}
	})
}
