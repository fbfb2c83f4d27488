package main

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// TestKeepClosed: --keep-closed folds the connections closed for longer
// into the totals and the report says how many (the JSON's
// closed_connections_folded, a text line), apart from the table's bound;
// -r without it lists every connection (the offline report is unchanged);
// a negative duration is a usage error. 120 connections, one a second,
// each closed after one ApiVersions, beside one left open.
func TestKeepClosed(t *testing.T) {
	var b strings.Builder
	w, err := gen.NewWriter(&b, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	broker := netip.MustParseAddrPort("10.0.0.1:9092")
	long := w.Conn(netip.MustParseAddrPort("10.0.0.3:40000"), broker, t0, gen.ConnOptions{})
	for i := range 120 {
		at := t0.Add(time.Duration(i+1) * time.Second)
		c := w.Conn(netip.AddrPortFrom(netip.MustParseAddr("10.0.0.2"), uint16(50000+i)), broker, at, gen.ConnOptions{})
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		c.Request(at.Add(time.Millisecond), 1, kmsg.StringPtr("short"), req)
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 3
		c.Response(at.Add(2*time.Millisecond), 1, resp)
		c.Close(at.Add(3 * time.Millisecond))
		long.Request(at.Add(500*time.Millisecond), int32(i), kmsg.StringPtr("long"), req)
		long.Response(at.Add(501*time.Millisecond), int32(i), resp)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "closed.pcap")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	type totals struct {
		KafkaConnections int            `json:"kafka_connections"`
		Evicted          int            `json:"evicted_connections"`
		Folded           *int           `json:"closed_connections_folded"`
		Bounds           map[string]int `json:"bounds_reached"`
	}
	run := func(args ...string) (totals, int) {
		t.Helper()
		code, out, errs := kfsniff(t, append([]string{"-r", path, "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
		}
		var r struct {
			Totals      totals
			Connections []json.RawMessage
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r.Totals, len(r.Connections)
	}
	all, listed := run()
	if all.KafkaConnections != 121 || listed != 121 || all.Folded != nil {
		t.Errorf("-r alone: %d connections, %d listed, folded %v; want 121, 121, absent", all.KafkaConnections, listed, all.Folded)
	}
	kc, listed := run("--keep-closed", "30s")
	if kc.KafkaConnections != 121 || kc.Folded == nil || listed+*kc.Folded != 121 || listed > 45 || kc.Evicted != 0 || kc.Bounds["connections_not_listed"] != 0 {
		t.Errorf("--keep-closed 30s: %+v, %d listed; want 121 connections, those not listed folded (at most 45 listed), no bound reached", kc, listed)
	}
	if code, out, _ := kfsniff(t, "-r", path, "--keep-closed", "30s"); code != exitOK || !strings.Contains(out, "closed connections folded into the totals") {
		t.Errorf("--keep-closed 30s, text: exit %d, no line for the folded connections:\n%.1500s", code, out)
	}
	if code, _, errs := kfsniff(t, "-r", path, "--keep-closed", "-1s"); code != exitUsage || !strings.Contains(errs, "--keep-closed") {
		t.Errorf("--keep-closed -1s: exit %d, stderr %q; want a usage error naming the flag", code, errs)
	}
}
