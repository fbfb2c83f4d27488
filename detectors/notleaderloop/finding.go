package notleaderloop

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
	"github.com/kfsniff/kfsniff/detectors/internal/spell"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one client looping on one partition (or, merged, on several
// of a topic). Its exported fields are the finding's "fields".
type Finding struct {
	// The client and the partition (on a merged finding, the first).
	peers.Fields
	// Partitions are the partitions of a merged finding (Partition is
	// the first).
	Partitions []int32  `json:"partitions,omitempty"`
	Error      string   `json:"error"`
	Servers    []string `json:"servers"`
	// Duration is the span of the refusals, first request to last
	// answer; HeldS how long the client was held up (to the success that
	// ended the loop, if one followed promptly); Ongoing that it was
	// still refused when the capture ended.
	Duration float64 `json:"duration_s"`
	HeldS    float64 `json:"held_s"`
	Ongoing  bool    `json:"ongoing"`
	Rate     float64 `json:"rate_per_s"`
	// NotLeaderPerPartition are the not-leader answers of each of
	// Partitions, in their order (a merged finding).
	NotLeaderPerPartition []int64 `json:"not_leader_per_partition,omitempty"`
	Shape                 string  `json:"shape"`
	LeaderID              int32   `json:"leader_id"`
	// The leader's epoch, where it comes from ("response" or
	// "metadata") and its endpoint: when a leader is named.
	LeaderEpoch    *int32 `json:"leader_epoch,omitempty"`
	LeaderSource   string `json:"leader_source,omitempty"`
	LeaderEndpoint string `json:"leader_endpoint,omitempty"`
	// The fetch offset of a Fetch loop (and the first, if it moved); not
	// on a merged finding.
	FetchOffset      *int64 `json:"fetch_offset,omitempty"`
	FirstFetchOffset *int64 `json:"first_fetch_offset,omitempty"`
	// The replica a fetcher declares itself to be.
	ReplicaID    *int32 `json:"replica_id,omitempty"`
	ReplicaEpoch *int64 `json:"replica_epoch,omitempty"`
	// The leader the client's Metadata names, and the server it came
	// from.
	MetadataLeaderID *int32 `json:"metadata_leader_id,omitempty"`
	MetadataServer   string `json:"metadata_server,omitempty"`
	KnownIssue       string `json:"known_issue,omitempty"`

	// The counts, summed over Partitions on a merged finding: the
	// requests and the not-leader answers; those to the leader, when
	// one is named; where not zero, the answers FENCED_LEADER_EPOCH or
	// another error and the requests unanswered; the client's Metadata
	// refreshes, when its Metadata was seen; and, when the leader was
	// unreachable, the connections to it unanswered or refused and the
	// requests to it unanswered.
	Requests                   int64  `count:"requests"`
	NotLeaderResponses         int64  `count:"not_leader_responses"`
	RequestsToLeader           *int64 `count:"requests_to_leader"`
	FencedLeaderEpoch          int64  `count:"fenced_leader_epoch,omitempty"`
	OtherErrors                int64  `count:"other_errors,omitempty"`
	Unanswered                 int64  `count:"unanswered,omitempty"`
	MetadataRefreshes          *int64 `count:"metadata_refreshes"`
	UnansweredConnectsToLeader *int64 `count:"unanswered_connects_to_leader"`
	RefusedConnectsToLeader    *int64 `count:"refused_connects_to_leader"`
	UnansweredRequestsToLeader *int64 `count:"unanswered_requests_to_leader"`

	prose
}

// prose is what the text says, as it stood when the finding was made: of
// the first partition of a merged finding.
type prose struct {
	Verdict                  Verdict
	Who, API, TopicPartition string
	Raft                     bool
	Span                     string
	RunRate                  float64
	RunRequests              int64
	NotLeader                int64
	Tried                    string // the servers tried, with their share
	NServers                 int
	Offset                   string
	Replica                  string
	AnswerLeader             int32 // the leader the answers name
	AnswerEpoch              int32
	MetaRefreshes            int64
	MetaFrom                 string // " from <server>" of the Metadata, if known
	ClientNode               int32
	Part                     int32   // the partition the text describes
	Merged                   []int32 // the partitions, when merged
	Held                     time.Duration
	Healed                   bool // a success ended the loop
	StillRefused             bool // still refused at the capture's end
	NoBackoff                bool // a burst: hundreds of answers in under 3 s
	// fromRate is the not-leader answers from the leader itself per
	// second over the run, the rate the summaries that count them give
	FromRate float64
}

// finding makes the finding of run e read as v; open if it was still
// refused when the capture ended, burst if it had burst-responses answers.
func finding(p *detectors.Pass, e *run, v Verdict, open, burst bool) detectors.Finding {
	c := e.key.C
	dur := e.duration()
	held, healed := e.held()
	errCode := cluster.NotLeaderOrFollower
	if e.fenced*2 > e.notLeader {
		errCode = cluster.FencedLeaderEpoch
	}
	f := &Finding{
		Fields: e.key.Fields(), Error: decode.ErrorName(errCode), Servers: e.servers.Strings(), Duration: text.Seconds(dur),
		HeldS: text.Seconds(held), Ongoing: open, Rate: text.Rate(e.requests, dur), Shape: v.Shape, LeaderID: v.Leader,
	}
	if v.Leader >= 0 {
		f.LeaderEpoch, f.LeaderSource, f.LeaderEndpoint = new(v.Epoch), v.Source, v.Endpoint
	}
	if e.hasOffset {
		f.FetchOffset = new(e.offset)
		if e.firstOffset != e.offset {
			f.FirstFetchOffset = new(e.firstOffset)
		}
	}
	if e.hasReplica {
		f.ReplicaID, f.ReplicaEpoch = new(e.replicaID), new(e.replicaEpoch)
	}
	if e.metaSeen {
		f.MetadataLeaderID = new(e.metaLeader)
		if e.metaServer.IsValid() {
			f.MetadataServer = e.metaServer.String()
		}
	}
	raft := strings.HasPrefix(c.ID, "raft-client-") && e.key.P.Topic == cluster.ClusterMetadataTopic
	if raft && v.Shape == ShapeHintIgnored {
		f.KnownIssue = "KAFKA-19354"
	}
	f.prose = prose{Verdict: v, Who: text.Or(c.ID, "client") + " (" + c.Host.String() + ")", API: decode.Name(e.api),
		TopicPartition: peers.Label(e.key.P), Raft: raft, Span: text.Duration(dur), RunRate: f.Rate, RunRequests: e.requests,
		NotLeader: e.notLeader, Tried: tried(p, e), NServers: e.servers.Len(), AnswerLeader: e.leader,
		AnswerEpoch: e.epoch, MetaRefreshes: e.metaEnd - e.metaStart, ClientNode: peers.NodeOf(p, e.fetcher, c.Host),
		Part: e.key.P.Num, Held: held, Healed: healed, StillRefused: open, NoBackoff: burst && held < detectors.FeltAfter,
		FromRate: text.Rate(v.FromLeader, dur)}
	if e.hasOffset {
		f.Offset = fmt.Sprintf(" at fetchOffset %d", e.offset)
		if e.firstOffset != e.offset {
			f.Offset = fmt.Sprintf(" at fetchOffset %d..%d", e.firstOffset, e.offset)
		}
	}
	if e.hasReplica {
		f.Replica = fmt.Sprintf(", replica %d epoch %d,", e.replicaID, e.replicaEpoch)
	}
	if e.metaServer.IsValid() {
		f.MetaFrom = " from " + p.Label(e.metaServer)
	}

	nodes := peers.NodeIDs(p, []*peers.Servers{&e.servers}, f.ClientNode, v.Leader)
	f.Requests, f.NotLeaderResponses = e.requests, e.notLeader
	f.FencedLeaderEpoch, f.OtherErrors, f.Unanswered = e.fenced, e.otherErrors, e.unanswered
	if v.Leader >= 0 {
		f.RequestsToLeader = new(v.toLeader)
	}
	if e.metaSeen {
		f.MetadataRefreshes = new(f.MetaRefreshes)
	}
	if v.Shape == ShapeUnreachable {
		f.UnansweredConnectsToLeader = new(v.Unreached.Connects)
		f.RefusedConnectsToLeader = new(v.Unreached.Refused)
		f.UnansweredRequestsToLeader = new(v.Unreached.Requests)
	}
	sev := detectors.Grade(held, open)
	if burst {
		sev = max(sev, detectors.Warning) // retrying without backoff: a misconfiguration
	}
	return detectors.Finding{
		Severity: sev,
		First:    e.first,
		Last:     e.last,
		Conns:    e.conns.IDs(),
		Nodes:    nodes,
		Evidence: e.ev.List(),
		Subject:  e.key.Subject(&e.servers, nodes, errCode),
		Detail:   f,
	}
}

// tried lists the servers a run's requests went to, with their share.
func tried(p *detectors.Pass, e *run) string {
	list := slices.Clone(e.servers.List())
	slices.SortFunc(list, func(a, b peers.Server) int {
		return cmp.Or(cmp.Compare(b.Requests, a.Requests), strings.Compare(a.Addr.String(), b.Addr.String()))
	})
	var out []string
	for _, s := range list {
		out = append(out, fmt.Sprintf("%d to %s", s.Requests, p.Label(s.Addr)))
	}
	if e.servers.Other > 0 {
		out = append(out, fmt.Sprintf("%d to other servers", e.servers.Other))
	}
	return strings.Join(out, ", ")
}

// leaderText names the leader: "node 3 (10.1.0.3:9092)".
func (f *Finding) leaderText() string {
	if f.Verdict.Leader < 0 {
		return ""
	}
	s := fmt.Sprintf("node %d", f.Verdict.Leader)
	if f.Verdict.Endpoint != "" {
		s += " (" + f.Verdict.Endpoint + ")"
	}
	return s
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	var s string
	switch f.Verdict.Shape {
	case ShapeHintIgnored:
		named := fmt.Sprintf("naming leader %s epoch %d", f.leaderText(), f.Verdict.Epoch)
		if f.Verdict.Source == "metadata" {
			named = fmt.Sprintf("while the client's Metadata names %s as leader (epoch %d)", f.leaderText(), f.Verdict.Epoch)
		}
		if f.Raft {
			s = fmt.Sprintf("%s loops %s of %s on %d non-leader controller(s): %d %s %s in %s, none sent to the leader (KAFKA-19354 observer fetch loop)",
				f.Who, f.API, f.TopicPartition, f.NServers, f.NotLeader, f.Error, named, f.Span)
		} else {
			s = fmt.Sprintf("%s keeps sending %s for %s to %d non-leader(s): %d %s %s in %s, none sent to the leader",
				f.Who, f.API, f.TopicPartition, f.NServers, f.NotLeader, f.Error, named, f.Span)
		}
	case ShapeUnreachable:
		s = fmt.Sprintf("%s cannot reach leader %s of %s: %s, while %d other server(s) answered %s naming it %d times in %s",
			f.Who, f.leaderText(), f.TopicPartition, f.Verdict.Unreached.text(), f.NServers, f.Error, f.NotLeader, f.Span)
	case ShapeShared:
		s = fmt.Sprintf("%s is sent to %s for %s, an endpoint nodes %s all advertise: the broker there answers %s, %d times in %s (%.1f/s)",
			f.Who, f.leaderText(), f.TopicPartition, text.IDs(f.Verdict.SharedWith, 0), f.Error, f.Verdict.FromLeader, f.Span, f.FromRate)
	case ShapeMetaSelf:
		s = fmt.Sprintf("metadata names broker %d as leader of %s but it answers %s: %s retried it %d times in %s (%.1f/s)",
			f.Verdict.Leader, f.TopicPartition, f.Error, f.Who, f.Verdict.FromLeader, f.Span, f.FromRate)
	case ShapeHintSelf:
		s = fmt.Sprintf("broker %d answers %s for %s while naming itself as leader (epoch %d): %s retried it %d times in %s (%.1f/s)",
			f.Verdict.Leader, f.Error, f.TopicPartition, f.Verdict.Epoch, f.Who, f.Verdict.FromLeader, f.Span, f.FromRate)
	default:
		s = fmt.Sprintf("%s got %d %s for %s in %s from %d server(s) with no success in between; nothing in the capture names the leader",
			f.Who, f.NotLeader, f.Error, f.TopicPartition, f.Span, f.NServers)
	}
	s += spell.Tail(f.StillRefused, f.Healed, f.Held, "refused", "a success", "refusal")
	if len(f.Merged) > 0 {
		s = fmt.Sprintf("%s [%d partitions: %s]", s, len(f.Merged), text.IDs(f.Merged, 8))
	}
	return s
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var b strings.Builder
	if len(f.Merged) > 0 {
		fmt.Fprintf(&b, "The same loop holds for %d partitions of %s (%s); counts are summed over them, and the text describes the first. ",
			len(f.Merged), f.Topic, text.IDs(f.Merged, 8))
	}
	switch f.Verdict.Shape {
	case ShapeHintIgnored:
		f.hintIgnored(&b)
	case ShapeUnreachable:
		f.unreachable(&b)
	case ShapeShared:
		fmt.Fprintf(&b, "%s%s sent %d %s requests for %s%s over %s (%.1f/s): %s. The leader, %s, is advertised at an endpoint "+
			"nodes %s all advertise, so requests meant for node %d reach whichever broker listens there, and %d answers from it were %s. "+
			"This is an advertised-listener conflict (see advertised-listener-conflict): a copied server.properties, or brokers behind "+
			"one address. The client cannot reach node %d at all until each broker advertises an endpoint of its own.",
			f.Who, f.Replica, f.RunRequests, f.API, f.TopicPartition, f.Offset, f.Span, f.RunRate, f.Tried, f.leaderText(), text.IDs(f.Verdict.SharedWith, 0),
			f.Verdict.Leader, f.Verdict.FromLeader, f.Error, f.Verdict.Leader)
	case ShapeMetaSelf, ShapeHintSelf:
		f.refuserNamed(&b)
	default:
		fmt.Fprintf(&b, "%s%s sent %d %s requests for %s%s over %s (%.1f/s), %s, and every answer was %s or another error, "+
			"never a success. The answers carry no leader hint (responses before KIP-951 do not) and no Metadata response in the "+
			"capture names a stable leader for the partition, so whether the client is being sent the right way cannot be told from "+
			"the wire; it has not reached a leader for %s.",
			f.Who, f.Replica, f.RunRequests, f.API, f.TopicPartition, f.Offset, f.Span, f.RunRate, f.Tried, f.Error, f.Span)
	}
	f.felt(&b)
	return b.String()
}

// felt says how long the client was held up, which grades the finding.
func (f *Finding) felt(b *strings.Builder) {
	switch {
	case f.StillRefused:
		fmt.Fprintf(b, " It was still refused when the capture ended, %s after its first refused request.", text.Duration(f.Held))
	case f.Healed:
		fmt.Fprintf(b, " A success ended the loop %s after the first refused request: that long the client was held up.", text.Duration(f.Held))
	default:
		fmt.Fprintf(b, " No success followed at once: the client was refused for %s.", text.Duration(f.Held))
	}
	if f.NoBackoff {
		fmt.Fprintf(b, " That is short, but %d refusals in it (%.0f/s) mean the client retries without backoff: a misconfiguration "+
			"that turns every leadership change into a request storm at the broker (KIP-580; kgo RetryBackoffFn, "+
			"the Java client's retry.backoff.ms and retry.backoff.max.ms).", f.NotLeader, f.RunRate)
	}
}

// hintIgnored explains a leader named and never followed.
func (f *Finding) hintIgnored(b *strings.Builder) {
	fmt.Fprintf(b, "%s%s sent %d %s requests for %s%s over %s (%.1f/s): %s. ",
		f.Who, f.Replica, f.RunRequests, f.API, f.TopicPartition, f.Offset, f.Span, f.RunRate, f.Tried)
	if f.Verdict.Source == "response" {
		fmt.Fprintf(b, "All %d answers were %s and named the same leader, %s, at epoch %d, ", f.NotLeader, f.Error, f.leaderText(), f.Verdict.Epoch)
	} else {
		fmt.Fprintf(b, "All %d answers were %s, and the Metadata the client got names %s as leader (epoch %d) throughout, ", f.NotLeader, f.Error, f.leaderText(), f.Verdict.Epoch)
	}
	if f.Verdict.Resolved {
		fmt.Fprintf(b, "yet not one request went to the leader. ")
	} else {
		fmt.Fprintf(b, "yet no request went to an address known to be the leader (the leader's endpoint %q could not be matched to captured addresses, so check that too). ", f.Verdict.Endpoint)
	}
	fmt.Fprintf(b, "The client does not act on the leader it is told about, so the partition never advances.")
	if f.Raft {
		fmt.Fprintf(b, " This is the pattern of KAFKA-19354: after a fetch timeout a KRaft observer (Kafka 3.9.x) keeps choosing "+
			"among the bootstrap controllers (pollFollowerAsObserver -> maybeSendFetchToAnyBootstrap), and a "+
			"NOT_LEADER_OR_FOLLOWER that names the leader it already knows, at the same epoch, changes no state, so the loop never ends.")
	}
}

// unreachable explains a leader the client tries and cannot reach.
func (f *Finding) unreachable(b *strings.Builder) {
	fmt.Fprintf(b, "%s%s sent %d %s requests for %s%s over %s (%.1f/s): %s. All %d answers were %s and named the leader, %s, at epoch %d. ",
		f.Who, f.Replica, f.RunRequests, f.API, f.TopicPartition, f.Offset, f.Span, f.RunRate, f.Tried, f.NotLeader, f.Error, f.leaderText(), f.Verdict.Epoch)
	fmt.Fprintf(b, "The client did try the leader: %s, from %s. ", f.Verdict.Unreached.text(), f.Client)
	fmt.Fprintf(b, "So the leader is not reachable from this host while other servers are: the leader process is down (refused "+
		"connections), or a network path is cut or filtered one way, a firewall, a listener the leader no longer serves, or a "+
		"leader too busy to accept connections. ")
	if f.Raft {
		fmt.Fprintf(b, "A KRaft observer that cannot reach the active controller asks the bootstrap controllers instead "+
			"(controller.quorum.bootstrap.servers), and they can only name the leader: Apache Kafka 4.1 does this by "+
			"design, so this is not the KAFKA-19354 bug, where the leader is reachable and never tried.")
	}
}

// text says what the client's unanswered attempts were.
func (u Unreached) text() string {
	var parts []string
	if u.Connects > 0 {
		parts = append(parts, fmt.Sprintf("%s never answered (%s)", text.Plural(u.Connects, "connection attempt", "connection attempts"),
			text.Plural(u.Syns, "SYN", "SYNs")))
	}
	if u.Refused > 0 {
		parts = append(parts, text.Plural(u.Refused, "connection attempt", "connection attempts")+" refused")
	}
	if u.Requests > 0 {
		parts = append(parts, text.Plural(u.Requests, "request", "requests")+" to it never answered")
	}
	return strings.Join(parts, " and ")
}

// refuserNamed explains a broker that refuses while named the leader.
func (f *Finding) refuserNamed(b *strings.Builder) {
	fmt.Fprintf(b, "%s%s sent %d %s requests for %s%s over %s (%.1f/s): %s. %d answers from %s itself were %s. ",
		f.Who, f.Replica, f.RunRequests, f.API, f.TopicPartition, f.Offset, f.Span, f.RunRate, f.Tried, f.Verdict.FromLeader, f.leaderText(), f.Error)
	if f.Verdict.Shape == ShapeMetaSelf {
		if n := f.MetaRefreshes; n > 0 {
			fmt.Fprintf(b, "Yet the Metadata the client refreshed %d times during the run (last%s) names that very broker, node %d, as leader with a stable leader id, so the client goes back to it every time. ", n, f.MetaFrom, f.Verdict.Leader)
		} else {
			fmt.Fprintf(b, "Yet the last Metadata the client got%s names that very broker, node %d, as leader, and the client retries it without refreshing. ", f.MetaFrom, f.Verdict.Leader)
		}
		switch {
		case f.AnswerLeader >= 0 && f.AnswerLeader != f.Verdict.Leader:
			fmt.Fprintf(b, "The answers themselves name node %d (epoch %d) as leader, which the client ignores. ", f.AnswerLeader, f.AnswerEpoch)
		case f.AnswerLeader == f.Verdict.Leader:
			fmt.Fprintf(b, "The answers themselves name node %d (epoch %d) as the leader too: the broker refuses and, in the same breath, points at itself. ", f.AnswerLeader, f.AnswerEpoch)
		}
	} else {
		fmt.Fprintf(b, "Each of those answers names node %d itself as the leader at epoch %d, so a client that follows the hint comes straight back. ", f.Verdict.Leader, f.Verdict.Epoch)
	}
	fmt.Fprintf(b, "The broker and the metadata disagree about leadership and the client cannot make progress until they agree.")
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	switch f.Verdict.Shape {
	case ShapeHintIgnored:
		if f.Raft {
			return fmt.Sprintf("Confirm the leader and this node's lag: kafka-metadata-quorum.sh --bootstrap-controller %s describe --status "+
				"and describe --replication (node %d's LogEndOffset and Lag). On node %d watch kafka.server:type=broker-metadata-metrics "+
				"last-applied-record-lag-ms (rising) and raft-metrics fetch-records-rate (0) and high-watermark (frozen). Restarting the "+
				"node clears the loop; the fix is the KAFKA-19354 patch (pollFollowerAsObserver always uses maybeSendFetchToBestNode): "+
				"upgrade or backport it.", text.Or(f.Verdict.Endpoint, f.leaderText()), f.ClientNode, f.ClientNode)
		}
		return fmt.Sprintf("Check which leader the cluster reports: kafka-topics.sh --bootstrap-server %s --describe --topic %s "+
			"(leader of partition %d). Then check the client: its version and whether it refreshes metadata on %s and honours "+
			"the KIP-951 leader hint; its logs for metadata refresh errors; whether it can reach %s at all (DNS of the advertised "+
			"listener, routing, firewall, a connection-refused finding).", text.Or(f.Verdict.Endpoint, "<broker>"), f.Topic,
			f.Part, f.Error, text.Or(f.Verdict.Endpoint, "the leader"))
	case ShapeShared:
		return fmt.Sprintf("Compare advertised.listeners of nodes %s (kafka-broker-api-versions.sh --bootstrap-server %s lists the "+
			"nodes with their endpoints; kafka-configs.sh --describe --entity-type brokers --entity-name <id>): each must advertise "+
			"an endpoint of its own that reaches it; restart the misconfigured broker with its own.", text.IDs(f.Verdict.SharedWith, 0), text.Or(f.Verdict.Endpoint, "<broker>"))
	case ShapeUnreachable:
		return fmt.Sprintf("Check the path from %s to %s: from that host, nc -vz %s (or kafka-metadata-quorum.sh --bootstrap-controller %s "+
			"describe --status); firewall and security group rules both ways, routes, and the leader's listener (listeners and "+
			"advertised.listeners, its log for accept errors). The report's Connection attempts list the unanswered "+
			"connection attempts.", f.Client, text.Or(f.Verdict.Endpoint, f.leaderText()), text.Or(strings.Replace(f.Verdict.Endpoint, ":", " ", 1), "<leader> <port>"),
			text.Or(f.Verdict.Endpoint, "<controller>"))
	case ShapeMetaSelf, ShapeHintSelf:
		return fmt.Sprintf("Compare what the cluster says with what broker %d believes: kafka-topics.sh --bootstrap-server %s --describe --topic %s "+
			"(leader, ISR, leader epoch of partition %d) against broker %d's server.log for the partition (become-leader/become-follower, "+
			"fenced or stale metadata) and its kafka.server:type=broker-metadata-metrics last-applied-record-lag-ms; "+
			"a broker serving stale Metadata (see metadata_server) has stuck metadata replication itself "+
			"(kafka-metadata-quorum.sh describe --replication; a liveness-without-replication finding). Restarting the stuck broker or "+
			"moving leadership (kafka-leader-election.sh) breaks the loop.", f.Verdict.Leader, text.Or(f.Verdict.Endpoint, "<broker>"), f.Topic,
			f.Part, f.Verdict.Leader)
	}
	return fmt.Sprintf("Capture the client's Metadata requests too (or run kafka-topics.sh --describe --topic %s) to see which broker "+
		"leads partition %d; check the client's logs for metadata refresh failures and whether the partition has a leader at all "+
		"(a leader-election-stall finding).", f.Topic, f.Part)
}

// answer is the evidence of one not-leader answer, formatted if it is
// listed.
type answer struct {
	packet        uint64
	file          int32
	corr          int32
	key, version  int16
	code          int16
	leader, epoch int32
	conn          *flows.ConnInfo
}

// Evidence implements detectors.Evidencer.
func (a answer) Evidence() detectors.Evidence {
	what := fmt.Sprintf("%s v%d corr %d to %s: %s", decode.Name(a.key), a.version, a.corr, peers.Addr(a.conn.Server), decode.ErrorName(a.code))
	if a.leader >= 0 {
		what += fmt.Sprintf(", leader %d epoch %d", a.leader, a.epoch)
	} else {
		what += ", no leader named"
	}
	return detectors.Evidence{File: int(a.file), Packet: a.packet, Conn: a.conn.ID, What: what}
}
