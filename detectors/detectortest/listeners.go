package detectortest

import "github.com/twmb/franz-go/pkg/kmsg"

// Builders for the listener rules: ApiVersions v5 naming the cluster and
// node the client expects to have reached (KIP-1242), and the broker's
// answer.

// ApiVersionsTo is an ApiVersions v5 request from a client that expects
// node of cluster at the address it connected to.
func ApiVersionsTo(cluster string, node int32) *kmsg.ApiVersionsRequest {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = 5
	r.ClientSoftwareName, r.ClientSoftwareVersion = "kgo", "1.22.3"
	r.ClusterID, r.NodeID = kmsg.StringPtr(cluster), node
	return r
}

// ApiVersionsAnswer is the v5 answer with code: 0, or REBOOTSTRAP_REQUIRED
// (129) when the broker is not the node asked for.
func ApiVersionsAnswer(code int16) *kmsg.ApiVersionsResponse {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version, r.ErrorCode = 5, code
	if code == 0 {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MaxVersion = int16(kmsg.Produce), 13
		r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{k}
	}
	return r
}
