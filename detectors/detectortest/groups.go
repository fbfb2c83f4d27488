package detectortest

import "github.com/twmb/franz-go/pkg/kmsg"

// Builders of consumer group requests and responses (classic protocol and
// KIP-848), for the rebalance rule.

// JoinGroup is a classic JoinGroup v9 of member (empty: a first join).
func JoinGroup(group, member string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.MemberID, r.ProtocolType = 9, group, member, "consumer"
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 45000, 60000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "cooperative-sticky"
	r.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	return r
}

// GroupJoined answers JoinGroup with errCode, a generation and the member id.
func GroupJoined(errCode int16, generation int32, member string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version, r.ErrorCode, r.Generation, r.MemberID, r.LeaderID = 9, errCode, generation, member, member
	proto := "cooperative-sticky"
	r.Protocol = &proto
	return r
}

// SyncGroup is a classic SyncGroup v5 of member at generation.
func SyncGroup(group string, generation int32, member string) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version, r.Group, r.Generation, r.MemberID = 5, group, generation, member
	return r
}

// Synced answers SyncGroup with errCode.
func Synced(errCode int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version, r.ErrorCode = 5, errCode
	return r
}

// ClassicHeartbeat is a classic Heartbeat v4 of member at generation.
func ClassicHeartbeat(group string, generation int32, member string) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version, r.Group, r.Generation, r.MemberID = 4, group, generation, member
	return r
}

// Beat answers Heartbeat with errCode.
func Beat(errCode int16) *kmsg.HeartbeatResponse {
	r := kmsg.NewPtrHeartbeatResponse()
	r.Version, r.ErrorCode = 4, errCode
	return r
}

// LeaveGroup is a LeaveGroup v5 of one member.
func LeaveGroup(group, member string) *kmsg.LeaveGroupRequest {
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version, r.Group = 5, group
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = member
	r.Members = []kmsg.LeaveGroupRequestMember{m}
	return r
}

// Left answers LeaveGroup.
func Left() *kmsg.LeaveGroupResponse {
	r := kmsg.NewPtrLeaveGroupResponse()
	r.Version = 5
	return r
}

// GroupHeartbeat is a KIP-848 ConsumerGroupHeartbeat v0 of member at
// epoch (0: joining, -1: leaving).
func GroupHeartbeat(group, member string, epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = group, member, epoch, 60000
	if epoch == 0 {
		r.SubscribedTopicNames = []string{"orders"}
	}
	return r
}

// GroupBeat answers ConsumerGroupHeartbeat with errCode, the member id and
// its epoch.
func GroupBeat(errCode int16, member string, epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
	r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	r.ErrorCode, r.MemberEpoch, r.HeartbeatIntervalMillis = errCode, epoch, 5000
	if member != "" {
		r.MemberID = &member
	}
	return r
}
