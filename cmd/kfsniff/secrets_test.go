package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kfsniff/kfsniff/fixtures/record"
	"github.com/kfsniff/kfsniff/internal/secretcheck"
)

// exported runs kfsniff -r capture --export into a fresh kfake cluster
// and returns every record value and key it shipped.
func exported(t *testing.T, capture string) []byte {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "ship", "ship.findings"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := c.ListenAddrs()
	code, stdout, stderr := kfsniff(t, "-r", capture, "--json", "--export", "kafka://"+strings.Join(seeds, ",")+"/ship")
	if code != exitOK && code != exitFindings {
		t.Fatalf("--export: exit %d: %s", code, stderr)
	}
	var rep reportWithExport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.Export == nil {
		t.Fatalf("--export: no export in the report (%v)", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("ship", "ship.findings"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var all []byte
	n := int64(0)
	deadline := time.Now().Add(20 * time.Second)
	for n < rep.Export.Records && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			n++
			all = append(append(append(all, r.Key...), '\n'), r.Value...)
		})
	}
	if n != rep.Export.Records {
		t.Fatalf("--export: %d records read back of %d shipped", n, rep.Export.Records)
	}
	return all
}

// TestNoSecretInAnyOutput runs every output mode over the SASL/PLAIN,
// SCRAM-SHA-256 (with AlterUserSCRAMCredentials) and OAUTHBEARER
// recordings (kgo against kfake) and finds no password, proof, server
// signature, salted password or token in any of them, as sent or as the
// base64 of its SASL message (--export's records read back from kfake
// too); with --show-secrets, --frames -v shows them, and the user name
// stays visible without it.
func TestNoSecretInAnyOutput(t *testing.T) {
	for _, name := range []string{"plain", "scram", "oauthbearer"} {
		t.Run(name, func(t *testing.T) {
			path := fixture(filepath.Join(record.SASLDir, "recorded-kgo-kfake-sasl-"+name+".pcap"))
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			secrets := secretcheck.Secrets(data)
			if len(secrets) < 2 {
				t.Fatalf("found %d secrets in the capture itself; is it a SASL recording?", len(secrets))
			}
			t.Logf("%d secrets in the capture", len(secrets))
			dir := t.TempDir()
			html, expect := filepath.Join(dir, "r.html"), filepath.Join(dir, "r.expect.json")
			modes := [][]string{
				{},
				{"--json"},
				{"--frames"},
				{"--frames", "--json"},
				{"--frames", "-v"},
				{"--frames", "--json", "-v"},
				{"--records"},
				{"--records", "--json"},
				{"--html", html, "--write-expect", expect},
			}
			for _, mode := range modes {
				code, out, errs := kfsniff(t, append([]string{"-r", path}, mode...)...)
				if code != 0 {
					t.Fatalf("%v: exit %d: %s", mode, code, errs)
				}
				if f := secretcheck.Found([]byte(out+errs), secrets); len(f) > 0 {
					t.Errorf("%v shows %d secrets (%s)", mode, len(f), secretcheck.Short(f))
				}
			}
			for _, file := range []string{html, expect} {
				b, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if f := secretcheck.Found(b, secrets); len(f) > 0 {
					t.Errorf("%s shows %d secrets (%s)", filepath.Base(file), len(f), secretcheck.Short(f))
				}
			}
			if b := exported(t, path); len(b) == 0 {
				t.Error("--export shipped nothing")
			} else if f := secretcheck.Found(b, secrets); len(f) > 0 {
				t.Errorf("--export ships %d secrets (%s)", len(f), secretcheck.Short(f))
			}
			_, out, _ := kfsniff(t, "-r", path, "--frames", "-v", "--show-secrets")
			if f := secretcheck.Found([]byte(out), secrets); len(f) == 0 {
				t.Errorf("--show-secrets shows none of the %d secrets", len(secrets))
			}
			_, out, _ = kfsniff(t, "-r", path, "--frames", "--json", "-v", "--show-secrets")
			if f := secretcheck.Found([]byte(out), secrets); len(f) == 0 {
				t.Errorf("--frames --json -v --show-secrets shows none of the %d secrets", len(secrets))
			}
			if name != "oauthbearer" {
				_, out, _ = kfsniff(t, "-r", path, "--frames")
				if !strings.Contains(out, "user="+record.SASLUser) {
					t.Errorf("--frames does not name the user %s", record.SASLUser)
				}
			}
		})
	}
}
