package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// selfSigned makes a CA-signed certificate for 127.0.0.1 and returns the
// server's TLS configuration and the CA's PEM file.
func selfSigned(t *testing.T) (*tls.Config, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kfsniff test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, caFile
}

// TestExportSASL ships a capture to kfake requiring SASL, configured from
// a properties file as Java clients (sasl.jaas.config) and librdkafka
// (sasl.username) write them, and from flags; SCRAM-SHA-512 over TLS with
// the CA given. A wrong password is refused at the start: one line, exit
// 2 (it was a report of every record failed, exit 0).
func TestExportSASL(t *testing.T) {
	serverTLS, caFile := selfSigned(t)
	cases := []struct {
		name, mechanism, props string
		flags                  []string
		tls                    bool
		badPassword            bool
	}{
		{name: "plain-jaas", mechanism: "PLAIN", props: "# Java client\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n" +
			`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \` + "\n" +
			`    username="agent" password="s3cr\\"et";` + "\nacks=all\n"},
		{name: "scram256-librdkafka", mechanism: "SCRAM-SHA-256", props: "security.protocol: sasl_plaintext\nsasl.mechanisms: SCRAM-SHA-256\nsasl.username: agent\nsasl.password: s3cr\"et\n"},
		{name: "scram512-tls-flags", mechanism: "SCRAM-SHA-512", tls: true,
			flags: []string{"--export-sasl-mechanism", "SCRAM-SHA-512", "--export-sasl-user", "agent", "--export-sasl-password", `s3cr"et`}},
		{name: "scram256-wrong-password", mechanism: "SCRAM-SHA-256", badPassword: true,
			flags: []string{"--export-sasl-mechanism", "SCRAM-SHA-256", "--export-sasl-user", "agent", "--export-sasl-password", "wrong", "--export-timeout", "2s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(2, "ship", "ship.findings"), kfake.EnableSASL(), kfake.Superuser(tc.mechanism, "agent", `s3cr"et`)}
			args := []string{"-r", fixture("scenarios/replica-divergence.pcap"), "--json"}
			if tc.tls {
				opts = append(opts, kfake.TLS(serverTLS))
				args = append(args, "--export-ca", caFile)
			}
			c, err := kfake.NewCluster(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			args = append(args, "--export", "kafka://"+c.ListenAddrs()[0]+"/ship")
			if tc.props != "" {
				f := filepath.Join(t.TempDir(), "client.properties")
				os.WriteFile(f, []byte(tc.props), 0o600)
				args = append(args, "--export-config", f)
			}
			args = append(args, tc.flags...)
			start := time.Now()
			code, stdout, stderr := kfsniff(t, args...)
			if tc.badPassword {
				// Refused at the start: one line, exit 2, within
				// --export-timeout (kfake closes the connection on a
				// failed SCRAM exchange, which cannot be told from a
				// network failure; Kafka answers SASL_AUTHENTICATION_FAILED,
				// which Reach gives up on at once).
				if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "did not answer") || time.Since(start) > 10*time.Second {
					t.Errorf("wrong password: exit %d after %s, want 2 within 2 s and one line saying why:\n%s%s", code, time.Since(start), stdout, stderr)
				}
				return
			}
			if code != exitOK && code != exitFindings {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var rep reportWithExport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.Export == nil {
				t.Fatalf("no export in the report (%v): %s", err, stderr)
			}
			if rep.Totals.Requests != 23 {
				t.Errorf("%d requests analysed; the capture has 23 whatever the sink", rep.Totals.Requests)
			}
			if rep.Export.Records == 0 || rep.Export.Failed != 0 || rep.Export.Dropped != 0 {
				t.Fatalf("export %+v: %s", *rep.Export, stderr)
			}
			// Read back as the same user: the records are there.
			copts := []kgo.Opt{kgo.SASL(scramOrPlain(tc.mechanism))}
			if tc.tls {
				pool := x509.NewCertPool()
				pemBytes, _ := os.ReadFile(caFile)
				pool.AppendCertsFromPEM(pemBytes)
				copts = append(copts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool}))
			}
			got := consumeWith(t, c.ListenAddrs(), int(rep.Export.Records), copts, "ship", "ship.findings")
			if len(got) != int(rep.Export.Records) {
				t.Errorf("%d records read back, %d shipped", len(got), rep.Export.Records)
			}
		})
	}
}

func scramOrPlain(m string) sasl.Mechanism {
	switch m {
	case "PLAIN":
		return plain.Auth{User: "agent", Pass: `s3cr"et`}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: "agent", Pass: `s3cr"et`}.AsSha256Mechanism()
	}
	return scram.Auth{User: "agent", Pass: `s3cr"et`}.AsSha512Mechanism()
}

// TestExportConfigUsage: what --export refuses before reading anything.
func TestExportConfigUsage(t *testing.T) {
	dir := t.TempDir()
	jks := filepath.Join(dir, "jks.properties")
	os.WriteFile(jks, []byte("security.protocol=SSL\nssl.truststore.location=/etc/kafka/truststore.jks\nssl.truststore.type=JKS\n"), 0o600)
	mech := filepath.Join(dir, "gssapi.properties")
	os.WriteFile(mech, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.username=u\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--export", "127.0.0.1:9092/ship"}, "kafka://"},
		{[]string{"--export", "kafka://127.0.0.1:9092"}, "no topic"},
		{[]string{"--export", "kafka://127.0.0.1/ship"}, "HOST:PORT"},
		{[]string{"--export", "kafka://127.0.0.1:9092/bad topic"}, "topic"},
		{[]string{"--agent-id", "x"}, "--agent-id needs --export"},
		{[]string{"--export", "kafka://127.0.0.1:9092/ship", "--export-buffer", "0"}, "--export-buffer"},
		{[]string{"--export", "kafka://127.0.0.1:9092/ship", "--export-compression", "brotli"}, "--export-compression"},
		{[]string{"--export", "kafka://127.0.0.1:9092/ship", "--export-config", jks}, "PEM"},
		{[]string{"--export", "kafka://127.0.0.1:9092/ship", "--export-config", mech}, "GSSAPI"},
		{[]string{"--export", "kafka://127.0.0.1:9092/ship", "--export-config", filepath.Join(dir, "missing")}, "--export-config"},
		{[]string{"--export", "kafka://127.0.0.1:9092/ship", "--export-sasl-user", "u"}, "mechanism"},
		{[]string{"--export", "kafka://127.0.0.1:9092/ship", "--export-findings-topic", ""}, "not a Kafka topic name"},
		{[]string{"--export", "kafka://127.0.0.1:9092/ship", "--export-findings-topic", "ship"}, "is the export topic"},
	} {
		code, stdout, stderr := kfsniff(t, append([]string{"-r", fixture("basic.pcap")}, tc.args...)...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want a usage error saying %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}
