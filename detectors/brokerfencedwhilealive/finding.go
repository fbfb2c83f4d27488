package brokerfencedwhilealive

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one broker's heartbeats. Its exported fields are the
// finding's "fields".
type Finding struct {
	Broker      int32    `json:"broker"`
	ClientIDs   []string `json:"client_ids"`
	Clients     []string `json:"clients"`
	Controllers []string `json:"controllers"`
	Heartbeats  int64    `json:"heartbeats" count:"heartbeats"`
	// FencedResponses counts answers with isFenced to a broker that did
	// not ask for it, after it had been unfenced; FencedSeconds is the
	// longest such episode, from its first fenced answer to the next
	// unfenced one (or the last, StillFenced).
	FencedResponses int64   `json:"fenced_responses" count:"fenced_responses"`
	FencedEpisodes  int     `json:"fenced_episodes"`
	FencedSeconds   float64 `json:"fenced_s"`
	StillFenced     bool    `json:"still_fenced"`
	// StartupFencedSeconds is how long it was kept fenced since the
	// capture began, asking to be unfenced.
	StartupFencedSeconds float64  `json:"startup_fenced_s,omitempty"`
	UnaskedShutdowns     int64    `json:"unasked_shutdowns" count:"unasked_shutdowns"`
	MaxRoundTripMs       float64  `json:"max_round_trip_ms"`
	MaxGapMs             float64  `json:"max_gap_ms"`
	SlowRoundTrips       int64    `json:"slow_round_trips" count:"slow_round_trips"`
	LongGaps             int64    `json:"long_gaps" count:"long_gaps"`
	TimedOut             int64    `json:"timed_out" count:"timed_out"`
	SessionTimeoutMs     float64  `json:"session_timeout_ms"`
	Errors               []string `json:"errors,omitempty"`
	KnownIssue           string   `json:"known_issue"`

	Verdict *Verdict
	Near    time.Duration
	Params  Params
	Dropped int64
}

func (r *rule) finding(p *detectors.Pass, v *Verdict) detectors.Finding {
	b := v.Broker
	f := &Finding{
		Broker: b.id, ClientIDs: text.SortedKeys(b.clientIDs), Clients: b.conns.Clients(), Controllers: b.conns.ServerLabels(p.Nodes),
		Heartbeats: b.heartbeats, FencedResponses: b.fenced, FencedEpisodes: b.episodes,
		FencedSeconds: text.Seconds(v.Fenced.length()), StillFenced: v.ongoing, UnaskedShutdowns: b.Shutdowns,
		MaxRoundTripMs: text.Millis(b.Slowest.Wait), MaxGapMs: text.Millis(b.Widest.Wait), SlowRoundTrips: b.Slow, LongGaps: b.Gaps,
		TimedOut: b.Timeout, SessionTimeoutMs: text.Millis(r.p.SessionTimeout), Errors: b.codes.Parts(), KnownIssue: "KAFKA-15019",
		Verdict: v, Near: r.near, Params: r.p, Dropped: r.dropped,
	}
	if v.Startup {
		f.StartupFencedSeconds = text.Seconds(b.Startup.length())
	}
	var ev []detectors.Evidence
	add := func(pt Point, what string) {
		if !pt.set() || detectors.HasPacket(ev, pt.Evidence.File, pt.Evidence.Packet) {
			return
		}
		e := pt.Evidence
		e.What = what
		ev = append(ev, e)
	}
	if v.Fenced.N > 0 {
		add(v.Fenced.First, "BrokerHeartbeat response: "+describe(v.Fenced.First.Answer)+" (fenced while alive)")
		add(v.Fenced.Last, "BrokerHeartbeat response: "+describe(v.Fenced.Last.Answer))
		add(v.Fenced.End, "BrokerHeartbeat response: "+describe(v.Fenced.End.Answer)+" (unfenced again)")
	}
	if v.Startup {
		add(b.Startup.First, "BrokerHeartbeat response: "+describe(b.Startup.First.Answer)+" (fenced since the capture began)")
	}
	add(b.shutdown, "BrokerHeartbeat response: "+describe(b.shutdown.Answer)+" (not asked for)")
	if b.Slowest.unanswered {
		add(b.Slowest, "BrokerHeartbeat still unanswered at the end, "+text.Duration(b.Slowest.Wait)+" after it was sent")
	} else {
		add(b.Slowest, "BrokerHeartbeat response "+text.Duration(b.Slowest.Wait)+" after its request")
	}
	add(b.Widest, fmt.Sprintf("BrokerHeartbeat request %s after the previous one (packet %d)", text.Duration(b.Widest.Wait), b.Widest.prev))
	detectors.SortEvidence(ev)
	ids := tally.IDs{}
	ids.Add(b.id)
	for _, id := range b.conns.Nodes(p.Nodes) {
		ids.Add(id)
	}
	first, last := b.first, b.last
	if v.Slow && !b.firstSlow.IsZero() {
		first, last = b.firstSlow, b.lastSlow
	}
	if v.Fenced.N > 0 {
		first, last = v.Fenced.First.At, v.Fenced.Last.At
		if v.Fenced.End.set() {
			last = v.Fenced.End.At
		}
	}
	return detectors.Finding{
		Severity: v.severity,
		First:    first,
		Last:     last,
		Conns:    b.conns.IDs(),
		Nodes:    ids.Sorted(),
		Evidence: ev,
		Subject: detectors.Subject{ClientIDs: f.ClientIDs, Clients: b.conns.ClientAddrs(), Servers: b.conns.ServerAddrs(),
			Nodes: ids.Sorted()},
		Detail: f,
	}
}

// describe is an answer as the evidence shows it.
func describe(a Answer) string {
	parts := []string{"isFenced " + strconv.FormatBool(a.fenced), "isCaughtUp " + strconv.FormatBool(a.CaughtUp)}
	if a.shutdown {
		parts = append(parts, "shouldShutDown")
	}
	asked := "wantFence " + strconv.FormatBool(a.wantFence)
	if a.wantShutdown {
		asked += ", wantShutDown"
	}
	return strings.Join(parts, ", ") + " (request: " + asked + ")"
}

// timing is the round trips and gaps in a few words.
func (f *Finding) timing() string {
	s := fmt.Sprintf("round trips up to %s, gaps up to %s (session timeout %s)", text.Duration(f.Verdict.Broker.Slowest.Wait),
		text.Duration(f.Verdict.Broker.Widest.Wait), text.Duration(f.Params.SessionTimeout))
	if f.TimedOut > 0 {
		s += fmt.Sprintf(", %s timed out by the controller", text.Plural(f.TimedOut, "heartbeat", "heartbeats"))
	}
	return s
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	v := f.Verdict
	switch {
	case v.Fenced.N > 0:
		s := fmt.Sprintf("broker %d fenced by the controller while alive: %s with isFenced over %s while it kept "+
			"heartbeating", f.Broker, text.Plural(v.Fenced.N, "heartbeat answered", "heartbeats answered"), text.Duration(v.Fenced.length()))
		if f.StillFenced {
			s += ", still fenced at the end"
		} else {
			s += ", then unfenced"
		}
		if f.FencedEpisodes > 1 {
			s += fmt.Sprintf(" (%d times)", f.FencedEpisodes)
		}
		return s + "; " + f.timing()
	case f.UnaskedShutdowns > 0:
		return fmt.Sprintf("broker %d told to shut down by the controller (shouldShutDown) without asking, %s; %s",
			f.Broker, text.Plural(f.UnaskedShutdowns, "time", "times"), f.timing())
	case v.Silent:
		return fmt.Sprintf("broker %d sent no heartbeat for %s, past the session timeout, with no heartbeat of its own waiting: it had "+
			"no controller to send to (see metadata-quorum-down), stopped, or was cut off; %s", f.Broker, text.Duration(v.Broker.Widest.Wait), f.timing())
	case v.Expired:
		return fmt.Sprintf("broker %d's session expired: two of its heartbeats %s apart, past the session timeout, so the controller "+
			"fenced it though no answer says so; %s", f.Broker, text.Duration(v.Broker.Widest.Wait), f.timing())
	case v.Slow:
		return fmt.Sprintf("broker %d's heartbeats come close to the session timeout: %s", f.Broker, f.timing())
	}
	return fmt.Sprintf("broker %d kept fenced for %s since the capture began while it asked to be unfenced", f.Broker,
		text.Duration(f.Verdict.Broker.Startup.length()))
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	v, b := f.Verdict, f.Verdict.Broker
	var s strings.Builder
	fmt.Fprintf(&s, "A KRaft broker sends BrokerHeartbeat to the active controller every broker.heartbeat.interval.ms (2 s by "+
		"default); the controller fences a broker whose heartbeat it has not processed for broker.session.timeout.ms (%s "+
		"assumed): the broker loses its leaderships and leaves every ISR, and clients get NOT_LEADER_OR_FOLLOWER until they "+
		"follow the new leaders. Broker %d sent %s to %s.", text.Duration(f.Params.SessionTimeout), f.Broker,
		text.Plural(f.Heartbeats, "heartbeat", "heartbeats"), text.List(f.Controllers, 3))
	if v.Fenced.N > 0 {
		fmt.Fprintf(&s, " After an answer had found it unfenced, %s answered isFenced from %s (packet %d) while the broker went "+
			"on heartbeating without asking to be fenced (wantFence false): the controller fenced a live broker.",
			text.Plural(v.Fenced.N, "heartbeat was", "heartbeats were"), text.Clock(v.Fenced.First.At), v.Fenced.First.Evidence.Packet)
		if v.Fenced.End.set() {
			fmt.Fprintf(&s, " It was unfenced at %s (packet %d), %s later; its partitions do not move back until a preferred "+
				"leader election.", text.Clock(v.Fenced.End.At), v.Fenced.End.Evidence.Packet, text.Duration(v.Fenced.length()))
		} else {
			s.WriteString(" It was still fenced at its last answer.")
		}
	}
	if b.Shutdowns > 0 {
		fmt.Fprintf(&s, " %s answered shouldShutDown though the heartbeat did not ask to shut down (wantShutDown false): the "+
			"broker stops.", text.Plural(b.Shutdowns, "heartbeat was", "heartbeats were"))
	}
	if v.Silent && v.Fenced.N == 0 {
		fmt.Fprintf(&s, " For %s broker %d sent no heartbeat, longer than the session timeout, and none of its heartbeats had "+
			"waited long: the broker itself stopped sending. A KRaft broker sends heartbeats only to the active controller: with "+
			"none (the controller quorum without a leader) it sends none, and nobody can fence it; otherwise the broker paused "+
			"(GC, a stopped process) or its network was cut (its packets do not reach the capture), and the controller fenced it.", text.Duration(b.Widest.Wait), f.Broker)
	} else if v.Expired && v.Fenced.N == 0 {
		fmt.Fprintf(&s, " For %s the controller got no heartbeat of broker %d, longer than the session timeout: it fenced "+
			"the broker then, though no answer in the capture says isFenced (a controller unfences a caught-up broker at its next "+
			"heartbeat, Apache Kafka 4.1.1 at once), and its partitions' leadership moved meanwhile.",
			text.Duration(b.Widest.Wait), f.Broker)
	}
	if v.Slow {
		fmt.Fprintf(&s, " Its heartbeats came close to the timeout: the slowest answer took %s, the widest gap between two "+
			"heartbeats was %s, against %s (%s of the session timeout, the time a broker's own heartbeat request waits "+
			"before it gives up, KAFKA-14392): %d round trips and %d gaps that long.", text.Duration(b.Slowest.Wait),
			text.Duration(b.Widest.Wait), text.Duration(f.Near), strconv.FormatFloat(f.Params.Near, 'f', -1, 64), b.Slow, b.Gaps)
		if b.Timeout > 0 {
			fmt.Fprintf(&s, " The controller answered %s REQUEST_TIMED_OUT: it could not process them in time.",
				text.Plural(b.Timeout, "heartbeat", "heartbeats"))
		}
		s.WriteString(" A controller that processes heartbeats late, overloaded (KAFKA-15019) or blocked (KAFKA-17793), fences brokers that are alive.")
	}
	if v.Startup {
		fmt.Fprintf(&s, " From the capture's start it was kept fenced for %s although it asked to be unfenced: a broker starting "+
			"up and catching up with the metadata log (isCaughtUp %v at the last of those answers), or fenced before the capture began.",
			text.Duration(b.Startup.length()), b.Startup.Last.Answer.CaughtUp)
	}
	if len(f.Errors) > 0 {
		fmt.Fprintf(&s, " Errors: %s.", strings.Join(f.Errors, ", "))
	}
	if f.Dropped > 0 {
		fmt.Fprintf(&s, " (%d heartbeats of brokers beyond the %d followed were not examined.)", f.Dropped, maxBrokers)
	}
	return s.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return fmt.Sprintf("kafka-metadata-quorum.sh --bootstrap-controller <controller> describe --status (and --replication) "+
		"shows the active controller and, per node, when it last fetched and caught up. On the controller, kafka.controller:type=KafkaController,name=FencedBrokerCount and "+
		"ActiveBrokerCount, kafka.controller:type=KafkaController,name=TimedOutBrokerHeartbeatCount (KIP-938), and "+
		"kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs and EventQueueProcessingTimeMs show heartbeats "+
		"waiting in its queue; look for its GC pauses and for what floods it (partition reassignments, many brokers). The "+
		"broker's log says \"fenced\" with the reason. broker.session.timeout.ms and broker.heartbeat.interval.ms set the "+
		"margins; KAFKA-15019 (timed-out heartbeats still count as contact) and KAFKA-19294 (heartbeat RPC timeouts) are "+
		"fixed in later releases: check broker %d's and the controllers' versions.", f.Broker)
}
