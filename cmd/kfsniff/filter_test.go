package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type counts struct {
	Packets, Requests, Responses, Conns int
}

func analyse(t *testing.T, args ...string) counts {
	t.Helper()
	code, out, errs := kfsniff(t, append(args, "--json")...)
	if code != exitOK {
		t.Fatalf("kfsniff %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	var r struct {
		Capture struct{ Packets int } `json:"capture"`
		Totals  struct {
			Requests  int `json:"requests"`
			Responses int `json:"responses"`
			Conns     int `json:"kafka_connections"`
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	return counts{r.Capture.Packets, r.Totals.Requests, r.Totals.Responses, r.Totals.Conns}
}

// TestFilterOnFiles: a trailing expression selects packets from capture
// files of every link type as tcpdump -r would (the counts agree with
// tcpdump 4.99 / libpcap 1.10 on these fixtures). Most fixtures hold two
// connections, IPv4 10.0.0.1:51000 -> 10.0.0.2:9092 and IPv6
// [fd00::1]:51001 -> [fd00::2]:9092, 42 packets and 9 exchanges each.
func TestFilterOnFiles(t *testing.T) {
	both := counts{84, 18, 18, 2}
	one := counts{42, 9, 9, 1}
	none := counts{}
	for _, tc := range []struct {
		file string
		expr string
		want counts
	}{
		{"sll.pcap", "", both},
		{"sll.pcap", "port 9092", both},
		{"sll.pcap", "ip", one},
		{"sll2.pcap", "ip6", one},
		{"sll2.pcap", "host fd00::1 and tcp port 9092", one},
		{"null.pcap", "net 10.0.0.0/8", one},
		{"loop.pcap", "ip6 and not host fd00::3", one},
		{"raw.pcap", "src port 51000", counts{22, 9, 0, 1}}, // the client's side only: requests, no responses
		{"raw.pcap", "port 1", none},
		{"vlan.pcap", "port 9092", none}, // tagged: like tcpdump, say "vlan and ..."
		{"vlan.pcap", "vlan 100 and port 9092", both},
		{"vlan.pcap", "vlan 200", none},
		{"qinq.pcap", "vlan 200 and vlan 100 and tcp", both},
		{"qinq.pcap", "vlan and tcp", none},
		{"nonstandard-port.pcap", "port 8081", one},
		{"nonstandard-port.pcap", "portrange 36000-37000", one},
		{"nonstandard-port.pcap", "port 8081 or 36333", both},
		{"multi-interface.pcapng", "net 127.0.0.0/8", one},
	} {
		t.Run(tc.file+"/"+tc.expr, func(t *testing.T) {
			args := []string{"-r", fixture(tc.file)}
			if tc.expr != "" {
				args = append(args, strings.Fields(tc.expr)...)
			}
			if got := analyse(t, args...); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCountOnFiles(t *testing.T) {
	if got := analyse(t, "-r", fixture("basic.pcap"), "-c", "5"); got.Packets != 5 {
		t.Errorf("-c 5 analysed %d packets", got.Packets)
	}
	if got := analyse(t, "-r", fixture("sll.pcap"), "-c", "3", "ip6"); got.Packets != 3 {
		t.Errorf("-c 3 ip6 analysed %d packets", got.Packets)
	}
}

// TestWriteFromFiles: -w keeps what the filter kept, readable with -r, in
// pcap or pcapng; inputs of several link types need pcapng.
func TestWriteFromFiles(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "v6.pcap")
	want := analyse(t, "-r", fixture("sll2.pcap"), "-w", out, "ip6")
	if got := analyse(t, "-r", out); got != want || got.Conns != 1 {
		t.Errorf("-w file: %+v; the run that wrote it: %+v", got, want)
	}
	code, _, errs := kfsniff(t, "-r", fixture("sll.pcap"), "-r", fixture("raw.pcap"), "-w", filepath.Join(dir, "mixed.pcap"))
	if code != exitUsage || !strings.Contains(errs, "mixed.pcapng") {
		t.Errorf("several link types into pcap: exit %d, %q; want exit 2 suggesting pcapng", code, errs)
	}
	ng := filepath.Join(dir, "mixed.pcapng")
	want = analyse(t, "-r", fixture("sll.pcap"), "-r", fixture("raw.pcap"), "-w", ng)
	if got := analyse(t, "-r", ng); got != want || got.Packets != 168 {
		t.Errorf("-w pcapng of two link types: %+v; the run that wrote it: %+v", got, want)
	}
	if _, err := os.Stat("/dev/full"); err == nil {
		code, out, errs := kfsniff(t, "-r", fixture("basic.pcap"), "-w", "/dev/full")
		if code != exitFailure || !strings.Contains(errs, "no space left on device") || !strings.Contains(out, "Capture") {
			t.Errorf("-w /dev/full: exit %d, stderr %q; want exit 1 naming the failure, and the report", code, errs)
		}
	}
	code, _, errs = kfsniff(t, "-r", fixture("basic.pcap"), "-w", filepath.Join(dir, "missing", "x.pcap"))
	if code != exitUsage || !strings.Contains(errs, "x.pcap") || strings.Count(errs, "\n") != 1 {
		t.Errorf("-w into a missing directory: exit %d, %q", code, errs)
	}
}

func TestBadFilterExpression(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-r", fixture("basic.pcap"), "port", "9092", "and"}, `bad filter expression "port 9092 and": expression ends after "and"`},
		{[]string{"-r", fixture("basic.pcap"), "host", "broker-1"}, "does not look up names"},
		{[]string{"-i", "lo", "portrange", "9092"}, "expected LOW-HIGH"},
		{[]string{fixture("basic.pcap")}, "capture files go after -r"},
	} {
		code, out, errs := kfsniff(t, tc.args...)
		if code != exitUsage || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", tc.args, code, out, errs, tc.want)
		}
	}
}

func TestLiveUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-i", "lo", "-r", fixture("basic.pcap")}, "not both"},
		{[]string{"-i", "no-such-interface0"}, `no interface "no-such-interface0" (kfsniff -D lists them)`},
		{[]string{"-i", "lo", "-c", "-1"}, "-c must not be negative"},
		{[]string{"-i", "lo", "-w", "-"}, "not supported"},
		{[]string{"-i", "lo", "--tui", "--no-tui"}, "contradict"},
		{[]string{}, "capture live with -i IFACE"},
	} {
		code, _, errs := kfsniff(t, tc.args...)
		if code != exitUsage || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line containing %q", tc.args, code, errs, tc.want)
		}
	}
}
