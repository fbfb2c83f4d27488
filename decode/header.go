// Package decode turns Kafka wire bytes into typed values: frame headers,
// request and response bodies (through kmsg) and record batches with their
// checksums. It does no I/O, keeps no state and imports nothing of kfsniff's.
package decode

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

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

// AppendResponseFrame appends a complete, size-prefixed response frame for
// resp (whose version must be set) with the given correlation id. It is the
// counterpart of kmsg.RequestFormatter.AppendRequest and is used to build
// test traffic.
func AppendResponseFrame(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if ResponseHeaderVersion(resp.Key(), resp.GetVersion()) == 1 {
		dst = append(dst, 0) // no tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// AppendRequestFrame appends a complete, size-prefixed request frame: the
// header for the request's key and version (v0 for ControlledShutdown v0,
// v2 with an empty tag section for flexible versions, else v1), then the
// body. A nil clientID is written as a null string, as kafka-python does.
func AppendRequestFrame(dst []byte, correlationID int32, clientID *string, req kmsg.Request) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	switch RequestHeaderVersion(req.Key(), req.GetVersion()) {
	case 0:
	case 2:
		dst = appendClientID(dst, clientID)
		dst = append(dst, 0) // no tagged fields
	default:
		dst = appendClientID(dst, clientID)
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// appendClientID writes the client id as a nullable int16-length string,
// also in flexible headers (as Kafka does, so old brokers can read it).
func appendClientID(dst []byte, id *string) []byte {
	if id == nil {
		return binary.BigEndian.AppendUint16(dst, 0xffff)
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(*id)))
	return append(dst, *id...)
}
