package decode_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/internal/fuzzing"
	"github.com/kfsniff/kfsniff/internal/kmsgtest"
)

// FuzzResponse feeds arbitrary response frames (the bytes after the size
// prefix: correlation id, header tags, body) for arbitrary (key, version)
// through ResponseHeaderLen and DecodeResponse, the way the analyzer does
// once it has paired a response with its request. Besides not panicking:
// the header is delimited within the frame, errors are the documented
// ones, a body decodes at the request's version (or at v0 for a refused
// ApiVersions, also beyond kmsg's versions) and re-encodes to bytes that
// decode to the same value and re-encode identically, every error code reported is non-zero,
// and the record sets of a Fetch response lie within the frame.
func FuzzResponse(f *testing.F) {
	fl := &kmsgtest.Filler{Batch: batch(0, 2, 4)}
	everyVersion(func(key, v int16) {
		frame := kmsgtest.AppendResponseFrame(nil, 1, fl.Response(key, v))
		f.Add(key, v, frame[4:])
	})
	for _, key := range []int16{0, 1, 3, 18} {
		resp := kmsg.ResponseForKey(key)
		resp.SetVersion(kmsg.RequestForKey(key).MaxVersion())
		frame := kmsgtest.AppendResponseFrame(nil, 2, resp)
		f.Add(key, resp.GetVersion(), frame[4:])
	}
	// ApiVersions answers with a v0 header whatever the version; an
	// error code then nothing (the broker's answer to a version it does
	// not support); tags claiming more than there is; arrays claiming
	// billions of elements.
	f.Add(int16(18), int16(4), []byte{0, 0, 0, 1, 0, 35})
	f.Add(int16(18), int16(5), []byte{0, 0, 0, 1, 0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 4})
	f.Add(int16(18), int16(2), []byte{0, 0, 0, 1, 0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Add(int16(18), int16(99), []byte{0, 0, 0, 1, 0, 35, 0, 0, 0, 0})
	f.Add(int16(3), int16(12), []byte{0, 0, 0, 1, 0x05, 1, 0xff, 0xff})
	f.Add(int16(3), int16(1), []byte{0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff})
	f.Add(int16(1), int16(17), []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(int16(2000), int16(0), []byte{0, 0, 0, 1})
	f.Add(int16(-1), int16(-1), []byte{})
	f.Fuzz(func(t *testing.T, key, version int16, frame []byte) {
		defer fuzzing.Input("FuzzResponse", key, version, frame)()
		hl, err := decode.ResponseHeaderLen(frame, key, version)
		if err != nil {
			if !errors.Is(err, decode.ErrShort) && !errors.Is(err, decode.ErrBadTags) {
				t.Fatalf("ResponseHeaderLen: undocumented error %v", err)
			}
			if len(frame) >= 4 && decode.ResponseHeaderVersion(key, version) == 0 {
				t.Fatalf("header v0 of %d bytes refused: %v", len(frame), err)
			}
			return
		}
		if hl < 4 || hl > len(frame) {
			t.Fatalf("header length %d of a %d-byte frame", hl, len(frame))
		}
		if decode.ResponseHeaderVersion(key, version) == 0 && hl != 4 {
			t.Fatalf("header v0 is %d bytes long", hl)
		}
		if corr, ok := decode.Correlation(frame); !ok || corr != int32(binary.BigEndian.Uint32(frame)) {
			t.Fatalf("correlation %d, %v from % x", corr, ok, frame[:4])
		}

		body := frame[hl:]
		resp, err := decode.DecodeResponse(key, version, body)
		refused := decode.UnsupportedVersionAnswer(key, version, body)
		if !decode.KnownVersion(key, version) && !refused {
			if err == nil || !errors.Is(err, decode.ErrUnknownKey) && !errors.Is(err, decode.ErrUnknownVersion) {
				t.Fatalf("key %d v%d is not known but DecodeResponse returned %v", key, version, err)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, decode.ErrBody) {
				t.Fatalf("DecodeResponse: undocumented error %v", err)
			}
			return
		}
		// A refused ApiVersions is read in the v0 layout; everything
		// else in the request's.
		if resp.Key() != key || resp.GetVersion() != version && (!refused || resp.GetVersion() != 0) {
			t.Fatalf("decoded as key %d v%d", resp.Key(), resp.GetVersion())
		}
		decode.ErrorCodes(resp, func(code int16) {
			if code == 0 {
				t.Fatalf("%s: ErrorCodes reported code 0", apiName(key, version))
			}
		})
		decode.RecordSets(resp, func(rs decode.RecordSet) {
			if len(rs.Records) > 0 && !within(rs.Records, body) {
				t.Fatalf("%s: record set of %d bytes does not alias the %d-byte body", apiName(key, version), len(rs.Records), len(body))
			}
		})
		enc := resp.AppendTo(nil)
		again, err := decode.DecodeResponse(key, version, enc)
		if err != nil {
			t.Fatalf("%s: re-encoding of a decoded body does not decode: %v\nbody % x\nre-encoded % x", apiName(key, version), err, body, enc)
		}
		if !kmsgtest.Same(reflect.ValueOf(resp), reflect.ValueOf(again)) {
			t.Fatalf("%s: decode(encode(decode(body))) differs at %s\nbody % x\nre-encoded % x", apiName(key, version), kmsgtest.FirstDiff(reflect.ValueOf(resp), reflect.ValueOf(again), "resp"), body, enc)
		}
		if enc2 := again.AppendTo(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("%s: encoding is not stable: %s", apiName(key, version), kmsgtest.DiffBytes(enc2, enc))
		}
	})
}

// within reports whether sub lies inside b's memory.
func within(sub, b []byte) bool {
	if len(b) == 0 {
		return false
	}
	s0 := reflect.ValueOf(sub).Pointer()
	b0 := reflect.ValueOf(b).Pointer()
	return s0 >= b0 && s0+uintptr(len(sub)) <= b0+uintptr(len(b))
}
