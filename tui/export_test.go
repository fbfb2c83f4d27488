package tui

import (
	"strings"
	"testing"
)

// TestStatusExportDropped: with --export the status line counts the
// records shipping lost; without it, no such count.
func TestStatusExportDropped(t *testing.T) {
	m, _ := analyse(t, scenario("mm2-replay.pcap"), ModelConfig{})
	s := startUI(t, Options{Model: m, Title: "test"})
	if got := s.waitFor("exchanges"); strings.Contains(got, "export dropped") {
		t.Errorf("export count shown without --export:\n%s", got)
	}
	st := m.Status()
	m.SetCounters(Counters{Packets: st.Packets, Export: true, ExportDropped: 1234})
	s.waitFor("1234 export dropped")
}
