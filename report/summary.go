package report

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
)

// maxItems bounds the partitions listed in one summary line.
const maxItems = 8

// Summary is the one-line gist of a message: the fields that matter for
// its API (topics, partitions, offsets, errors, leaders, epochs, batches).
func Summary(m *flows.Message) string {
	var b strings.Builder
	s := &sum{b: &b, m: m}
	switch {
	case m.Req != nil:
		s.request(m.Req)
	case m.Resp != nil:
		s.response(m.Resp)
	}
	if len(m.Batches) > 0 {
		s.batches(m)
	}
	if m.Resp != nil && len(m.ErrorCodes) > 0 && !s.errorsShown {
		codes := each(m.ErrorCodes, func(e flows.ErrorCount) string { return fmt.Sprintf("%sx%d", decode.ErrorName(e.Code), e.Count) })
		s.add("errors=" + strings.Join(codes, ","))
	}
	if m.Err != nil {
		s.add("decode-error=" + m.Err.Error())
	}
	return Clean(b.String())
}

type sum struct {
	b           *strings.Builder
	m           *flows.Message
	items       int
	more        int
	errorsShown bool
}

func (s *sum) add(x string) {
	if s.b.Len() > 0 {
		s.b.WriteByte(' ')
	}
	s.b.WriteString(x)
}

// item adds a per-partition item, up to maxItems, then counts the rest.
func (s *sum) item(x string) {
	if s.items >= maxItems {
		s.more++
		return
	}
	s.items++
	s.add(x)
}

func (s *sum) flush() {
	if s.more > 0 {
		s.add(fmt.Sprintf("(+%d more)", s.more))
		s.more = 0
	}
	s.items = 0
}

func (s *sum) request(req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		s.add(fmt.Sprintf("acks=%d", r.Acks))
		if r.TransactionID != nil {
			s.add("txn=" + *r.TransactionID)
		}
	case *kmsg.FetchRequest:
		if r.Version <= 14 {
			s.add(fmt.Sprintf("replica=%d", r.ReplicaID))
		} else if r.ReplicaState.ID >= 0 {
			s.add(fmt.Sprintf("replica=%d epoch=%d", r.ReplicaState.ID, r.ReplicaState.Epoch))
		}
		if r.SessionID != 0 || r.SessionEpoch != -1 {
			s.add(fmt.Sprintf("session=%d/%d", r.SessionID, r.SessionEpoch))
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				it := fmt.Sprintf("%s[%d] offset=%d", s.m.TopicName(t.Topic, t.TopicID), p.Partition, p.FetchOffset)
				if p.CurrentLeaderEpoch >= 0 {
					it += fmt.Sprintf(" leader-epoch=%d", p.CurrentLeaderEpoch)
				}
				if p.LastFetchedEpoch >= 0 && r.Version >= 12 {
					it += fmt.Sprintf(" last-fetched-epoch=%d", p.LastFetchedEpoch)
				}
				s.item(it)
			}
		}
		s.flush()
	case *kmsg.MetadataRequest:
		if r.Topics == nil {
			s.add("topics=all")
		} else {
			for _, t := range r.Topics {
				name := ""
				if t.Topic != nil {
					name = *t.Topic
				}
				s.item(s.m.TopicName(name, t.TopicID))
			}
			s.flush()
		}
	case *kmsg.BrokerHeartbeatRequest:
		s.add(fmt.Sprintf("broker=%d epoch=%d metadata-offset=%d fenced=%v shutdown=%v", r.BrokerID, r.BrokerEpoch, r.CurrentMetadataOffset, r.WantFence, r.WantShutdown))
	case *kmsg.BrokerRegistrationRequest:
		s.add(fmt.Sprintf("broker=%d", r.BrokerID))
		for _, l := range r.Listeners {
			s.item(fmt.Sprintf("%s=%s:%d", l.Name, l.Host, l.Port))
		}
		s.flush()
	case *kmsg.FindCoordinatorRequest:
		if r.Version >= 4 {
			s.add(fmt.Sprintf("type=%d keys=%s", r.CoordinatorType, strings.Join(r.CoordinatorKeys, ",")))
		} else {
			s.add(fmt.Sprintf("type=%d key=%s", r.CoordinatorType, r.CoordinatorKey))
		}
	case *kmsg.JoinGroupRequest:
		s.add(fmt.Sprintf("group=%s member=%s", r.Group, r.MemberID))
	case *kmsg.SyncGroupRequest:
		s.add(fmt.Sprintf("group=%s generation=%d member=%s", r.Group, r.Generation, r.MemberID))
	case *kmsg.HeartbeatRequest:
		s.add(fmt.Sprintf("group=%s generation=%d member=%s", r.Group, r.Generation, r.MemberID))
	case *kmsg.LeaveGroupRequest:
		s.add("group=" + r.Group)
	case *kmsg.OffsetCommitRequest:
		s.add(fmt.Sprintf("group=%s generation=%d", r.Group, r.Generation))
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				s.item(fmt.Sprintf("%s[%d]=%d", t.Topic, p.Partition, p.Offset))
			}
		}
		s.flush()
	case *kmsg.OffsetFetchRequest:
		if r.Group != "" {
			s.add("group=" + r.Group)
		}
		for _, g := range r.Groups {
			s.item("group=" + g.Group)
		}
		s.flush()
	case *kmsg.ConsumerGroupHeartbeatRequest:
		s.add(fmt.Sprintf("group=%s member=%s epoch=%d", r.Group, r.MemberID, r.MemberEpoch))
	case *kmsg.ListOffsetsRequest:
		s.add(fmt.Sprintf("replica=%d", r.ReplicaID))
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				s.item(fmt.Sprintf("%s[%d] ts=%d", t.Topic, p.Partition, p.Timestamp))
			}
		}
		s.flush()
	case *kmsg.VoteRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				s.item(fmt.Sprintf("%s[%d] candidate=%d epoch=%d last-offset=%d", t.Topic, p.Partition, p.CandidateID, p.CandidateEpoch, p.LastOffset))
			}
		}
		s.flush()
	case *kmsg.SASLHandshakeRequest:
		s.add("mechanism=" + r.Mechanism)
	case *kmsg.SASLAuthenticateRequest:
		if u := decode.SASLUser(r.SASLAuthBytes); u != "" {
			s.add("user=" + u)
		}
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID != nil {
			s.add("txn=" + *r.TransactionalID)
		}
		s.add(fmt.Sprintf("producer-id=%d epoch=%d", r.ProducerID, r.ProducerEpoch))
	}
}

func (s *sum) response(resp kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		s.errorsShown = true
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				it := fmt.Sprintf("%s[%d]", s.m.TopicName(t.Topic, t.TopicID), p.Partition)
				if p.ErrorCode != 0 {
					it += " err=" + decode.ErrorName(p.ErrorCode)
					if p.CurrentLeader.LeaderID >= 0 {
						it += fmt.Sprintf(" leader=%d leader-epoch=%d", p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch)
					}
				} else {
					it += fmt.Sprintf(" base-offset=%d", p.BaseOffset)
				}
				s.item(it)
			}
		}
		s.flush()
	case *kmsg.FetchResponse:
		s.errorsShown = true
		if r.ErrorCode != 0 {
			s.add("err=" + decode.ErrorName(r.ErrorCode))
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				it := fmt.Sprintf("%s[%d]", s.m.TopicName(t.Topic, t.TopicID), p.Partition)
				if p.ErrorCode != 0 {
					it += " err=" + decode.ErrorName(p.ErrorCode)
				}
				if p.CurrentLeader.LeaderID >= 0 {
					it += fmt.Sprintf(" leader=%d leader-epoch=%d", p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch)
				}
				it += fmt.Sprintf(" hw=%d", p.HighWatermark)
				if p.DivergingEpoch.Epoch >= 0 {
					it += fmt.Sprintf(" diverging-epoch=%d@%d", p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset)
				}
				s.item(it)
			}
		}
		s.flush()
		for _, n := range r.Brokers {
			s.item(fmt.Sprintf("node %d=%s:%d", n.NodeID, n.Host, n.Port))
		}
		s.flush()
	case *kmsg.MetadataResponse:
		s.errorsShown = true
		for _, b := range r.Brokers {
			s.item(fmt.Sprintf("broker %d=%s:%d", b.NodeID, b.Host, b.Port))
		}
		s.flush()
		if r.ControllerID >= 0 {
			s.add(fmt.Sprintf("controller=%d", r.ControllerID))
		}
		for _, t := range r.Topics {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			if t.ErrorCode != 0 {
				s.item(fmt.Sprintf("%s err=%s", s.m.TopicName(name, t.TopicID), decode.ErrorName(t.ErrorCode)))
			}
			for _, p := range t.Partitions {
				it := fmt.Sprintf("%s[%d] leader=%d", s.m.TopicName(name, t.TopicID), p.Partition, p.Leader)
				if r.Version >= 7 {
					it += fmt.Sprintf(" leader-epoch=%d", p.LeaderEpoch)
				}
				if p.ErrorCode != 0 {
					it += " err=" + decode.ErrorName(p.ErrorCode)
				}
				s.item(it)
			}
		}
		s.flush()
	case *kmsg.BrokerHeartbeatResponse:
		s.add(fmt.Sprintf("caught-up=%v fenced=%v shutdown=%v", r.IsCaughtUp, r.IsFenced, r.ShouldShutdown))
	case *kmsg.FindCoordinatorResponse:
		if len(r.Coordinators) == 0 {
			s.add(fmt.Sprintf("coordinator=%d %s:%d", r.NodeID, r.Host, r.Port))
		}
		for _, c := range r.Coordinators {
			s.item(fmt.Sprintf("%s coordinator=%d %s:%d", c.Key, c.NodeID, c.Host, c.Port))
		}
		s.flush()
	case *kmsg.JoinGroupResponse:
		s.add(fmt.Sprintf("generation=%d leader=%s member=%s", r.Generation, r.LeaderID, r.MemberID))
	case *kmsg.ApiVersionsResponse:
		s.errorsShown = true
		if r.ErrorCode != 0 {
			s.add("err=" + decode.ErrorName(r.ErrorCode))
		}
		if r.Version != s.m.Version {
			// The broker refused the request's version and answered
			// in the v0 layout (decode.UnsupportedVersionAnswer).
			s.add(fmt.Sprintf("(v%d layout)", r.Version))
		}
		if len(r.ApiKeys) == 1 && r.ApiKeys[0].ApiKey == 18 {
			// KIP-511: only ApiVersions' own range, the versions to
			// retry with.
			s.add(fmt.Sprintf("ApiVersions=v%d-v%d", r.ApiKeys[0].MinVersion, r.ApiKeys[0].MaxVersion))
		} else {
			s.add(fmt.Sprintf("apis=%d", len(r.ApiKeys)))
		}
	case *kmsg.DescribeClusterResponse:
		for _, b := range r.Brokers {
			s.item(fmt.Sprintf("broker %d=%s:%d", b.NodeID, b.Host, b.Port))
		}
		s.flush()
	case *kmsg.InitProducerIDResponse:
		s.add(fmt.Sprintf("producer-id=%d epoch=%d", r.ProducerID, r.ProducerEpoch))
	}
}

func (s *sum) batches(m *flows.Message) {
	for _, b := range m.Batches {
		crc := "crc-ok"
		if !b.CRCOK {
			crc = "CRC-BAD"
		}
		it := fmt.Sprintf("batch %s[%d] offsets=%d..%d records=%d crc=%08x %s", s.m.TopicName(b.Topic, b.TopicID), b.Partition,
			b.BaseOffset, b.LastOffset(), b.Records, b.CRC, crc)
		if b.Magic < 2 {
			it += fmt.Sprintf(" magic=%d", b.Magic)
		}
		if b.Codec() != decode.CodecNone {
			it += " " + b.Codec().String()
		}
		if b.ProducerID >= 0 {
			it += fmt.Sprintf(" pid=%d", b.ProducerID)
		}
		s.item(it)
	}
	s.flush()
	if m.BatchErrors > 0 {
		s.add(fmt.Sprintf("malformed-record-sets=%d", m.BatchErrors))
	}
}
