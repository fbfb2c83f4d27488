package metadataquorumdown

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one outage of the metadata quorum. Its exported fields are
// the finding's "fields".
type Finding struct {
	// Fetchers are the nodes whose raft fetches failed.
	Fetchers []int32 `json:"fetchers" count:"fetchers,len"`
	// LeaderID is the leader the answers name (-1: none named), at
	// LeaderEpoch, at LeaderEndpoint.
	LeaderID       int32  `json:"leader_id"`
	LeaderEpoch    *int32 `json:"leader_epoch,omitempty"`
	LeaderEndpoint string `json:"leader_endpoint,omitempty"`
	// Answering are the controllers that answered raft fetches (with an
	// error); Down those that refused or ignored connection attempts.
	Answering []string `json:"answering"`
	Down      []string `json:"down"`
	Error     string   `json:"error,omitempty"`
	// Duration is from the first failed raft fetch to the last failure;
	// HeldS to the success that ended the outage if one did; Ongoing that
	// none did before the capture ended.
	Duration float64 `json:"duration_s"`
	HeldS    float64 `json:"held_s"`
	Ongoing  bool    `json:"ongoing"`

	// The counts besides: the raft fetches to the leader and those
	// unanswered, the connection attempts refused or unanswered to the
	// controllers down, the votes asked and granted.
	RaftFetches     int64 `count:"raft_fetches"`
	Unanswered      int64 `count:"raft_fetches_unanswered"`
	RefusedConnects int64 `count:"refused_connects"`
	Votes           int64 `count:"votes"`
	VotesGranted    int64 `count:"votes_granted"`

	Outage  *Outage
	Downs   []Down
	Held    time.Duration
	Healed  bool
	LeaderN string // "node 1001 (10.77.0.11:9093)"
}

func finding(p *detectors.Pass, o *Outage, open bool, downs []Down) detectors.Finding {
	held, healed := o.held()
	if open {
		held, healed = p.End.Sub(o.First), false
	}
	f := &Finding{
		LeaderID: o.leader, LeaderEndpoint: o.leaderEP, Answering: o.answering.Strings(), Down: []string{},
		Duration: text.Seconds(o.last.Sub(o.First)), HeldS: text.Seconds(held), Ongoing: open,
		RaftFetches: o.Fetches, Unanswered: o.Unanswered, Votes: o.Votes, VotesGranted: o.Granted,
		Outage: o, Downs: downs, Held: held, Healed: healed,
	}
	f.Fetchers = slices.Sorted(maps.Keys(o.fetchers))
	if o.leader >= 0 {
		f.LeaderEpoch = new(o.Epoch)
		f.LeaderN = fmt.Sprintf("node %d", o.leader)
		if o.leaderEP != "" {
			f.LeaderN += " (" + o.leaderEP + ")"
		}
	}
	for _, d := range downs {
		f.Down = append(f.Down, d.AddrPort.String())
	}
	if code, n := o.Codes.Top(); n > 0 {
		f.Error = detectors.ErrorName(code)
	}
	for _, d := range downs {
		f.RefusedConnects += d.Attempts
	}
	nodes := append([]int32(nil), f.Fetchers...)
	if o.leader >= 0 {
		nodes = append(nodes, o.leader)
	}
	nodes = peers.NodeIDs(p, []*peers.Servers{&o.answering}, nodes...)
	return detectors.Finding{
		Severity: detectors.Grade(held, open),
		First:    o.First,
		Last:     o.last,
		Nodes:    nodes,
		Evidence: o.ev.List(),
		Subject:  detectors.Subject{Nodes: nodes},
		Detail:   f,
	}
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("the KRaft metadata quorum has no working leader: no raft fetch succeeded for %s while %d nodes (%s) kept fetching",
		text.Duration(f.Held), len(f.Fetchers), text.IDs(f.Fetchers, 0))
	if f.LeaderID >= 0 {
		s += "; the answers name leader " + f.LeaderN
		if f.downHas(true) {
			s += ", which refuses connections"
		}
	}
	if len(f.Down) > 0 {
		s += fmt.Sprintf("; %d controller endpoint(s) down (%s), %d answering", len(f.Down), text.List(f.Down, 3), len(f.Answering))
	}
	return s + f.tail()
}

func (f *Finding) tail() string {
	switch {
	case f.Ongoing:
		return "; still down when the capture ended"
	case f.Healed:
		return "; a raft fetch succeeded again after " + text.Duration(f.Held)
	}
	return ""
}

// downHas reports whether an endpoint that was down is the leader's (or
// any, if leader is false).
func (f *Finding) downHas(leader bool) bool {
	return slices.ContainsFunc(f.Downs, func(d Down) bool { return d.Leader || !leader })
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	o := f.Outage
	var b strings.Builder
	fmt.Fprintf(&b, "From %s no raft fetch of __cluster_metadata succeeded from any node for %s: %d raft fetches from %d nodes (%s) failed (%s",
		text.Clock(o.First), text.Duration(f.Held), o.Fetches, len(f.Fetchers), text.IDs(f.Fetchers, 0), strings.Join(o.Codes.Parts(), ", "))
	if o.Unanswered > 0 {
		fmt.Fprintf(&b, ", no answer x%d", o.Unanswered)
	}
	b.WriteString("). ")
	if f.LeaderID >= 0 {
		fmt.Fprintf(&b, "The controllers that answered (%s) name %s as leader at epoch %d", strings.Join(f.Answering, ", "), f.LeaderN, o.Epoch)
		if f.downHas(true) {
			b.WriteString(", and it refuses or ignores connections: the leader is gone and no new one has been elected")
		}
		b.WriteString(". ")
	}
	if len(f.Downs) > 0 {
		var parts []string
		for _, d := range f.Downs {
			parts = append(parts, fmt.Sprintf("%s (%s)", d.AddrPort, text.Plural(d.Attempts, "attempt", "attempts")))
		}
		fmt.Fprintf(&b, "Connection attempts to %d controller endpoint(s) were refused or never answered meanwhile: %s; %d answered raft fetches. ",
			len(f.Downs), strings.Join(parts, ", "), len(f.Answering))
		if len(f.Answering) <= len(f.Downs) {
			b.WriteString("A quorum needs a majority of the voters: with as many controllers down as answering, or more, none can be elected. ")
		}
	}
	if o.Votes > 0 {
		fmt.Fprintf(&b, "%d Vote requests were answered meanwhile, %d granted. ", o.Votes, o.Granted)
	}
	b.WriteString("While the quorum has no leader nothing that needs the controller happens: no partition leader is elected for a " +
		"broker lost meanwhile (clients' Metadata keeps naming it and their connections to it are refused), no ISR shrinks (acks=all " +
		"produce waits for a replica that is gone until its request times out), no topic is created, no broker registers, is " +
		"fenced or unfenced. Brokers keep serving what they led with what they knew.")
	switch {
	case f.Ongoing:
		fmt.Fprintf(&b, " It was still down when the capture ended, %s after the first failed raft fetch.", text.Duration(f.Held))
	case f.Healed:
		fmt.Fprintf(&b, " A raft fetch succeeded again %s after the first failed one.", text.Duration(f.Held))
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	at := "<controller>"
	if len(f.Answering) > 0 {
		at = f.Answering[0]
	}
	return fmt.Sprintf("kafka-metadata-quorum.sh --bootstrap-controller %s describe --status (LeaderId, CurrentVoters) and describe "+
		"--replication; bring back the controllers that are down (%s): their process, host and network path to the others; their "+
		"logs for the election (Vote, 'Completed transition to'). Once a leader is elected, check leaderless partitions "+
		"(kafka-topics.sh --describe --unavailable-partitions) and under-replicated ones.", at, text.Or(text.List(f.Down, 3), "see the connection findings"))
}
