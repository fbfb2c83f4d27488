package decode

import "slices"

// Removed is a range of request versions that Apache Kafka 4.0 no longer
// accepts: versions 0 to Below-1 of the API Key.
type Removed struct {
	Key   int16
	Below int16
	// RestoredIn, if set, is the release that accepts these versions
	// again: they fail on 4.0.0 only.
	RestoredIn string
	// Note says what else an operator should know of this range.
	Note string
}

// RemovedInKafka40 is KIP-896 ("Remove old client protocol API versions in
// Kafka 4.0") as Apache Kafka 4.0.0 shipped it: the request versions the
// broker rejects (a 4.0 broker answers UNSUPPORTED_VERSION or closes the
// connection). Taken from the KIP's final list and checked against the
// message definitions, clients/src/main/resources/common/message/
// *Request.json "validVersions": every lower bound is 0 at 3.9.0, and at
// 4.0.0 it is the Below given here.
//
// The KIP listed more at first, deprecated in 3.7 (Produce v3-v6, Metadata
// v0-v3, FindCoordinator v0, DeleteGroups v0, SaslHandshake v0); 4.0 kept
// those, since popular clients still use them (KAFKA-18648 for Metadata).
// Broker-to-controller APIs are not listed (4.0 brokers talk to 4.0
// controllers).
var RemovedInKafka40 = []Removed{
	{Key: 0, Below: 3, Note: "a 4.0 broker still lists Produce from v0 in its ApiVersions answer, because old librdkafka needs to see v0 there (KAFKA-18659), but rejects v0-v2 requests"},
	{Key: 1, Below: 4}, // Fetch
	{Key: 2, Below: 1}, // ListOffsets
	{Key: 8, Below: 2}, // OffsetCommit
	{Key: 9, Below: 1}, // OffsetFetch
	{Key: 11, Below: 2, RestoredIn: "4.0.1", Note: "removed in 4.0.0 and added back in 4.0.1 and 4.1.0 for librdkafka before 2.11.0 with Kerberos (KAFKA-19444)"}, // JoinGroup
	{Key: 19, Below: 2}, // CreateTopics
	{Key: 20, Below: 1}, // DeleteTopics
	{Key: 23, Below: 2}, // OffsetForLeaderEpoch
	{Key: 27, Below: 1, Note: "sent by brokers only (transaction coordinators to partition leaders); brokers from 2.8 on send v1"}, // WriteTxnMarkers
	{Key: 29, Below: 1}, // DescribeAcls
	{Key: 30, Below: 1}, // CreateAcls
	{Key: 31, Below: 1}, // DeleteAcls
	{Key: 32, Below: 1}, // DescribeConfigs
	{Key: 34, Below: 1}, // AlterReplicaLogDirs
	{Key: 35, Below: 1}, // DescribeLogDirs
	{Key: 38, Below: 1}, // CreateDelegationToken
	{Key: 39, Below: 1}, // RenewDelegationToken
	{Key: 40, Below: 1}, // ExpireDelegationToken
	{Key: 41, Below: 1}, // DescribeDelegationToken
}

// removedBelow is RemovedInKafka40 indexed by key, for a lookup per request.
var removedBelow = func() (t [64]int8) {
	for _, r := range RemovedInKafka40 {
		t[r.Key] = int8(r.Below)
	}
	return t
}()

// RemovedIn40 reports whether Apache Kafka 4.0 rejects version of key
// (KIP-896), and the range it falls in.
func RemovedIn40(key, version int16) (Removed, bool) {
	if key < 0 || int(key) >= len(removedBelow) || version < 0 || version >= int16(removedBelow[key]) {
		return Removed{}, false
	}
	i := slices.IndexFunc(RemovedInKafka40, func(r Removed) bool { return r.Key == key })
	return RemovedInKafka40[i], true
}
