package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLiveTLSKeyLogFollowed: a live capture on lo of kgo clients talking
// TLS 1.3 to kfake, with --tls-keylog naming a file that is empty when
// the capture starts and that the clients append to as they connect
// (tls.Config.KeyLogWriter): the records wait for their keys, and every
// request the clients sent is decrypted and counted.
func TestLiveTLSKeyLogFollowed(t *testing.T) {
	needLive(t)
	cert := kafkaTestCert(t)
	c, ports, filter := startKfake(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}}))
	keylog := filepath.Join(t.TempDir(), "keys.log")
	if err := os.WriteFile(keylog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := append([]string{"-i", "lo", "--json", "--ports", ports, "--tls-keylog", keylog, "--duration", "2m"}, strings.Fields(filter)...)
	done, errw := startLive(t, ctx, nil, args...)

	kl, err := os.OpenFile(keylog, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Close()
	counts := &kafkaCounts{writes: map[int16]int{}, reads: map[int16]int{}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ClientID("kfsniff-live-tls"), kgo.WithHooks(counts),
		kgo.DialTLSConfig(&tls.Config{InsecureSkipVerify: true, ServerName: "kafka.test", KeyLogWriter: kl}),
		kgo.DefaultProduceTopic("live"))
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	for i := range 20 {
		if err := cl.ProduceSync(wctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	wcancel()
	cl.Close()
	time.Sleep(500 * time.Millisecond)
	cancel()
	r := wait(t, done, errw)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, errw)
	}
	var rep struct {
		Totals struct{ Requests int }
		TLS    struct{ Connections, Decrypted, NoKeys int64 } `json:"tls"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	counts.mu.Lock()
	sent := 0
	for _, n := range counts.writes {
		sent += n
	}
	counts.mu.Unlock()
	if rep.TLS.Connections == 0 || rep.TLS.Decrypted != rep.TLS.Connections || rep.Totals.Requests != sent {
		t.Errorf("TLS %+v, %d requests decoded of the %d the client sent", rep.TLS, rep.Totals.Requests, sent)
	}
}

// TestLivePythonTLS: kafka-python (Debian's python3-kafka, installed by
// fixtures/clients/python-tls/ensure.sh when missing; skipped only if it
// cannot be) produces and consumes over TLS 1.3 (AES-128-GCM; AES-256-GCM
// with OpenSSL told to offer only it) and TLS 1.2 ECDHE-ECDSA AES-256-GCM
// to kfake, writing its key log through ssl_context.keylog_filename,
// while kfsniff captures lo live and follows the key log: every
// connection is decrypted with the suite asked for, and the capture read
// back with the key log holds every record the client produced, as sent.
func TestLivePythonTLS(t *testing.T) {
	needLive(t)
	if out, err := exec.Command("sh", filepath.Join("..", "..", "fixtures", "clients", "python-tls", "ensure.sh")).CombinedOutput(); err != nil {
		t.Skipf("kafka-python is not installed and could not be: %v: %s", err, out)
	}
	cert := kafkaTestCert(t)
	for _, c := range []struct {
		name, version, opensslConf, suite string
	}{
		{"tls13-aes128gcm", "tls13", "", "TLS_AES_128_GCM_SHA256"},
		{"tls13-aes256gcm", "tls13", "Ciphersuites = TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384"},
		{"tls12-ecdhe-aes256gcm", "tls12", "", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, ports, filter := startKfake(t, kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}}))
			dir := t.TempDir()
			keylog, out := filepath.Join(dir, "keys.log"), filepath.Join(dir, "py.pcapng")
			if err := os.WriteFile(keylog, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			args := append([]string{"-i", "lo", "--json", "--ports", ports, "--tls-keylog", keylog, "-w", out, "--duration", "2m"}, strings.Fields(filter)...)
			done, errw := startLive(t, ctx, nil, args...)
			const records = 25
			py := exec.Command("/usr/bin/python3", filepath.Join("..", "..", "fixtures", "clients", "python-tls", "client.py"),
				strings.Join(cl.ListenAddrs(), ","), keylog, c.version, fmt.Sprint(records))
			py.Env = os.Environ()
			if c.opensslConf != "" {
				conf := filepath.Join(dir, "openssl.cnf")
				os.WriteFile(conf, []byte("openssl_conf = default_conf\n[default_conf]\nssl_conf = ssl_sect\n[ssl_sect]\nsystem_default = system_default_sect\n[system_default_sect]\n"+c.opensslConf+"\n"), 0o644)
				py.Env = append(py.Env, "OPENSSL_CONF="+conf)
			}
			pyOut, err := py.Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("kafka-python: %v\n%s", err, stderr)
			}
			var sent struct{ Produced, Consumed int }
			if err := json.Unmarshal(pyOut, &sent); err != nil || sent.Consumed != records {
				t.Fatalf("kafka-python said %q (%v)", pyOut, err)
			}
			time.Sleep(500 * time.Millisecond)
			cancel()
			r := wait(t, done, errw)
			if r.code != exitOK {
				t.Fatalf("exit %d\n%s", r.code, errw)
			}
			var rep struct {
				TLS         struct{ Connections, Decrypted, NoKeys, AuthFailures int64 } `json:"tls"`
				Connections []struct {
					TLSSession struct {
						CipherSuite string `json:"cipher_suite"`
						Decrypted   bool
					} `json:"tls_session"`
					Errors, DecodeErrors, FramingErrors int
				}
			}
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.TLS.Connections == 0 || rep.TLS.Decrypted != rep.TLS.Connections || rep.TLS.AuthFailures != 0 {
				t.Errorf("TLS %+v", rep.TLS)
			}
			for i, conn := range rep.Connections {
				if conn.TLSSession.CipherSuite != c.suite || conn.DecodeErrors+conn.FramingErrors != 0 {
					t.Errorf("connection %d: %+v, want %s", i+1, conn, c.suite)
				}
			}
			code, recs, errs := kfsniff(t, "-r", out, "--tls-keylog", keylog, "--records", "--records-format", "%o %k %s\n")
			if code != 0 {
				t.Fatalf("--records: exit %d: %s", code, errs)
			}
			for i := range records {
				want := fmt.Sprintf("key-%04d value %04d from kafka-python over TLS", i, i)
				if !strings.Contains(recs, want) {
					t.Errorf("record %d (%q) not among the records read back", i, want)
					break
				}
			}
		})
	}
}

// TestLiveRdkafkaTLSBrokerKeyLog: librdkafka (confluent-kafka-python,
// Debian's python3-confluent-kafka) has no key log of its own; the
// broker's decrypts the same connections. kfake over TLS writes its key
// log (the server's tls.Config.KeyLogWriter) while librdkafka produces
// and consumes, and kfsniff -i lo follows it: every connection decrypted,
// every record produced found as sent.
func TestLiveRdkafkaTLSBrokerKeyLog(t *testing.T) {
	needLive(t)
	if out, err := exec.Command("sh", filepath.Join("..", "..", "fixtures", "clients", "python-tls", "ensure.sh")).CombinedOutput(); err != nil {
		t.Skipf("confluent-kafka is not installed and could not be: %v: %s", err, out)
	}
	cert := kafkaTestCert(t)
	dir := t.TempDir()
	keylog, out := filepath.Join(dir, "broker-keys.log"), filepath.Join(dir, "rd.pcapng")
	kl, err := os.OpenFile(keylog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Close()
	cl, ports, filter := startKfake(t, kfake.NumBrokers(1), kfake.TLS(&tls.Config{
		Certificates: []tls.Certificate{cert}, KeyLogWriter: kl}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := append([]string{"-i", "lo", "--json", "--ports", ports, "--tls-keylog", keylog, "-w", out, "--duration", "2m"}, strings.Fields(filter)...)
	done, errw := startLive(t, ctx, nil, args...)
	const records = 25
	py := exec.Command("/usr/bin/python3", filepath.Join("..", "..", "fixtures", "clients", "python-tls", "rdkafka.py"),
		strings.Join(cl.ListenAddrs(), ","), fmt.Sprint(records))
	pyOut, err := py.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("confluent-kafka: %v\n%s", err, stderr)
	}
	var sent struct{ Produced, Consumed int }
	if err := json.Unmarshal(pyOut, &sent); err != nil || sent.Produced != records || sent.Consumed != records {
		t.Fatalf("confluent-kafka said %q (%v)", pyOut, err)
	}
	time.Sleep(500 * time.Millisecond)
	cancel()
	r := wait(t, done, errw)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, errw)
	}
	var rep struct {
		TLS struct{ Connections, Decrypted, NoKeys, AuthFailures int64 } `json:"tls"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.TLS.Connections == 0 || rep.TLS.Decrypted != rep.TLS.Connections || rep.TLS.AuthFailures != 0 {
		t.Errorf("TLS %+v", rep.TLS)
	}
	code, recs, errs := kfsniff(t, "-r", out, "--tls-keylog", keylog, "--records", "--records-format", "%o %k %s\n")
	if code != 0 {
		t.Fatalf("--records: exit %d: %s", code, errs)
	}
	for i := range records {
		if want := fmt.Sprintf("key-%04d value %04d from librdkafka over TLS", i, i); !strings.Contains(recs, want) {
			t.Errorf("record %d (%q) not among the records read back", i, want)
			break
		}
	}
}

// kafkaTestCert is a self-signed certificate for kafka.test, valid for an hour, that the
// live TLS tests' kfake serves.
func kafkaTestCert(t *testing.T) tls.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kafka.test"},
		DNSNames: []string{"kafka.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}
