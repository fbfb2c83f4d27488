package detectortest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
)

// Want is what a finding must show: its severity, the counts and fields
// named (others are not compared), and strings its summary must contain.
type Want struct {
	Severity detectors.Severity
	Counts   map[string]int64
	Fields   map[string]any
	Summary  []string
	// Evidence, if set, are packets that must be among the evidence.
	Evidence []uint64
	// Detail, if set, is the rule's typed finding (a pointer to its
	// Detail type) with the fields the finding must have: each field
	// set, not zero, is compared with the finding's; a zero field is not
	// (the case's goldens hold the whole finding), unless Exact names it.
	Detail detectors.Detail
	// Exact are fields of Detail compared even where zero there: an
	// expected false, 0 or nil.
	Exact []string
	// ExplainedBy, if set, is the rule whose finding the Set found to
	// explain this one (its "explained_by" field).
	ExplainedBy string
}

// Ptr returns a pointer to v, for a Detail's optional fields.
func Ptr[T any](v T) *T { return &v }

// Check compares the findings of rule with want, in order: the same
// number, and each as its Want says, and with the test's goldens (Golden).
// It reports every difference.
func Check(t testing.TB, findings []detectors.Finding, rule string, want ...Want) {
	t.Helper()
	Golden(t, findings, rule)
	Compare(t, findings, rule, want...)
}

// Compare is Check without goldens, for findings over a capture (whose
// goldens are the report's).
func Compare(t testing.TB, findings []detectors.Finding, rule string, want ...Want) {
	t.Helper()
	var got []detectors.Finding
	for _, f := range findings {
		if f.Detector == rule {
			got = append(got, f)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d %s findings, want %d:%s", len(got), rule, len(want), Describe(got))
		return
	}
	for i, w := range want {
		f := got[i]
		if f.Severity != w.Severity {
			t.Errorf("%s finding %d: severity %s, want %s: %s", rule, i, f.Severity, w.Severity, f.Summary)
		}
		for k, n := range w.Counts {
			if v, ok := f.Counts[k]; !ok || v != n {
				t.Errorf("%s finding %d: count %s = %d (present %v), want %d", rule, i, k, v, ok, n)
			}
		}
		for k, v := range w.Fields {
			if g, ok := f.Fields[k]; !ok || !reflect.DeepEqual(g, v) {
				t.Errorf("%s finding %d: field %s = %#v (present %v), want %#v", rule, i, k, g, ok, v)
			}
		}
		for _, s := range w.Summary {
			if !strings.Contains(f.Summary, s) {
				t.Errorf("%s finding %d: summary %q lacks %q", rule, i, f.Summary, s)
			}
		}
		for _, p := range w.Evidence {
			found := false
			for _, e := range f.Evidence {
				found = found || e.Packet == p
			}
			if !found {
				t.Errorf("%s finding %d: no evidence at packet %d", rule, i, p)
			}
		}
		if g, _ := f.Fields["explained_by"].(string); w.ExplainedBy != "" && g != w.ExplainedBy {
			t.Errorf("%s finding %d: explained by %q, want %q", rule, i, g, w.ExplainedBy)
		}
		if w.Detail != nil {
			compareDetail(t, rule, i, w.Detail, f.Detail, w.Exact)
		} else if len(w.Exact) > 0 {
			t.Errorf("%s finding %d: Exact %v without a Detail", rule, i, w.Exact)
		}
		if f.Explanation == "" || f.Next == "" {
			t.Errorf("%s finding %d: every finding says what it means and what to check next", rule, i)
		}
	}
}

// Describe lists findings, for failure messages.
func Describe(fs []detectors.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "\n  %s %s: %s counts=%v fields=%v", f.Severity, f.Detector, f.Summary, f.Counts, f.Fields)
	}
	return b.String()
}

// compareDetail reports the fields set in want (or named in exact) that
// got's differ from. The fields of an embedded struct are compared one by
// one, as the detail's own.
func compareDetail(t testing.TB, rule string, i int, want, got detectors.Detail, exact []string) {
	t.Helper()
	wv, gv := reflect.ValueOf(want), reflect.ValueOf(got)
	if got == nil || wv.Type() != gv.Type() {
		t.Errorf("%s finding %d: detail %T, want %T", rule, i, got, want)
		return
	}
	wv, gv = reflect.Indirect(wv), reflect.Indirect(gv)
	named := map[string]bool{}
	for _, n := range exact {
		if _, ok := wv.Type().FieldByName(n); !ok {
			t.Errorf("%s finding %d: Exact names %s, not a field of %T", rule, i, n, want)
		}
		named[n] = true
	}
	compareFields(t, rule, i, wv, gv, named)
}

func compareFields(t testing.TB, rule string, i int, wv, gv reflect.Value, exact map[string]bool) {
	t.Helper()
	for j := range wv.NumField() {
		sf := wv.Type().Field(j)
		if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			compareFields(t, rule, i, wv.Field(j), gv.Field(j), exact)
			continue
		}
		if !sf.IsExported() || wv.Field(j).IsZero() && !exact[sf.Name] {
			continue
		}
		if w, g := wv.Field(j).Interface(), gv.Field(j).Interface(); !reflect.DeepEqual(w, g) {
			t.Errorf("%s finding %d: %s = %s, want %s", rule, i, sf.Name, show(g), show(w))
		}
	}
}

// show prints a field's value, and what a pointer points at.
func show(v any) string {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return fmt.Sprintf("&%#v", rv.Elem().Interface())
	}
	return fmt.Sprintf("%#v", v)
}
