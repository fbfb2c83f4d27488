package decode

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsKey is ApiVersions' API key.
const apiVersionsKey = 18

// errUnsupportedVersion is the error code UNSUPPORTED_VERSION.
const errUnsupportedVersion = 35

// UnsupportedVersionAnswer reports whether body, the body of a response to
// key at version, is a broker's refusal of an ApiVersions version it does
// not know: ApiVersions, a request version above 0, and the error code 35
// UNSUPPORTED_VERSION in the body's first two bytes.
//
// A broker cannot answer a version it does not know in that version's
// layout, so it answers in the v0 layout, the only one every client reads:
// the error code, then the API keys it supports (since Kafka 2.4, KIP-511,
// only ApiVersions' own range, which tells the client the version to retry
// with; before, none). Every ApiVersions layout begins with the error code,
// so the code tells the layout before the body is read. Kafka's broker
// serializes this answer at v0 whatever the request's version
// (RequestContext.apiVersion), and kgo reads v0 when byte 1 is 35
// (pkg/kgo/broker.go; both bytes are checked here, as no error code is
// 35 plus a multiple of 256). A response in the request's own layout
// never carries this code: a broker that can write that layout knows the
// version.
func UnsupportedVersionAnswer(key, version int16, body []byte) bool {
	return key == apiVersionsKey && version > 0 && len(body) >= 2 &&
		int16(binary.BigEndian.Uint16(body)) == errUnsupportedVersion
}

// decodeUnsupportedVersion decodes an UnsupportedVersionAnswer body: in
// the v0 layout when that reading accounts for every byte (a v0 answer is
// the error code, the array length and 6 bytes per key, nothing more); else
// in the request's own layout if that decodes (a v1 or v2 body is a v0 one
// plus a throttle time, so a broker breaking the rule above is read in its
// own layout); else in v0 with bytes left over, as clients read it. The
// response's GetVersion() says which layout was used. If nothing decodes,
// the error is v0's.
//
// v0 comes first, as in kgo, not last, as in Kafka's Java client: kmsg reads
// a null array where the field is not nullable as empty and does not object
// to bytes left over, so a v0 answer read in a flexible layout (v3 and
// later) would often "decode" into nonsense, while a flexible body read as
// v0 fails on its array length or leaves bytes over.
func decodeUnsupportedVersion(version int16, body []byte) (kmsg.Response, error) {
	v0 := kmsg.NewPtrApiVersionsResponse() // Version 0
	err := readBody(v0, body)
	if err == nil && len(body) == 2+4+6*len(v0.ApiKeys) {
		return v0, nil
	}
	if KnownVersion(apiVersionsKey, version) {
		own := kmsg.NewPtrApiVersionsResponse()
		own.SetVersion(version)
		if readBody(own, body) == nil {
			return own, nil
		}
	}
	if err == nil {
		return v0, nil
	}
	return v0, fmt.Errorf("v0 layout (UNSUPPORTED_VERSION answer): %w", err)
}
