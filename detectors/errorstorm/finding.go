package errorstorm

import (
	"fmt"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one API answering one error to clients in a retry loop. Its
// exported fields are the finding's "fields".
type Finding struct {
	API       string   `json:"api"`
	Error     string   `json:"error"`
	ErrorCode int16    `json:"error_code"`
	ClientIDs []string `json:"client_ids"`
	Clients   []string `json:"clients"`
	Servers   []string `json:"servers"`
	// Duration is how long the storm lasted in seconds, Rate its
	// responses per second.
	Duration float64 `json:"duration_s"`
	Rate     float64 `json:"rate_per_s"`
	// Held is the longest a storming client kept getting the error with
	// no success in between, in seconds; Ongoing that it still did when
	// the capture ended. The severity is theirs (detectors.Grade).
	Held    float64 `json:"held_s"`
	Ongoing bool    `json:"ongoing"`
	// TopicsCreated: the topics the answers named unknown, every one of
	// them created in the capture (a CreateTopics request, or a later
	// answer listing it): the clients waited for a topic being created,
	// and the finding is info.
	TopicsCreated []string `json:"topics_created,omitempty"`
	// Fast: a client retried faster than any client's backoff allows
	// (detectors.Episode.Fast), at FastRate failing answers a second;
	// StillFailing counts the storming clients still failing at the end.
	Fast         bool    `json:"fast,omitempty"`
	FastRate     float64 `json:"fast_rate_per_s,omitempty"`
	StillFailing int     `json:"still_failing,omitempty"`

	Group        *Group
	ExactRate    float64
	Span         time.Duration
	HeldFor      time.Duration
	Severity     detectors.Severity
	Who          []string // the storming clients, `"id" (host)`
	ServerLabels []string
	MinErrors    int
	Window       time.Duration
	Episode      detectors.Episode

	// The counts: responses with the error, those in the worst storm,
	// the error's occurrences (one response may carry it for many
	// partitions), the API's responses in all, and the clients in the
	// storm.
	Responses      int64 `count:"responses"`
	StormResponses int64 `count:"storm_responses"`
	ErrorCodes     int64 `count:"error_codes"`
	APIResponses   int64 `count:"api_responses"`
	StormClients   int64 `count:"clients"`
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("%s answered %s %d times in %s (%.1f/s) to %s", f.API, f.Error, f.Group.Stormed,
		text.Duration(f.Span), f.ExactRate, text.List(f.Who, 3))
	if len(f.Servers) > 0 {
		s += " from " + text.List(f.ServerLabels, 3)
	}
	if len(f.TopicsCreated) > 0 {
		s += fmt.Sprintf(" while %s %s being created", text.List(f.TopicsCreated, 3), text.Word(len(f.TopicsCreated), "was", "were"))
	} else if f.Ongoing || f.Fast {
		s += "; " + f.Episode.Felt()
	}
	return s
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	g := f.Group
	expl := fmt.Sprintf("%d of %d %s responses carried %s (error code %d, %d occurrences: one response can name it "+
		"for several partitions or resources). %d client(s), %s, kept getting it at %.1f per second for %s, "+
		"from %s to %s, at least %d within %s: the client retries and the broker gives the same answer every "+
		"time. A healthy client sees this error now and then and recovers after one refresh or retry.",
		f.Responses, f.APIResponses, f.API, f.Error, f.ErrorCode, f.ErrorCodes, f.StormClients,
		strings.Join(f.Who, ", "), f.ExactRate, text.Duration(f.Span),
		text.Clock(g.StormFirst), text.Clock(g.StormLast), f.MinErrors, text.Duration(f.Window))
	if g.Responses > g.Stormed {
		expl += fmt.Sprintf(" %d other response(s) carried it outside the storm.", g.Responses-g.Stormed)
	}
	return expl + " " + f.felt()
}

// felt says how long clients were held up and what severity that is.
func (f *Finding) felt() string {
	if len(f.TopicsCreated) > 0 {
		return fmt.Sprintf("Every topic the answers named unknown (%s) was created in the capture (a CreateTopics request, or a later "+
			"answer listing it): the clients waited for a topic being created, as Kafka Streams does for its internal topics until "+
			"its group leader creates them, or a producer for a topic auto-created on first use: info.", text.List(f.TopicsCreated, 5))
	}
	var s string
	switch {
	case f.Ongoing:
		s = fmt.Sprintf("A client had been getting it for %s with no success in between and still was when the capture ended", text.Duration(f.HeldFor))
	case f.HeldFor > 0:
		s = fmt.Sprintf("The longest a client kept getting it with no success in between was %s", text.Duration(f.HeldFor))
	default:
		s = "The storming clients got successful answers between the errors"
	}
	switch {
	case f.Severity == detectors.Error:
		return s + fmt.Sprintf(": an error (%s or more, or %s or more and not healed).", text.Duration(detectors.LongAfter), text.Duration(detectors.HealAfter))
	case f.Severity == detectors.Warning && f.Episode.Fast() && f.HeldFor < detectors.FeltAfter:
		return s + fmt.Sprintf(": a warning however short, since the client retried %d times at %.0f a second, faster than any client's "+
			"retry backoff allows (%.0f a second or more: the lowest library default, 100 ms, allows a few a second per broker); "+
			"a client with no backoff loads the broker for every other client.", f.Episode.Failures, f.Episode.Rate, detectors.FastRate)
	case f.Severity == detectors.Warning && f.Episode.Broad() && f.HeldFor < detectors.FeltAfter:
		return s + fmt.Sprintf(": a warning however short, since %d clients were still failing when the capture ended.", f.StillFailing)
	case f.Severity == detectors.Warning:
		return s + fmt.Sprintf(": a warning, clients held up for %s or more.", text.Duration(detectors.FeltAfter))
	}
	return s + fmt.Sprintf(": info, no client held up for %s.", text.Duration(detectors.FeltAfter))
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return fmt.Sprintf("kfsniff -r <capture> --frames --errors --api %s%s shows the exchanges. ", f.API,
		text.Filter("client-id", f.ClientIDs)) + hint(f.ErrorCode)
}

// hint says what to check for the common errors of retry loops.
func hint(code int16) string {
	switch code {
	case cluster.NotLeaderOrFollower, cluster.FencedLeaderEpoch, cluster.UnknownLeaderEpoch:
		return "Compare the leader the responses and Metadata name with the broker the client sends to " +
			"(see not-leader-loop); kafka-topics.sh --describe --topic <topic> shows leader and ISR."
	case cluster.LeaderNotAvailable:
		return "kafka-topics.sh --describe --unavailable-partitions lists leaderless partitions; " +
			"check that their replicas' brokers are up (see leader-election-stall)."
	case cluster.UnknownTopicOrPartition:
		return "Check that the topic exists (kafka-topics.sh --describe --topic <topic>) and " +
			"auto.create.topics.enable; a deleted topic still in the client's list loops here."
	case cluster.CoordinatorLoadInProgress, cluster.CoordinatorNotAvailable, cluster.NotCoordinator:
		return "Check the __consumer_offsets (or __transaction_state) partition of the group: " +
			"its leader, ISR and the coordinator broker's log for loading errors."
	case cluster.NotEnoughReplicas, cluster.NotEnoughReplicasAfterAppend:
		return "Compare the partition's ISR with min.insync.replicas (kafka-topics.sh --describe " +
			"--under-min-isr-partitions)."
	case cluster.OffsetOutOfRange:
		return "The fetch offset is outside the log: check retention and the consumer's auto.offset.reset."
	case cluster.TopicAuthorizationFailed, cluster.GroupAuthorizationFailed, cluster.ClusterAuthorizationFailed, cluster.SASLAuthenticationFailed:
		return "Check the principal's ACLs (kafka-acls.sh --list --principal User:<name>) and credentials."
	case cluster.UnsupportedVersion:
		return "The client asks for a version the broker does not support: compare ApiVersions with the client's version."
	}
	return "Look the error up in the Kafka protocol guide and the broker's log at the same time; " +
		"the client's retry settings (retry.backoff.ms, retries) set the rate."
}
