// Package decode turns Kafka wire bytes into typed values: frame headers,
// request and response bodies (through kmsg) and record batches with their
// checksums. It does no I/O, keeps no state and imports nothing of kfsniff's.
package decode

import "github.com/twmb/franz-go/pkg/kmsg"

// keyInfo is what the decoder needs to know of one API key, computed once
// from kmsg so that no table of API versions is written by hand.
type keyInfo struct {
	known      bool
	maxVersion int16
	// flexibleFrom is the first flexible version, or maxVersion+1 if none.
	flexibleFrom int16
}

// keys is filled once at init from kmsg and only read afterwards.
var keys = func() (t [kmsg.MaxKey + 1]keyInfo) {
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		req := kmsg.RequestForKey(k)
		if req == nil {
			continue
		}
		info := keyInfo{known: true, maxVersion: req.MaxVersion(), flexibleFrom: req.MaxVersion() + 1}
		for v := int16(0); v <= info.maxVersion; v++ {
			req.SetVersion(v)
			if req.IsFlexible() {
				info.flexibleFrom = v
				break
			}
		}
		t[k] = info
	}
	return t
}()

// KnownKey reports whether kmsg knows the API key.
func KnownKey(key int16) bool {
	return key >= 0 && int(key) < len(keys) && keys[key].known
}

// KnownVersion reports whether kmsg can decode this key at this version.
func KnownVersion(key, version int16) bool {
	return KnownKey(key) && version >= 0 && version <= keys[key].maxVersion
}

// MaxVersion returns kmsg's highest version for key, or -1 if unknown.
func MaxVersion(key int16) int16 {
	if !KnownKey(key) {
		return -1
	}
	return keys[key].maxVersion
}

// Flexible reports whether key at version uses flexible (tagged) encoding.
func Flexible(key, version int16) bool {
	return KnownKey(key) && version >= keys[key].flexibleFrom
}

// RequestHeaderVersion is the request header version used by key at version:
// 0 for ControlledShutdown v0 (no client id), 2 for flexible versions, else 1.
func RequestHeaderVersion(key, version int16) int {
	switch {
	case key == 7 && version == 0:
		return 0
	case Flexible(key, version):
		return 2
	default:
		return 1
	}
}

// ResponseHeaderVersion is the response header version for key at version:
// 1 (tagged fields after the correlation id) for flexible versions, except
// ApiVersions, whose response header is always v0 so that a client can read
// it before it knows what the broker supports.
func ResponseHeaderVersion(key, version int16) int {
	if key == 18 || !Flexible(key, version) {
		return 0
	}
	return 1
}
