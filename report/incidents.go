package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
)

// Incident is findings at warning or above that share a cause, grouped:
// the cause first, then the findings it explains (its facets), in the
// report's order. A finding no other explains and that explains none is
// an incident of its own. Informational findings are in none.
type Incident struct {
	// Severity is the highest of its findings'.
	Severity detectors.Severity `json:"severity"`
	// Cause is the index in findings[] of the finding taken for the
	// cause; Findings are the indexes of all of them, the cause first.
	Cause    int   `json:"cause"`
	Findings []int `json:"findings"`
	// Detector is the cause's rule.
	Detector string    `json:"detector"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	// Story is one paragraph: the cause, then what followed from it.
	Story string `json:"story"`
}

// relation is one line of the table of causes: findings of rule Effect
// (of shape Shape, if set: the not-leader-loop's "shape" field; or,
// with CauseShape, the cause's shape) follow from findings of rule Cause
// about the same subject at the same time. Why says in a few words how.
type relation struct {
	Cause, CauseShape, Effect, Shape string
	Why                              string
}

// relations is the table of which rules can be cause and which effect.
// The order of causes in it is their rank: when an incident holds several
// findings that could be its cause, the one whose rule comes first is.
var relations = []relation{
	// A KRaft quorum without a leader: nothing can be committed, brokers
	// lose their controller, raft fetches are refused everywhere.
	{Cause: "metadata-quorum-down", Effect: "connection-refused", Why: "connections to its nodes were refused"},
	{Cause: "metadata-quorum-down", Effect: "reconnect-storm", Why: "nodes and clients reconnected in storms"},
	{Cause: "metadata-quorum-down", Effect: "not-leader-loop", Why: "raft fetches were answered NOT_LEADER_OR_FOLLOWER"},
	{Cause: "metadata-quorum-down", Effect: "stalled-fetch", Why: "replicas of the metadata log made no progress"},
	{Cause: "metadata-quorum-down", Effect: "unanswered-requests", Why: "requests waiting on it went unanswered"},
	{Cause: "metadata-quorum-down", Effect: "slow-responses", Why: "requests waiting on it were answered late"},
	{Cause: "metadata-quorum-down", Effect: "broker-fenced-while-alive", Why: "brokers without a controller to heartbeat to were fenced while alive"},
	{Cause: "metadata-quorum-down", Effect: "liveness-without-replication", Why: "brokers stayed alive by heartbeat without replicating"},
	// Several nodes at one advertised endpoint: whoever is sent there for
	// one of them reaches another, which refuses.
	// (The rule itself grades by these refusals: listenerconflict/felt.go.)
	{Cause: "advertised-listener-conflict", Effect: "not-leader-loop", Shape: "leader-endpoint-shared", Why: "clients sent to the shared endpoint were refused NOT_LEADER_OR_FOLLOWER"},
	{Cause: "advertised-listener-conflict", Effect: "connection-refused", Why: "connections to the shared endpoint were refused"},
	{Cause: "advertised-listener-conflict", Effect: "error-storm", Why: "clients at the shared endpoint kept getting errors"},
	// Partitions without a leader: clients refresh metadata in bursts
	// and are refused by the old leader.
	{Cause: "leader-election-stall", Effect: "metadata-storm", Why: "clients asked for metadata in bursts while no leader was named"},
	{Cause: "leader-election-stall", Effect: "not-leader-loop", Why: "requests were refused NOT_LEADER_OR_FOLLOWER"},
	{Cause: "leader-election-stall", Effect: "stalled-fetch", Why: "fetches made no progress"},
	// A client refused by the broker it is sent to: its fetches stall,
	// a broker's replication fails while its heartbeats pass.
	{Cause: "not-leader-loop", Effect: "stalled-fetch", Why: "the refused fetches made no progress"},
	{Cause: "not-leader-loop", Effect: "liveness-without-replication", Why: "a broker stayed alive by heartbeat without replicating"},
	{Cause: "not-leader-loop", CauseShape: "leader-unreachable", Effect: "connection-refused", Why: "connections to the leader failed"},
	{Cause: "not-leader-loop", CauseShape: "leader-unreachable", Effect: "unanswered-requests", Why: "requests to the leader went unanswered"},
}

// incidentsOf is r's incidents, grouped here when r was built without
// them (a Report made by hand rather than by Build).
func incidentsOf(r *Report) []Incident {
	if r.Incidents == nil {
		return Incidents(r.Findings)
	}
	return r.Incidents
}

// incidentSlack is how far apart in time two findings may be and still
// be one incident: an effect can trail its cause by a broker's session
// timeout (broker.session.timeout.ms, 9 s by default: a fence comes that
// long after the heartbeats stop) and a retry's backoff.
const incidentSlack = 15 * time.Second

// rank is a rule's place among causes (lower first), len(relations) for
// a rule that is no cause.
func rank(rule string) int {
	if i := slices.IndexFunc(relations, func(r relation) bool { return r.Cause == rule }); i >= 0 {
		return i
	}
	return len(relations)
}

func shape(f *detectors.Finding) string {
	s, _ := f.Fields["shape"].(string)
	return s
}

// related returns the relation by which a explains b, if one does.
func related(a, b *detectors.Finding) (relation, bool) {
	for _, r := range relations {
		if r.Cause == a.Detector && r.Effect == b.Detector &&
			(r.Shape == "" || r.Shape == shape(b)) && (r.CauseShape == "" || r.CauseShape == shape(a)) &&
			sameSubject(a, b) && sameTime(a, b) {
			return r, true
		}
	}
	return relation{}, false
}

// sameTime reports whether the findings' spans overlap, within
// incidentSlack.
func sameTime(a, b *detectors.Finding) bool {
	if a.First.IsZero() || b.First.IsZero() {
		return true
	}
	return !a.First.After(b.Last.Add(incidentSlack)) && !b.First.After(a.Last.Add(incidentSlack))
}

// sameSubject reports whether the findings share a node, a server, a
// partition, a client id or a connection.
func sameSubject(a, b *detectors.Finding) bool {
	return shares(nodesOf(a), nodesOf(b)) || shares(a.Subject.Servers, b.Subject.Servers) ||
		shares(a.Subject.Partitions, b.Subject.Partitions) || shares(a.Subject.ClientIDs, b.Subject.ClientIDs) ||
		shares(a.Conns, b.Conns)
}

func nodesOf(f *detectors.Finding) []int32 {
	return append(slices.Clip(f.Nodes), f.Subject.Nodes...)
}

func shares[T comparable](a, b []T) bool {
	return slices.ContainsFunc(a, func(x T) bool { return slices.Contains(b, x) })
}

// Incidents groups the findings at warning or above (fs in the report's
// order) into incidents: two findings are in one when a line of the table
// of causes (relations) relates their rules, they share a subject and
// their times overlap; the groups are closed under that. Incidents come
// most severe first, then in the order of their first finding.
func Incidents(fs []detectors.Finding) []Incident {
	var idx []int
	for i := range fs {
		if fs[i].Severity >= detectors.Warning {
			idx = append(idx, i)
		}
	}
	parent := make(map[int]int, len(idx))
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for _, i := range idx {
		parent[i] = i
	}
	for x, i := range idx {
		for _, j := range idx[x+1:] {
			_, ij := related(&fs[i], &fs[j])
			_, ji := related(&fs[j], &fs[i])
			if ij || ji {
				parent[find(i)] = find(j)
			}
		}
	}
	groups := map[int][]int{}
	var roots []int
	for _, i := range idx {
		r := find(i)
		if groups[r] == nil {
			roots = append(roots, r)
		}
		groups[r] = append(groups[r], i)
	}
	out := make([]Incident, 0, len(roots))
	for _, r := range roots {
		out = append(out, incidentOf(fs, groups[r]))
	}
	slices.SortStableFunc(out, func(a, b Incident) int {
		return cmp.Or(cmp.Compare(b.Severity, a.Severity), slices.Min(a.Findings)-slices.Min(b.Findings))
	})
	return out
}

// incidentOf makes the incident of the findings at members (in order).
// Its cause is the finding that explains the others best: one no other
// member explains, of the rule ranked first among causes, explaining the
// most members, the most severe, the first.
func incidentOf(fs []detectors.Finding, members []int) Incident {
	type score struct {
		effect   bool
		rank     int
		explains int
		severity detectors.Severity
		index    int
	}
	scoreOf := func(i int) score {
		s := score{rank: rank(fs[i].Detector), severity: fs[i].Severity, index: i}
		for _, j := range members {
			if j == i {
				continue
			}
			if _, ok := related(&fs[j], &fs[i]); ok {
				s.effect = true
			}
			if _, ok := related(&fs[i], &fs[j]); ok {
				s.explains++
			}
		}
		return s
	}
	better := func(a, b score) bool {
		switch {
		case a.effect != b.effect:
			return !a.effect
		case a.rank != b.rank:
			return a.rank < b.rank
		case a.explains != b.explains:
			return a.explains > b.explains
		case a.severity != b.severity:
			return a.severity > b.severity
		}
		return a.index < b.index
	}
	cause, best := members[0], scoreOf(members[0])
	for _, i := range members[1:] {
		if s := scoreOf(i); better(s, best) {
			cause, best = i, s
		}
	}
	in := Incident{Cause: cause, Findings: []int{cause}, Detector: fs[cause].Detector}
	for _, i := range members {
		if i != cause {
			in.Findings = append(in.Findings, i)
		}
		f := &fs[i]
		in.Severity = max(in.Severity, f.Severity)
		if !f.First.IsZero() && (in.First.IsZero() || f.First.Before(in.First)) {
			in.First = f.First
		}
		if f.Last.After(in.Last) {
			in.Last = f.Last
		}
	}
	in.Story = story(fs, in)
	return in
}

// story tells an incident in one paragraph: the cause's summary, then
// what followed from it, by rule, in the words of the table of causes.
func story(fs []detectors.Finding, in Incident) string {
	c := &fs[in.Cause]
	s := strings.TrimRight(c.Summary, ". ")
	if len(in.Findings) == 1 {
		return s + "."
	}
	// Each effect's reason: its relation to the cause, else to another
	// member that explains it.
	type part struct {
		why   string
		rules []string
		n     int
	}
	var parts []*part
	for _, i := range in.Findings[1:] {
		r, ok := related(c, &fs[i])
		for _, j := range in.Findings {
			if ok {
				break
			}
			if j != i {
				r, ok = related(&fs[j], &fs[i])
			}
		}
		why := "it concerns the same nodes, servers or partitions at the same time"
		if ok {
			why = r.Why
		}
		k := slices.IndexFunc(parts, func(p *part) bool { return p.why == why })
		if k < 0 {
			parts = append(parts, &part{why: why})
			k = len(parts) - 1
		}
		p := parts[k]
		p.n++
		if !slices.Contains(p.rules, fs[i].Detector) {
			p.rules = append(p.rules, fs[i].Detector)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The cause, %s: %s. ", c.Detector, s)
	fmt.Fprintf(&b, "From it follow %d other finding%s", len(in.Findings)-1, plural(len(in.Findings)-1))
	if !in.First.IsZero() {
		fmt.Fprintf(&b, " within %s", in.Last.Sub(in.First).Round(time.Millisecond))
	}
	b.WriteString(": ")
	for k, p := range parts {
		if k > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s)", p.why, strings.Join(p.rules, ", "))
		if p.n > 1 {
			fmt.Fprintf(&b, " x%d", p.n)
		}
	}
	b.WriteString(".")
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
