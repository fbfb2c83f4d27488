package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/fixtures/record"
	"github.com/kfsniff/kfsniff/internal/secretcheck"
)

// TestDetailHidesSecrets: the detail pane and the hex view of every
// exchange of the SASL recordings show no password, proof, signature,
// salted password or token; with ShowSecrets (--show-secrets) the detail
// shows them.
func TestDetailHidesSecrets(t *testing.T) {
	for _, name := range []string{"plain", "scram", "oauthbearer"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("..", "fixtures", "pcaps", record.SASLDir, "recorded-kgo-kfake-sasl-"+name+".pcap")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			secrets := secretcheck.Secrets(data)
			m, _ := analyse(t, path, ModelConfig{})
			shown := 0
			xs := m.AppendExchanges(nil, 0, 0)
			if len(xs) == 0 {
				t.Fatal("no exchanges")
			}
			for _, x := range xs {
				req, resp := m.Frames(&x)
				text := detailTreeOf(&x, req, resp, false).String() + hexTextOf(&x, req, resp, false)
				if f := secretcheck.Found([]byte(text), secrets); len(f) > 0 {
					t.Errorf("%s corr %d: the detail shows %d secrets (%s)", x.API(), x.Correlation, len(f), secretcheck.Short(f))
				}
				shown += len(secretcheck.Found([]byte(detailTreeOf(&x, req, resp, true).String()), secrets))
			}
			if shown == 0 {
				t.Errorf("with ShowSecrets the detail shows none of the %d secrets", len(secrets))
			}
		})
	}
}

// TestConnsShowTLS: a capture carrying its TLS keys (a pcapng Decryption
// Secrets Block) shows each connection's TLS version in the connections'
// state, its exchanges decoded.
func TestConnsShowTLS(t *testing.T) {
	path := filepath.Join("..", "fixtures", "pcaps", record.TLSDir, "tls-kgo-kfake-tls13-secrets.pcapng")
	m, _ := analyse(t, path, ModelConfig{})
	conns := m.Conns()
	if len(conns) != 6 {
		t.Fatalf("%d connections, want 6", len(conns))
	}
	for _, c := range conns {
		if c.TLS != "TLS 1.3" || c.Requests == 0 {
			t.Errorf("connection %d: TLS %q, %d requests", c.ID, c.TLS, c.Requests)
		}
		if got := connColumns[len(connColumns)-1].cell(&c).Text; !strings.HasSuffix(got, ", TLS 1.3") {
			t.Errorf("connection %d: state %q", c.ID, got)
		}
	}
}
