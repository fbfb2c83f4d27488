package export

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ParseURL reads kafka://HOST:PORT[,HOST:PORT...]/TOPIC.
func ParseURL(s string) (brokers []string, topic string, err error) {
	rest, ok := strings.CutPrefix(s, "kafka://")
	if !ok {
		return nil, "", fmt.Errorf("%q: want kafka://HOST:PORT[,HOST:PORT]/TOPIC", s)
	}
	hosts, topic, ok := strings.Cut(rest, "/")
	if !ok || topic == "" {
		return nil, "", fmt.Errorf("%q: no topic (kafka://HOST:PORT/TOPIC)", s)
	}
	if !validTopic(topic) {
		return nil, "", fmt.Errorf("%q: topic %q is not a Kafka topic name (letters, digits, '.', '_', '-'; at most 249)", s, topic)
	}
	for _, h := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil || port == "" {
			return nil, "", fmt.Errorf("%q: broker %q: want HOST:PORT", s, h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, "", fmt.Errorf("%q: broker %q: port %q is not a number from 1 to 65535", s, h, port)
		}
		if host == "" || strings.ContainsAny(host, " \t/@?#") {
			return nil, "", fmt.Errorf("%q: broker %q: want a host name or address before the port", s, h)
		}
		brokers = append(brokers, h)
	}
	return brokers, topic, nil
}

// topicRE is compiled on first use: its {1,249} makes a large program,
// which every run of the command paid at start-up (about 4 ms).
var topicRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`) })

func validTopic(t string) bool { return topicRE().MatchString(t) && t != "." && t != ".." }

// ValidTopic says whether t can name a Kafka topic.
func ValidTopic(t string) bool { return validTopic(t) }

// Security is how to reach the sink: from flags, a properties file, or
// both (flags win).
type Security struct {
	// Protocol is Kafka's security.protocol: PLAINTEXT, SSL,
	// SASL_PLAINTEXT or SASL_SSL ("" when not given).
	Protocol string
	TLS      bool
	// CAFile is a PEM bundle of the CAs to trust (the system's if empty);
	// CertFile and KeyFile a client certificate (PEM).
	CAFile, CertFile, KeyFile string
	// Insecure skips verifying the sink's certificate.
	Insecure bool
	// NoHostnameCheck verifies the chain but not the name
	// (ssl.endpoint.identification.algorithm empty).
	NoHostnameCheck bool
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 ("" for none).
	Mechanism, User, Password string
}

// PropertyKeys are the keys ReadProperties understands.
var PropertyKeys = []string{
	"security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.jaas.config",
	"sasl.username", "sasl.password",
	"ssl.ca.location", "ssl.truststore.location", "ssl.truststore.type",
	"ssl.certificate.location", "ssl.key.location",
	"ssl.keystore.type", "ssl.keystore.location",
	"ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification",
}

// ReadProperties reads a Kafka client properties file (Java's or
// librdkafka's keys, docs/export.md): key=value or key: value, '#' and '!'
// comments, '\' continuing a line. It returns the keys it did not use, so
// that the caller can say they were ignored.
func ReadProperties(r io.Reader) (Security, []string, error) {
	props, err := parseProperties(r)
	if err != nil {
		return Security{}, nil, err
	}
	var s Security
	var ignored []string
	for k, v := range props {
		switch k {
		case "security.protocol":
			s.Protocol = strings.ToUpper(v)
			switch s.Protocol {
			case "PLAINTEXT", "SASL_PLAINTEXT":
			case "SSL", "SASL_SSL":
				s.TLS = true
			default:
				return s, nil, fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", v)
			}
		case "sasl.mechanism", "sasl.mechanisms":
			s.Mechanism = strings.ToUpper(v)
		case "sasl.jaas.config":
			u, p, err := parseJAAS(v)
			if err != nil {
				return s, nil, err
			}
			s.User, s.Password = u, p
		case "sasl.username", "sasl.password":
			// Set after the loop, over sasl.jaas.config's.
		case "ssl.ca.location", "ssl.truststore.location":
			s.CAFile = v
		case "ssl.truststore.type", "ssl.keystore.type":
			if !strings.EqualFold(v, "PEM") {
				return s, nil, fmt.Errorf("%s %q: only PEM files are read (convert a JKS or PKCS12 store with keytool/openssl)", k, v)
			}
		case "ssl.keystore.location", "ssl.certificate.location":
			s.CertFile = v
		case "ssl.key.location":
			s.KeyFile = v
		case "ssl.endpoint.identification.algorithm":
			s.NoHostnameCheck = v == "" || strings.EqualFold(v, "none")
		case "enable.ssl.certificate.verification":
			s.Insecure = strings.EqualFold(v, "false")
		default:
			ignored = append(ignored, k)
		}
	}
	// sasl.jaas.config may come before sasl.username in map order: the
	// explicit keys win.
	if u, ok := props["sasl.username"]; ok {
		s.User = u
	}
	if p, ok := props["sasl.password"]; ok {
		s.Password = p
	}
	slices.Sort(ignored)
	return s, ignored, nil
}

// parseProperties reads java.util.Properties' line format (the subset
// clients' files use: no unicode escapes beyond \uXXXX being kept as is).
func parseProperties(r io.Reader) (map[string]string, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var logical strings.Builder
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if logical.Len() == 0 && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		// An odd number of trailing backslashes continues the line.
		trail := len(line) - len(strings.TrimRight(line, `\`))
		if trail%2 == 1 {
			logical.WriteString(line[:len(line)-1])
			continue
		}
		logical.WriteString(line)
		k, v := splitProperty(logical.String())
		logical.Reset()
		if k == "" {
			return nil, fmt.Errorf("line %d: no key", n)
		}
		props[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if logical.Len() > 0 {
		k, v := splitProperty(logical.String())
		props[k] = v
	}
	return props, nil
}

// splitProperty cuts a logical line at the first unescaped '=', ':' or
// white space.
func splitProperty(line string) (string, string) {
	i := 0
	for ; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' {
			break
		}
	}
	key := unescape(line[:min(i, len(line))])
	rest := strings.TrimLeft(line[min(i, len(line)):], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, unescape(rest)
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

var jaasOption = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))`)
})

// parseJAAS takes username and password from a sasl.jaas.config value
// such as `org.apache.kafka.common.security.plain.PlainLoginModule
// required username="u" password="p";` (PLAIN and SCRAM modules).
func parseJAAS(v string) (user, pass string, err error) {
	for _, m := range jaasOption().FindAllStringSubmatch(v, -1) {
		val := m[3]
		if m[3] == "" {
			val = strings.ReplaceAll(strings.ReplaceAll(m[2], `\"`, `"`), `\\`, `\`)
		}
		switch m[1] {
		case "username":
			user = val
		case "password":
			pass = val
		}
	}
	if user == "" {
		return "", "", errors.New("sasl.jaas.config: no username=\"...\" found")
	}
	return user, pass, nil
}

// Merge lays the flags' settings (o) over the file's (s): a field set in
// o wins.
func (s Security) Merge(o Security) Security {
	if o.Protocol != "" {
		s.Protocol = o.Protocol
	}
	s.TLS = s.TLS || o.TLS
	for _, f := range [][2]*string{{&s.CAFile, &o.CAFile}, {&s.CertFile, &o.CertFile}, {&s.KeyFile, &o.KeyFile}, {&s.Mechanism, &o.Mechanism}, {&s.User, &o.User}, {&s.Password, &o.Password}} {
		if *f[1] != "" {
			*f[0] = *f[1]
		}
	}
	s.Insecure = s.Insecure || o.Insecure
	s.NoHostnameCheck = s.NoHostnameCheck || o.NoHostnameCheck
	return s
}

// Build makes the TLS configuration and SASL mechanism (nil when not
// used).
func (s Security) Build() (*tls.Config, sasl.Mechanism, error) {
	var tc *tls.Config
	if s.KeyFile != "" && s.CertFile == "" {
		// Without TLS asked for, the key was ignored and the agent
		// shipped in plaintext.
		return nil, nil, errors.New("a client key without its certificate: give --export-cert (ssl.certificate.location)")
	}
	useTLS := s.TLS || s.CAFile != "" || s.CertFile != "" || s.Insecure
	if s.Protocol == "PLAINTEXT" || s.Protocol == "SASL_PLAINTEXT" {
		if s.CAFile != "" || s.CertFile != "" {
			return nil, nil, fmt.Errorf("security.protocol %s with TLS files given: want SSL or SASL_SSL", s.Protocol)
		}
		useTLS = s.TLS
	}
	if useTLS {
		tc = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: s.Insecure}
		if s.CAFile != "" {
			pem, err := os.ReadFile(s.CAFile)
			if err != nil {
				return nil, nil, fmt.Errorf("CA file: %v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, nil, fmt.Errorf("CA file %s: no PEM certificate in it", s.CAFile)
			}
			tc.RootCAs = pool
		}
		if s.CertFile != "" || s.KeyFile != "" {
			key := s.KeyFile
			if key == "" {
				key = s.CertFile // one PEM with both
			}
			cert, err := tls.LoadX509KeyPair(s.CertFile, key)
			if err != nil {
				return nil, nil, fmt.Errorf("client certificate: %v", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		if s.NoHostnameCheck && !s.Insecure {
			// Verify the chain, not the name.
			tc.InsecureSkipVerify = true
			roots := tc.RootCAs
			tc.VerifyConnection = func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("no certificate from the sink")
				}
				inter := x509.NewCertPool()
				for _, c := range cs.PeerCertificates[1:] {
					inter.AddCert(c)
				}
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
				return err
			}
		}
	}
	if s.Protocol == "SASL_PLAINTEXT" || s.Protocol == "SASL_SSL" {
		if s.Mechanism == "" {
			s.Mechanism = "PLAIN" // Kafka's default sasl.mechanism
		}
	}
	var mech sasl.Mechanism
	switch s.Mechanism {
	case "":
		if s.User != "" {
			return nil, nil, errors.New("a SASL user without a mechanism: give --export-sasl-mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
		}
	case "PLAIN":
		mech = plain.Auth{User: s.User, Pass: s.Password}.AsMechanism()
	case "SCRAM-SHA-256":
		mech = scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		mech = scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()
	default:
		return nil, nil, fmt.Errorf("SASL mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
	}
	if mech != nil && s.User == "" {
		return nil, nil, fmt.Errorf("SASL %s without a user", s.Mechanism)
	}
	return tc, mech, nil
}
