package leaderelectionstall

import (
	"fmt"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is partitions of one topic answered without a leader, all of
// whose worst stretches have the finding's severity. Its exported fields
// are the finding's "fields".
type Finding struct {
	Topic           string   `json:"topic"`
	Partitions      []int32  `json:"partitions" count:"partitions,len"`
	Error           string   `json:"error"`     // the error answered most often
	LeaderID        int32    `json:"leader_id"` // the leader answered most often (-1: none)
	Servers         []string `json:"servers"`   // the brokers that answered
	DurationS       float64  `json:"duration_s"`
	Ongoing         bool     `json:"ongoing"` // still leaderless at the end of the capture
	Replicas        []int32  `json:"replicas"`
	ISR             []int32  `json:"isr"`
	OfflineReplicas []int32  `json:"offline_replicas"`
	// NewLeaders are the leaders named by the answers that ended the
	// stretches (none when every one lasted to the end).
	NewLeaders []int32 `json:"new_leaders"`
	// Waited are the clients that waited for a leader, those that
	// waited most first.
	Waited []Waiter `json:"waited" count:"clients,len"`
	// Responses is the answers without a leader; Refused, of the
	// waiters' requests, those refused.
	Responses int64 `count:"responses"`
	Refused   int64 `count:"refused"`

	Severity     detectors.Severity
	Params       Params
	ErrCode      int16
	First, last  time.Time // the first and last answers without a leader
	Healed       time.Time // the last answer that ended a stretch
	End          time.Time // the end of the capture, if a stretch lasted to it
	LastAnswer   time.Time // the last answer without a leader of those stretches
	Span         time.Duration
	Longest      int32    // the partition leaderless longest
	Labels       []string // Servers with their node ids
	Nodes        []int32  // the offline replicas, or all replicas if none is
	OfflineKnown bool     // every response listed offline replicas (v5+)
	AllOffline   bool     // every replica is offline
	ISROffline   bool     // every in-sync replica is offline
	Online       []int32  // replicas not offline
	OnlineISR    []int32  // in-sync replicas not offline
	ConnsMore    int      // connections beyond those kept per stretch
	WaitersMore  int64    // answers to clients beyond those kept per stretch
	Dropped      int64    // leaderless answers about partitions not tracked
}

// Waiter is a client that waited for a leader: its Metadata requests
// answered without one, its Produce and Fetch requests refused
// (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE) for these partitions. A
// request names several partitions, so each count is the most for any one
// partition of the finding: exact when the requests named them all (a
// producer's requests to one leader do), a lower bound otherwise.
type Waiter struct {
	ClientID        string `json:"client_id"`
	Host            string `json:"host"`
	MetadataAnswers int64  `json:"metadata_answers"`
	ProduceRefused  int64  `json:"produce_refused"`
	FetchRefused    int64  `json:"fetch_refused"`
}

func (w *Waiter) requests() int64 { return w.MetadataAnswers + w.ProduceRefused + w.FetchRefused }

func (w *Waiter) String() string {
	var parts []string
	if w.MetadataAnswers > 0 {
		parts = append(parts, text.Plural(w.MetadataAnswers, "Metadata answer", "Metadata answers")+" without a leader")
	}
	if w.ProduceRefused > 0 {
		parts = append(parts, fmt.Sprintf("%d Produce refused", w.ProduceRefused))
	}
	if w.FetchRefused > 0 {
		parts = append(parts, fmt.Sprintf("%d Fetch refused", w.FetchRefused))
	}
	return fmt.Sprintf("%q on %s (%s)", w.ClientID, w.Host, strings.Join(parts, ", "))
}

func (f *Finding) partitions() string {
	return text.Word(len(f.Partitions), "partition", "partitions") + " " + text.IDs(f.Partitions, 0)
}

func (f *Finding) leaders() string {
	return text.Word(len(f.NewLeaders), "node", "nodes") + " " + text.IDs(f.NewLeaders, 0)
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	var b strings.Builder
	if f.Severity == detectors.Info {
		fmt.Fprintf(&b, "%s %s briefly without a leader (%s)", f.Topic, f.partitions(), text.Duration(f.Span))
		switch {
		case f.Ongoing:
			b.WriteString(", still without one at the end of the capture, too soon to call it a stall")
		case len(f.NewLeaders) > 0:
			fmt.Fprintf(&b, ", then led by %s: a leader election", f.leaders())
		}
		return b.String()
	}
	fmt.Fprintf(&b, "%s %s without a leader for %s (%s from %s: %s, leader %d)",
		f.Topic, f.partitions(), text.Duration(f.Span), text.Plural(f.Responses, "Metadata response", "Metadata responses"),
		strings.Join(f.Labels, ", "), f.Error, f.LeaderID)
	switch {
	case f.AllOffline && len(f.Replicas) == 1:
		fmt.Fprintf(&b, "; their only replica, node %s, is offline", text.IDs(f.Replicas, 0))
	case f.AllOffline:
		fmt.Fprintf(&b, "; all their replicas (nodes %s) are offline", text.IDs(f.Replicas, 0))
	}
	if f.Ongoing {
		b.WriteString("; still so at the end of the capture")
	} else if len(f.NewLeaders) > 0 {
		fmt.Fprintf(&b, "; then led by %s", f.leaders())
	}
	if n := len(f.Waited); n > 0 {
		fmt.Fprintf(&b, "; %s waited", text.Plural(n, "client", "clients"))
	}
	return b.String()
}

// Explanation implements detectors.Detail: how long, what the replicas
// allow, who waited, and what the severity means.
func (f *Finding) Explanation() string {
	var b strings.Builder
	fmt.Fprintf(&b, "From %s UTC every Metadata response that listed %s %s answered %s with leader %d", text.Stamp(f.First),
		f.Topic, f.partitions(), f.Error, f.LeaderID)
	switch {
	case f.Ongoing && f.End.Sub(f.LastAnswer) < time.Second:
		fmt.Fprintf(&b, " to the end of the capture at %s (%s of capture time). ", text.Stamp(f.End), text.Duration(f.Span))
	case f.Ongoing:
		fmt.Fprintf(&b, "; the last, at %s, still named none, and no response named one until the end of the capture at %s "+
			"(%s of capture time). ", text.Stamp(f.LastAnswer), text.Stamp(f.End), text.Duration(f.Span))
	default:
		fmt.Fprintf(&b, ", until a response named %s the leader at %s (%s of capture time for %s partition %d). ",
			f.leaders(), text.Stamp(f.Healed), text.Duration(f.Span), f.Topic, f.Longest)
	}
	fmt.Fprintf(&b, "%s, from %s. ", text.Plural(f.Responses, "response", "responses"), strings.Join(f.Labels, ", "))
	fmt.Fprintf(&b, "Replicas %v, in-sync replicas %v", f.Replicas, f.ISR)
	if f.OfflineKnown {
		fmt.Fprintf(&b, ", offline replicas %v. ", f.OfflineReplicas)
	} else {
		b.WriteString(" (these Metadata versions do not list offline replicas). ")
	}
	switch {
	case f.ErrCode == cluster.ListenerNotFound:
		b.WriteString("LISTENER_NOT_FOUND means the leader exists but has no listener by the name the client connected through: " +
			"the brokers' listener names differ, not an election. ")
	case f.AllOffline:
		fmt.Fprintf(&b, "Every replica of these partitions is offline, so there is no candidate to elect: this is not a slow election; "+
			"the partitions come back only when node %s does (or, if its log is lost, by reassigning them, losing their data). ",
			text.IDs(f.Replicas, 0))
	case f.ISROffline:
		fmt.Fprintf(&b, "Every in-sync replica is offline; the online replicas (%v) are out of sync, and with "+
			"unclean.leader.election.enable=false (the default) the controller will not elect them. ", f.Online)
	case f.OfflineKnown && len(f.Replicas) > 0 && f.Severity > detectors.Info:
		fmt.Fprintf(&b, "In-sync replicas %v are online, yet no leader was elected: the controller is not completing the election. ",
			f.OnlineISR)
	}
	b.WriteString(f.waited())
	switch f.Severity {
	case detectors.Info:
		fmt.Fprintf(&b, "A leader election after a broker stops or restarts leaves partitions leaderless for milliseconds to a second or two; "+
			"clients retry through it. Under %s clients do not feel it (a warning from there, an error from %s).",
			text.Duration(f.Params.WarnAfter), text.Duration(f.Params.MinDuration))
	default:
		fmt.Fprintf(&b, "A healthy election leaves a partition leaderless for milliseconds; for %s producers of these partitions "+
			"could not write (records waited in their buffers, or failed at delivery.timeout.ms) and consumers could not fetch them, "+
			"and OfflinePartitionsCount was above 0 (a warning from %s, an error from %s or when still leaderless at the end after %s).",
			text.Duration(f.Span), text.Duration(f.Params.WarnAfter), text.Duration(f.Params.MinDuration),
			text.Duration(min(detectors.HealAfter, f.Params.MinDuration)))
	}
	if f.ConnsMore > 0 {
		fmt.Fprintf(&b, " (%s beyond the first %d of each partition are not listed: other brokers may have answered too.)",
			text.Plural(f.ConnsMore, "connection", "connections"), maxConns)
	}
	b.WriteString(untracked(f.Dropped))
	return b.String()
}

// waited says which clients waited, and how.
func (f *Finding) waited() string {
	if len(f.Waited) == 0 {
		return ""
	}
	const shown = 8
	parts := make([]string, 0, shown)
	for _, w := range f.Waited[:min(shown, len(f.Waited))] {
		parts = append(parts, w.String())
	}
	s := fmt.Sprintf("%s waited for a leader: %s", text.Plural(len(f.Waited), "client", "clients"), strings.Join(parts, "; "))
	if len(f.Waited) > shown {
		s += fmt.Sprintf("; and %d more", len(f.Waited)-shown)
	}
	if f.WaitersMore > 0 {
		s += fmt.Sprintf(" (%s to clients beyond the first %d of each partition are not counted)",
			text.Plural(f.WaitersMore, "answer", "answers"), maxWaiters)
	}
	return s + ". "
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	if f.Severity == detectors.Info {
		return "Nothing, unless it repeats: then look for the broker restarts behind it (broker and controller logs, " +
			"kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs)."
	}
	server := text.First(f.Servers, "<broker>")
	return fmt.Sprintf("kafka-topics.sh --bootstrap-server %s --describe --topic %s --unavailable-partitions; "+
		"is node %s running and registered (its server.log, kafka-broker-api-versions.sh --bootstrap-server %s lists live brokers)? "+
		"Controller: kafka-metadata-quorum.sh --bootstrap-server %s describe --status (KRaft), the controller log for the election of these partitions, "+
		"metrics kafka.controller:type=KafkaController,name=OfflinePartitionsCount and "+
		"kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs. "+
		"If the replica is gone for good: kafka-reassign-partitions.sh onto live brokers, or kafka-leader-election.sh --election-type unclean (data loss). "+
		"To survive one broker: replication.factor 3 with min.insync.replicas 2.",
		server, text.ShellOr(f.Topic, "<topic>"), text.IDs(f.Nodes, 0), server, server)
}

// untracked says how many leaderless answers the rule could not follow.
func untracked(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s about partitions beyond the first %d tracked were not followed.)",
		text.Plural(n, "leaderless answer", "leaderless answers"), maxPartitions)
}
