package electionstall

import (
	"fmt"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is a stall: partitions of one topic answered without a leader
// for MinDuration or longer (an error). Its exported fields are the
// finding's "fields".
type Finding struct {
	Topic           string   `json:"topic"`
	Partitions      []int32  `json:"partitions"`
	Error           string   `json:"error"`     // the error answered most often
	LeaderID        int32    `json:"leader_id"` // the leader answered most often (-1: none)
	Servers         []string `json:"servers"`   // the brokers that answered
	DurationS       float64  `json:"duration_s"`
	Ongoing         bool     `json:"ongoing"` // still leaderless at the end of the capture
	Replicas        []int32  `json:"replicas"`
	ISR             []int32  `json:"isr"`
	OfflineReplicas []int32  `json:"offline_replicas"`

	errCode      int16
	responses    int64
	first, last  time.Time
	dur          time.Duration
	labels       []string // Servers with their node ids
	nodes        []int32  // the offline replicas, or all replicas if none is
	offlineKnown bool     // every response listed offline replicas (v5+)
	allOffline   bool     // every replica is offline
	isrOffline   bool     // every in-sync replica is offline
	online       []int32  // replicas not offline
	onlineISR    []int32  // in-sync replicas not offline
	connsMore    int      // connections beyond those kept per stretch
	dropped      int64    // leaderless answers about partitions not tracked
}

func (f *Finding) partitions() string {
	return text.Word(len(f.Partitions), "partition", "partitions") + " " + text.IDs(f.Partitions, 0)
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s without a leader for %s (%d Metadata responses from %s: %s, leader %d)",
		f.Topic, f.partitions(), text.Duration(f.dur), f.responses, strings.Join(f.labels, ", "), f.Error, f.LeaderID)
	switch {
	case f.allOffline && len(f.Replicas) == 1:
		fmt.Fprintf(&b, "; their only replica, node %s, is offline", text.IDs(f.Replicas, 0))
	case f.allOffline:
		fmt.Fprintf(&b, "; all their replicas (nodes %s) are offline", text.IDs(f.Replicas, 0))
	}
	if f.Ongoing {
		b.WriteString("; still so at the end of the capture")
	}
	return b.String()
}

// Explanation implements detectors.Detail: what the replicas allow.
func (f *Finding) Explanation() string {
	var b strings.Builder
	fmt.Fprintf(&b, "From %s to %s UTC (%s of capture time", text.Stamp(f.first), text.Stamp(f.last), text.Duration(f.dur))
	if f.Ongoing {
		b.WriteString(", and still at the end of the capture")
	}
	fmt.Fprintf(&b, ") every Metadata response that listed %s %s answered %s with leader %d; no response in between named a leader. ",
		f.Topic, f.partitions(), f.Error, f.LeaderID)
	fmt.Fprintf(&b, "%d responses, from %s. ", f.responses, strings.Join(f.labels, ", "))
	fmt.Fprintf(&b, "Replicas %v, in-sync replicas %v", f.Replicas, f.ISR)
	if f.offlineKnown {
		fmt.Fprintf(&b, ", offline replicas %v. ", f.OfflineReplicas)
	} else {
		b.WriteString(" (these Metadata versions do not list offline replicas). ")
	}
	switch {
	case f.errCode == 72:
		b.WriteString("LISTENER_NOT_FOUND means the leader exists but has no listener by the name the client connected through: " +
			"the brokers' listener names differ, not an election. ")
	case f.allOffline:
		fmt.Fprintf(&b, "Every replica of these partitions is offline, so there is no candidate to elect: this is not a slow election; "+
			"the partitions come back only when node %s does (or, if its log is lost, by reassigning them, losing their data). ",
			text.IDs(f.Replicas, 0))
	case f.isrOffline:
		fmt.Fprintf(&b, "Every in-sync replica is offline; the online replicas (%v) are out of sync, and with "+
			"unclean.leader.election.enable=false (the default) the controller will not elect them. ", f.online)
	case f.offlineKnown && len(f.Replicas) > 0:
		fmt.Fprintf(&b, "In-sync replicas %v are online, yet no leader was elected: the controller is not completing the election. ",
			f.onlineISR)
	}
	b.WriteString("Producers and consumers of these partitions fail or wait for all this time.")
	if f.connsMore > 0 {
		fmt.Fprintf(&b, " (%s beyond the first %d of each partition are not listed: other brokers may have answered too.)",
			text.Plural(f.connsMore, "connection", "connections"), maxConns)
	}
	b.WriteString(untracked(f.dropped))
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	server := text.First(f.Servers, "<broker>")
	return fmt.Sprintf("kafka-topics.sh --bootstrap-server %s --describe --topic %s --unavailable-partitions; "+
		"is node %s running and registered (its server.log, kafka-broker-api-versions.sh --bootstrap-server %s lists live brokers)? "+
		"Controller: kafka-metadata-quorum.sh --bootstrap-server %s describe --status (KRaft), the controller log for the election of these partitions, "+
		"metric kafka.controller:type=KafkaController,name=OfflinePartitionsCount. "+
		"If the replica is gone for good: kafka-reassign-partitions.sh onto live brokers, or kafka-leader-election.sh --election-type unclean (data loss). "+
		"To survive one broker: replication.factor 3 with min.insync.replicas 2.",
		server, f.Topic, text.IDs(f.nodes, 0), server, server)
}

// Election is partitions of one topic briefly without a leader: shorter
// than MinDuration, as a normal leader election gives (info).
type Election struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
	DurationS  float64 `json:"duration_s"` // the longest stretch
	Ongoing    bool    `json:"ongoing"`    // some still leaderless at the end
	Error      string  `json:"error"`

	dur     time.Duration
	min     time.Duration
	dropped int64
}

// Summary implements detectors.Detail.
func (e *Election) Summary() string {
	what := "then got a leader: a normal leader election"
	if e.Ongoing {
		what = "and some were still without one at the end of the capture, too soon to call it a stall"
	}
	ids := text.IDs(e.Partitions, 0)
	return fmt.Sprintf("%s %s briefly without a leader (longest %s), %s", e.Topic,
		text.Word(len(e.Partitions), "partition "+ids+" was", "partitions "+ids+" were"), text.Duration(e.dur), what)
}

// Explanation implements detectors.Detail.
func (e *Election) Explanation() string {
	return fmt.Sprintf("Metadata responses answered these partitions without a leader for at most %s of capture time each "+
		"(the threshold for a stall is %s). A leader election after a broker stops or restarts takes this long.",
		text.Duration(e.dur), text.Duration(e.min)) + untracked(e.dropped)
}

// Next implements detectors.Detail.
func (e *Election) Next() string {
	return "Nothing, unless it repeats: then look for the broker restarts behind it (broker and controller logs, " +
		"kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs)."
}

// untracked says how many leaderless answers the rule could not follow.
func untracked(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s about partitions beyond the first %d tracked were not followed.)",
		text.Plural(n, "leaderless answer", "leaderless answers"), maxPartitions)
}
