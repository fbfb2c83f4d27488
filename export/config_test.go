package export

import (
	"strings"
	"testing"
)

// TestReadProperties reads the keys of Java clients' and librdkafka's
// files as their documentation writes them.
func TestReadProperties(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       Security
		ignored    string
	}{
		{"java-plain", "# comment\n! another\nbootstrap.servers=b1:9092\nsecurity.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n" +
			"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n" +
			"    username=\"agent\" \\\n    password=\"s3cr\\\\\"et\";\nssl.truststore.location=/etc/ca.pem\nssl.truststore.type=PEM\nacks=all\n",
			Security{Protocol: "SASL_SSL", TLS: true, Mechanism: "PLAIN", User: "agent", Password: `s3cr"et`, CAFile: "/etc/ca.pem"}, "acks,bootstrap.servers"},
		{"java-scram-unquoted", "security.protocol = SASL_PLAINTEXT\nsasl.mechanism : SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=u password=p;\n",
			Security{Protocol: "SASL_PLAINTEXT", Mechanism: "SCRAM-SHA-512", User: "u", Password: "p"}, ""},
		{"librdkafka", "security.protocol=sasl_ssl\nsasl.mechanisms=SCRAM-SHA-256\nsasl.username=u\nsasl.password=p w\nssl.ca.location=/ca.pem\nssl.certificate.location=/c.pem\nssl.key.location=/k.pem\nssl.endpoint.identification.algorithm=none\n",
			Security{Protocol: "SASL_SSL", TLS: true, Mechanism: "SCRAM-SHA-256", User: "u", Password: "p w", CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", NoHostnameCheck: true}, ""},
		{"explicit-wins-over-jaas", "sasl.username=x\nsasl.jaas.config=m required username=\"y\" password=\"z\";\n",
			Security{User: "x", Password: "z"}, ""},
		{"no-verify", "security.protocol=SSL\nenable.ssl.certificate.verification=false\n", Security{Protocol: "SSL", TLS: true, Insecure: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ignored, err := ReadProperties(strings.NewReader(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
			if strings.Join(ignored, ",") != tc.ignored {
				t.Errorf("ignored %q, want %q", ignored, tc.ignored)
			}
		})
	}
	for _, bad := range []string{"security.protocol=SASL_GSSAPI\n", "ssl.keystore.type=JKS\n", "sasl.jaas.config=nothing here\n"} {
		if _, _, err := ReadProperties(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestSecurityBuild: the flags lay over the file; what cannot work is
// refused before the capture starts.
func TestSecurityBuild(t *testing.T) {
	file := Security{Protocol: "SASL_PLAINTEXT", Mechanism: "PLAIN", User: "file", Password: "fp"}
	merged := file.Merge(Security{User: "flag"})
	if merged.User != "flag" || merged.Password != "fp" || merged.Mechanism != "PLAIN" {
		t.Errorf("merged %+v", merged)
	}
	tc, mech, err := merged.Build()
	if err != nil || tc != nil || mech == nil || mech.Name() != "PLAIN" {
		t.Errorf("SASL_PLAINTEXT PLAIN: tls %v, mechanism %v, %v", tc, mech, err)
	}
	if _, mech, err := (Security{Protocol: "SASL_SSL", TLS: true, User: "u"}).Build(); err != nil || mech.Name() != "PLAIN" {
		t.Errorf("SASL_SSL without a mechanism: %v %v; want Kafka's default PLAIN", mech, err)
	}
	for _, bad := range []Security{
		{Mechanism: "GSSAPI", User: "u"},
		{Mechanism: "PLAIN"},
		{User: "u"},
		{TLS: true, CAFile: "/nonexistent/ca.pem"},
		{Protocol: "PLAINTEXT", CAFile: "/ca.pem"},
		{KeyFile: "/client.key"}, // was: plaintext, the key ignored
	} {
		if _, _, err := bad.Build(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestParseURL(t *testing.T) {
	b, topic, err := ParseURL("kafka://b1:9092,[::1]:9093/kfsniff.ship")
	if err != nil || strings.Join(b, " ") != "b1:9092 [::1]:9093" || topic != "kfsniff.ship" {
		t.Errorf("%v %q %v", b, topic, err)
	}
	for _, bad := range []string{"b1:9092/t", "kafka://b1:9092", "kafka://b1/t", "kafka://b1:9092/", "kafka://b1:9092/a b", "kafka://b1:9092/..", "kafka://:9092,/t",
		"kafka://b1:99999/t", "kafka://b1:0/t", "kafka://b1:-1/t", "kafka://b1:http/t", "kafka://:9092/t"} { // issue 31: ports out of range were accepted
		if _, _, err := ParseURL(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
