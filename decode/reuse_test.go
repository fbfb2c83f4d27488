package decode_test

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/internal/kmsgtest"
)

// TestDecodeIntoSameAsDecode: a body of a key decode.Reusable says may
// be decoded into again is, decoded into, what kmsg decodes afresh from
// the same bytes, whatever was decoded into it before: bodies full (every
// field set, one or two elements per array) and empty (arrays of none,
// which kmsg decodes to nil and --frames -v prints as null), at every
// version kmsg knows, one after the other into the same body.
func TestDecodeIntoSameAsDecode(t *testing.T) {
	keys := 0
	for key := int16(0); key < 1000; key++ {
		if !decode.Reusable(key) {
			continue
		}
		keys++
		var req kmsg.Request
		var resp kmsg.Response
		for v := int16(0); v <= decode.MaxVersion(key); v++ {
			if !decode.KnownVersion(key, v) {
				continue
			}
			f := kmsgtest.Filler{Batch: []byte{1, 2, 3}}
			full, empty := f.Request(key, v), kmsg.RequestForKey(key)
			empty.SetVersion(v)
			fullR, emptyR := f.Response(key, v), kmsg.ResponseForKey(key)
			emptyR.SetVersion(v)
			for i, src := range []kmsg.Request{full, empty, full, full, empty, empty, full} {
				b := src.AppendTo(nil)
				want, err := decode.DecodeRequest(key, v, b)
				if err != nil {
					t.Fatalf("%s v%d request: %v", decode.Name(key), v, err)
				}
				got, err := decode.DecodeRequestInto(req, key, v, b)
				if err != nil {
					t.Fatalf("%s v%d request: %v", decode.Name(key), v, err)
				}
				if a, b := reflect.ValueOf(want), reflect.ValueOf(got); !kmsgtest.Same(a, b) {
					t.Errorf("%s v%d request %d, decoded into again: differs at %s", decode.Name(key), v, i, kmsgtest.FirstDiff(a, b, "req"))
				}
				req = got
			}
			for i, src := range []kmsg.Response{fullR, emptyR, fullR, fullR, emptyR, emptyR, fullR} {
				b := src.AppendTo(nil)
				want, err := decode.DecodeResponse(key, v, b)
				if err != nil {
					t.Fatalf("%s v%d response: %v", decode.Name(key), v, err)
				}
				got, err := decode.DecodeResponseInto(resp, key, v, b)
				if err != nil {
					t.Fatalf("%s v%d response: %v", decode.Name(key), v, err)
				}
				if a, b := reflect.ValueOf(want), reflect.ValueOf(got); !kmsgtest.Same(a, b) {
					t.Errorf("%s v%d response %d, decoded into again: differs at %s", decode.Name(key), v, i, kmsgtest.FirstDiff(a, b, "resp"))
				}
				resp = got
			}
		}
	}
	if keys < 2 {
		t.Errorf("%d keys decoded into again, want Produce's and Fetch's", keys)
	}
}
