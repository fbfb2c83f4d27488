package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/tlsdec"
)

// readKeyLogs reads the --tls-keylog files into one key log. A file that
// cannot be read is an error naming it; lines that are not key log lines
// are counted and placed (file:line) on stderr, never shown. For a live
// capture (final false) the files are followed instead (followKeyLogs).
func readKeyLogs(paths []string, final bool, stderr io.Writer) (*tlsdec.Keys, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	keys := tlsdec.NewKeys()
	if !final {
		return keys, nil
	}
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
		more := ""
		if keys.Malformed > len(keys.MalformedAt) {
			more = ", ..."
		}
		fmt.Fprintf(stderr, "kfsniff: warning: %d key log lines are not NSS key log lines, skipped (%s%s)\n",
			keys.Malformed, strings.Join(keys.MalformedAt, ", "), more)
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
	if !strings.HasSuffix(strings.ToLower(name), ".pcapng") {
		return nil
	}
	return keySecrets(keys)
}

// keySecrets is the key log as a Decryption Secrets Block, nil without
// keys.
func keySecrets(keys *tlsdec.Keys) []capture.Secret {
	if keys == nil {
		return nil
	}
	if all, _ := keys.Sessions(); all == 0 {
		return nil
	}
	return []capture.Secret{{Type: capture.SecretsTLSKeyLog, Data: keys.AppendNSS(nil)}}
}

// followKeyLogs reads the --tls-keylog files of a live capture as they
// grow (a client appends a line per connection), every interval until
// ctx ends: records wait for their keys (within --buffer-budget). A file
// that cannot be read at the start is an error; later, a file that went
// missing is tried again.
func followKeyLogs(ctx context.Context, keys *tlsdec.Keys, paths []string, interval time.Duration, stderr io.Writer) error {
	var fs []*tlsdec.Follower
	for _, p := range paths {
		f := keys.Follow(p, func() (io.ReadSeekCloser, error) { return os.Open(p) })
		if err := f.Poll(); err != nil {
			return fmt.Errorf("--tls-keylog: %w", err)
		}
		fs = append(fs, f)
	}
	poll := func() {
		for _, f := range fs {
			f.Poll()
		}
	}
	keys.SetRefresh(poll)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				poll()
			}
		}
	}()
	return nil
}
