package decode

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Redaction marks a secret taken out of what kfsniff shows.
const Redaction = "<redacted>"

// Redact returns m with every credential kmsg decodes replaced (SASL
// passwords, SCRAM proofs and signatures, OAUTHBEARER tokens, delegation
// token HMACs, SCRAM salted passwords, the values of sensitive configs,
// the forwarded requests of Envelope), and whether it replaced any. The
// user names stay (they are evidence). m itself is never changed: a
// message with secrets comes back as a copy, its replaced parts copied
// too.
func Redact(m any) (any, bool) {
	switch r := m.(type) {
	case *kmsg.SASLAuthenticateRequest:
		return redactBytes(r, func(c *kmsg.SASLAuthenticateRequest) *[]byte { return &c.SASLAuthBytes }, RedactSASL)
	case *kmsg.SASLAuthenticateResponse:
		return redactBytes(r, func(c *kmsg.SASLAuthenticateResponse) *[]byte { return &c.SASLAuthBytes }, RedactSASL)
	case *kmsg.CreateDelegationTokenResponse:
		return redactBytes(r, func(c *kmsg.CreateDelegationTokenResponse) *[]byte { return &c.HMAC }, redactedBytes)
	case *kmsg.RenewDelegationTokenRequest:
		return redactBytes(r, func(c *kmsg.RenewDelegationTokenRequest) *[]byte { return &c.HMAC }, redactedBytes)
	case *kmsg.ExpireDelegationTokenRequest:
		return redactBytes(r, func(c *kmsg.ExpireDelegationTokenRequest) *[]byte { return &c.HMAC }, redactedBytes)
	case *kmsg.DescribeDelegationTokenResponse:
		if len(r.TokenDetails) == 0 {
			return m, false
		}
		c := *r
		c.TokenDetails = append([]kmsg.DescribeDelegationTokenResponseTokenDetail(nil), r.TokenDetails...)
		for i := range c.TokenDetails {
			c.TokenDetails[i].HMAC = redactedBytes(c.TokenDetails[i].HMAC)
		}
		return &c, true
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		if len(r.Upsertions) == 0 {
			return m, false
		}
		c := *r
		c.Upsertions = append([]kmsg.AlterUserSCRAMCredentialsRequestUpsertion(nil), r.Upsertions...)
		for i := range c.Upsertions {
			u := &c.Upsertions[i]
			u.Salt, u.SaltedPassword = redactedBytes(u.Salt), redactedBytes(u.SaltedPassword)
		}
		return &c, true
	case *kmsg.EnvelopeRequest:
		// The forwarded request may be any admin request, SCRAM
		// credentials and sensitive configs among them.
		return redactBytes(r, func(c *kmsg.EnvelopeRequest) *[]byte { return &c.RequestData }, redactedBytes)
	case *kmsg.EnvelopeResponse:
		return redactBytes(r, func(c *kmsg.EnvelopeResponse) *[]byte { return &c.ResponseData }, redactedBytes)
	case *kmsg.AlterConfigsRequest:
		type res = kmsg.AlterConfigsRequestResource
		type cfg = kmsg.AlterConfigsRequestResourceConfig
		return redactConfigs(r, func(c *kmsg.AlterConfigsRequest) *[]res { return &c.Resources }, func(o *res) *[]cfg { return &o.Configs },
			func(x *cfg) **string { return secretValue(x.Name, false, &x.Value) })
	case *kmsg.IncrementalAlterConfigsRequest:
		type res = kmsg.IncrementalAlterConfigsRequestResource
		type cfg = kmsg.IncrementalAlterConfigsRequestResourceConfig
		return redactConfigs(r, func(c *kmsg.IncrementalAlterConfigsRequest) *[]res { return &c.Resources }, func(o *res) *[]cfg { return &o.Configs },
			func(x *cfg) **string { return secretValue(x.Name, false, &x.Value) })
	case *kmsg.CreateTopicsRequest:
		type topic = kmsg.CreateTopicsRequestTopic
		type cfg = kmsg.CreateTopicsRequestTopicConfig
		return redactConfigs(r, func(c *kmsg.CreateTopicsRequest) *[]topic { return &c.Topics }, func(o *topic) *[]cfg { return &o.Configs },
			func(x *cfg) **string { return secretValue(x.Name, false, &x.Value) })
	case *kmsg.CreateTopicsResponse:
		type topic = kmsg.CreateTopicsResponseTopic
		type cfg = kmsg.CreateTopicsResponseTopicConfig
		return redactConfigs(r, func(c *kmsg.CreateTopicsResponse) *[]topic { return &c.Topics }, func(o *topic) *[]cfg { return &o.Configs },
			func(x *cfg) **string { return secretValue(x.Name, x.IsSensitive, &x.Value) })
	case *kmsg.DescribeConfigsResponse:
		sensitive := func(x kmsg.DescribeConfigsResponseResourceConfig) bool {
			if (x.IsSensitive || SensitiveConfig(x.Name)) && x.Value != nil {
				return true
			}
			return slices.ContainsFunc(x.ConfigSynonyms, func(s kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) bool {
				return (x.IsSensitive || SensitiveConfig(s.Name)) && s.Value != nil
			})
		}
		if !slices.ContainsFunc(r.Resources, func(res kmsg.DescribeConfigsResponseResource) bool {
			return slices.ContainsFunc(res.Configs, sensitive)
		}) {
			return m, false
		}
		c := *r
		c.Resources = append([]kmsg.DescribeConfigsResponseResource(nil), r.Resources...)
		for i := range c.Resources {
			res := &c.Resources[i]
			res.Configs = append([]kmsg.DescribeConfigsResponseResourceConfig(nil), res.Configs...)
			for j := range res.Configs {
				x := &res.Configs[j]
				if !sensitive(*x) {
					continue
				}
				if x.Value != nil && (x.IsSensitive || SensitiveConfig(x.Name)) {
					x.Value = redactedString()
				}
				x.ConfigSynonyms = append([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym(nil), x.ConfigSynonyms...)
				for k := range x.ConfigSynonyms {
					if s := &x.ConfigSynonyms[k]; s.Value != nil && (x.IsSensitive || SensitiveConfig(s.Name)) {
						s.Value = redactedString()
					}
				}
			}
		}
		return &c, true
	}
	return m, false
}

// redactBytes returns a copy of r with the bytes field gives replaced by
// with, if it holds any; else r itself.
func redactBytes[T any](r *T, field func(*T) *[]byte, with func([]byte) []byte) (any, bool) {
	if len(*field(r)) == 0 {
		return r, false
	}
	c := *r
	f := field(&c)
	*f = with(*f)
	return &c, true
}

// redactConfigs returns a copy of r whose list and its elements' configs
// are copied too, with the config values secret names redacted, if secret
// names any; else r itself.
func redactConfigs[T, O, C any](r *T, list func(*T) *[]O, configs func(*O) *[]C, secret func(*C) **string) (any, bool) {
	if !slices.ContainsFunc(*list(r), func(o O) bool {
		return slices.ContainsFunc(*configs(&o), func(x C) bool { return secret(&x) != nil })
	}) {
		return r, false
	}
	c := *r
	os := list(&c)
	*os = append([]O(nil), *os...)
	for i := range *os {
		cs := configs(&(*os)[i])
		*cs = append([]C(nil), *cs...)
		for j := range *cs {
			if v := secret(&(*cs)[j]); v != nil {
				*v = redactedString()
			}
		}
	}
	return &c, true
}

// secretValue returns value if it is set and its config a credential (the
// broker marked it sensitive, or SensitiveConfig says so by its name).
func secretValue(name string, sensitive bool, value **string) **string {
	if *value != nil && (sensitive || SensitiveConfig(name)) {
		return value
	}
	return nil
}

// SecretKey reports whether frames of API key may carry a credential in
// some version, so that their raw bytes (a hex dump) are not shown
// either.
func SecretKey(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.SASLAuthenticate, kmsg.CreateDelegationToken, kmsg.RenewDelegationToken,
		kmsg.ExpireDelegationToken, kmsg.DescribeDelegationToken, kmsg.AlterUserSCRAMCredentials,
		kmsg.Envelope, kmsg.AlterConfigs, kmsg.IncrementalAlterConfigs, kmsg.DescribeConfigs,
		kmsg.CreateTopics:
		return true
	}
	return false
}

// SensitiveConfig reports whether a config's value is a credential by its
// name, as Kafka's PASSWORD-typed configs are named (ssl.key.password,
// sasl.jaas.config, ...), for configs a request sets (the broker marks
// those it describes IsSensitive itself).
func SensitiveConfig(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"password", "secret", "jaas", "credential", "private", "token"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return strings.HasSuffix(n, ".key") || strings.Contains(n, "keystore.key") || strings.Contains(n, ".key.")
}

func redactedBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return []byte(Redaction)
}

func redactedString() *string {
	s := Redaction
	return &s
}

// RedactSASL returns a SASL message with its secret replaced and the rest
// kept: PLAIN's password (authzid NUL user NUL password), SCRAM's client
// proof (p=) and server signature (v=), OAUTHBEARER's token (auth=Bearer
// ...); a message of any other shape (GSSAPI tokens, ...) is replaced
// whole.
func RedactSASL(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	if plainLike(b) {
		i := bytes.LastIndexByte(b, 0)
		out := append([]byte(nil), b[:i+1]...)
		return append(out, Redaction...)
	}
	// OAUTHBEARER (RFC 7628): gs2 header, then key=value pairs
	// separated by 0x01.
	if i := bytes.IndexByte(b, 1); i >= 0 && (bytes.HasPrefix(b, []byte("n,")) || bytes.HasPrefix(b, []byte("y,")) || bytes.HasPrefix(b, []byte("p="))) {
		parts := bytes.Split(b, []byte{1})
		for j, p := range parts {
			if k, _, ok := bytes.Cut(p, []byte("=")); ok && j > 0 && string(k) != "host" && string(k) != "port" {
				if string(k) == "auth" {
					scheme, _, _ := bytes.Cut(p[len("auth="):], []byte(" "))
					parts[j] = append([]byte("auth="+string(scheme)+" "), Redaction...)
				} else {
					parts[j] = append(append([]byte(nil), k...), "="+Redaction...)
				}
			}
		}
		return bytes.Join(parts, []byte{1})
	}
	if scramLike(b) {
		// SCRAM (RFC 5802): attributes a=value separated by commas;
		// p (proof) and v (server signature) are the secrets.
		parts := bytes.Split(b, []byte(","))
		for j, p := range parts {
			if bytes.HasPrefix(p, []byte("p=")) || bytes.HasPrefix(p, []byte("v=")) {
				parts[j] = append(append([]byte(nil), p[:2]...), Redaction...)
			}
		}
		return bytes.Join(parts, []byte(","))
	}
	return []byte(Redaction + " " + strconv.Itoa(len(b)) + " bytes")
}

// scramLike reports a SCRAM message: printable, comma-separated
// single-letter attributes (a gs2 header first in the client's first).
func scramLike(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	s := string(b)
	if strings.HasPrefix(s, "n,") || strings.HasPrefix(s, "y,") || strings.HasPrefix(s, "p=") {
		return true
	}
	return len(s) >= 2 && s[1] == '=' && s[0] >= 'a' && s[0] <= 'z'
}

// SASLUser returns the user a client's SASL message names: PLAIN's
// authentication id, SCRAM's n= in its first message; "" otherwise.
func SASLUser(b []byte) string {
	if plainLike(b) {
		parts := bytes.Split(b, []byte{0})
		return string(parts[1])
	}
	if scramLike(b) && bytes.IndexByte(b, 1) < 0 {
		for _, p := range strings.Split(string(b), ",") {
			if u, ok := strings.CutPrefix(p, "n="); ok {
				// RFC 5802: "=2C" is a comma, "=3D" an equals sign.
				return strings.NewReplacer("=2C", ",", "=3D", "=").Replace(u)
			}
		}
	}
	return ""
}

// plainLike reports a PLAIN message (RFC 4616): authzid NUL authcid NUL
// passwd, text otherwise.
func plainLike(b []byte) bool {
	if bytes.Count(b, []byte{0}) != 2 {
		return false
	}
	for _, c := range b {
		if c != 0 && (c < 0x20 || c == 0x7f) {
			return false
		}
	}
	return true
}
