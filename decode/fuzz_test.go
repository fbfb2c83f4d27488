package decode_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"
	"unsafe"

	"github.com/kfsniff/kfsniff/internal/kmsgtest"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

// FuzzRequest feeds arbitrary request frames (key, version, then the rest
// of the frame from the correlation id on) through ParseRequestHeader and
// DecodeRequest. Besides not panicking: the header is delimited within the
// frame, errors are the documented ones, and a body that decodes re-encodes
// to bytes that decode to the same value and re-encode identically.
func FuzzRequest(f *testing.F) {
	fl := &kmsgtest.Filler{Batch: batch(0, 2, 4)}
	id := "fuzz"
	everyVersion(func(key, v int16) {
		frame := requestFrame(1, &id, fl.Request(key, v))
		f.Add(key, v, frame[8:])
	})
	for _, key := range []int16{0, 1, 3, 18} {
		req := kmsg.RequestForKey(key)
		req.SetVersion(req.MaxVersion())
		frame := requestFrame(2, nil, req)
		f.Add(key, req.MaxVersion(), frame[8:])
	}
	f.Add(int16(7), int16(0), []byte{0, 0, 0, 1, 0, 0, 0, 5})
	f.Add(int16(2000), int16(0), []byte{0, 0, 0, 1, 0, 1, 'x'})
	f.Add(int16(3), int16(99), []byte{0, 0, 0, 1, 0, 1, 'x', 0})
	f.Add(int16(-1), int16(-1), []byte{})
	f.Fuzz(func(t *testing.T, key, version int16, rest []byte) {
		frame := binary.BigEndian.AppendUint16(nil, uint16(key))
		frame = binary.BigEndian.AppendUint16(frame, uint16(version))
		frame = append(frame, rest...)
		h, err := decode.ParseRequestHeader(frame)
		if len(frame) >= 8 && (h.Key != key || h.Version != version || h.Correlation != int32(binary.BigEndian.Uint32(frame[4:]))) {
			t.Fatalf("header key %d v%d corr %d from frame % x", h.Key, h.Version, h.Correlation, frame[:8])
		}
		if err != nil {
			if !errors.Is(err, decode.ErrShort) && !errors.Is(err, decode.ErrBadClientID) && !errors.Is(err, decode.ErrBadTags) {
				t.Fatalf("ParseRequestHeader: undocumented error %v", err)
			}
			return
		}
		if h.Len < 8 || h.Len > len(frame) {
			t.Fatalf("header length %d of a %d-byte frame", h.Len, len(frame))
		}
		if h.HeaderVersion > 0 && !h.ClientIDNull {
			n := int(binary.BigEndian.Uint16(frame[8:]))
			if len(h.ClientID) != n || 10+n > h.Len || n > 0 && &h.ClientID[0] != &frame[10] {
				t.Fatalf("client id of %d bytes is not frame[10:%d] (header length %d)", len(h.ClientID), 10+n, h.Len)
			}
		}

		body := frame[h.Len:]
		req, err := decode.DecodeRequest(h.Key, h.Version, body)
		if !decode.KnownVersion(key, version) {
			if err == nil || !errors.Is(err, decode.ErrUnknownKey) && !errors.Is(err, decode.ErrUnknownVersion) {
				t.Fatalf("key %d v%d is not known but DecodeRequest returned %v", key, version, err)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, decode.ErrBody) {
				t.Fatalf("DecodeRequest: undocumented error %v", err)
			}
			return
		}
		if req.Key() != key || req.GetVersion() != version {
			t.Fatalf("decoded as key %d v%d", req.Key(), req.GetVersion())
		}
		enc := req.AppendTo(nil)
		again, err := decode.DecodeRequest(key, version, enc)
		if err != nil {
			t.Fatalf("%s: re-encoding of a decoded body does not decode: %v\nbody % x\nre-encoded % x", apiName(key, version), err, body, enc)
		}
		if !kmsgtest.Same(reflect.ValueOf(req), reflect.ValueOf(again)) {
			t.Fatalf("%s: decode(encode(decode(body))) differs at %s\nbody % x\nre-encoded % x", apiName(key, version), kmsgtest.FirstDiff(reflect.ValueOf(req), reflect.ValueOf(again), "req"), body, enc)
		}
		if enc2 := again.AppendTo(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("%s: encoding is not stable: %s", apiName(key, version), kmsgtest.DiffBytes(enc2, enc))
		}
	})
}

// FuzzScanBatches checks ScanBatches on arbitrary record sets: every batch
// handed to fn is the next stretch of the input, in order and without gaps;
// the counts agree with the calls; the CRC verdict is the checksum's; and
// the input is consumed whole unless the scan says why not.
func FuzzScanBatches(f *testing.F) {
	b1, b2 := batch(0, 1, 0), batch(1, 5, 50)
	v0 := legacyMessage(0, 3, 0, []byte("k"), []byte("v"))
	v1 := legacyMessage(1, 4, batchTime, nil, []byte("value"))
	for _, seed := range [][]byte{
		nil,
		b1,
		cat(b1, b2),
		cat(b1, b2[:len(b2)-1]),
		cat(b2, b1[:20]),
		flip(b2, 40),
		cat(v0, v1),
		cat(v0, v1, b1),
		flip(v1, len(v1)-1),
		cat(b1, flip(b2, 16)),
		bytes.Repeat([]byte{0xff}, 70),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		off, calls, bad := 0, 0, 0
		s, err := decode.ScanBatches(in, func(b *decode.Batch) {
			calls++
			n := len(b.Raw)
			if n == 0 || off+n > len(in) || unsafe.SliceData(b.Raw) != unsafe.SliceData(in[off:]) {
				t.Fatalf("batch %d: Raw (%d bytes) is not the input at offset %d of %d", calls, n, off, len(in))
			}
			if int(b.Length)+12 != n || int8(b.Raw[16]) != b.Magic || int64(binary.BigEndian.Uint64(b.Raw)) != b.BaseOffset {
				t.Fatalf("batch %d: length %d magic %d base %d disagree with its %d bytes", calls, b.Length, b.Magic, b.BaseOffset, n)
			}
			var ok bool
			var sum uint32
			switch b.Magic {
			case 2:
				sum = crc32.Checksum(b.Raw[21:], castagnoli)
				ok = n >= 61 && sum == binary.BigEndian.Uint32(b.Raw[17:])
			case 0, 1:
				sum = crc32.ChecksumIEEE(b.Raw[16:])
				ok = sum == binary.BigEndian.Uint32(b.Raw[12:])
			default:
				t.Fatalf("batch %d: magic %d delivered", calls, b.Magic)
			}
			if ok != b.CRCOK || sum != b.ComputedCRC {
				t.Fatalf("batch %d (magic %d): CRCOK %v computed %d, checksum says %v (%d)", calls, b.Magic, b.CRCOK, b.ComputedCRC, ok, sum)
			}
			if !b.CRCOK {
				bad++
			}
			off += n
		})
		if s.Batches != calls || s.BadCRC != bad {
			t.Fatalf("scan %+v after %d calls, %d bad CRCs", s, calls, bad)
		}
		if n := decode.CountBatches(in); n != calls {
			t.Fatalf("CountBatches says %d batches, the scan gave %d", n, calls)
		}
		switch {
		case err != nil:
			if !errors.Is(err, decode.ErrBatch) || s.Truncated || off >= len(in) {
				t.Fatalf("error %v (truncated %v) at offset %d of %d", err, s.Truncated, off, len(in))
			}
		case s.Truncated:
			if off >= len(in) {
				t.Fatalf("truncated, but the batches cover all %d bytes", len(in))
			}
		case off != len(in):
			t.Fatalf("no error, not truncated, but batches cover %d of %d bytes", off, len(in))
		}
	})
}
