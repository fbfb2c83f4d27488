package pipeline

import (
	"bytes"
	"fmt"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/tlsdec"
)

// FileKeys adds the TLS key logs of the files' pcapng Decryption Secrets
// Blocks (as editcap --inject-secrets writes them) to keys, made if nil
// and some file has one, and returns it: the files decrypt as with
// --tls-keylog. Blocks after the first packet are read as they come
// (capture.File.OnSecret). Calling it again adds nothing twice.
func FileKeys(files []*capture.File, keys *tlsdec.Keys) *tlsdec.Keys {
	for _, f := range files {
		for _, s := range f.Secrets() {
			if s.Type != capture.SecretsTLSKeyLog {
				continue
			}
			if keys == nil {
				keys = tlsdec.NewKeys()
				keys.SetFinal(true)
			}
			keys.Read(bytes.NewReader(s.Data), secretsName(f, s))
		}
		f.TakeSecrets()
	}
	if keys != nil {
		for _, f := range files {
			f.OnSecret = func(s capture.Secret) {
				if s.Type == capture.SecretsTLSKeyLog {
					keys.Read(bytes.NewReader(s.Data), secretsName(f, s))
				}
			}
		}
	}
	return keys
}

func secretsName(f *capture.File, s capture.Secret) string {
	return fmt.Sprintf("%s secrets block at byte %d", f.Name, s.Offset)
}
