package export

import (
	"encoding/base64"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

// Bodies (schema version 2): what the rules read of an API other than a
// partition's fields travels as the body itself, as Kafka encodes it at
// the record's version (kmsg's AppendTo), in base64: Metadata's brokers
// and partitions, JoinGroup's and SyncGroup's members and generations,
// BrokerHeartbeat's epochs and fencing, a Fetch's session id and epoch.
// A correlator decodes it with the same code a capture's frames go
// through, so that every rule reads on shipped input what it reads in a
// file. Credentials are taken out first (decode.Redact), as from every
// other output. The split APIs (Produce, Fetch, ListOffsets,
// OffsetCommit) ship their body without its topics: the partitions are
// each record's own fields, and the batches' bytes never leave the host.

// maxBody bounds a body shipped (encoded, before base64): past it the
// record goes without it, far below the sink's default maximum message
// size (1 MiB). A Metadata answer of about 6,000 partitions takes it.
const maxBody = 256 << 10

// heads are scratch copies of the split APIs' bodies, their topics left
// out (a body is never written: a shallow copy, reused, allocates
// nothing).
type heads struct {
	produceReq  kmsg.ProduceRequest
	produceResp kmsg.ProduceResponse
	fetchReq    kmsg.FetchRequest
	fetchResp   kmsg.FetchResponse
	listReq     kmsg.ListOffsetsRequest
	listResp    kmsg.ListOffsetsResponse
	commitReq   kmsg.OffsetCommitRequest
	commitResp  kmsg.OffsetCommitResponse
}

// head returns what is shipped of a request's or response's body: a
// split API's without its topics, any other with credentials redacted.
func (h *heads) head(m any) interface{ AppendTo([]byte) []byte } {
	switch r := m.(type) {
	case *kmsg.ProduceRequest:
		h.produceReq = *r
		h.produceReq.Topics = nil
		return &h.produceReq
	case *kmsg.FetchRequest:
		h.fetchReq = *r
		h.fetchReq.Topics = nil
		return &h.fetchReq
	case *kmsg.ListOffsetsRequest:
		h.listReq = *r
		h.listReq.Topics = nil
		return &h.listReq
	case *kmsg.OffsetCommitRequest:
		h.commitReq = *r
		h.commitReq.Topics = nil
		return &h.commitReq
	case *kmsg.ProduceResponse:
		h.produceResp = *r
		h.produceResp.Topics = nil
		return &h.produceResp
	case *kmsg.FetchResponse:
		h.fetchResp = *r
		h.fetchResp.Topics = nil
		return &h.fetchResp
	case *kmsg.ListOffsetsResponse:
		h.listResp = *r
		h.listResp.Topics = nil
		return &h.listResp
	case *kmsg.OffsetCommitResponse:
		h.commitResp = *r
		h.commitResp.Topics = nil
		return &h.commitResp
	}
	return redacted(m)
}

// redacted is m with its credentials replaced (a copy when it had any:
// decode.Redact never writes m).
func redacted(m any) interface{ AppendTo([]byte) []byte } {
	r, _ := decode.Redact(m)
	a, _ := r.(interface{ AppendTo([]byte) []byte })
	return a
}

// appendBody appends a body field, base64 of the body's encoding; nothing
// when the body is over maxBody.
func (e *Exporter) appendBody(b []byte, name string, m interface{ AppendTo([]byte) []byte }) []byte {
	if m == nil {
		return b
	}
	e.body = m.AppendTo(e.body[:0])
	if len(e.body) > maxBody {
		if cap(e.body) > 4*maxBody {
			e.body = nil // one huge answer does not stay
		}
		return b
	}
	b = appendField(b, name)
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, e.body)
	return append(b, '"')
}
