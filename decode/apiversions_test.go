package decode_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/internal/kmsgtest"
)

// refusal is what a broker answers to an ApiVersions version it does not
// know, built with kmsg and encoded at v0: UNSUPPORTED_VERSION and, since
// KIP-511, ApiVersions' own range up to max (max < 0: no key, as brokers
// before Kafka 2.4 answered).
func refusal(max int16) *kmsg.ApiVersionsResponse {
	r := kmsg.NewPtrApiVersionsResponse()
	r.ErrorCode = 35
	if max >= 0 {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = 18, 0, max
		r.ApiKeys = append(r.ApiKeys, k)
	}
	return r
}

// TestDecodeResponseUnsupportedVersion: the broker's v0-layout refusal of
// every ApiVersions version from v1 to one beyond what kmsg knows decodes
// as v0, with its error code and the version to retry with.
func TestDecodeResponseUnsupportedVersion(t *testing.T) {
	max := decode.MaxVersion(18)
	for v := int16(1); v <= max+1; v++ {
		for _, retry := range []int16{v - 1, -1} {
			name := fmt.Sprintf("request v%d, retry at v%d", v, retry)
			if retry < 0 {
				name = fmt.Sprintf("request v%d, no key (before KIP-511)", v)
			}
			t.Run(name, func(t *testing.T) {
				want := refusal(retry)
				body := want.AppendTo(nil)
				if !decode.UnsupportedVersionAnswer(18, v, body) {
					t.Fatalf("UnsupportedVersionAnswer(% x) = false", body)
				}
				resp, err := decode.DecodeResponse(18, v, body)
				if err != nil {
					t.Fatalf("DecodeResponse: %v", err)
				}
				if resp.GetVersion() != 0 {
					t.Errorf("decoded in the v%d layout, want v0", resp.GetVersion())
				}
				if !kmsgtest.Same(reflect.ValueOf(resp), reflect.ValueOf(want)) {
					t.Errorf("decoded differs at %s", kmsgtest.FirstDiff(reflect.ValueOf(resp), reflect.ValueOf(want), "resp"))
				}
				var codes []int16
				decode.ErrorCodes(resp, func(c int16) { codes = append(codes, c) })
				if len(codes) != 1 || codes[0] != 35 {
					t.Errorf("error codes %v, want [35] UNSUPPORTED_VERSION", codes)
				}
			})
		}
	}
}

// TestDecodeResponseApiVersionsOwnLayout: ordinary ApiVersions responses,
// with and without an error, decode at the request's version; so does one
// that carries UNSUPPORTED_VERSION in the request's own layout against the
// protocol's rule (no real broker writes it), since the v0 layout does not
// fit its bytes.
func TestDecodeResponseApiVersionsOwnLayout(t *testing.T) {
	fl := &kmsgtest.Filler{}
	for v := int16(0); v <= decode.MaxVersion(18); v++ {
		for _, code := range []int16{0, 42, 35} {
			t.Run(fmt.Sprintf("v%d error %d", v, code), func(t *testing.T) {
				want := fl.Response(18, v).(*kmsg.ApiVersionsResponse)
				want.ErrorCode = code
				for i := range 6 { // a broker's list, more than ApiVersions
					k := kmsg.NewApiVersionsResponseApiKey()
					k.ApiKey, k.MaxVersion = int16(i), int16(i+3)
					want.ApiKeys = append(want.ApiKeys, k)
				}
				body := want.AppendTo(nil)
				ref := kmsg.NewPtrApiVersionsResponse() // kmsg at v, for the fields v has
				ref.SetVersion(v)
				if err := ref.ReadFrom(body); err != nil {
					t.Fatal(err)
				}
				resp, err := decode.DecodeResponse(18, v, body)
				if err != nil {
					t.Fatalf("DecodeResponse: %v", err)
				}
				if resp.GetVersion() != v {
					t.Errorf("decoded in the v%d layout, want the request's v%d", resp.GetVersion(), v)
				}
				if !kmsgtest.Same(reflect.ValueOf(resp), reflect.ValueOf(ref)) {
					t.Errorf("decoded differs at %s", kmsgtest.FirstDiff(reflect.ValueOf(resp), reflect.ValueOf(ref), "resp"))
				}
				if r := resp.(*kmsg.ApiVersionsResponse); r.ErrorCode != code || !reflect.DeepEqual(r.ApiKeys, want.ApiKeys) {
					t.Errorf("error %d keys %+v, want %d %+v", r.ErrorCode, r.ApiKeys, code, want.ApiKeys)
				}
			})
		}
	}
}

// TestDecodeResponseUnsupportedVersionLeftOver: a refusal with a byte after
// its last key, which no other layout explains (v1 and v2 would need four,
// a throttle time), is still read as v0, as kgo and Kafka's client read it.
// With four bytes over it is a v1 or v2 body: see
// TestDecodeResponseApiVersionsOwnLayout.
func TestDecodeResponseUnsupportedVersionLeftOver(t *testing.T) {
	want := refusal(2)
	body := append(want.AppendTo(nil), 0xff)
	for v := int16(1); v <= decode.MaxVersion(18)+1; v++ {
		resp, err := decode.DecodeResponse(18, v, body)
		if err != nil || resp.GetVersion() != 0 || !kmsgtest.Same(reflect.ValueOf(resp), reflect.ValueOf(want)) {
			t.Errorf("v%d: %+v, %v; want the v0 refusal", v, resp, err)
		}
	}
}

// TestDecodeResponseUnsupportedVersionTruncated: a refusal cut anywhere
// after its error code stays a decode error at every request version (the
// request's layout is not taken instead), and says which layout it was
// read in.
func TestDecodeResponseUnsupportedVersionTruncated(t *testing.T) {
	for _, retry := range []int16{3, -1} {
		body := refusal(retry).AppendTo(nil)
		for v := int16(1); v <= decode.MaxVersion(18)+1; v++ {
			for n := 2; n < len(body); n++ {
				resp, err := decode.DecodeResponse(18, v, body[:n])
				if err == nil {
					t.Errorf("v%d, refusal cut to %d of %d bytes: decoded as v%d %+v, want an error", v, n, len(body), resp.GetVersion(), resp)
					continue
				}
				if !errors.Is(err, decode.ErrBody) || !strings.Contains(err.Error(), "v0 layout") {
					t.Errorf("v%d, cut to %d bytes: error %q, want ErrBody naming the v0 layout", v, n, err)
				}
			}
		}
	}
}

func TestUnsupportedVersionAnswer(t *testing.T) {
	for _, tc := range []struct {
		name         string
		key, version int16
		body         []byte
		want         bool
	}{
		{"ApiVersions v4 refused", 18, 4, []byte{0, 35, 0, 0, 0, 0}, true},
		{"error code alone", 18, 3, []byte{0, 35}, true},
		{"v0 request: its own layout already", 18, 0, []byte{0, 35, 0, 0, 0, 0}, false},
		{"another error", 18, 3, []byte{0, 33, 0, 0, 0, 0}, false},
		{"35 in byte 1 only (kgo would say yes)", 18, 3, []byte{1, 35, 0, 0, 0, 0}, false},
		{"another API", 12, 4, []byte{0, 35}, false},
		{"one byte", 18, 3, []byte{0}, false},
	} {
		if got := decode.UnsupportedVersionAnswer(tc.key, tc.version, tc.body); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDecodeResponseOtherAPIsUnsupportedVersion: other APIs answer
// UNSUPPORTED_VERSION in the request's layout (the broker knows the
// ApiVersions it advertised); Heartbeat v0's body is only the error code.
func TestDecodeResponseOtherAPIsUnsupportedVersion(t *testing.T) {
	for v := int16(0); v <= decode.MaxVersion(12); v++ {
		want := &kmsg.HeartbeatResponse{Version: v, ErrorCode: 35, ThrottleMillis: 7}
		resp, err := decode.DecodeResponse(12, v, want.AppendTo(nil))
		if err != nil || resp.GetVersion() != v || resp.(*kmsg.HeartbeatResponse).ErrorCode != 35 {
			t.Errorf("Heartbeat v%d: %+v, %v", v, resp, err)
		}
	}
}
