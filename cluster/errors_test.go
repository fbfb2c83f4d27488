package cluster_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kfsniff/kfsniff/cluster"
)

// TestErrorCodesAreKafkas holds each constant to Kafka's code of its name,
// as kerr's table (generated from Kafka's Errors.java) has it.
func TestErrorCodesAreKafkas(t *testing.T) {
	for _, tt := range []struct {
		code int16
		name string
	}{
		{cluster.OffsetOutOfRange, "OFFSET_OUT_OF_RANGE"},
		{cluster.CorruptMessage, "CORRUPT_MESSAGE"},
		{cluster.MessageTooLarge, "MESSAGE_TOO_LARGE"},
		{cluster.RecordListTooLarge, "RECORD_LIST_TOO_LARGE"},
		{cluster.InvalidTimestamp, "INVALID_TIMESTAMP"},
		{cluster.UnsupportedCompressionType, "UNSUPPORTED_COMPRESSION_TYPE"},
		{cluster.InvalidRecord, "INVALID_RECORD"},
		{cluster.UnknownTopicOrPartition, "UNKNOWN_TOPIC_OR_PARTITION"},
		{cluster.LeaderNotAvailable, "LEADER_NOT_AVAILABLE"},
		{cluster.NotLeaderOrFollower, "NOT_LEADER_FOR_PARTITION"}, // kerr's pre-2.7 name
		{cluster.RequestTimedOut, "REQUEST_TIMED_OUT"},
		{cluster.NetworkException, "NETWORK_EXCEPTION"},
		{cluster.CoordinatorLoadInProgress, "COORDINATOR_LOAD_IN_PROGRESS"},
		{cluster.CoordinatorNotAvailable, "COORDINATOR_NOT_AVAILABLE"},
		{cluster.NotCoordinator, "NOT_COORDINATOR"},
		{cluster.NotEnoughReplicas, "NOT_ENOUGH_REPLICAS"},
		{cluster.NotEnoughReplicasAfterAppend, "NOT_ENOUGH_REPLICAS_AFTER_APPEND"},
		{cluster.IllegalGeneration, "ILLEGAL_GENERATION"},
		{cluster.UnknownMemberID, "UNKNOWN_MEMBER_ID"},
		{cluster.RebalanceInProgress, "REBALANCE_IN_PROGRESS"},
		{cluster.TopicAuthorizationFailed, "TOPIC_AUTHORIZATION_FAILED"},
		{cluster.GroupAuthorizationFailed, "GROUP_AUTHORIZATION_FAILED"},
		{cluster.ClusterAuthorizationFailed, "CLUSTER_AUTHORIZATION_FAILED"},
		{cluster.UnsupportedVersion, "UNSUPPORTED_VERSION"},
		{cluster.OutOfOrderSequenceNumber, "OUT_OF_ORDER_SEQUENCE_NUMBER"},
		{cluster.DuplicateSequenceNumber, "DUPLICATE_SEQUENCE_NUMBER"},
		{cluster.InvalidProducerEpoch, "INVALID_PRODUCER_EPOCH"},
		{cluster.SASLAuthenticationFailed, "SASL_AUTHENTICATION_FAILED"},
		{cluster.UnknownProducerID, "UNKNOWN_PRODUCER_ID"},
		{cluster.FetchSessionIDNotFound, "FETCH_SESSION_ID_NOT_FOUND"},
		{cluster.InvalidFetchSessionEpoch, "INVALID_FETCH_SESSION_EPOCH"},
		{cluster.ListenerNotFound, "LISTENER_NOT_FOUND"},
		{cluster.FencedLeaderEpoch, "FENCED_LEADER_EPOCH"},
		{cluster.UnknownLeaderEpoch, "UNKNOWN_LEADER_EPOCH"},
		{cluster.MemberIDRequired, "MEMBER_ID_REQUIRED"},
		{cluster.FencedInstanceID, "FENCED_INSTANCE_ID"},
		{cluster.UnknownTopicID, "UNKNOWN_TOPIC_ID"},
		{cluster.InconsistentTopicID, "INCONSISTENT_TOPIC_ID"},
		{cluster.FencedMemberEpoch, "FENCED_MEMBER_EPOCH"},
		{cluster.StaleMemberEpoch, "STALE_MEMBER_EPOCH"},
		{cluster.RebootstrapRequired, "REBOOTSTRAP_REQUIRED"},
		{cluster.ProducerFenced, "PRODUCER_FENCED"},
		{cluster.UnreleasedInstanceID, "UNRELEASED_INSTANCE_ID"},
		{cluster.TransactionalIDAuthorizationFailed, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"},
		{cluster.KafkaStorageError, "KAFKA_STORAGE_ERROR"},
	} {
		e := kerr.TypedErrorForCode(tt.code)
		if e == nil || e.Code != tt.code || e.Message != tt.name {
			t.Errorf("code %d: kerr has %v, want %s", tt.code, e, tt.name)
		}
	}
	if kerr.TypedErrorForCode(cluster.None) != nil {
		t.Error("None is an error to kerr")
	}
}
