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
	"math/big"
	"os"
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
	c, ports, filter := startKfake(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: k}}}))
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
