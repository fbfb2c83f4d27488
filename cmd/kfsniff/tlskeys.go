package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/tlsdec"
)

// readKeyLogs reads the --tls-keylog files into one key log. A file that
// cannot be read is an error naming it; lines that are not key log lines
// are counted and placed (file:line) on stderr, never shown.
func readKeyLogs(paths []string, final bool, stderr io.Writer) (*tlsdec.Keys, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	keys := tlsdec.NewKeys()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("--tls-keylog: %w", err)
		}
		st, err := f.Stat()
		if err == nil && st.IsDir() {
			err = fmt.Errorf("%s is a directory", p)
		}
		if err == nil {
			err = keys.Read(f, p)
		}
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("--tls-keylog: %s: %w", p, err)
		}
	}
	if keys.Malformed > 0 {
		fmt.Fprintf(stderr, "kfsniff: warning: %d key log lines are not NSS key log lines, skipped (%s)\n",
			keys.Malformed, strings.Join(keys.MalformedAt, ", "))
	}
	all, _ := keys.Sessions()
	if all == 0 {
		fmt.Fprintf(stderr, "kfsniff: warning: --tls-keylog %s: no TLS 1.2 or 1.3 session keys in it\n", strings.Join(paths, ", "))
	}
	keys.SetFinal(final)
	return keys, nil
}

// secretsBlock is the Decryption Secrets Block -w NAME writes: the key
// log, when there is one and NAME is a pcapng file (a pcap file cannot
// hold it and is written without), so that the file alone can be read
// decrypted (by kfsniff or Wireshark).
func secretsBlock(name string, keys *tlsdec.Keys) []capture.Secret {
	if keys == nil || !strings.HasSuffix(strings.ToLower(name), ".pcapng") {
		return nil
	}
	if all, _ := keys.Sessions(); all == 0 {
		return nil
	}
	return []capture.Secret{{Type: capture.SecretsTLSKeyLog, Data: keys.AppendNSS(nil)}}
}
