package tui

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"

	"github.com/kfsniff/kfsniff/fixtures/record"
	"github.com/kfsniff/kfsniff/internal/termcheck"
)

// TestDetailShowsRecords: the detail of a Fetch exchange of a capture
// where kgo produced zstd-compressed records lists them decompressed as
// the producer wrote them (its sidecar): offsets, keys, text values as
// text, the binary value in hex, headers; nothing of them can drive the
// terminal.
func TestDetailShowsRecords(t *testing.T) {
	base := filepath.Join("..", "fixtures", "pcaps", record.CompressedDir, "compressed-kgo-zstd")
	sc, err := record.ReadSidecar(base + ".counts.json")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := analyse(t, base+".pcap", ModelConfig{})
	var fetch *Exchange
	for _, x := range m.AppendExchanges(nil, 0, 0) {
		if x.Key == 1 && x.Batches > 0 {
			fetch = &x
			break
		}
	}
	if fetch == nil {
		t.Fatal("no Fetch exchange carrying batches")
	}
	req, resp := m.Frames(fetch)
	text := detailTree(fetch, req, resp).String()
	if err := termcheck.Safe([]byte(text)); err != nil {
		t.Error(err)
	}
	if !strings.Contains(text, fmt.Sprintf("records (%d listed)", len(sc.Sent.Records))) {
		t.Errorf("tree lacks the count of records:\n%s", text)
	}
	for _, r := range sc.Sent.Records {
		key := "(null)"
		if r.Key != nil {
			key = string(r.Key)
		}
		var val string
		switch {
		case r.Value == nil:
			val = "(null)"
		case strings.ContainsAny(string(r.Value), "\x00\x1b"):
			val = fmt.Sprintf("0x%x", r.Value)
		default:
			val = string(r.Value)
		}
		want := fmt.Sprintf("offset %d  %s  key %s  value %s\n", r.Offset, msTime(r.Timestamp), key, val)
		if !strings.Contains(text, want) {
			t.Errorf("tree lacks %q:\n%s", want, text)
		}
		for _, h := range r.Headers {
			if strings.ContainsAny(string(h.Value), "\x00\x1b") || h.Value == nil {
				continue
			}
			if w := "header " + h.Key + " = " + string(h.Value); !strings.Contains(text, w) {
				t.Errorf("tree lacks %q", w)
			}
		}
	}
	if !strings.Contains(text, "header bin = 0x001bff") || !strings.Contains(text, "header null = (null)") {
		t.Errorf("binary and null header values not shown as such:\n%s", text)
	}
}

// TestDetailProduceRecords: in a Produce request the records are listed
// by their place in the batch (the log's offsets come with the
// response), with what the producer wrote.
func TestDetailProduceRecords(t *testing.T) {
	base := filepath.Join("..", "fixtures", "pcaps", record.CompressedDir, "compressed-kgo-gzip")
	sc, err := record.ReadSidecar(base + ".counts.json")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := analyse(t, base+".pcap", ModelConfig{})
	for _, x := range m.AppendExchanges(nil, 0, 0) {
		if x.Key != 0 {
			continue
		}
		req, resp := m.Frames(&x)
		text := detailTree(&x, req, resp).String()
		for i, r := range sc.Sent.Records {
			if r.Key == nil || r.Value == nil || strings.ContainsAny(string(r.Value), "\x00\x1b") {
				continue
			}
			if want := fmt.Sprintf("record %d  %s  key %s  value %s\n", i, msTime(r.Timestamp), r.Key, r.Value); !strings.Contains(text, want) {
				t.Errorf("tree lacks %q:\n%s", want, text)
			}
		}
		return
	}
	t.Fatal("no Produce exchange")
}

// TestViewDetailRecords: on the screen, the detail of the Produce
// exchange (Enter after filtering) lists its records under the batch.
func TestViewDetailRecords(t *testing.T) {
	m, _ := analyse(t, filepath.Join("..", "fixtures", "pcaps", record.CompressedDir, "compressed-kgo-lz4.pcap"), ModelConfig{})
	done := make(chan struct{})
	close(done)
	s := startUI(t, Options{Model: m, Done: done})
	s.waitFor("ENDED")
	s.typeText("/api:=Produce")
	s.key(tcell.KeyEnter)
	s.waitFor("Exchanges: all (1) filter: api:=Produce")
	s.key(tcell.KeyEnter)
	scr := s.waitFor("Decoded", "records (16 listed)")
	if l := line(scr, "record 0 "); !strings.Contains(l, "record 0  2026-01-01 00:00:00.000  key order-0000") {
		t.Errorf("first record's line %q:\n%s", l, scr)
	}
	if err := termcheck.Safe([]byte(scr)); err != nil {
		t.Error(err)
	}
}

// TestDetailControlMarkers: in the detail of the Fetch of kgo's
// transactions (fixtures/record.Transactions), the control batches'
// records read as the markers the broker wrote, with the producer id and
// epoch its sidecar lists, not as data (key 0x00000001 value
// 0x000000000000).
func TestDetailControlMarkers(t *testing.T) {
	base := filepath.Join("..", "fixtures", "pcaps", record.CompressedDir, record.TransactionsFile)
	sc, err := record.ReadSidecar(base + ".counts.json")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := analyse(t, base+".pcap", ModelConfig{})
	var text string
	for _, x := range m.AppendExchanges(nil, 0, 0) {
		if x.Key == 1 && x.Batches > 0 {
			req, resp := m.Frames(&x)
			text += detailTree(&x, req, resp).String()
		}
	}
	if len(sc.Sent.Markers) == 0 || strings.Contains(text, "key 0x0000000") {
		t.Fatalf("markers shown as data, or none listed:\n%s", text)
	}
	for _, mk := range sc.Sent.Markers {
		if w := fmt.Sprintf("offset %d  %s  producer id %d epoch %d\n", mk.Offset, mk.Type, mk.ProducerID, mk.ProducerEpoch); !strings.Contains(text, w) {
			t.Errorf("detail lacks %q:\n%s", w, text)
		}
	}
}
