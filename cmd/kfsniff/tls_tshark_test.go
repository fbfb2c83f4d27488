package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needTshark installs tshark and editcap when missing
// (testdata/tshark/ensure.sh) and skips only if that fails.
func needTshark(t *testing.T) {
	t.Helper()
	out, err := exec.Command("sh", filepath.Join("testdata", "tshark", "ensure.sh")).CombinedOutput()
	if err != nil {
		t.Skipf("tshark is not installed and could not be: %v: %s", err, out)
	}
}

// tsharkCounts is how many Kafka PDUs and requests tshark dissects in
// capture, TLS on port 9092 decrypted with keylog ("" for none: the
// file's own secrets blocks).
func tsharkCounts(t *testing.T, capture string, tls bool, keylog string) (pdus, requests int) {
	t.Helper()
	args := []string{"-r", capture}
	if tls {
		args = append(args, "-d", "tcp.port==9092,tls", "-d", "tls.port==9092,kafka")
	}
	if keylog != "" {
		args = append(args, "-o", "tls.keylog_file:"+keylog)
	}
	// Requests are the PDUs sent to the broker's port 9092.
	args = append(args, "-Y", "kafka", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=;",
		"-e", "kafka.len", "-e", "tcp.dstport", "-e", "kafka.request_frame")
	out, err := exec.Command("tshark", args...).Output()
	if err != nil {
		t.Fatalf("tshark %v: %v", args, err)
	}
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(l, "\t")
		if len(f) < 3 || f[0] == "" {
			continue
		}
		n := len(strings.Split(f[0], ";"))
		pdus += n
		if f[1] == "9092" {
			requests += n
		}
	}
	return pdus, requests
}

// kfsniffCounts is kfsniff's requests and responses of capture.
func kfsniffCounts(t *testing.T, args ...string) (pdus, requests int) {
	t.Helper()
	m := reportJSON(t, args...)
	tot := m["totals"].(map[string]any)
	req, resp := int(tot["requests"].(float64)), int(tot["responses"].(float64))
	return req + resp, req
}

// TestTLSCountsEqualTshark: on every TLS recording kfsniff decrypts as
// many Kafka requests and responses as tshark dissects in the plaintext
// twin, and as tshark decrypts with the same key log (but on the TLS 1.2
// resumed recording, where tshark 4.0 decrypts only the first, full
// handshake); a -w FILE.pcapng written with --tls-keylog carries the
// keys in a Decryption Secrets Block that kfsniff and tshark read
// without a key log, and editcap --inject-secrets' file reads the same.
func TestTLSCountsEqualTshark(t *testing.T) {
	needTshark(t)
	dir := t.TempDir()
	for _, base := range tlsFixtures(t) {
		name := filepath.Base(base)
		t.Run(name, func(t *testing.T) {
			kp, kr := kfsniffCounts(t, "-r", base+".pcap", "--tls-keylog", base+".keylog")
			pp, pr := tsharkCounts(t, base+"-plain.pcap", false, "")
			if kp != pp || kr != pr || kp == 0 {
				t.Errorf("kfsniff decrypts %d PDUs (%d requests), tshark dissects %d (%d) in the plaintext twin", kp, kr, pp, pr)
			}
			tp, tr := tsharkCounts(t, base+".pcap", true, base+".keylog")
			if strings.HasPrefix(name, "tls-kgo-kfake-tls12-") && strings.HasSuffix(name, "-resumed") {
				t.Logf("tshark decrypts %d PDUs of %d (TLS 1.2 resumed sessions)", tp, kp)
			} else if tp != kp || tr != kr {
				t.Errorf("kfsniff decrypts %d PDUs (%d requests), tshark %d (%d) with the same key log", kp, kr, tp, tr)
			}
			out := filepath.Join(dir, name+".pcapng")
			if code, _, errs := kfsniff(t, "-r", base+".pcap", "--tls-keylog", base+".keylog", "-w", out); code != 0 {
				t.Fatalf("-w: exit %d: %s", code, errs)
			}
			if wp, wr := kfsniffCounts(t, "-r", out); wp != kp || wr != kr {
				t.Errorf("kfsniff reads %d PDUs (%d requests) from its -w pcapng without a key log, %d with", wp, wr, kp)
			}
			if !strings.HasSuffix(name, "-resumed") {
				if wp, wr := tsharkCounts(t, out, true, ""); wp != kp || wr != kr {
					t.Errorf("tshark reads %d PDUs (%d requests) from kfsniff's -w pcapng, %d from the key log", wp, wr, kp)
				}
			}
			inj := filepath.Join(dir, name+"-injected.pcapng")
			if b, err := exec.Command("editcap", "--inject-secrets", "tls,"+base+".keylog", base+".pcap", inj).CombinedOutput(); err != nil {
				t.Fatalf("editcap: %v: %s", err, b)
			}
			if ip, ir := kfsniffCounts(t, "-r", inj); ip != kp || ir != kr {
				t.Errorf("kfsniff reads %d PDUs (%d requests) from editcap's pcapng with secrets, %d from the key log", ip, ir, kp)
			}
		})
	}
	// A pcap cannot hold the secrets: -w FILE.pcap is written without.
	base := fixture(filepath.Join("tls", "tls-kgo-kfake-tls13-aes128gcm"))
	out := filepath.Join(dir, "plain.pcap")
	if code, _, errs := kfsniff(t, "-r", base+".pcap", "--tls-keylog", base+".keylog", "-w", out); code != 0 {
		t.Fatalf("-w pcap: exit %d: %s", code, errs)
	}
	if b, _ := os.ReadFile(out); strings.Contains(string(b), "CLIENT_") {
		t.Error("a pcap file holds key log lines")
	}
}
