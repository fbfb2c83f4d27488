package detectortest

import (
	"net/netip"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/flows"
)

// Builders for the operational rules (error-storm, slow-responses,
// unanswered-requests, connection-refused): the requests and responses of
// clients and groups, and connection attempts that fail.

// MetadataErrors is a Metadata v12 exchange for orders whose partitions, one per
// code, carry errCodes (leaderless where not 0); broker 1 is 10.1.0.10:9092.
func MetadataErrors(errCodes ...int16) (*kmsg.MetadataRequest, *kmsg.MetadataResponse) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("orders")
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp := Advertise(Broker(1, "10.1.0.10", 9092))
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr("orders")
	for i, ec := range errCodes {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.ErrorCode, p.Leader = int32(i), ec, 1
		if ec != 0 {
			p.Leader = -1
		}
		p.Replicas, p.ISR = []int32{1}, []int32{1}
		t.Partitions = append(t.Partitions, p)
	}
	resp.Topics = []kmsg.MetadataResponseTopic{t}
	return req, resp
}

// Broker is a broker as Metadata advertises it.
func Broker(id int32, host string, port int32) kmsg.MetadataResponseBroker {
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = id, host, port
	return b
}

// Advertise is a Metadata v12 response advertising brokers, no topics.
func Advertise(brokers ...kmsg.MetadataResponseBroker) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 12
	resp.Brokers = brokers
	return resp
}

// Heartbeat is a consumer's Heartbeat v4 in orders-app, answered errCode.
func Heartbeat(errCode int16) (*kmsg.HeartbeatRequest, *kmsg.HeartbeatResponse) {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version, req.Group, req.Generation, req.MemberID = 4, "orders-app", 3, "m"
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version, resp.ErrorCode = 4, errCode
	return req, resp
}

// Join is a JoinGroup v7 of orders-app by member ("" for a first join)
// with a rebalance timeout.
func Join(member string, rebalanceMs int32) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 7, "orders-app", 45000, rebalanceMs
	r.MemberID, r.ProtocolType = member, "consumer"
	pr := kmsg.NewJoinGroupRequestProtocol()
	pr.Name, pr.Metadata = "range", []byte{0, 0, 0, 0, 0, 0}
	r.Protocols = []kmsg.JoinGroupRequestProtocol{pr}
	return r
}

// Joined answers Join with errCode, member as the leader.
func Joined(errCode int16, member string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version, r.ErrorCode, r.Generation, r.MemberID = 7, errCode, 1, member
	r.ProtocolType, r.Protocol, r.LeaderID = kmsg.StringPtr("consumer"), kmsg.StringPtr("range"), member
	if errCode != 0 {
		r.Generation = -1
	}
	return r
}

// Sync is a SyncGroup v5 of orders-app by m-1.
func Sync() *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version, r.Group, r.Generation, r.MemberID = 5, "orders-app", 1, "m-1"
	return r
}

// CreateTopics is an admin's CreateTopics v7 of orders, answered errCode.
func CreateTopics(errCode int16) (*kmsg.CreateTopicsRequest, *kmsg.CreateTopicsResponse) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 7, 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "orders", 1, 1
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Version = 7
	t := kmsg.NewCreateTopicsResponseTopic()
	t.Topic, t.ErrorCode = "orders", errCode
	resp.Topics = []kmsg.CreateTopicsResponseTopic{t}
	return req, resp
}

// ListOffsets is a consumer's ListOffsets v7 of orders-0 (latest).
func ListOffsets() *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 7, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	return req
}

// Refused is a connection attempt from client to server (both "ip:port")
// whose SYN was answered by a RST at at, in packet packet.
func Refused(client, server string, at time.Time, packet uint64) *flows.ConnEvent {
	return &flows.ConnEvent{Kind: flows.ConnRefused, Client: netip.MustParseAddrPort(client),
		Server: netip.MustParseAddrPort(server), Packet: packet, Time: at, Attempts: 1}
}

// SynUnanswered is a connection attempt whose SYN, first sent at at in
// packet packet and retransmitted retries times, was never answered.
func SynUnanswered(client, server string, at time.Time, packet uint64, retries int) *flows.ConnEvent {
	return &flows.ConnEvent{Kind: flows.ConnUnanswered, Client: netip.MustParseAddrPort(client),
		Server: netip.MustParseAddrPort(server), Packet: packet, Time: at, Attempts: retries + 1}
}

// Timeline collects answered calls on several connections and delivers
// them as a capture would: each exchange when its response arrives, so
// that a slow response comes after the fast ones sent later.
type Timeline struct {
	h     *Harness
	calls []call
}

type call struct {
	done     time.Time
	c        *flows.Conn
	at       time.Time
	lat      time.Duration
	clientID string
	req      kmsg.Request
	resp     kmsg.Response
}

// NewTimeline returns a timeline delivering to h.
func NewTimeline(h *Harness) *Timeline { return &Timeline{h: h} }

// Call schedules a request from c at at, answered after lat.
func (tl *Timeline) Call(c *flows.Conn, at time.Time, lat time.Duration, clientID string, req kmsg.Request, resp kmsg.Response) {
	tl.calls = append(tl.calls, call{at.Add(lat), c, at, lat, clientID, req, resp})
}

// Every schedules n calls from c, one every step from at, each answered
// after lat; mk makes each request and its response.
func (tl *Timeline) Every(c *flows.Conn, at time.Time, step time.Duration, n int, lat time.Duration, clientID string,
	mk func() (kmsg.Request, kmsg.Response)) {
	for i := range n {
		req, resp := mk()
		tl.Call(c, at.Add(time.Duration(i)*step), lat, clientID, req, resp)
	}
}

// Run delivers the calls scheduled, by the time of their responses (in
// the order scheduled for equal times), and forgets them.
func (tl *Timeline) Run() {
	sort.SliceStable(tl.calls, func(i, j int) bool { return tl.calls[i].done.Before(tl.calls[j].done) })
	for _, c := range tl.calls {
		tl.h.Call(c.c, c.at, c.lat, c.clientID, c.req, c.resp)
	}
	tl.calls = nil
}
