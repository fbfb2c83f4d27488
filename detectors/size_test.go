package detectors_test

import (
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
)

type sizeParams struct {
	Max detectors.Bytes `param:"max-decompressed" unit:"MiB" alias:"max-decompressed-mib" doc:"largest records section decompressed"`
}

type sizeRule struct{ p sizeParams }

func (r sizeRule) Findings(*detectors.Pass) []detectors.Finding { return nil }

// TestSizeParameter: a size is given with its unit, or as a bare number in
// the parameter's unit (as the old name, in MiB, took it), and listed with
// its unit.
func TestSizeParameter(t *testing.T) {
	a := detectors.Define(detectors.Analyzer{Name: "sizes", Doc: "a rule with a size"}, sizeParams{Max: 16 * detectors.MiB},
		func(p sizeParams) detectors.Rule { return sizeRule{p} })
	for _, tc := range []struct {
		settings map[string]string
		want     detectors.Bytes
	}{
		{nil, 16 << 20},
		{map[string]string{"max-decompressed": "512KiB"}, 512 << 10},
		{map[string]string{"max-decompressed": "2GiB"}, 2 << 30},
		{map[string]string{"max-decompressed": "300B"}, 300},
		{map[string]string{"max-decompressed": "4"}, 4 << 20},
		{map[string]string{"max-decompressed-mib": "0.5"}, 512 << 10},
	} {
		r, err := a.New(tc.settings)
		if err != nil {
			t.Fatalf("%v: %v", tc.settings, err)
		}
		if got := r.(sizeRule).p.Max; got != tc.want {
			t.Errorf("%v: %d bytes, want %d", tc.settings, got, tc.want)
		}
	}
	for _, bad := range []string{"-1MiB", "lots", "16MB", "1e30GiB"} {
		if _, err := a.New(map[string]string{"max-decompressed": bad}); err == nil || !strings.Contains(err.Error(), "not a size") {
			t.Errorf("%q: %v, want an error saying it is not a size", bad, err)
		}
	}
	doc := strings.Join(strings.Fields(detectors.Describe([]*detectors.Analyzer{a})), " ")
	for _, s := range []string{"-o sizes.max-decompressed=16MiB (size)", "(also -o sizes.max-decompressed-mib in MiB)"} {
		if !strings.Contains(doc, s) {
			t.Errorf("the description lacks %q:\n%s", s, doc)
		}
	}
}
