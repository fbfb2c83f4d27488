package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// jsonIndent is what appendIndent must equal: encoding/json's own indenter.
func jsonIndent(t testing.TB, src []byte, prefix, indent string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, src, prefix, indent); err != nil {
		t.Fatalf("json.Indent of valid JSON %q: %v", src, err)
	}
	return b.Bytes()
}

// checkIndent fails unless appendIndent gives json.Indent's bytes for src,
// with the --json report's indentation and with a prefix, after what dst
// already holds.
func checkIndent(t testing.TB, name string, src []byte) {
	t.Helper()
	for _, p := range []struct{ prefix, indent string }{{"", "  "}, {"        ", "\t"}} {
		want := jsonIndent(t, src, p.prefix, p.indent)
		got := appendIndent([]byte("x"), src, p.prefix, p.indent)
		if !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Errorf("%s, prefix %q indent %q: appendIndent differs from json.Indent\nsrc:  %q\ngot:  %q\nwant: %q",
				name, p.prefix, p.indent, src, got, want)
		}
	}
}

var indentCases = []struct{ name, src string }{
	{"empty object", `{}`},
	{"empty array", `[]`},
	{"empty object, newline after", "{}\n"},
	{"nested empties", `{"a":{},"b":[],"c":[{},[],[[]],{"d":{}}]}`},
	{"empties among values", `[1,[],2,{},3]`},
	{"scalars", `[0,-1.5e+10,1E-3,true,false,null,""]`},
	{"top-level number", `12`},
	{"top-level number, newline after", "12\n"},
	{"top-level string", `"a"`},
	{"top-level literal", `null`},
	{"escaped quote", `{"a\"b":"c\"d\"","e":"\""}`},
	{"escaped backslashes", `["\\","\\\\","a\\\"","\\\"\\"]`},
	{"backslash before closing quote", `{"k\\":"v\\\\"}`},
	{"unicode escapes", `{"\u00e9":"\u0022\u005c\ud83d\ude00","x":"\u001b[31m"}`},
	{"punctuation inside strings", `{"{[":"]}","a,b":":,:","\"{,}\"":"[\",\"]"}`},
	{"spaces inside strings", `{"a b":"  c\t "}`},
	{"raw utf-8", `{"clé":"日本語 – ☃"}`},
	{"whitespace between tokens", " { \"a\" : [ 1 , 2 ] ,\n\t\"b\" :\r\n{ } } \n "},
	{"already indented", "{\n  \"a\": [\n    1\n  ]\n}\n"},
	{"deep", `[[[[[[[[[[{"a":[[[{}]]]}]]]]]]]]]]`},
}

func TestIndentCases(t *testing.T) {
	for _, c := range indentCases {
		if !json.Valid([]byte(c.src)) {
			t.Fatalf("%s: case is not valid JSON: %q", c.name, c.src)
		}
		checkIndent(t, c.name, []byte(c.src))
	}
}

// TestIndentGoldens indents, both ways, every JSON document in the goldens
// (the --json reports, the --frames --json lines), compacted first as
// encoding/json writes them.
func TestIndentGoldens(t *testing.T) {
	n := 0
	for _, root := range []string{"testdata", "../cmd/kfsniff/testdata"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			var docs [][]byte
			switch {
			case strings.HasSuffix(path, ".json"):
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				docs = append(docs, b)
			case strings.HasSuffix(path, ".jsonl"):
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				defer f.Close()
				sc := bufio.NewScanner(f)
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					docs = append(docs, bytes.Clone(sc.Bytes()))
				}
				if err := sc.Err(); err != nil {
					return err
				}
			}
			for _, doc := range docs {
				// Goldens past their size limit are cut (see fit in
				// golden_test.go) and no longer JSON.
				if !json.Valid(doc) {
					continue
				}
				var compact bytes.Buffer
				if err := json.Compact(&compact, doc); err != nil {
					return err
				}
				compact.WriteByte('\n') // as json.Encoder ends a value
				checkIndent(t, path, compact.Bytes())
				n++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// 120-odd report goldens and the frames lines: far fewer means the
	// walk no longer finds them.
	if n < 100 {
		t.Fatalf("compared %d JSON documents from the goldens, want at least 100", n)
	}
	t.Logf("compared %d JSON documents", n)
}

// FuzzIndent: for any valid JSON, appendIndent gives json.Indent's bytes.
func FuzzIndent(f *testing.F) {
	for _, c := range indentCases {
		f.Add([]byte(c.src))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if !json.Valid(src) {
			return
		}
		checkIndent(t, "fuzz", src)
	})
}

// BenchmarkIndent compares appendIndent with json.Indent on a large golden
// report, compacted as json.Encoder writes it.
func BenchmarkIndent(b *testing.B) {
	doc, err := os.ReadFile("testdata/golden/scenarios/election-stall.pcap.report.json")
	if err != nil {
		b.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		b.Fatal(err)
	}
	compact.WriteByte('\n')
	src := compact.Bytes()
	b.Run("appendIndent", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		var dst []byte
		for b.Loop() {
			dst = appendIndent(dst[:0], src, "", "  ")
		}
	})
	b.Run("json.Indent", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		var dst bytes.Buffer
		for b.Loop() {
			dst.Reset()
			if err := json.Indent(&dst, src, "", "  "); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestWriteJSONAsEncoder: WriteJSON writes what it wrote when it was a
// json.Encoder with SetEscapeHTML(false) and SetIndent("", "  ") writing
// through SafeJSONWriter, for a report whose strings hold everything the
// two could differ on: HTML characters, quotes and backslashes, C0 and C1
// controls, invalid UTF-8, brackets, and empty lists and maps.
func TestWriteJSONAsEncoder(t *testing.T) {
	hostile := "<a href=\"x\">&amp;</a> \\\" \\\\ \x1b[31m \u009b2J \xff\xfe {[,:]} \u2028 日本"
	r := &Report{
		Schema:  Schema,
		Capture: Capture{Files: []File{{Name: hostile, Format: "pcap", LinkTypes: []string{}, Error: hostile}}},
		Totals: Totals{
			SkippedBytes:   map[string]int64{hostile: 1, "": 0},
			DatagramsLost:  map[string]int64{},
			FirstBadPacket: &Problem{Packet: 7, What: hostile},
		},
		APIs:        []API{{Name: hostile, Errors: map[string]int64{}}},
		Connections: []Connection{},
		Events:      []Event{{Kind: hostile, Client: "[::1]:9092"}},
		Lag:         nil,
	}
	var old bytes.Buffer
	enc := json.NewEncoder(SafeJSONWriter{W: &old})
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := WriteJSON(&got, r); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), old.Bytes()) {
		t.Errorf("WriteJSON differs from the Encoder it replaced\ngot:\n%s\nwant:\n%s", got.Bytes(), old.Bytes())
	}
	// The document is what is tested: it must hold the characters the
	// escaping settings are about, raw, and the sanitised C1 control.
	for _, want := range []string{`<a href=\"x\">&amp;</a>`, `\\\"`, `\u001b`, `\u009b`, `\ufffd`, "{}", "[]"} {
		if !bytes.Contains(got.Bytes(), []byte(want)) {
			t.Errorf("WriteJSON's document lacks %s:\n%s", want, got.Bytes())
		}
	}
}

// SafeJSONWriter applies SafeJSON to every Write (each a whole JSON value,
// as json.Encoder writes them).
type SafeJSONWriter struct{ W io.Writer }

func (s SafeJSONWriter) Write(b []byte) (int, error) {
	if _, err := s.W.Write(SafeJSON(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}
