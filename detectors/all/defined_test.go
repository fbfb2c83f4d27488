package all_test

import (
	"testing"

	"github.com/kfsniff/kfsniff/detectors/all"
)

// TestEveryRuleWellDefined: every rule's parameters are well defined
// (tags, types, defaults within range). Define does not check them at
// start-up (every run would read every rule's tags), so this test does.
func TestEveryRuleWellDefined(t *testing.T) {
	as := all.Analyzers()
	if len(as) < 20 {
		t.Fatalf("%d rules: the list is not the rules'", len(as))
	}
	for _, a := range as {
		if err := a.Check(); err != nil {
			t.Error(err)
		}
	}
}
