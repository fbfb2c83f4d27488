package decode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRedactSASL(t *testing.T) {
	for _, c := range []struct {
		name, in, want, user string
	}{
		{"plain", "\x00alice\x00hunter2", "\x00alice\x00" + Redaction, "alice"},
		{"plain authzid", "admin\x00alice\x00hunter2", "admin\x00alice\x00" + Redaction, "alice"},
		{"scram first", "n,,n=alice,r=abc", "n,,n=alice,r=abc", "alice"},
		{"scram escaped user", "n,,n=a=2Cb,r=abc", "n,,n=a=2Cb,r=abc", "a,b"},
		{"scram server first", "r=abcdef,s=c2FsdA==,i=4096", "r=abcdef,s=c2FsdA==,i=4096", ""},
		{"scram final", "c=biws,r=abcdef,p=cHJvb2Y=", "c=biws,r=abcdef,p=" + Redaction, ""},
		{"scram server final", "v=c2lnbmF0dXJl", "v=" + Redaction, ""},
		{"oauthbearer", "n,,\x01auth=Bearer tok.en\x01\x01", "n,,\x01auth=Bearer " + Redaction + "\x01\x01", ""},
		{"oauthbearer extension", "n,a=bob,\x01auth=Bearer t\x01ext=v\x01\x01", "n,a=bob,\x01auth=Bearer " + Redaction + "\x01ext=" + Redaction + "\x01\x01", ""},
		{"gssapi", "\x60\x82\x01\x00binary\x00token\x00", Redaction + " 17 bytes", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := string(RedactSASL([]byte(c.in))); got != c.want {
				t.Errorf("RedactSASL(%q) = %q, want %q", c.in, got, c.want)
			}
			if got := SASLUser([]byte(c.in)); got != c.user {
				t.Errorf("SASLUser(%q) = %q, want %q", c.in, got, c.user)
			}
		})
	}
}

// TestRedact: every credential field kmsg decodes is replaced in the copy
// Redact returns, and the message given is left as it was.
func TestRedact(t *testing.T) {
	secret := "s3cr3t-value"
	str := func(s string) *string { return &s }
	sasl := kmsg.NewPtrSASLAuthenticateRequest()
	sasl.SASLAuthBytes = []byte("\x00u\x00" + secret)
	saslResp := kmsg.NewPtrSASLAuthenticateResponse()
	saslResp.SASLAuthBytes = []byte("v=" + secret)
	create := kmsg.NewPtrCreateDelegationTokenResponse()
	create.HMAC, create.TokenID = []byte(secret), "token-id"
	renew := kmsg.NewPtrRenewDelegationTokenRequest()
	renew.HMAC = []byte(secret)
	expire := kmsg.NewPtrExpireDelegationTokenRequest()
	expire.HMAC = []byte(secret)
	desc := kmsg.NewPtrDescribeDelegationTokenResponse()
	desc.TokenDetails = []kmsg.DescribeDelegationTokenResponseTokenDetail{{TokenID: "t", HMAC: []byte(secret)}}
	scram := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	scram.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: "bob", Salt: []byte(secret), SaltedPassword: []byte(secret)}}
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = []byte(secret)
	envResp := kmsg.NewPtrEnvelopeResponse()
	envResp.ResponseData = []byte(secret)
	alter := kmsg.NewPtrAlterConfigsRequest()
	alter.Resources = []kmsg.AlterConfigsRequestResource{{Configs: []kmsg.AlterConfigsRequestResourceConfig{
		{Name: "ssl.keystore.password", Value: str(secret)}, {Name: "retention.ms", Value: str("1000")}}}}
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	inc.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		{Name: "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config", Value: str(secret)}}}}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "t", Configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "some.secret", Value: str(secret)}}}}
	dc := kmsg.NewPtrDescribeConfigsResponse()
	dc.Resources = []kmsg.DescribeConfigsResponseResource{{Configs: []kmsg.DescribeConfigsResponseResourceConfig{
		{Name: "custom", Value: str(secret), IsSensitive: true,
			ConfigSynonyms: []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{{Name: "custom", Value: str(secret)}}}}}}
	ctr := kmsg.NewPtrCreateTopicsResponse()
	ctr.Topics = []kmsg.CreateTopicsResponseTopic{{Topic: "t", Configs: []kmsg.CreateTopicsResponseTopicConfig{{Name: "x", Value: str(secret), IsSensitive: true}}}}
	for _, m := range []any{sasl, saslResp, create, renew, expire, desc, scram, env, envResp, alter, inc, ct, dc, ctr} {
		// The secret in a *string field shows in JSON, in a []byte
		// field with %s.
		has := func(v any) bool {
			js, _ := json.Marshal(v)
			return bytes.Contains(js, []byte(secret)) || strings.Contains(fmt.Sprintf("%s", v), secret)
		}
		before, _ := json.Marshal(m)
		if !has(m) {
			t.Fatalf("%T: the test's message has no secret: %s", m, before)
		}
		r, ok := Redact(m)
		if !ok {
			t.Errorf("%T: nothing redacted", m)
			continue
		}
		after, _ := json.Marshal(m)
		if !bytes.Equal(before, after) {
			t.Errorf("%T: Redact changed the message given", m)
		}
		if has(r) {
			t.Errorf("%T: the secret is still there: %s", m, r)
		}
	}
	if !strings.Contains(mustJSON(Redact(alter)), "1000") {
		t.Error("AlterConfigs: a config that is no secret was redacted")
	}
	if _, ok := Redact(kmsg.NewPtrMetadataRequest()); ok {
		t.Error("Metadata: redacted")
	}
}

func mustJSON(v any, _ bool) string {
	b, _ := json.Marshal(v)
	return string(b)
}
