package cluster

// The Kafka error codes rules name, under Kafka's names (the protocol's
// Errors.java; kerr spells NOT_LEADER_OR_FOLLOWER by its pre-2.7 name).
// Constants, so that a rule switches on them as cheaply as on literals;
// TestErrorCodesAreKafkas holds each to kerr's table.
const (
	None                               int16 = 0
	OffsetOutOfRange                   int16 = 1
	CorruptMessage                     int16 = 2
	UnknownTopicOrPartition            int16 = 3
	LeaderNotAvailable                 int16 = 5
	NotLeaderOrFollower                int16 = 6
	RequestTimedOut                    int16 = 7
	MessageTooLarge                    int16 = 10
	NetworkException                   int16 = 13
	CoordinatorLoadInProgress          int16 = 14
	CoordinatorNotAvailable            int16 = 15
	NotCoordinator                     int16 = 16
	RecordListTooLarge                 int16 = 18
	NotEnoughReplicas                  int16 = 19
	NotEnoughReplicasAfterAppend       int16 = 20
	IllegalGeneration                  int16 = 22
	UnknownMemberID                    int16 = 25
	RebalanceInProgress                int16 = 27
	TopicAuthorizationFailed           int16 = 29
	GroupAuthorizationFailed           int16 = 30
	ClusterAuthorizationFailed         int16 = 31
	InvalidTimestamp                   int16 = 32
	UnsupportedVersion                 int16 = 35
	OutOfOrderSequenceNumber           int16 = 45
	DuplicateSequenceNumber            int16 = 46
	InvalidProducerEpoch               int16 = 47
	TransactionalIDAuthorizationFailed int16 = 53
	KafkaStorageError                  int16 = 56
	SASLAuthenticationFailed           int16 = 58
	UnknownProducerID                  int16 = 59
	FetchSessionIDNotFound             int16 = 70
	InvalidFetchSessionEpoch           int16 = 71
	ListenerNotFound                   int16 = 72
	FencedLeaderEpoch                  int16 = 74
	UnknownLeaderEpoch                 int16 = 75
	UnsupportedCompressionType         int16 = 76
	MemberIDRequired                   int16 = 79
	InvalidRecord                      int16 = 87
	ProducerFenced                     int16 = 90
	FencedInstanceID                   int16 = 82
	UnknownTopicID                     int16 = 100
	InconsistentTopicID                int16 = 103
	FencedMemberEpoch                  int16 = 110
	UnreleasedInstanceID               int16 = 111
	StaleMemberEpoch                   int16 = 113
	RebootstrapRequired                int16 = 129
)

// TopicGone reports the codes of a request naming a topic by an id the
// broker no longer knows, or by an id that is not the name's: the topic
// was deleted, or deleted and created again under its name.
func TopicGone(code int16) bool { return code == UnknownTopicID || code == InconsistentTopicID }
