package decode_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/kfsniff/kfsniff/internal/kmsgtest"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

// requestFrame builds a size-prefixed request frame by the protocol's
// rules, independently of decode: header v0 (no client id) for
// ControlledShutdown v0, a tag section after the client id when kmsg says
// the version is flexible.
func requestFrame(corr int32, clientID *string, req kmsg.Request) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if req.Key() != 7 || req.GetVersion() != 0 {
		if clientID == nil {
			b = append(b, 0xff, 0xff)
		} else {
			b = append(b, str(*clientID)...)
		}
		if req.IsFlexible() {
			b = append(b, 0)
		}
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// hdr is a request frame without its size prefix: key, version,
// correlation id, then rest.
func hdr(key, version int16, corr int32, rest ...[]byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	for _, r := range rest {
		b = append(b, r...)
	}
	return b
}

// str is a Kafka STRING: int16 length, bytes.
func str(s string) []byte { return append(binary.BigEndian.AppendUint16(nil, uint16(len(s))), s...) }

func b(x ...byte) []byte { return x }

// everyVersion calls fn for every (key, version) kmsg knows.
func everyVersion(fn func(key, version int16)) {
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			fn(key, v)
		}
	}
}

func apiName(key, version int16) string {
	return fmt.Sprintf("%s (key %d) v%d", kmsg.NameForKey(key), key, version)
}

func TestParseRequestHeader(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
		want  decode.RequestHeader
		err   error
	}{
		{
			name:  "ControlledShutdown v0 has header v0, no client id",
			frame: hdr(7, 0, 42, b(0, 0, 0, 1)),
			want:  decode.RequestHeader{Key: 7, Version: 0, Correlation: 42, ClientIDNull: true, HeaderVersion: 0, Len: 8},
		},
		{
			name:  "ControlledShutdown v1 has a client id",
			frame: hdr(7, 1, 42, str("cl"), b(0, 0, 0, 1)),
			want:  decode.RequestHeader{Key: 7, Version: 1, Correlation: 42, ClientID: []byte("cl"), HeaderVersion: 1, Len: 12},
		},
		{
			name:  "Produce v3 header v1",
			frame: hdr(0, 3, -7, str("kfsniff"), b(0xff, 0xff)),
			want:  decode.RequestHeader{Key: 0, Version: 3, Correlation: -7, ClientID: []byte("kfsniff"), HeaderVersion: 1, Len: 17},
		},
		{
			name:  "Metadata v12 header v2, no tagged fields",
			frame: hdr(3, 12, 1, str("a"), b(0), b(1, 2, 3)),
			want:  decode.RequestHeader{Key: 3, Version: 12, Correlation: 1, ClientID: []byte("a"), HeaderVersion: 2, Len: 12},
		},
		{
			name:  "Metadata v12 header v2 with a tagged field",
			frame: hdr(3, 12, 1, str("a"), b(1, 0, 2, 0xaa, 0xbb), b(1, 2, 3)),
			want:  decode.RequestHeader{Key: 3, Version: 12, Correlation: 1, ClientID: []byte("a"), HeaderVersion: 2, Len: 16},
		},
		{
			name:  "null client id",
			frame: hdr(3, 1, 9, b(0xff, 0xff), b(0, 0, 0, 0)),
			want:  decode.RequestHeader{Key: 3, Version: 1, Correlation: 9, ClientIDNull: true, HeaderVersion: 1, Len: 10},
		},
		{
			name:  "null client id, flexible ApiVersions v3",
			frame: hdr(18, 3, 9, b(0xff, 0xff), b(0)),
			want:  decode.RequestHeader{Key: 18, Version: 3, Correlation: 9, ClientIDNull: true, HeaderVersion: 2, Len: 11},
		},
		{
			name:  "empty client id is not null",
			frame: hdr(3, 1, 9, str("")),
			want:  decode.RequestHeader{Key: 3, Version: 1, Correlation: 9, ClientID: []byte{}, HeaderVersion: 1, Len: 10},
		},
		{
			name:  "unknown key is read as header v1",
			frame: hdr(2000, 5, 3, str("x"), b(1, 2)),
			want:  decode.RequestHeader{Key: 2000, Version: 5, Correlation: 3, ClientID: []byte("x"), HeaderVersion: 1, Len: 11},
		},
		{
			name:  "version beyond kmsg's of a flexible API is header v2",
			frame: hdr(3, 999, 3, str("x"), b(0)),
			want:  decode.RequestHeader{Key: 3, Version: 999, Correlation: 3, ClientID: []byte("x"), HeaderVersion: 2, Len: 12},
		},
		{
			name:  "client id longer than the frame",
			frame: hdr(3, 1, 5, b(0, 16), []byte("abc")),
			want:  decode.RequestHeader{Key: 3, Version: 1, Correlation: 5},
			err:   decode.ErrBadClientID,
		},
		{
			name:  "negative client id length other than -1",
			frame: hdr(3, 1, 5, b(0xff, 0xfe), []byte("abc")),
			want:  decode.RequestHeader{Key: 3, Version: 1, Correlation: 5},
			err:   decode.ErrBadClientID,
		},
		{
			name:  "flexible header without its tag section",
			frame: hdr(3, 12, 5, str("abc")),
			want:  decode.RequestHeader{Key: 3, Version: 12, Correlation: 5},
			err:   decode.ErrBadTags,
		},
		{
			name:  "flexible header with a tag longer than the frame",
			frame: hdr(3, 12, 5, str("abc"), b(1, 0, 5, 0xaa)),
			want:  decode.RequestHeader{Key: 3, Version: 12, Correlation: 5},
			err:   decode.ErrBadTags,
		},
		{
			name:  "short: no correlation id",
			frame: b(0, 3, 0, 1, 0, 0, 0),
			err:   decode.ErrShort,
		},
		{
			name:  "short: no client id length",
			frame: hdr(3, 1, 5, b(0)),
			want:  decode.RequestHeader{Key: 3, Version: 1, Correlation: 5},
			err:   decode.ErrShort,
		},
		{
			name: "empty",
			err:  decode.ErrShort,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := decode.ParseRequestHeader(tc.frame)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if h.Key != tc.want.Key || h.Version != tc.want.Version || h.Correlation != tc.want.Correlation {
				t.Errorf("key %d v%d corr %d, want key %d v%d corr %d", h.Key, h.Version, h.Correlation, tc.want.Key, tc.want.Version, tc.want.Correlation)
			}
			if err != nil {
				return
			}
			if h.HeaderVersion != tc.want.HeaderVersion || h.Len != tc.want.Len {
				t.Errorf("header v%d len %d, want v%d len %d", h.HeaderVersion, h.Len, tc.want.HeaderVersion, tc.want.Len)
			}
			if h.ClientIDNull != tc.want.ClientIDNull || !bytes.Equal(h.ClientID, tc.want.ClientID) || (h.ClientID == nil) != (tc.want.ClientID == nil) {
				t.Errorf("client id %q (null %v), want %q (null %v)", h.ClientID, h.ClientIDNull, tc.want.ClientID, tc.want.ClientIDNull)
			}
		})
	}
}

// TestRequestFramesEveryVersion parses the header of a frame of every
// request kmsg knows, at every version, and decodes its body: the header
// must end exactly where kmsg's body encoding begins.
func TestRequestFramesEveryVersion(t *testing.T) {
	f := &kmsgtest.Filler{Batch: batch(0, 3, 0)}
	id := "kfsniff-test"
	n := 0
	everyVersion(func(key, v int16) {
		n++
		req := f.Request(key, v)
		body := req.AppendTo(nil)
		for _, cid := range []*string{&id, nil} {
			frame := requestFrame(int32(n), cid, req)
			h, err := decode.ParseRequestHeader(frame[4:])
			if err != nil {
				t.Errorf("%s: %v", apiName(key, v), err)
				continue
			}
			null := cid == nil || key == 7 && v == 0
			if h.Key != key || h.Version != v || h.Correlation != int32(n) || h.ClientIDNull != null || !null && string(h.ClientID) != id {
				t.Errorf("%s: parsed as key %d v%d corr %d client id %q (null %v)", apiName(key, v), h.Key, h.Version, h.Correlation, h.ClientID, h.ClientIDNull)
			}
			if got := frame[4+h.Len:]; !bytes.Equal(got, body) {
				t.Errorf("%s: header length %d leaves %d body bytes, want %d", apiName(key, v), h.Len, len(got), len(body))
				continue
			}
			got, err := decode.DecodeRequest(h.Key, h.Version, frame[4+h.Len:])
			if err != nil {
				t.Errorf("%s: %v", apiName(key, v), err)
				continue
			}
			want := kmsg.RequestForKey(key)
			want.SetVersion(v)
			if err := want.ReadFrom(body); err != nil {
				t.Fatalf("%s: kmsg cannot decode its own encoding: %v", apiName(key, v), err)
			}
			if !kmsgtest.Same(reflect.ValueOf(got), reflect.ValueOf(want)) {
				t.Errorf("%s: decoded value differs from kmsg's at %s", apiName(key, v), kmsgtest.FirstDiff(reflect.ValueOf(got), reflect.ValueOf(want), "req"))
			}
		}
	})
	if f.Err != nil {
		t.Fatal(f.Err)
	}
	if n < 300 {
		t.Errorf("only %d (key, version) pairs: is kmsg's table empty?", n)
	}
}

// TestAppendRequestFrame checks the frames decode builds for test traffic
// (fixtures/gen sends them) against the protocol's rules for every request
// kmsg knows.
func TestAppendRequestFrame(t *testing.T) {
	f := &kmsgtest.Filler{Batch: batch(0, 2, 0)}
	id := "kfsniff-test"
	everyVersion(func(key, v int16) {
		req := f.Request(key, v)
		for _, cid := range []*string{&id, nil} {
			got := kmsgtest.AppendRequestFrame(nil, 77, cid, req)
			want := requestFrame(77, cid, req)
			if size, _ := decode.FrameSize(got); int(size) != len(got)-4 {
				t.Errorf("%s (client id %v): size prefix %d for a %d-byte frame: % x", apiName(key, v), cid != nil, size, len(got), got[:min(len(got), 24)])
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s (client id %v): frame %s", apiName(key, v), cid != nil, kmsgtest.DiffBytes(got, want))
			}
		}
	})
}

// TestAppendRequestFrameAppends checks that AppendRequestFrame appends, as
// its name and its response counterpart do, keeping what dst holds.
func TestAppendRequestFrameAppends(t *testing.T) {
	id := "c"
	req := &kmsg.MetadataRequest{Version: 12}
	want := cat([]byte("prefix"), requestFrame(5, &id, req))
	if got := kmsgtest.AppendRequestFrame([]byte("prefix"), 5, &id, req); !bytes.Equal(got, want) {
		t.Errorf("AppendRequestFrame(%q, ...) = % x\nwant % x", "prefix", got, want)
	}
	resp := &kmsg.MetadataResponse{Version: 12}
	wantResp := cat([]byte("prefix"), kmsgtest.AppendResponseFrame(nil, 5, resp))
	if got := kmsgtest.AppendResponseFrame([]byte("prefix"), 5, resp); !bytes.Equal(got, wantResp) {
		t.Errorf("AppendResponseFrame(%q, ...) = % x\nwant % x", "prefix", got, wantResp)
	}
}

// TestAppendResponseFrame checks the response frames built for test
// traffic: header v0 for ApiVersions and inflexible versions, v1 (an empty
// tag section) otherwise, and the body kmsg encodes.
func TestAppendResponseFrame(t *testing.T) {
	f := &kmsgtest.Filler{Batch: batch(0, 2, 0)}
	everyVersion(func(key, v int16) {
		resp := f.Response(key, v)
		frame := kmsgtest.AppendResponseFrame([]byte{9}, -5, resp)[1:]
		wantHdr := 4
		if resp.IsFlexible() && key != 18 {
			wantHdr = 5
		}
		body := resp.AppendTo(nil)
		if size, _ := decode.FrameSize(frame); int(size) != len(frame)-4 {
			t.Errorf("%s: size prefix %d for %d bytes", apiName(key, v), size, len(frame)-4)
		}
		if corr, _ := decode.Correlation(frame[4:]); corr != -5 {
			t.Errorf("%s: correlation id %d", apiName(key, v), corr)
		}
		hl, err := decode.ResponseHeaderLen(frame[4:], key, v)
		if err != nil || hl != wantHdr || !bytes.Equal(frame[4+hl:], body) {
			t.Errorf("%s: header length %d (%v), want %d followed by the %d-byte body", apiName(key, v), hl, err, wantHdr, len(body))
		}
	})
}

func TestResponseHeaderLen(t *testing.T) {
	corr := b(0, 0, 0, 42)
	for _, tc := range []struct {
		name         string
		frame        []byte
		key, version int16
		want         int
		err          error
	}{
		{name: "ApiVersions v0", frame: cat(corr, b(0, 0)), key: 18, version: 0, want: 4},
		// The body of ApiVersions v3 starts with the int16 error code;
		// reading a tag section there would eat its first byte.
		{name: "ApiVersions v3 (flexible) is always header v0", frame: cat(corr, b(0, 35)), key: 18, version: 3, want: 4},
		{name: "ApiVersions v4 with error 1", frame: cat(corr, b(0, 1)), key: 18, version: 4, want: 4},
		{name: "Fetch v11 header v0", frame: cat(corr, b(0, 0, 0, 0)), key: 1, version: 11, want: 4},
		{name: "Fetch v12 header v1, empty tag section", frame: cat(corr, b(0), b(0, 0, 0, 0)), key: 1, version: 12, want: 5},
		{name: "Fetch v12 header v1 with a tagged field", frame: cat(corr, b(1, 0, 3, 7, 7, 7), b(0, 0)), key: 1, version: 12, want: 10},
		{name: "Fetch v17 header v1, two tagged fields", frame: cat(corr, b(2, 0, 0, 0x80, 0x01, 1, 9)), key: 1, version: 17, want: 11},
		{name: "Fetch v12 without its tag section", frame: corr, key: 1, version: 12, err: decode.ErrBadTags},
		{name: "Fetch v12 tag longer than the frame", frame: cat(corr, b(1, 0, 9, 1)), key: 1, version: 12, err: decode.ErrBadTags},
		{name: "unknown key is header v0", frame: cat(corr, b(1, 2)), key: 2000, version: 0, want: 4},
		{name: "short", frame: b(0, 0, 0), key: 1, version: 4, err: decode.ErrShort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode.ResponseHeaderLen(tc.frame, tc.key, tc.version)
			if !errors.Is(err, tc.err) || err == nil && got != tc.want {
				t.Errorf("ResponseHeaderLen = %d, %v; want %d, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestSkipTags(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want int // -1: ErrBadTags
	}{
		{"no tags", b(0), 1},
		{"no tags, body follows", b(0, 0xff, 0xff), 1},
		{"one tag", b(1, 0, 2, 0xaa, 0xbb), 5},
		{"one tag, body follows", b(1, 0, 2, 0xaa, 0xbb, 0xcc), 5},
		{"two tags, multi-byte tag number and size", cat(b(2, 0x80, 0x01, 1, 0xaa, 5, 0x80, 0x01), bytes.Repeat(b(7), 128)), 8 + 128},
		{"empty tagged value", b(1, 3, 0), 3},
		{"empty input", nil, -1},
		{"count varint cut", b(0x80), -1},
		{"count larger than the input", b(5, 0, 0), -1},
		{"second tag missing", b(2, 0, 0), -1},
		{"tag number cut", b(1), -1},
		{"tag number varint cut", b(1, 0x80), -1},
		{"size missing", b(1, 0), -1},
		{"size beyond the input", b(1, 0, 3, 0xaa), -1},
		{"size near 2^64", b(1, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), -1},
		{"count varint overflows", b(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode.SkipTags(tc.in)
			switch {
			case tc.want < 0 && !errors.Is(err, decode.ErrBadTags):
				t.Errorf("SkipTags = %d, %v; want ErrBadTags", got, err)
			case tc.want >= 0 && (err != nil || got != tc.want):
				t.Errorf("SkipTags = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestPlausibleRequest(t *testing.T) {
	// Every request kmsg knows is plausible, with and without client id.
	f := &kmsgtest.Filler{Batch: batch(0, 2, 0)}
	id := "console-consumer-1"
	everyVersion(func(key, v int16) {
		req := f.Request(key, v)
		for _, cid := range []*string{&id, nil} {
			frame := requestFrame(1, cid, req)
			if !decode.PlausibleRequest(frame, decode.DefaultMaxFrame) {
				t.Errorf("%s (client id %v): real frame % x... not plausible", apiName(key, v), cid != nil, frame[:min(len(frame), 24)])
			}
		}
	})

	produce := requestFrame(1, &id, &kmsg.ProduceRequest{Version: 7, Acks: -1, TimeoutMillis: 30000})
	withSize := func(frame []byte, size uint32) []byte {
		out := bytes.Clone(frame)
		binary.BigEndian.PutUint32(out, size)
		return out
	}
	frameOf := func(parts ...[]byte) []byte {
		f := cat(b(0, 0, 0, 0), cat(parts...))
		binary.BigEndian.PutUint32(f, uint32(len(f)-4))
		return f
	}
	tlsHello := cat(b(0x16, 0x03, 0x01, 0x00, 0xf8, 0x01, 0x00, 0x00, 0xf4, 0x03, 0x03), bytes.Repeat(b(0x5a), 32), b(0x20), bytes.Repeat(b(0x11), 32))
	for _, tc := range []struct {
		name     string
		in       []byte
		maxFrame int
		want     bool
	}{
		{"Produce v7", produce, decode.DefaultMaxFrame, true},
		{"only the first 14 bytes of a frame", produce[:14], decode.DefaultMaxFrame, true},
		{"fewer than 14 bytes", produce[:13], decode.DefaultMaxFrame, false},
		{"HTTP GET", []byte("GET / HTTP/1.1\r\nHost: broker:9092\r\n\r\n"), decode.DefaultMaxFrame, false},
		{"HTTP/2 preface", []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), decode.DefaultMaxFrame, false},
		{"TLS ClientHello", tlsHello, decode.DefaultMaxFrame, false},
		{"size 200 MB", withSize(produce, 200<<20), decode.DefaultMaxFrame, false},
		{"size negative", withSize(produce, 0xfffffff0), decode.DefaultMaxFrame, false},
		{"size above --max-frame", produce, len(produce) - 5, false},
		{"size below a header", withSize(produce, 9), decode.DefaultMaxFrame, false},
		{"unknown key", frameOf(hdr(2000, 0, 1, str("abc"))), decode.DefaultMaxFrame, false},
		{"version beyond kmsg's", frameOf(hdr(0, 999, 1, str("abc"))), decode.DefaultMaxFrame, false},
		{"negative version", frameOf(hdr(0, -1, 1, str("abc"))), decode.DefaultMaxFrame, false},
		{"client id with a control character", frameOf(hdr(3, 1, 1, str("ab\x01c"), b(0, 0, 0, 0))), decode.DefaultMaxFrame, false},
		{"client id with a high byte", frameOf(hdr(3, 1, 1, str("ab\xc3\xa9"), b(0, 0, 0, 0))), decode.DefaultMaxFrame, false},
		{"client id of 2000 bytes", frameOf(hdr(3, 1, 1, str(string(bytes.Repeat(b('a'), 2000))))), decode.DefaultMaxFrame, false},
		{"client id longer than the frame", frameOf(hdr(3, 1, 1, b(0, 20), []byte("abc"))), decode.DefaultMaxFrame, false},
		{"client id length -2", frameOf(hdr(3, 1, 1, b(0xff, 0xfe), []byte("abcd"))), decode.DefaultMaxFrame, false},
		{"null client id", frameOf(hdr(3, 1, 1, b(0xff, 0xff), b(0, 0, 0, 0))), decode.DefaultMaxFrame, true},
		{"ControlledShutdown v0", frameOf(hdr(7, 0, 1, b(0, 0, 0, 3))), decode.DefaultMaxFrame, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decode.PlausibleRequest(tc.in, tc.maxFrame); got != tc.want {
				t.Errorf("PlausibleRequest(% x...) = %v, want %v", tc.in[:min(len(tc.in), 16)], got, tc.want)
			}
		})
	}

	t.Run("random bytes", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		buf := make([]byte, 64)
		for i := 0; i < 10000; i++ {
			for j := range buf {
				buf[j] = byte(r.Uint32())
			}
			if decode.PlausibleRequest(buf, decode.DefaultMaxFrame) {
				t.Fatalf("random bytes % x plausible", buf)
			}
		}
	})
}

// TestParseRequestHeaderAllocs holds the per-frame header parse to zero
// allocations: it runs for every request on every connection.
func TestParseRequestHeaderAllocs(t *testing.T) {
	id := "kfsniff"
	frame := requestFrame(1, &id, &kmsg.MetadataRequest{Version: 12})[4:]
	if n := testing.AllocsPerRun(100, func() {
		if _, err := decode.ParseRequestHeader(frame); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ParseRequestHeader allocates %v times per frame, want 0", n)
	}
}
