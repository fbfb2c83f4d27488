package text

import "testing"

func TestFirst(t *testing.T) {
	if got := First([]string{"10.0.0.2:9092", "10.0.0.3:9092"}, "<broker>"); got != "10.0.0.2:9092" {
		t.Errorf("First: %q", got)
	}
	if got := First(nil, "<broker>"); got != "<broker>" {
		t.Errorf("First of none: %q", got)
	}
}
