// Package secretcheck lists the credentials a SASL recording of
// fixtures/record carries, read from the capture's bytes without
// kfsniff's decoding, in the forms an output could show them (as sent,
// base64 of the SASL message that carries them), for the tests that
// look for them in every output.
package secretcheck

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"strings"

	"github.com/kfsniff/kfsniff/fixtures/record"
)

var (
	// A SCRAM client-final message (RFC 5802) and its proof.
	clientFinal = regexp.MustCompile(`c=[A-Za-z0-9+/=]+,r=[!-+\--~]+,p=([A-Za-z0-9+/=]+)`)
	// A SCRAM server-final message: the server signature.
	serverFinal = regexp.MustCompile(`v=([A-Za-z0-9+/]{20,}=*)`)
)

// Secrets returns the secrets of capture (its file's bytes): the
// fixtures' password and token, the SCRAM proofs and server signatures
// found in it, the salted password AlterUserSCRAMCredentials carries, and
// the base64 of every SASL message carrying one, and the hex of the
// start of each.
func Secrets(capture []byte) []string {
	plain := "\x00" + record.SASLUser + "\x00" + record.SASLPassword
	oauth := "n,,\x01auth=Bearer " + record.OAuthToken + "\x01\x01"
	// raw: the secrets themselves; s: the messages carrying them, in
	// base64.
	var raw, s []string
	for _, msg := range []string{plain, oauth} {
		if bytes.Contains(capture, []byte(msg)) {
			s = append(s, msg, base64.StdEncoding.EncodeToString([]byte(msg)))
		}
	}
	for _, m := range clientFinal.FindAllSubmatch(capture, -1) {
		raw = append(raw, string(m[1]))
		s = append(s, base64.StdEncoding.EncodeToString(m[0]))
	}
	for _, m := range serverFinal.FindAllSubmatch(capture, -1) {
		raw = append(raw, string(m[1]))
		s = append(s, base64.StdEncoding.EncodeToString(m[0]))
	}
	if sp := record.SCRAMSaltedPassword(); bytes.Contains(capture, sp) {
		raw = append(raw, string(sp))
		s = append(s, base64.StdEncoding.EncodeToString(sp))
	}
	for _, r := range []string{record.SASLPassword, record.OAuthToken} {
		if bytes.Contains(capture, []byte(r)) {
			raw = append(raw, r)
		}
	}
	// A hex preview (the UI's) of a secret: the hex of its first 12
	// bytes.
	for _, r := range raw {
		s = append(s, r, hex.EncodeToString([]byte(r[:min(len(r), 12)])))
	}
	return s
}

// Found returns the secrets out contains.
func Found(out []byte, secrets []string) []string {
	var found []string
	for _, sec := range secrets {
		if bytes.Contains(out, []byte(sec)) {
			found = append(found, sec)
		}
	}
	return found
}

// Short is a secret shortened for a failure message, so that a test's
// log does not repeat it whole either.
func Short(secrets []string) string {
	var b strings.Builder
	for i, sec := range secrets {
		if i > 0 {
			b.WriteString(", ")
		}
		if len(sec) > 6 {
			sec = sec[:6] + "…"
		}
		b.WriteString(sec)
	}
	return b.String()
}
