package report

import (
	"cmp"
	"fmt"
)

// TLS is what decryption with key logs (--tls-keylog, pcapng secrets)
// did: absent from the report without a key log.
type TLS struct {
	// Connections counts the TCP connections that began with a
	// ClientHello; Decrypted those decrypted; NoKeys those the key log
	// has no secret for.
	Connections int64 `json:"connections"`
	Decrypted   int64 `json:"decrypted"`
	NoKeys      int64 `json:"no_keys"`
	// MidStream counts connections whose first bytes were TLS records
	// without a ClientHello (joined mid-connection): not matched to keys.
	MidStream int64 `json:"joined_mid_stream,omitempty"`
	// KeyLogSessions counts the sessions the key logs give secrets for,
	// UnusedSessions those no connection of the capture used;
	// MalformedLines the key log lines that are not key log lines.
	KeyLogSessions int `json:"key_log_sessions"`
	UnusedSessions int `json:"unused_key_log_sessions"`
	MalformedLines int `json:"malformed_key_log_lines,omitempty"`
	// AuthFailures counts records that did not authenticate (wrong keys,
	// or corrupted), the first at FirstAuthFailure.
	AuthFailures     int64    `json:"auth_failures"`
	FirstAuthFailure *Problem `json:"first_auth_failure,omitempty"`
}

// ConnTLS is a connection's TLS session.
type ConnTLS struct {
	Version      string `json:"version,omitempty"`
	CipherSuite  string `json:"cipher_suite,omitempty"`
	SNI          string `json:"sni,omitempty"`
	ALPN         string `json:"alpn,omitempty"`
	Decrypted    bool   `json:"decrypted"`
	Why          string `json:"not_decrypted_because,omitempty"`
	Records      int64  `json:"records_decrypted"`
	AuthFailures int    `json:"auth_failures,omitempty"`
	KeyUpdates   int    `json:"key_updates,omitempty"`
}

// text is the TLS line of the text report.
func (t *TLS) text() string {
	s := fmt.Sprintf("TLS: %d connections, %d decrypted", t.Connections, t.Decrypted)
	if t.NoKeys > 0 {
		s += fmt.Sprintf("; no keys for %d TLS connections", t.NoKeys)
	}
	if t.MidStream > 0 {
		s += fmt.Sprintf("; %d more joined mid-connection (no ClientHello: their keys cannot be found)", t.MidStream)
	}
	s += fmt.Sprintf("; key log lines for %d other sessions unused", t.UnusedSessions)
	if t.AuthFailures > 0 {
		s += fmt.Sprintf("; %d records failed authentication (first: %s)", t.AuthFailures, problemText(t.FirstAuthFailure))
	}
	if t.MalformedLines > 0 {
		s += fmt.Sprintf("; %d key log lines malformed", t.MalformedLines)
	}
	return s
}

// tlsText describes a connection's TLS session in its line of the text
// report.
func (c *ConnTLS) text() string {
	s := cmp.Or(c.Version, "TLS")
	if c.CipherSuite != "" {
		s += " " + c.CipherSuite
	}
	if c.SNI != "" {
		s += " SNI " + Clean(c.SNI)
	} else {
		s += " no SNI"
	}
	if c.ALPN != "" {
		s += " ALPN " + Clean(c.ALPN)
	}
	if c.Decrypted {
		s += fmt.Sprintf(", decrypted (%d records)", c.Records)
	} else {
		s += ", not decrypted"
	}
	if c.Why != "" {
		s += ": " + c.Why
	}
	return s
}
