package kmsgtest

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

// AppendResponseFrame appends a complete, size-prefixed response frame for
// resp (whose version must be set) with the given correlation id. It is the
// counterpart of kmsg.RequestFormatter.AppendRequest.
func AppendResponseFrame(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if decode.ResponseHeaderVersion(resp.Key(), resp.GetVersion()) == 1 {
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
	switch decode.RequestHeaderVersion(req.Key(), req.GetVersion()) {
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
