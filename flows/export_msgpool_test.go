package flows

import (
	"errors"
	"slices"
	"time"
	"unsafe"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SetMsgPoison makes the messages given back (recycle) spoiled instead of
// pooled, for the tests of flows_test: any use of them after they were
// given back shows in what handlers make of them. false pools them again.
func SetMsgPoison(on bool) {
	if !on {
		msgPoison = nil
		return
	}
	msgPoison = func(m *Message) {
		if !m.shared {
			spoilBody(m.Req)
			spoilBody(m.Resp)
		}
		m.Key, m.Version, m.Correlation = 0x7e, 0x7e, -0x7e7e
		m.File, m.Packet, m.FirstPacket = 0x7e, 0x7e7e7e, 0x7e7e7e
		m.Time, m.FirstTime = time.Unix(0x7e7e7e, 0), time.Unix(0x7e7e7e, 0)
		m.Size, m.Client.ID, m.Role = 0x7e7e, "given back", cluster.RoleNone
		m.Req, m.Resp, m.Err = nil, nil, errors.New("given back")
		m.Partial, m.Inferred, m.BatchErrors = true, true, 0x7e
		for i := range m.Batches {
			m.Batches[i] = BatchRef{Topic: "given back", Partition: -0x7e}
		}
		m.ErrorCodes = []ErrorCount{{Code: 0x7e, Count: 0x7e}} // (the memo's may be shared)
		if m.Response {
			x := &(*respExchange)(unsafe.Pointer(m)).x
			x.Unanswered, x.NoResponse, x.OneSided, x.ConnGaps = true, true, true, 0x7e
		}
	}
}

// spoilBody spoils the bodies that are given back for reuse.
func spoilBody(body any) {
	switch b := body.(type) {
	case *kmsg.ProduceRequest:
		b.Acks, b.TimeoutMillis = 0x7e, 0x7e
		for i := range b.Topics {
			b.Topics[i].Topic, b.Topics[i].TopicID = "given back", [16]byte{0x7e}
			for j := range b.Topics[i].Partitions {
				b.Topics[i].Partitions[j].Partition = -0x7e
			}
		}
	case *kmsg.FetchRequest:
		b.MaxWaitMillis, b.MinBytes, b.SessionID, b.SessionEpoch = 0x7e, 0x7e, 0x7e, 0x7e
		for i := range b.Topics {
			b.Topics[i].Topic, b.Topics[i].TopicID = "given back", [16]byte{0x7e}
			for j := range b.Topics[i].Partitions {
				p := &b.Topics[i].Partitions[j]
				p.Partition, p.FetchOffset, p.CurrentLeaderEpoch = -0x7e, -0x7e, -0x7e
			}
		}
		for i := range b.ForgottenTopics {
			b.ForgottenTopics[i].Topic, b.ForgottenTopics[i].Partitions = "given back", []int32{-0x7e}
		}
	case *kmsg.FetchResponse:
		b.ThrottleMillis, b.ErrorCode, b.SessionID = 0x7e, 0x7e, 0x7e
		for i := range b.Topics {
			b.Topics[i].Topic, b.Topics[i].TopicID = "given back", [16]byte{0x7e}
			for j := range b.Topics[i].Partitions {
				p := &b.Topics[i].Partitions[j]
				p.Partition, p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -0x7e, 0x7e, -0x7e, -0x7e, -0x7e
				p.RecordBatches = nil
			}
		}
		for i := range b.Brokers {
			b.Brokers[i].NodeID, b.Brokers[i].Host, b.Brokers[i].Port = -0x7e, "given back", 0x7e
		}
	case *kmsg.ProduceResponse:
		b.ThrottleMillis = 0x7e
		for i := range b.Topics {
			b.Topics[i].Topic, b.Topics[i].TopicID = "given back", [16]byte{0x7e}
			for j := range b.Topics[i].Partitions {
				p := &b.Topics[i].Partitions[j]
				p.Partition, p.ErrorCode, p.BaseOffset, p.LogStartOffset = -0x7e, 0x7e, -0x7e, -0x7e
			}
		}
		for i := range b.Brokers {
			b.Brokers[i].NodeID, b.Brokers[i].Host, b.Brokers[i].Port = -0x7e, "given back", 0x7e
		}
	}
}

// Detach returns a copy of x and its messages that outlives its delivery
// (after which flows reuses the messages: msgpool.go), for the tests'
// handlers that look at what was delivered once the analysis is over.
func Detach(x *Exchange) *Exchange {
	cp := *x
	cp.Req, cp.Resp = DetachMessage(x.Req), DetachMessage(x.Resp)
	return &cp
}

// DetachMessage is Detach for a message (nil stays nil).
func DetachMessage(m *Message) *Message {
	if m == nil {
		return nil
	}
	cp := *m
	cp.home = nil
	cp.Batches = slices.Clone(m.Batches)
	cp.ErrorCodes = slices.Clone(m.ErrorCodes)
	return &cp
}
