package collect

import (
	"cmp"
	"maps"
	"slices"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
	"github.com/kfsniff/kfsniff/tlsdec"
)

func connTLS(i *tlsdec.Info) *report.ConnTLS {
	if i == nil {
		return nil
	}
	c := &report.ConnTLS{SNI: i.SNI, ALPN: i.ALPN, Decrypted: i.Decrypted, Why: i.Why, Records: i.Records,
		AuthFailures: i.AuthFailures, KeyUpdates: i.KeyUpdates}
	if i.Version != 0 {
		c.Version = tlsdec.VersionName(i.Version)
	}
	if i.Suite != 0 {
		c.CipherSuite = tlsdec.SuiteName(i.Suite)
	}
	return c
}

// SetTLS puts the key logs' counts in the report: keys is what the
// analysis decrypted with (nil: no key log, no section).
func SetTLS(r *report.Report, st *flows.Stats, keys *tlsdec.Keys) {
	if keys == nil {
		return
	}
	t := &report.TLS{Connections: st.TLS.Conns, Decrypted: st.TLS.Decrypted, NoKeys: st.TLS.NoKeys, MidStream: st.TLS.MidStream, AuthFailures: st.TLS.AuthFailures}
	t.KeyLogSessions, t.UnusedSessions = keys.Sessions()
	t.MalformedLines = keys.Malformed
	t.FirstAuthFailure = problemAt(st.TLS.FirstAuthFailure)
	r.TLS = t
	clientTLS(r)
}

// clientTLS describes in the client inventory the TLS of each client's
// connections: a client on TLS 1.2 with CBC, or without SNI, is worth a
// line.
func clientTLS(r *report.Report) {
	byID := make(map[int]*report.ConnTLS, len(r.Connections))
	for i := range r.Connections {
		if s := r.Connections[i].TLSSession; s != nil {
			byID[r.Connections[i].ID] = s
		}
	}
	for i := range r.Clients {
		c := &r.Clients[i]
		seen := map[string]bool{}
		for _, id := range c.Connections {
			s := byID[id]
			if s == nil {
				continue
			}
			d := cmp.Or(s.Version, "TLS")
			if s.CipherSuite != "" {
				d += " " + s.CipherSuite
			}
			if s.SNI == "" {
				d += " (no SNI)"
			}
			if !s.Decrypted {
				d += " (not decrypted)"
			}
			seen[d] = true
		}
		c.TLS = slices.Sorted(maps.Keys(seen))
	}
}
