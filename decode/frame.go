package decode

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors returned by the frame decoders. They are wrapped with the API,
// version and correlation id of the frame they concern.
var (
	ErrShort          = errors.New("frame too short")
	ErrUnknownKey     = errors.New("unknown API key")
	ErrUnknownVersion = errors.New("API version beyond what kmsg knows")
	ErrBadTags        = errors.New("malformed tagged fields")
	ErrBadClientID    = errors.New("client id length out of range")
	ErrBody           = errors.New("body does not decode")
)

// SizeLen is the length of the size prefix of every Kafka frame.
const SizeLen = 4

// DefaultMaxFrame is the broker's default socket.request.max.bytes.
const DefaultMaxFrame = 100 << 20

// FrameSize reads the size prefix at the start of b. ok is false if b holds
// fewer than four bytes.
func FrameSize(b []byte) (size int32, ok bool) {
	if len(b) < SizeLen {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(b)), true
}

// RequestHeader is a decoded request header. ClientID aliases the frame
// bytes: copy it to keep it.
type RequestHeader struct {
	Key           int16
	Version       int16
	Correlation   int32
	ClientID      []byte
	ClientIDNull  bool
	HeaderVersion int
	// Len is the header's length in bytes; the body starts at frame[Len:].
	Len int
}

// ParseRequestHeader decodes the request header at the start of frame (the
// bytes after the size prefix). It fails for keys and versions kmsg does not
// know only when the header itself cannot be delimited; callers check
// KnownVersion to decide whether the body can be decoded.
func ParseRequestHeader(frame []byte) (RequestHeader, error) {
	var h RequestHeader
	if len(frame) < 8 {
		return h, ErrShort
	}
	h.Key = int16(binary.BigEndian.Uint16(frame))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.Correlation = int32(binary.BigEndian.Uint32(frame[4:]))
	h.Len = 8
	if !KnownKey(h.Key) {
		// Without kmsg's knowledge of the key we cannot tell header v0
		// from v1 or v2; read the client id as v1 does, which every key
		// but ControlledShutdown v0 has.
		h.HeaderVersion = 1
	} else {
		h.HeaderVersion = RequestHeaderVersion(h.Key, h.Version)
	}
	if h.HeaderVersion == 0 {
		h.ClientIDNull = true
		return h, nil
	}
	if len(frame) < 10 {
		return h, ErrShort
	}
	n := int(int16(binary.BigEndian.Uint16(frame[8:])))
	h.Len = 10
	switch {
	case n == -1:
		h.ClientIDNull = true
	case n < -1 || n > len(frame)-10:
		return h, ErrBadClientID
	default:
		h.ClientID = frame[10 : 10+n]
		h.Len += n
	}
	if h.HeaderVersion == 2 {
		n, err := SkipTags(frame[h.Len:])
		if err != nil {
			return h, err
		}
		h.Len += n
	}
	return h, nil
}

// ResponseHeaderLen returns the length of the response header at the start of
// frame for a response to key at version: the correlation id, then tagged
// fields for header v1.
func ResponseHeaderLen(frame []byte, key, version int16) (int, error) {
	if len(frame) < 4 {
		return 0, ErrShort
	}
	if ResponseHeaderVersion(key, version) == 0 {
		return 4, nil
	}
	n, err := SkipTags(frame[4:])
	if err != nil {
		return 0, err
	}
	return 4 + n, nil
}

// Correlation returns the correlation id at the start of a response frame.
func Correlation(frame []byte) (int32, bool) {
	if len(frame) < 4 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(frame)), true
}

// SkipTags returns the length of the tagged-field section at the start of b.
func SkipTags(b []byte) (int, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return 0, ErrBadTags
	}
	off := n
	for i := uint64(0); i < count; i++ {
		_, n = binary.Uvarint(b[off:])
		if n <= 0 {
			return 0, ErrBadTags
		}
		off += n
		size, n := binary.Uvarint(b[off:])
		if n <= 0 || size > uint64(len(b)-off-n) {
			return 0, ErrBadTags
		}
		off += n + int(size)
	}
	return off, nil
}

// DecodeRequest decodes a request body of key at version through kmsg.
func DecodeRequest(key, version int16, body []byte) (req kmsg.Request, err error) {
	if err := knownVersion(key, version); err != nil {
		return nil, err
	}
	req = kmsg.RequestForKey(key)
	req.SetVersion(version)
	return req, readBody(req, body)
}

// knownVersion says why kmsg cannot decode key at version: ErrUnknownKey,
// ErrUnknownVersion; nil if it can.
func knownVersion(key, version int16) error {
	if !KnownKey(key) {
		return ErrUnknownKey
	}
	if !KnownVersion(key, version) {
		return ErrUnknownVersion
	}
	return nil
}

// DecodeRequestInto is DecodeRequest into req, a body of key's type that
// an earlier request was decoded into and that nothing uses any more:
// cleared, then decoded, keeping only the room of its slices that kmsg
// reuses: the top level's (kmsg's readFrom makes a slice of l elements
// with append(a[:0], make([]T, l)...), which takes no new array while the
// room suffices, but clears the elements, so the slices nested in them,
// a topic's partitions, are made anew each time). Produce and Fetch for
// now: see Reusable.
func DecodeRequestInto(req kmsg.Request, key, version int16, body []byte) (kmsg.Request, error) {
	if req == nil || req.Key() != key || !KnownVersion(key, version) {
		return DecodeRequest(key, version, body)
	}
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		*r = kmsg.ProduceRequest{Topics: r.Topics[:0]}
	case *kmsg.FetchRequest:
		*r = kmsg.FetchRequest{Topics: r.Topics[:0], ForgottenTopics: r.ForgottenTopics[:0]}
	default:
		return DecodeRequest(key, version, body)
	}
	req.SetVersion(version)
	err := readBody(req, body)
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		r.Topics = nilIfEmpty(r.Topics)
	case *kmsg.FetchRequest:
		r.Topics, r.ForgottenTopics = nilIfEmpty(r.Topics), nilIfEmpty(r.ForgottenTopics)
	}
	return req, err
}

// nilIfEmpty is s, or nil if it has no elements: kmsg decodes an empty
// array into a nil slice, and a body decoded into again must be the same
// (its JSON says null, not []), so the room of an empty one goes.
func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// DecodeResponseInto is DecodeRequestInto for a response body
// (Produce's and Fetch's topics and brokers).
func DecodeResponseInto(resp kmsg.Response, key, version int16, body []byte) (kmsg.Response, error) {
	if resp == nil || resp.Key() != key || !KnownVersion(key, version) || UnsupportedVersionAnswer(key, version, body) {
		return DecodeResponse(key, version, body)
	}
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		*r = kmsg.ProduceResponse{Topics: r.Topics[:0], Brokers: r.Brokers[:0]}
	case *kmsg.FetchResponse:
		*r = kmsg.FetchResponse{Topics: r.Topics[:0], Brokers: r.Brokers[:0]}
	default:
		return DecodeResponse(key, version, body)
	}
	resp.SetVersion(version)
	err := readBody(resp, body)
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		r.Topics, r.Brokers = nilIfEmpty(r.Topics), nilIfEmpty(r.Brokers)
	case *kmsg.FetchResponse:
		r.Topics, r.Brokers = nilIfEmpty(r.Topics), nilIfEmpty(r.Brokers)
	}
	return resp, err
}

// Reusable reports whether a body of key may be decoded into again
// (DecodeRequestInto, DecodeResponseInto).
func Reusable(key int16) bool { return key == int16(kmsg.Produce) || key == int16(kmsg.Fetch) }

// DecodeResponse decodes a response body of key at version through kmsg.
// The body is in the request's layout, except a broker's refusal of an
// ApiVersions version (UnsupportedVersionAnswer), which is decoded in the
// v0 layout, also for versions kmsg does not know: the response's
// GetVersion() then says 0, and the caller keeps the request's version.
func DecodeResponse(key, version int16, body []byte) (resp kmsg.Response, err error) {
	if UnsupportedVersionAnswer(key, version, body) {
		return decodeUnsupportedVersion(version, body)
	}
	if err := knownVersion(key, version); err != nil {
		return nil, err
	}
	resp = kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	return resp, readBody(resp, body)
}

// DecodeRequestExact is DecodeRequest for a frame found by searching bytes
// of unknown alignment (a capture that began mid-connection, bytes after a
// hole): besides decoding, the body must be exactly what the message takes,
// which kmsg's decoder does not check (it ignores trailing bytes). A
// response or the tail of another frame read as a request almost never
// passes this.
func DecodeRequestExact(key, version int16, body []byte) (kmsg.Request, error) {
	req, err := DecodeRequest(key, version, body)
	if err == nil {
		err = exact(req, body)
	}
	return req, err
}

// DecodeResponseExact is DecodeResponse with the check of
// DecodeRequestExact.
func DecodeResponseExact(key, version int16, body []byte) (kmsg.Response, error) {
	resp, err := DecodeResponse(key, version, body)
	if err == nil {
		err = exact(resp, body)
	}
	return resp, err
}

// ErrTrailing marks a body that decodes but is not exactly what its
// message takes.
var ErrTrailing = errors.New("body length does not match what it decodes to")

// exact re-encodes a decoded message and compares lengths: kmsg keeps
// unknown tagged fields and raw record bytes, so a body that was consumed
// exactly encodes back to the same length. Varints are re-encoded in their
// shortest form, which every client writes.
func exact(m interface{ AppendTo([]byte) []byte }, body []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: encoder panic: %v", ErrTrailing, p)
		}
	}()
	var scratch [512]byte
	if n := len(m.AppendTo(scratch[:0])); n != len(body) {
		return fmt.Errorf("%w: %d bytes, decodes to %d", ErrTrailing, len(body), n)
	}
	return nil
}

type reader interface{ ReadFrom([]byte) error }

// readBody runs kmsg's decoder, turning a panic (which kmsg should never
// raise, but input is hostile) into an error.
func readBody(r reader, body []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: decoder panic: %v", ErrBody, p)
		}
	}()
	if err := r.ReadFrom(body); err != nil {
		return fmt.Errorf("%w: %v", ErrBody, err)
	}
	return nil
}

// Name returns kmsg's name for key, or "Unknown(N)".
func Name(key int16) string {
	if KnownKey(key) {
		return kmsg.NameForKey(key)
	}
	return fmt.Sprintf("Unknown(%d)", key)
}

// PlausibleRequest reports whether b starts with something that looks like a
// whole Kafka request header: a size within [min, maxFrame], an API key and
// version kmsg knows, and a client id of sane length made of printable
// characters. It is used to recognise Kafka on unexpected ports and to find
// a frame boundary after a gap; it does not need the whole frame.
func PlausibleRequest(b []byte, maxFrame int) bool {
	size, ok := FrameSize(b)
	if !ok || size < 10 || int64(size) > int64(maxFrame) || len(b) < 14 {
		return false
	}
	key := int16(binary.BigEndian.Uint16(b[4:]))
	version := int16(binary.BigEndian.Uint16(b[6:]))
	if !KnownVersion(key, version) {
		return false
	}
	if RequestHeaderVersion(key, version) == 0 {
		return true
	}
	n := int(int16(binary.BigEndian.Uint16(b[12:])))
	if n == -1 {
		return true
	}
	if n < 0 || n > 1024 || 10+n > int(size) {
		return false
	}
	id := b[14:]
	if len(id) > n {
		id = id[:n]
	}
	for _, c := range id {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
