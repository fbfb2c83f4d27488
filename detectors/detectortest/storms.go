package detectortest

import (
	"net/netip"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/flows"
)

// Builders of Metadata, ApiVersions and SASL requests and responses, for
// the metadata-storm, reconnect-storm and sasl-failure rules.

// MetadataFor is a Metadata v12 request for the topics named; none: for
// all topics (a null list).
func MetadataFor(topics ...string) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = 12
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// MetadataOf answers Metadata with three brokers and topic "orders" of
// partitions partitions, all led by node 1.
func MetadataOf(partitions int32) *kmsg.MetadataResponse {
	r := kmsg.NewPtrMetadataResponse()
	r.Version = 12
	for id := range int32(3) {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = id, "10.1.0."+string(rune('0'+10+id)), 9092
		r.Brokers = append(r.Brokers, b)
	}
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr("orders")
	for p := range partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p, 1, 1
		mp.Replicas, mp.ISR = []int32{0, 1, 2}, []int32{0, 1, 2}
		t.Partitions = append(t.Partitions, mp)
	}
	r.Topics = []kmsg.MetadataResponseTopic{t}
	return r
}

// ApiVersions is an ApiVersions v3 request from a client software.
func ApiVersions() *kmsg.ApiVersionsRequest {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version, r.ClientSoftwareName, r.ClientSoftwareVersion = 3, "kgo", "1.0.0"
	return r
}

// ApiVersionsOK answers ApiVersions with no error.
func ApiVersionsOK() *kmsg.ApiVersionsResponse {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = 3
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MaxVersion = 3, 12
	r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{k}
	return r
}

// SaslHandshake is a SaslHandshake v1 for mechanism.
func SaslHandshake(mechanism string) *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Version, r.Mechanism = 1, mechanism
	return r
}

// SaslHandshaked answers SaslHandshake with errCode and the mechanisms the
// broker enables.
func SaslHandshaked(errCode int16, enabled ...string) *kmsg.SASLHandshakeResponse {
	r := kmsg.NewPtrSASLHandshakeResponse()
	r.Version, r.ErrorCode, r.SupportedMechanisms = 1, errCode, enabled
	return r
}

// SaslAuthenticate is a SaslAuthenticate v2 carrying auth bytes.
func SaslAuthenticate(auth string) *kmsg.SASLAuthenticateRequest {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.Version, r.SASLAuthBytes = 2, []byte(auth)
	return r
}

// SaslAuthenticated answers SaslAuthenticate with errCode, a message and
// the session lifetime (KIP-368; 0: none).
func SaslAuthenticated(errCode int16, message string, lifetimeMs int64) *kmsg.SASLAuthenticateResponse {
	r := kmsg.NewPtrSASLAuthenticateResponse()
	r.Version, r.ErrorCode, r.SessionLifetimeMillis = 2, errCode, lifetimeMs
	if message != "" {
		r.ErrorMessage = kmsg.StringPtr(message)
	}
	return r
}

// OpenAt opens a connection from client to server at at, with its SYN
// captured (its ConnOpened event at the next packet), as Harness.Conn does
// at the harness's current time.
func (h *Harness) OpenAt(client, server string, at time.Time) *flows.Conn {
	h.t.Helper()
	c := flows.MakeConn(netip.MustParseAddrPort(client), netip.MustParseAddrPort(server))
	c.Handshake, c.FirstSeen = true, at
	h.conns = append(h.conns, c)
	h.pkt++
	c.FirstPacket = h.pkt
	h.ConnEvent(&flows.ConnEvent{Kind: flows.ConnOpened, Conn: c, Client: c.Client, Server: c.Server, Packet: h.pkt, Time: at})
	return c
}

// CloseAt delivers the end of c (FIN or RST) at at.
func (h *Harness) CloseAt(c *flows.Conn, at time.Time) {
	h.pkt++
	h.ConnEvent(&flows.ConnEvent{Kind: flows.ConnClosed, Conn: c, Client: c.Client, Server: c.Server, Packet: h.pkt, Time: at})
}

// RefusedAt delivers a connection attempt from client to server answered
// by RST, after attempts SYNs.
func (h *Harness) RefusedAt(client, server string, at time.Time, attempts int) {
	h.pkt++
	h.ConnEvent(&flows.ConnEvent{Kind: flows.ConnRefused, Client: netip.MustParseAddrPort(client),
		Server: netip.MustParseAddrPort(server), Packet: h.pkt, Time: at, Attempts: attempts})
}
