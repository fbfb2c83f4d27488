package detectortest

import "github.com/twmb/franz-go/pkg/kmsg"

// Builders for KRaft broker liveness: a broker's BrokerHeartbeat to the
// controller and the controller's answer.

// BrokerHeartbeatAsking is broker id's BrokerHeartbeat v1 (epoch 100, metadata
// offset 5000), asking to be fenced or to shut down or not.
func BrokerHeartbeatAsking(id int32, wantFence, wantShutdown bool) *kmsg.BrokerHeartbeatRequest {
	q := kmsg.NewPtrBrokerHeartbeatRequest()
	q.Version, q.BrokerID, q.BrokerEpoch, q.CurrentMetadataOffset = 1, id, 100, 5000
	q.WantFence, q.WantShutdown = wantFence, wantShutdown
	return q
}

// HeartbeatAnswer is the controller's answer: fenced or not, caught up,
// told to shut down, with an error code.
func HeartbeatAnswer(fenced, caughtUp, shutdown bool, code int16) *kmsg.BrokerHeartbeatResponse {
	r := kmsg.NewPtrBrokerHeartbeatResponse()
	r.Version, r.ErrorCode = 1, code
	r.IsFenced, r.IsCaughtUp, r.ShouldShutdown = fenced, caughtUp, shutdown
	return r
}
