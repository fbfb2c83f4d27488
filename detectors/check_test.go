package detectors_test

import (
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
)

type noDoc struct {
	N int `param:"n"`
}

type outOfRange struct {
	F float64 `param:"f" range:"0,1" doc:"a fraction"`
}

type notAParam struct {
	S string `param:"s" doc:"a string"`
}

// TestCheckDefinition: Check refuses a parameter without doc, a default
// outside its range and a type that is no parameter type, naming the rule
// and the parameter; New with settings refuses them too. (Define no longer
// checks at start-up: detectors/all's TestEveryRuleWellDefined checks
// every rule.)
func TestCheckDefinition(t *testing.T) {
	for _, tc := range []struct {
		a    *detectors.Analyzer
		want string
	}{
		{detectors.Define(detectors.Analyzer{Name: "nodoc"}, noDoc{}, func(noDoc) detectors.Rule { return sizeRule{} }), "nodoc: n: no doc"},
		{detectors.Define(detectors.Analyzer{Name: "range"}, outOfRange{F: 2}, func(outOfRange) detectors.Rule { return sizeRule{} }), "range: f: default 2"},
		{detectors.Define(detectors.Analyzer{Name: "str"}, notAParam{}, func(notAParam) detectors.Rule { return sizeRule{} }), "str: s: type string is not a parameter type"},
	} {
		if err := tc.a.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check() = %v, want an error with %q", tc.a.Name, err, tc.want)
		}
		if _, err := tc.a.New(map[string]string{"x": "1"}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New(settings) = %v, want an error with %q", tc.a.Name, err, tc.want)
		}
	}
	good := detectors.Define(detectors.Analyzer{Name: "sizes", Doc: "a rule with a size"}, sizeParams{Max: 16 * detectors.MiB},
		func(p sizeParams) detectors.Rule { return sizeRule{p} })
	if err := good.Check(); err != nil {
		t.Errorf("a well-defined rule: %v", err)
	}
}

// TestNewWithoutSettingsKeepsDefaults: a rule made without settings gets the
// defaults, and a rule made with settings changes neither them nor a rule
// made before.
func TestNewWithoutSettingsKeepsDefaults(t *testing.T) {
	a := detectors.Define(detectors.Analyzer{Name: "sizes", Doc: "a rule with a size"}, sizeParams{Max: 16 * detectors.MiB},
		func(p sizeParams) detectors.Rule { return &sizeRule{p} })
	r1, err := a.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.New(map[string]string{"max-decompressed": "1MiB"})
	if err != nil {
		t.Fatal(err)
	}
	r3, err := a.New(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r1.(*sizeRule).p.Max; got != 16*detectors.MiB {
		t.Errorf("first rule: %d, want the default", got)
	}
	if got := r2.(*sizeRule).p.Max; got != detectors.MiB {
		t.Errorf("set rule: %d, want 1 MiB", got)
	}
	if got := r3.(*sizeRule).p.Max; got != 16*detectors.MiB {
		t.Errorf("rule after a set one: %d, want the default", got)
	}
	r1.(*sizeRule).p.Max = 1
	if got := a.Params()[0].Default; got != "16MiB" {
		t.Errorf("defaults after a rule changed its copy: %s, want 16MiB", got)
	}
}
