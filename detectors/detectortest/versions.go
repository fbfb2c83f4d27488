package detectortest

import "github.com/twmb/franz-go/pkg/kmsg"

// Builders for the Kafka 4.0 readiness rule: requests at a chosen version,
// and the ApiVersions request in which a client names its software.

// ApiVersionsAt is an ApiVersions request at version; from v3 on it names
// the client software (KIP-511).
func ApiVersionsAt(version int16, software, softwareVersion string) *kmsg.ApiVersionsRequest {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = version
	if version >= 3 {
		r.ClientSoftwareName, r.ClientSoftwareVersion = software, softwareVersion
	}
	return r
}

// MetadataAt is a Metadata request at version for orders.
func MetadataAt(version int16) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = version
	t := kmsg.NewMetadataRequestTopic()
	name := "orders"
	t.Topic = &name
	r.Topics = []kmsg.MetadataRequestTopic{t}
	return r
}

// FetchAt is Fetch (a consumer's, of orders-0) at version.
func FetchAt(version int16) *kmsg.FetchRequest {
	r := Fetch(500)
	r.Version = version
	return r
}

// JoinGroupAt is a consumer's JoinGroup request at version.
func JoinGroupAt(version int16, group string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.ProtocolType, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = version, group, "consumer", 10000, 60000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	r.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	return r
}
