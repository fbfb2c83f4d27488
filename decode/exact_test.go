package decode_test

import (
	"errors"
	"testing"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/internal/kmsgtest"
)

// TestExactAcceptsEveryEncoding: whatever kmsg encodes, at every version of
// every request and response, passes the exact decoders (a frame found by
// search must not be rejected for being real), and the same body with one
// byte more does not.
func TestExactAcceptsEveryEncoding(t *testing.T) {
	f := &kmsgtest.Filler{Batch: batch(0, 3, 0)}
	n := 0
	everyVersion(func(key, v int16) {
		n++
		body := f.Request(key, v).AppendTo(nil)
		if _, err := decode.DecodeRequestExact(key, v, body); err != nil {
			t.Errorf("%s request: %v", apiName(key, v), err)
		}
		if _, err := decode.DecodeRequestExact(key, v, append(body, 0)); !errors.Is(err, decode.ErrTrailing) && !errors.Is(err, decode.ErrBody) {
			t.Errorf("%s request with a trailing byte: err %v, want ErrTrailing", apiName(key, v), err)
		}
		rbody := f.Response(key, v).AppendTo(nil)
		if _, err := decode.DecodeResponseExact(key, v, rbody); err != nil {
			t.Errorf("%s response: %v", apiName(key, v), err)
		}
		if _, err := decode.DecodeResponseExact(key, v, append(rbody, 0)); !errors.Is(err, decode.ErrTrailing) && !errors.Is(err, decode.ErrBody) {
			t.Errorf("%s response with a trailing byte: err %v, want ErrTrailing", apiName(key, v), err)
		}
	})
	if f.Err != nil {
		t.Fatal(f.Err)
	}
	if n < 300 {
		t.Errorf("only %d (key, version) pairs", n)
	}
}

// TestExactRejectsResponsesReadAsRequests: the bytes of a response frame
// whose correlation id is small read as a request header of Produce v<corr>
// (key 0): the mistake a capture joined mid-way invites. The plain decoder
// accepts some of them; the exact one must reject every one.
func TestExactRejectsResponsesReadAsRequests(t *testing.T) {
	f := &kmsgtest.Filler{Batch: batch(0, 3, 0)}
	plain, exact := 0, 0
	everyVersion(func(key, v int16) {
		for corr := int16(0); corr <= decode.MaxVersion(0); corr++ {
			// frame = corr(4) | body; read as a request: key 0,
			// version corr, corr = body[0:4], client id, then body.
			frame := append([]byte{0, 0, 0, byte(corr)}, f.Response(key, v).AppendTo(nil)...)
			h, err := decode.ParseRequestHeader(frame)
			if err != nil || !decode.KnownVersion(h.Key, h.Version) {
				continue
			}
			if _, err := decode.DecodeRequest(h.Key, h.Version, frame[h.Len:]); err == nil {
				plain++
			}
			if _, err := decode.DecodeRequestExact(h.Key, h.Version, frame[h.Len:]); err == nil {
				exact++
				t.Errorf("%s response with corr %d decodes exactly as Produce v%d", apiName(key, v), corr, h.Version)
			}
		}
	})
	t.Logf("responses read as Produce requests: %d decode, %d decode exactly", plain, exact)
	if plain == 0 {
		t.Errorf("no response decoded as a request with the plain decoder: the test no longer shows what the exact one prevents")
	}
}
