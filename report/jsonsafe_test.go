package report

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/kmsgtest"
)

// marshal returns v's compact JSON as a json.Encoder with
// SetEscapeHTML(false) writes it (a newline at the end), and the values
// it had to write otherwise (see above). It never fails.
func marshal(v any) ([]byte, []JSONIssue) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err == nil {
		return buf.Bytes(), nil
	}
	return marshalWalk(v)
}

// encodeStd is what encoding/json writes for v (no HTML escaping).
func encodeStd(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSafeEncoderSameAsJSON: on every value encoding/json can encode, the
// fallback writes the same bytes: every request and response of every
// version kmsg knows, filled field by field (report's
// TestSafeEncoderReports compares the reports of the golden captures).
func TestSafeEncoderSameAsJSON(t *testing.T) {
	var f kmsgtest.Filler
	n := 0
	for key := int16(0); key < 200; key++ {
		if !decode.KnownKey(key) {
			continue
		}
		for v := int16(0); v <= kmsg.Key(key).Request().MaxVersion(); v++ {
			for _, msg := range []any{f.Request(key, v), f.Response(key, v)} {
				n++
				got, issues := walk(msg)
				want := encodeStd(t, msg)
				if !bytes.Equal(got, want) || issues != nil {
					t.Fatalf("%T v%d: fallback differs (issues %v):\n got %.300s\nwant %.300s", msg, v, issues, got, want)
				}
			}
		}
	}
	if n < 500 {
		t.Fatalf("only %d messages compared", n)
	}
	t.Logf("%d kmsg messages compared", n)
}

// TestJSONNonFinite: NaN and the infinities, which encoding/json refuses,
// are written as strings, and nothing else of the document changes.
func TestJSONNonFinite(t *testing.T) {
	resp := kmsg.NewPtrDescribeClientQuotasResponse()
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1.5, 0} {
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		val := kmsg.NewDescribeClientQuotasResponseEntryValue()
		val.Key, val.Value = "producer_byte_rate", v
		e.Values = append(e.Values, val)
		resp.Entries = append(resp.Entries, e)
	}
	if _, err := json.Marshal(resp); err == nil {
		t.Fatal("encoding/json encodes NaN now: the fallback may no longer be needed")
	}
	got, issues := marshal(resp)
	if issues != nil {
		t.Errorf("issues %v: NaN and infinities are documented, not issues", issues)
	}
	var doc struct {
		Entries []struct{ Values []struct{ Value any } }
	}
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, got)
	}
	var vals []any
	for _, e := range doc.Entries {
		vals = append(vals, e.Values[0].Value)
	}
	if want := []any{"NaN", "+Inf", "-Inf", 1.5, 0.0}; !reflect.DeepEqual(vals, want) {
		t.Errorf("values %v, want %v", vals, want)
	}
	// The same message with finite values encodes as encoding/json does,
	// but for the three values.
	fin := *resp
	fin.Entries = append([]kmsg.DescribeClientQuotasResponseEntry(nil), resp.Entries...)
	for i, s := range []string{`"NaN"`, `"+Inf"`, `"-Inf"`} {
		e := fin.Entries[i]
		e.Values = []kmsg.DescribeClientQuotasResponseEntryValue{{Key: "producer_byte_rate", Value: 7}}
		fin.Entries[i] = e
		got = bytes.Replace(got, []byte(`"Value":`+s), []byte(`"Value":7`), 1)
	}
	if want := encodeStd(t, &fin); !bytes.Equal(got, want) {
		t.Errorf("beyond the three values:\n got %s\nwant %s", got, want)
	}
}

// TestJSONTimeOutOfRange: times after 9999 and before year 0 are clamped
// and each is reported with its place in the document.
func TestJSONTimeOutOfRange(t *testing.T) {
	f := detectors.Finding{
		Detector: "x", Severity: detectors.Warning,
		First: time.Unix(400e9, 0).UTC(), Last: time.Unix(-70e9, 0).UTC(),
		Fields: map[string]any{"ratio": math.Inf(1), "when": time.Unix(300e9, 0)},
	}
	got, issues := marshal(struct {
		Findings []detectors.Finding `json:"findings"`
	}{[]detectors.Finding{f}})
	var doc struct {
		Findings []struct {
			First, Last string
			Fields      map[string]any
		}
	}
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, got)
	}
	d := doc.Findings[0]
	if d.First != "9999-12-31T23:59:59.999999999Z" || d.Last != "0000-01-01T00:00:00Z" ||
		d.Fields["ratio"] != "+Inf" || d.Fields["when"] != "9999-12-31T23:59:59.999999999Z" {
		t.Errorf("got %+v", d)
	}
	var paths []string
	for _, i := range issues {
		paths = append(paths, i.Path)
		if !strings.Contains(i.What, "year") {
			t.Errorf("issue %q does not say the year", i)
		}
	}
	if want := []string{"findings[0].first", "findings[0].last", "findings[0].fields.when"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("issues at %v, want %v", paths, want)
	}
}
