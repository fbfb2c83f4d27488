package noprogress

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one client making no progress on one target. Its exported
// fields are the finding's "fields".
type Finding struct {
	// Kind is what made no progress: coordinator, join, commit or
	// produce.
	Kind     string `json:"kind"`
	ClientID string `json:"client_id"`
	Client   string `json:"client"`
	// Group is the group (or, for a transactional coordinator, the
	// transactional id) or, for produce, the topic; Partitions the
	// partitions with no record acknowledged.
	Group         string   `json:"group,omitempty"`
	TransactionID string   `json:"transactional_id,omitempty"`
	Topic         string   `json:"topic,omitempty"`
	Partitions    []int32  `json:"partitions,omitempty"`
	Servers       []string `json:"servers"`
	Errors        []string `json:"errors"`
	// Answers counts the failing answers in the stall; StalledS is its
	// length in seconds, to the capture's end when Ongoing; Healed: a
	// success ended it; AtStart: it was under way from the capture's
	// first seconds, so it may have begun before.
	Answers  int64   `json:"failing_answers" count:"failing_answers"`
	StalledS float64 `json:"stalled_s"`
	Ongoing  bool    `json:"ongoing"`
	Healed   bool    `json:"healed"`
	AtStart  bool    `json:"at_start,omitempty"`

	Params      Params
	host        netip.Addr
	From, To    time.Time
	Code        int16
	codes       map[string]bool
	conns       tally.Conns
	ev          []detectors.Evidence
	Episode     detectors.Episode
	ServerLabel []string

	// StalledMs is the stall's length in milliseconds, a count.
	StalledMs int64 `count:"stalled_ms"`
}

// add merges one key's stall (Produce partitions of one client and topic).
func (f *Finding) add(k key, e ended, ongoing bool) {
	if f.codes == nil {
		f.codes = map[string]bool{}
		f.host, f.ClientID, f.Client = k.client.Host, k.client.ID, k.client.Host.Unmap().String()
		f.Kind = [...]string{"coordinator", "join", "commit", "produce"}[k.kind]
		switch {
		case k.kind == produce:
			f.Topic = k.target
		case k.coord == 1:
			f.TransactionID = k.target
		default:
			f.Group = k.target
		}
		f.From, f.To, f.Code = e.from, e.to, e.code
		f.Healed, f.AtStart = true, true
	}
	if k.kind == produce {
		f.Partitions = append(f.Partitions, k.part)
	}
	if e.from.Before(f.From) {
		f.From = e.from
	}
	if e.to.After(f.To) {
		f.To = e.to
	}
	if e.asks > f.Answers {
		f.Code = e.code
	}
	f.Answers += e.asks
	f.Ongoing = f.Ongoing || ongoing
	f.Healed = f.Healed && e.healed
	f.AtStart = f.AtStart && e.atStart
	for _, c := range e.codes {
		f.codes[c] = true
	}
	for _, c := range e.conns.List() {
		f.conns.AddKey(c)
	}
	f.ev = append(f.ev, e.ev...)
}

func (f *Finding) finding(p *detectors.Pass) detectors.Finding {
	f.Errors = text.SortedKeys(f.codes)
	f.Servers = f.conns.Servers()
	f.ServerLabel = f.conns.ServerLabels(p.Nodes)
	d := f.To.Sub(f.From)
	f.StalledS = text.Seconds(d)
	f.Episode = detectors.Episode{Seen: d, Ongoing: f.Ongoing, Clients: 1}
	sort.Slice(f.ev, func(i, j int) bool { return f.ev[i].Packet < f.ev[j].Packet })
	if len(f.ev) > 8 {
		f.ev = append(f.ev[:4], f.ev[len(f.ev)-4:]...)
	}
	detectors.SortEvidence(f.ev)
	var parts []cluster.Partition
	for _, pt := range f.Partitions {
		parts = append(parts, cluster.Partition{Topic: f.Topic, Num: pt})
	}
	f.StalledMs = d.Milliseconds()
	return detectors.Finding{
		Severity: f.Episode.Grade(),
		First:    f.From,
		Last:     f.To,
		Conns:    f.conns.IDs(),
		Nodes:    f.conns.Nodes(p.Nodes),
		Evidence: f.ev,
		Subject: detectors.Subject{ClientIDs: []string{f.ClientID}, Clients: []netip.Addr{f.host}, Servers: f.conns.ServerAddrs(),
			Partitions: parts, Error: f.Code},
		Detail: f,
	}
}

func (f *Finding) who() string {
	if f.ClientID == "" {
		return "client " + f.Client + " (no client id)"
	}
	return fmt.Sprintf("client %q (%s)", f.ClientID, f.Client)
}

func (f *Finding) target() string {
	switch {
	case f.Kind == "produce":
		return text.List(partitions(f.Topic, f.Partitions), 4)
	case f.TransactionID != "":
		return fmt.Sprintf("transactional id %q", f.TransactionID)
	}
	return fmt.Sprintf("group %q", f.Group)
}

func partitions(topic string, ps []int32) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = fmt.Sprintf("%s-%d", topic, p)
	}
	return out
}

// what says what made no progress.
func (f *Finding) what() string {
	switch f.Kind {
	case "coordinator":
		return "found no coordinator for " + f.target()
	case "join":
		return "joined no generation of " + f.target()
	case "commit":
		return "had no offset commit accepted for " + f.target()
	}
	return "had no record acknowledged on " + f.target()
}

func (f *Finding) apis() string {
	switch f.Kind {
	case "coordinator":
		return "FindCoordinator"
	case "join":
		return "JoinGroup/SyncGroup/ConsumerGroupHeartbeat"
	case "commit":
		return "OffsetCommit"
	}
	return "Produce"
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("%s %s for %s: %s %s", f.who(), f.what(), text.Duration(f.Episode.Seen),
		text.Plural(f.Answers, f.apis()+" answer", f.apis()+" answers"), strings.Join(f.Errors, ", "))
	switch {
	case f.Ongoing:
		s += "; " + f.Episode.Felt()
	case f.Healed:
		s += "; then made progress"
	default:
		s += "; then stopped asking"
	}
	if f.AtStart {
		s += " (already stalled when the capture began)"
	}
	return s
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var b strings.Builder
	fmt.Fprintf(&b, "From %s to %s %s %s: it kept asking (%d failing %s answers from %s, %s) and got no success in between",
		text.Clock(f.From), text.Clock(f.To), f.who(), f.what(), f.Answers, f.apis(), text.List(f.ServerLabel, 3),
		strings.Join(f.Errors, ", "))
	switch {
	case f.Ongoing:
		fmt.Fprintf(&b, "; it was still asking when the capture ended, so the stall lasted at least %s and how long it went on is unknown.", text.Duration(f.Episode.Seen))
	case f.Healed:
		b.WriteString("; then a request succeeded.")
	default:
		fmt.Fprintf(&b, "; then it stopped asking for %s or more (it gave up, or was stopped).", text.Duration(f.Params.MaxGap))
	}
	if f.AtStart {
		b.WriteString(" It was failing from the capture's first seconds, with no success before: it may have begun before the capture did.")
	}
	switch f.Kind {
	case "coordinator":
		b.WriteString(" A client finds its group's (or transactional id's) coordinator before anything else: the broker " +
			"leading the __consumer_offsets (or __transaction_state) partition the id hashes to. Until it is found the group " +
			"cannot join, fetch its committed offsets or commit: its consumers read nothing. COORDINATOR_NOT_AVAILABLE means " +
			"that partition has no leader (or the offsets topic does not exist yet); COORDINATOR_LOAD_IN_PROGRESS that its " +
			"new leader is still loading it, which takes long when the partition is large (compaction behind).")
	case "join":
		b.WriteString(" Until a member completes a join (SyncGroup, or a ConsumerGroupHeartbeat answered without error) " +
			"it holds no assignment and reads nothing.")
	case "commit":
		b.WriteString(" Offsets not committed are read again after the next rebalance or restart: the longer the stall, the " +
			"more duplicates.")
	default:
		b.WriteString(" Records not acknowledged wait in the producer's buffer: once delivery.timeout.ms (2 minutes by " +
			"default) passes they fail, and the application's sends block once the buffer is full.")
	}
	fmt.Fprintf(&b, " A stall is graded by its length, whatever the rate of errors (a client with a sane backoff asks "+
		"seldom): %s or more is a warning, %s or more (or %s and still stalled at the end) an error.",
		text.Duration(f.Params.MinStall), text.Duration(detectors.LongAfter), text.Duration(detectors.HealAfter))
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	filter := fmt.Sprintf("kfsniff -r <capture> --frames --errors --api %s", strings.Split(f.apis(), "/")[0])
	if f.ClientID != "" {
		filter += fmt.Sprintf(" --client-id %q", f.ClientID)
	}
	filter += " shows the answers. "
	switch f.Kind {
	case "coordinator":
		return filter + "kafka-topics.sh --describe --topic __consumer_offsets (or __transaction_state) shows whether the " +
			"coordinator's partition has a leader; the leader broker's log says how long loading took " +
			"(\"Finished loading offsets and group metadata\"). " + hint(f.Code)
	case "join":
		return filter + "kafka-consumer-groups.sh --describe --group " + f.Group + " --state shows the group's state; the " +
			"coordinator's log says why it refused the member. " + hint(f.Code)
	case "commit":
		return filter + "kafka-consumer-groups.sh --describe --group " + f.Group + " --offsets shows what was committed. " + hint(f.Code)
	}
	return filter + "kafka-topics.sh --describe --topic " + f.Topic + " shows the partitions' leaders and ISR; the " +
		"leader broker's log says why it refused the records. " + hint(f.Code)
}

func hint(code int16) string {
	switch code {
	case cluster.CoordinatorLoadInProgress, cluster.CoordinatorNotAvailable, cluster.NotCoordinator:
		return "Check the coordinator partition's leader and ISR and the broker's log for loading errors."
	case cluster.GroupAuthorizationFailed, cluster.TopicAuthorizationFailed, cluster.ClusterAuthorizationFailed,
		cluster.TransactionalIDAuthorizationFailed:
		return "The principal is not authorized: kafka-acls.sh --list --principal User:<name>."
	case cluster.RequestTimedOut:
		return "REQUEST_TIMED_OUT: the broker could not complete the request in time (replication, a slow disk)."
	case cluster.KafkaStorageError:
		return "KAFKA_STORAGE_ERROR: a log directory is offline on the broker."
	}
	return "Look " + decode.ErrorName(code) + " up in the Kafka protocol guide."
}
