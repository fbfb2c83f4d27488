package rebalanceloop

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one group's worst episode of instability. Its exported
// fields are the finding's "fields".
type Finding struct {
	Group    string `json:"group"`
	Protocol string `json:"protocol"`
	// Rebalances are the generations completed (classic) and the members
	// fenced (KIP-848) in the episode; Unexplained those that members
	// joining and leaving do not account for.
	Rebalances      int      `json:"rebalances" count:"rebalances"`
	Unexplained     int      `json:"unexplained_rebalances"`
	GenerationFirst int32    `json:"generation_first,omitempty"`
	GenerationLast  int32    `json:"generation_last,omitempty"`
	Joined          int      `json:"members_joined" count:"members_joined"`
	Left            int      `json:"members_left" count:"members_left"`
	Fenced          int      `json:"members_fenced" count:"fences"`
	Members         []string `json:"member_ids,omitempty"`
	Errors          []string `json:"errors,omitempty"`
	// EpisodeS is how long no assignment held: from the first
	// disturbance to the group settling for good (hold); UnsettledS the
	// time of it spent in rebalances.
	EpisodeS          float64  `json:"episode_s"`
	UnsettledS        float64  `json:"unsettled_s"`
	LongestUnsettledS float64  `json:"longest_unsettled_s"`
	Ongoing           bool     `json:"ongoing"`
	Loop              bool     `json:"loop"`
	Clients           []string `json:"clients"`
	Servers           []string `json:"coordinators"`

	// The counts besides: the group's error responses in the episode,
	// its JoinGroup requests, and its episodes of instability in the
	// capture (this is the worst).
	RebalanceErrors int64 `count:"rebalance_errors"`
	JoinRequests    int64 `count:"join_requests"`
	Episodes        int   `count:"episodes"`

	// What the prose says besides: the episode's span; the time spent
	// in rebalances, in all and the longest; the exchanges of groups not
	// followed (too many groups); the rule's parameters.
	Start, Last        time.Time
	Unsettled, Longest time.Duration
	Dropped            int64
	Params             Params
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	what := "rebalanced"
	if f.Loop {
		what = "rebalancing in a loop"
	}
	s := fmt.Sprintf("group %q %s: %s in %s without an assignment holding %s (%s in rebalances)", f.Group, what,
		text.Plural(f.Rebalances, "rebalance", "rebalances"), text.Duration(f.Last.Sub(f.Start)), text.Duration(f.Params.Hold),
		text.Duration(f.Unsettled))
	if f.Ongoing {
		s += " (still unsettled at the end)"
	}
	if len(f.Errors) > 0 {
		s += "; " + strings.Join(f.Errors, ", ")
	}
	return s
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Between %s and %s the %s-protocol group %q, coordinated by %s, went through %s",
		text.Clock(f.Start), text.Clock(f.Last), f.Protocol, f.Group, text.List(f.Servers, 3), text.Plural(f.Rebalances, "rebalance", "rebalances"))
	if f.GenerationLast != 0 {
		fmt.Fprintf(&b, " (generations %d to %d)", f.GenerationFirst, f.GenerationLast)
	}
	fmt.Fprintf(&b, "; %s joined, %s left and %s fenced, so %s not explained by membership changes. ",
		text.Plural(f.Joined, "member", "members"), text.Plural(f.Left, "member", "members"),
		text.Plural(f.Fenced, "member was", "members were"), text.Plural(f.Unexplained, "rebalance is", "rebalances are"))
	if f.RebalanceErrors > 0 {
		fmt.Fprintf(&b, "Members were answered %s. ", strings.Join(f.Errors, ", "))
	}
	fmt.Fprintf(&b, "No assignment held for %s in those %s; %s of it (the longest stretch %s) the group spent "+
		"in rebalances, during which its members stop consuming (the classic protocol is stop-the-world; KIP-848 "+
		"revokes and assigns partitions member by member), and after each the members start over: offsets "+
		"fetched again, fetch sessions rebuilt, records of revoked partitions redelivered. ",
		text.Duration(f.Params.Hold), text.Duration(f.Last.Sub(f.Start)), text.Duration(f.Unsettled), text.Duration(f.Longest))
	if f.Loop {
		b.WriteString("Rebalances that follow one another without members joining or leaving are a loop: members are " +
			"kicked out and rejoin, typically because processing a poll takes longer than max.poll.interval.ms, " +
			"heartbeats miss session.timeout.ms (GC pauses, a blocked heartbeat thread), the rebalance timeout is too " +
			"short for a slow member to rejoin (KAFKA-8653), or a client rejoins on every REBALANCE_IN_PROGRESS " +
			"(kafkajs 375). Under KIP-848, FENCED_MEMBER_EPOCH means the member's epoch fell behind the coordinator's, " +
			"UNKNOWN_MEMBER_ID that the coordinator removed it (session timeout).")
	} else {
		fmt.Fprintf(&b, "This is below a loop (%d unexplained rebalances and %d rebalance errors make one): "+
			"rebalances when members join or leave are normal.", f.Params.MinRebalances, f.Params.MinErrors)
	}
	if f.Episodes > 1 {
		fmt.Fprintf(&b, " The group had %s of instability; this is the worst.", text.Plural(f.Episodes, "episode", "episodes"))
	}
	if f.Ongoing {
		b.WriteString(" The group had not settled when the capture ended.")
	}
	if f.Dropped > 0 {
		fmt.Fprintf(&b, " (%d exchanges of further groups were not followed: too many groups.)", f.Dropped)
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	g := text.ShellOr(f.Group, strconv.Quote(f.Group))
	return fmt.Sprintf("kafka-consumer-groups.sh --bootstrap-server <broker> --describe --group %s --members --verbose "+
		"shows the members, their hosts and assignments (--state shows the state and, for KIP-848 groups, the epoch). "+
		"In the consumers' logs look for the reason of each rejoin; check max.poll.interval.ms against the time a poll "+
		"loop takes, session.timeout.ms and heartbeat.interval.ms, and the consumer metrics "+
		"kafka.consumer:type=consumer-coordinator-metrics (rebalance-rate-per-hour, failed-rebalance-total, "+
		"last-rebalance-seconds-ago, last-poll-seconds-ago). On the coordinator, kafka.server:type=group-coordinator-metrics "+
		"and its log (\"Preparing to rebalance group\" with the reason) say who triggers each rebalance. Static membership "+
		"(group.instance.id, KIP-345), the cooperative assignor (KIP-429) or the consumer protocol (KIP-848) stop "+
		"restarts from rebalancing the whole group.", g)
}
