package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
)

// TestSecretsDroppedSaid: a pcapng Decryption Secrets Block that does not
// hold together (its secrets length runs past the block) is skipped, and
// said on stderr with the file and the block's byte (it was counted in
// capture.File.SecretsDropped and never said: the keys vanished without a
// word); a whole block beside it is not.
func TestSecretsDroppedSaid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.pcapng")
	keys := []byte("CLIENT_RANDOM " + strings.Repeat("ab", 32) + " " + strings.Repeat("cd", 48) + "\n")
	w, err := capture.Create(path, capture.LinkEthernet, 65535, "lo", capture.Secret{Type: capture.SecretsTLSKeyLog, Data: keys})
	if err != nil {
		t.Fatal(err)
	}
	p := capture.Packet{Link: capture.LinkEthernet, Time: time.Unix(1700000000, 0), Len: 60, Data: make([]byte, 60)}
	if err := w.WritePacket(&p); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSecrets(capture.SecretsTLSKeyLog, keys); err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(&p); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The second Decryption Secrets Block (type 10) gets a secrets length
	// past its end.
	var at, seen int
	for off := 0; off+8 <= len(b); off += int(binary.LittleEndian.Uint32(b[off+4:])) {
		if binary.LittleEndian.Uint32(b[off:]) == 10 {
			if seen++; seen == 2 {
				at = off
				binary.LittleEndian.PutUint32(b[off+12:], 1<<20)
			}
		}
	}
	if at == 0 {
		t.Fatalf("no second Decryption Secrets Block in the file written (%d blocks of type 10)", seen)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, stderr := kfsniff(t, "-r", path)
	want := fmt.Sprintf("kfsniff: warning: %s: 1 pcapng Decryption Secrets Blocks skipped (not whole, or past the 16 MiB of secrets kept from a file), the first at byte %d\n", path, at)
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr %q\nwant the line %q", stderr, want)
	}
}
