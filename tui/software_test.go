package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"
)

// TestConnSoftware: the Connections table's SOFTWARE column shows what a
// client named itself in ApiVersions v3+ (sarama), and warns on a
// connection that used a request version Kafka 4.0 removed (kafka-python's
// Produce v1 in go-sniffer's capture) but not on one whose versions 4.0
// still serves (its Metadata v0).
func TestConnSoftware(t *testing.T) {
	m, _ := analyse(t, filepath.Join("..", "fixtures", "pcaps", "clients", "notleader-sarama.pcap"), ModelConfig{})
	for _, c := range m.Conns() {
		if c.Software != "sarama v1.61.1" || c.Removed40 != "" {
			t.Errorf("sarama #%d: software %q, removed %q", c.ID, c.Software, c.Removed40)
		}
		if cl := softwareCell(&c); cl.Text != "sarama v1.61.1" || fg(cl) != colorText {
			t.Errorf("sarama #%d: cell %q", c.ID, cl.Text)
		}
	}

	shared := filepath.Join("..", "..", "shared", "captures", "go-sniffer", "kafka.pcap")
	if _, err := os.Stat(shared); err != nil && os.Getenv("CI") == "" {
		t.Skipf("shared captures not beside the repository: %v", err)
	}
	m, _ = analyse(t, shared, ModelConfig{})
	meta, produce := findConn(t, m.Conns(), 1), findConn(t, m.Conns(), 2)
	if meta.Removed40 != "" || produce.Removed40 != "Produce v1" || produce.Software != "" {
		t.Errorf("kafka-python: #1 removed %q, #2 removed %q software %q; want -, Produce v1, -", meta.Removed40, produce.Removed40, produce.Software)
	}
	if cl := softwareCell(&produce); !strings.Contains(cl.Text, "Produce v1: not in Kafka 4.0") || fg(cl) != colorWarn {
		t.Errorf("kafka-python #2: cell %q", cl.Text)
	}
	if cl := softwareCell(&meta); cl.Text != "-" {
		t.Errorf("kafka-python #1: cell %q", cl.Text)
	}
}

// fg is a cell's text colour.
func fg(cl *tview.TableCell) tcell.Color {
	if cl.Style == tcell.StyleDefault {
		return cl.Color
	}
	f, _, _ := cl.Style.Decompose()
	return f
}
