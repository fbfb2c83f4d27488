package legacy

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// electionStallSpec: partitions that Metadata keeps answering without a
// leader.
//
// A partition is leaderless in a Metadata response when its error is
// LEADER_NOT_AVAILABLE (5) or NOT_LEADER_OR_FOLLOWER (6), or its leader is
// -1 (whatever the error, e.g. LISTENER_NOT_FOUND). A response that names a
// leader (leader >= 0, another error or none) ends the leaderless stretch.
// A stretch is measured in capture time from the first to the last response
// saying so; at min-duration or longer it is an error. Shorter stretches (a
// leader election after a broker restart takes a few seconds) are one info
// finding per topic. Topic-level errors without partitions (auto-creation
// in progress) are not counted. State is kept only for partitions seen
// leaderless, at most maxStallPartitions of them.
func electionStallSpec() Spec {
	return Spec{
		ID:       "leader-election-stall",
		Severity: Error,
		Summary: "Partitions that Metadata responses keep answering without a leader (LEADER_NOT_AVAILABLE, " +
			"NOT_LEADER_OR_FOLLOWER, leader -1), with no response naming a leader in between, for min-duration " +
			"or longer: which topic and partitions, for how long, which brokers answered, and which replicas " +
			"are offline (when every replica is offline there is nobody to elect). Shorter stretches, as a " +
			"normal election gives, are info.",
		Params: []Param{{
			Name:    "min-duration",
			Default: 30,
			Meaning: "seconds of capture time a partition must stay leaderless, from the first to the last " +
				"Metadata response saying so, to be an error",
		}},
		New: func(p Params) Detector {
			return &electionStall{minDur: p.Seconds("min-duration"), topics: map[string]*stallTopic{}}
		},
	}
}

// maxStallPartitions bounds the leaderless partitions tracked.
const maxStallPartitions = 1 << 16

// Bounds of what one stretch keeps.
const (
	maxStallServers  = 8
	maxStallConns    = 16
	maxStallReplicas = 32
)

type electionStall struct {
	minDur time.Duration
	topics map[string]*stallTopic
	parts  int
	// scratch holds the leaderless partitions of the topic being read.
	scratch []int
}

type stallTopic struct {
	// seq counts the responses that listed partitions of the topic; a
	// stretch is the run of them from firstSeq to lastSeq.
	seq   int64
	parts map[int32]*stallPartition
}

type stallPartition struct {
	open  *leaderless // the current stretch, nil while the partition has a leader
	long  *leaderless // the longest finished stretch of min-duration or more
	longN int         // finished stretches of min-duration or more

	// Finished stretches shorter than min-duration.
	shortN         int
	shortMax       time.Duration
	shortResponses int64
	shortFirst     time.Time
	shortLast      time.Time
	shortEv        Evidence // the first response of the longest one
	shortErr       int16    // the most frequent error of the longest one
}

// leaderless is one stretch of responses answering a partition without a
// leader.
type leaderless struct {
	first, last       time.Time
	firstSeq, lastSeq int64
	n                 int64
	errs              []errTally
	leader            int32
	replicas          []int32
	isr               []int32
	offline           []int32
	offlineKnown      bool // Metadata v5+ lists offline replicas
	servers           []netip.AddrPort
	conns             []int
	ev                sampler[Evidence]
}

type errTally struct {
	code int16
	n    int64
}

func (l *leaderless) dur() time.Duration { return l.last.Sub(l.first) }

// mainErr is the error code answered most often in the stretch.
func (l *leaderless) mainErr() int16 {
	m := make(map[int16]int64, len(l.errs))
	for _, e := range l.errs {
		m[e.code] += e.n
	}
	return mostFrequentKey(m)
}

// leaderlessPartition reports a partition answered without a leader.
func leaderlessPartition(p *kmsg.MetadataResponseTopicPartition) bool {
	return p.Leader < 0 || p.ErrorCode == 5 || p.ErrorCode == 6
}

// OnExchange implements flows.ExchangeHandler.
func (d *electionStall) OnExchange(x *flows.Exchange) {
	if x.Resp == nil {
		return
	}
	r, ok := x.Resp.Resp.(*kmsg.MetadataResponse)
	if !ok {
		return
	}
	for ti := range r.Topics {
		t := &r.Topics[ti]
		if len(t.Partitions) == 0 {
			continue
		}
		name := metadataTopicName(t)
		st := d.topics[name]
		d.scratch = d.scratch[:0]
		for pi := range t.Partitions {
			if leaderlessPartition(&t.Partitions[pi]) {
				d.scratch = append(d.scratch, pi)
			}
		}
		if st == nil {
			if len(d.scratch) == 0 || d.parts >= maxStallPartitions {
				continue // healthy topics take no memory
			}
			st = &stallTopic{parts: map[int32]*stallPartition{}}
			d.topics[name] = st
		}
		st.seq++
		what := ""
		if len(d.scratch) > 0 {
			what = d.describe(x.Resp, name, t)
		}
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			sp := st.parts[p.Partition]
			if !leaderlessPartition(p) {
				if sp != nil && sp.open != nil {
					d.finish(sp)
				}
				continue
			}
			if sp == nil {
				if d.parts >= maxStallPartitions {
					continue
				}
				d.parts++
				sp = &stallPartition{}
				st.parts[p.Partition] = sp
			}
			if sp.open == nil {
				sp.open = &leaderless{first: x.Resp.Time, firstSeq: st.seq}
			}
			sp.open.add(x, r.Version, st.seq, p, what)
		}
	}
}

func (l *leaderless) add(x *flows.Exchange, version int16, seq int64, p *kmsg.MetadataResponseTopicPartition, what string) {
	l.last, l.lastSeq = x.Resp.Time, seq
	l.n++
	found := false
	for i := range l.errs {
		if l.errs[i].code == p.ErrorCode {
			l.errs[i].n++
			found = true
			break
		}
	}
	if !found && len(l.errs) < 8 {
		l.errs = append(l.errs, errTally{p.ErrorCode, 1})
	}
	l.leader = p.Leader
	l.replicas = appendIDsCapped(l.replicas[:0], p.Replicas)
	l.isr = appendIDsCapped(l.isr[:0], p.ISR)
	l.offline = appendIDsCapped(l.offline[:0], p.OfflineReplicas)
	l.offlineKnown = version >= 5
	srv := x.Conn.Server
	if !hasAddrPort(l.servers, srv) && len(l.servers) < maxStallServers {
		l.servers = append(l.servers, srv)
	}
	if !hasInt(l.conns, x.Conn.ID) && len(l.conns) < maxStallConns {
		l.conns = append(l.conns, x.Conn.ID)
	}
	l.ev.add(evidence(x.Resp, what))
}

// finish closes the open stretch of a partition that got a leader.
func (d *electionStall) finish(sp *stallPartition) {
	l := sp.open
	sp.open = nil
	if l.dur() >= d.minDur {
		sp.longN++
		if sp.long == nil || l.dur() > sp.long.dur() {
			sp.long = l
		}
		return
	}
	if sp.shortN == 0 || l.first.Before(sp.shortFirst) {
		sp.shortFirst = l.first
	}
	if l.last.After(sp.shortLast) {
		sp.shortLast = l.last
	}
	if sp.shortN == 0 || l.dur() > sp.shortMax {
		sp.shortMax = l.dur()
		sp.shortEv = l.ev.first
		sp.shortErr = l.mainErr()
	}
	sp.shortN++
	sp.shortResponses += l.n
}

// describe is the evidence text for a response with leaderless partitions
// of topic t (those at d.scratch).
func (d *electionStall) describe(m *flows.Message, name string, t *kmsg.MetadataResponseTopic) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Metadata v%d response from %s: %s partition", m.Version, m.Conn.Server, name)
	if len(d.scratch) > 1 {
		b.WriteByte('s')
	}
	for i, pi := range d.scratch {
		if i == 8 {
			fmt.Fprintf(&b, " and %d more", len(d.scratch)-i)
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(int(t.Partitions[pi].Partition)))
	}
	p := &t.Partitions[d.scratch[0]]
	fmt.Fprintf(&b, " without a leader (%s, leader %d)", decode.ErrorName(p.ErrorCode), p.Leader)
	return b.String()
}

// metadataTopicName is the topic's name, or its id as Kafka prints it.
func metadataTopicName(t *kmsg.MetadataResponseTopic) string {
	if t.Topic != nil && *t.Topic != "" {
		return *t.Topic
	}
	return base64.RawURLEncoding.EncodeToString(t.TopicID[:])
}

// Findings implements Detector: per topic, one error for the partitions
// leaderless for min-duration or longer, one info for the shorter ones.
func (d *electionStall) Findings(env *Env) []Finding {
	names := make([]string, 0, len(d.topics))
	for n := range d.topics {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Finding
	for _, name := range names {
		st := d.topics[name]
		ids := make([]int32, 0, len(st.parts))
		for id := range st.parts {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		var long []stallRef
		var short []int32
		for _, id := range ids {
			sp := st.parts[id]
			if sp.long != nil {
				long = append(long, stallRef{id, sp.long, false})
			}
			if sp.open != nil && sp.open.dur() >= d.minDur {
				long = append(long, stallRef{id, sp.open, true})
			} else if sp.open != nil || sp.shortN > 0 {
				short = append(short, id)
			}
		}
		if len(long) > 0 {
			out = append(out, d.stallFinding(env, name, st, long))
		}
		if len(short) > 0 {
			out = append(out, d.shortFinding(name, st, short))
		}
	}
	return out
}

type stallRef struct {
	partition int32
	l         *leaderless
	open      bool
}

func (d *electionStall) stallFinding(env *Env, topic string, st *stallTopic, refs []stallRef) Finding {
	parts := idSet{}
	replicas, isr, offline, conns := idSet{}, idSet{}, idSet{}, idSet{}
	servers := map[netip.AddrPort]bool{}
	errs := map[int16]int64{}
	leaders := map[int32]int64{}
	var first, last time.Time
	var longest time.Duration
	ongoing, offlineKnown := false, true
	var evs [][]Evidence
	intervals := make([][2]int64, 0, len(refs))
	for i, r := range refs {
		l := r.l
		parts.add(r.partition)
		if i == 0 || l.first.Before(first) {
			first = l.first
		}
		if l.last.After(last) {
			last = l.last
		}
		longest = max(longest, l.dur())
		ongoing = ongoing || r.open
		offlineKnown = offlineKnown && l.offlineKnown
		for _, e := range l.errs {
			errs[e.code] += e.n
		}
		leaders[l.leader] += l.n
		for _, id := range l.replicas {
			replicas.add(id)
		}
		for _, id := range l.isr {
			isr.add(id)
		}
		for _, id := range l.offline {
			offline.add(id)
		}
		for _, s := range l.servers {
			servers[s] = true
		}
		for _, c := range l.conns {
			conns.add(int32(c))
		}
		evs = append(evs, l.ev.list())
		intervals = append(intervals, [2]int64{l.firstSeq, l.lastSeq})
	}
	responses := intervalUnionLen(intervals)
	errCode := mostFrequentKey(errs)
	leader := mostFrequentKey(leaders)
	serverList := addrPortStrings(servers)
	partList := parts.sorted()
	nodes := offline.sorted()
	if len(nodes) == 0 {
		nodes = replicas.sorted()
	}
	durS := float64(longest.Milliseconds()) / 1000
	errName := decode.ErrorName(errCode)

	var sum strings.Builder
	fmt.Fprintf(&sum, "%s %s without a leader for %s (%d Metadata responses from %s: %s, leader %d)",
		topic, text.Word(len(partList), "partition", "partitions")+" "+text.IDs(partList, 0), text.Duration(time.Duration(durS*float64(time.Second))),
		responses, strings.Join(serverNodeLabels(env, serverList), ", "), errName, leader)
	allOffline := offlineKnown && len(replicas) > 0 && idSubset(replicas, offline)
	isrOffline := offlineKnown && len(offline) > 0 && len(isr) > 0 && idSubset(isr, offline)
	switch {
	case allOffline && len(replicas) == 1:
		fmt.Fprintf(&sum, "; their only replica, node %s, is offline", text.IDs(replicas.sorted(), 0))
	case allOffline:
		fmt.Fprintf(&sum, "; all their replicas (nodes %s) are offline", text.IDs(replicas.sorted(), 0))
	}
	if ongoing {
		sum.WriteString("; still so at the end of the capture")
	}

	var ex strings.Builder
	fmt.Fprintf(&ex, "From %s to %s UTC (%s of capture time", text.Stamp(first), text.Stamp(last), text.Duration(time.Duration(durS*float64(time.Second))))
	if ongoing {
		ex.WriteString(", and still at the end of the capture")
	}
	fmt.Fprintf(&ex, ") every Metadata response that listed %s %s answered %s with leader %d; no response in between named a leader. ",
		topic, text.Word(len(partList), "partition "+text.IDs(partList, 0), "partitions "+text.IDs(partList, 0)), errName, leader)
	fmt.Fprintf(&ex, "%d responses, from %s. ", responses, strings.Join(serverNodeLabels(env, serverList), ", "))
	fmt.Fprintf(&ex, "Replicas %v, in-sync replicas %v", replicas.sorted(), isr.sorted())
	if offlineKnown {
		fmt.Fprintf(&ex, ", offline replicas %v. ", offline.sorted())
	} else {
		ex.WriteString(" (these Metadata versions do not list offline replicas). ")
	}
	switch {
	case errCode == 72:
		ex.WriteString("LISTENER_NOT_FOUND means the leader exists but has no listener by the name the client connected through: " +
			"the brokers' listener names differ, not an election. ")
	case allOffline:
		fmt.Fprintf(&ex, "Every replica of these partitions is offline, so there is no candidate to elect: this is not a slow election; "+
			"the partitions come back only when node %s does (or, if its log is lost, by reassigning them, losing their data). ",
			text.IDs(replicas.sorted(), 0))
	case isrOffline:
		fmt.Fprintf(&ex, "Every in-sync replica is offline; the online replicas (%v) are out of sync, and with "+
			"unclean.leader.election.enable=false (the default) the controller will not elect them. ", idMinus(replicas, offline).sorted())
	case offlineKnown && len(replicas) > 0:
		fmt.Fprintf(&ex, "In-sync replicas %v are online, yet no leader was elected: the controller is not completing the election. ",
			idMinus(isr, offline).sorted())
	}
	ex.WriteString("Producers and consumers of these partitions fail or wait for all this time.")

	next := fmt.Sprintf("kafka-topics.sh --bootstrap-server %s --describe --topic %s --unavailable-partitions; "+
		"is node %s running and registered (its server.log, kafka-broker-api-versions.sh --bootstrap-server %s lists live brokers)? "+
		"Controller: kafka-metadata-quorum.sh --bootstrap-server %s describe --status (KRaft), the controller log for the election of these partitions, "+
		"metric kafka.controller:type=KafkaController,name=OfflinePartitionsCount. "+
		"If the replica is gone for good: kafka-reassign-partitions.sh onto live brokers, or kafka-leader-election.sh --election-type unclean (data loss). "+
		"To survive one broker: replication.factor 3 with min.insync.replicas 2.",
		firstOrElse(serverList, "<broker>"), topic, text.IDs(nodes, 0), firstOrElse(serverList, "<broker>"), firstOrElse(serverList, "<broker>"))

	counts := map[string]int64{
		"responses":  responses,
		"partitions": int64(len(partList)),
	}
	fields := map[string]any{
		"topic":            topic,
		"partitions":       partList,
		"error":            errName,
		"leader_id":        leader,
		"servers":          serverList,
		"duration_s":       durS,
		"ongoing":          ongoing,
		"replicas":         replicas.sorted(),
		"isr":              isr.sorted(),
		"offline_replicas": offline.sorted(),
	}
	return Finding{
		Severity:    Error,
		Summary:     sum.String(),
		First:       first,
		Last:        last,
		Conns:       conns.ints(),
		Nodes:       nodes,
		Counts:      counts,
		Fields:      fields,
		Evidence:    mergeEvidenceLists(evs...),
		Explanation: ex.String(),
		Next:        next,
	}
}

func (d *electionStall) shortFinding(topic string, st *stallTopic, ids []int32) Finding {
	var first, last time.Time
	var longest time.Duration
	var answers int64
	ongoing := false
	var evs []Evidence
	errs := map[int16]int64{}
	for _, id := range ids {
		sp := st.parts[id]
		if sp.shortN > 0 {
			if first.IsZero() || sp.shortFirst.Before(first) {
				first = sp.shortFirst
			}
			if sp.shortLast.After(last) {
				last = sp.shortLast
			}
			longest = max(longest, sp.shortMax)
			answers += sp.shortResponses
			evs = append(evs, sp.shortEv)
			errs[sp.shortErr]++
		}
		if l := sp.open; l != nil && l.dur() < d.minDur {
			ongoing = true
			if first.IsZero() || l.first.Before(first) {
				first = l.first
			}
			if l.last.After(last) {
				last = l.last
			}
			longest = max(longest, l.dur())
			answers += l.n
			evs = append(evs, l.ev.first)
			for _, e := range l.errs {
				errs[e.code] += e.n
			}
		}
	}
	durS := float64(longest.Milliseconds()) / 1000
	what := "then got a leader: a normal leader election"
	if ongoing {
		what = "and some were still without one at the end of the capture, too soon to call it a stall"
	}
	sum := fmt.Sprintf("%s %s briefly without a leader (longest %s), %s", topic,
		text.Word(len(ids), "partition "+text.IDs(ids, 0)+" was", "partitions "+text.IDs(ids, 0)+" were"), text.Duration(time.Duration(durS*float64(time.Second))), what)
	fields := map[string]any{"topic": topic, "partitions": ids, "duration_s": durS, "ongoing": ongoing,
		"error": decode.ErrorName(mostFrequentKey(errs))}
	return Finding{
		Severity: Info,
		Summary:  sum,
		First:    first,
		Last:     last,
		Counts:   map[string]int64{"partition_answers": answers, "partitions": int64(len(ids))},
		Fields:   fields,
		Evidence: mergeEvidenceLists(evs),
		Explanation: fmt.Sprintf("Metadata responses answered these partitions without a leader for at most %s of capture time each "+
			"(the threshold for a stall is %s). A leader election after a broker stops or restarts takes this long.",
			text.Duration(time.Duration(durS*float64(time.Second))), text.Duration(time.Duration(d.minDur.Seconds()*float64(time.Second)))),
		Next: "Nothing, unless it repeats: then look for the broker restarts behind it (broker and controller logs, " +
			"kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs).",
	}
}

// intervalUnionLen is the number of integers covered by closed intervals.
func intervalUnionLen(iv [][2]int64) int64 {
	sort.Slice(iv, func(i, j int) bool { return iv[i][0] < iv[j][0] })
	var n int64
	end := int64(-1 << 62)
	for _, v := range iv {
		lo := max(v[0], end+1)
		if v[1] >= lo {
			n += v[1] - lo + 1
		}
		end = max(end, v[1])
	}
	return n
}

// mergeEvidenceLists merges evidence lists into one in packet order without
// repeats, thinned to the first, the last and a few spread in between.
func mergeEvidenceLists(lists ...[]Evidence) []Evidence {
	var all []Evidence
	for _, l := range lists {
		for _, e := range l {
			if e.Packet != 0 {
				all = append(all, e)
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].File != all[j].File {
			return all[i].File < all[j].File
		}
		return all[i].Packet < all[j].Packet
	})
	uniq := all[:0]
	for i, e := range all {
		if i > 0 && e.File == all[i-1].File && e.Packet == all[i-1].Packet {
			continue
		}
		uniq = append(uniq, e)
	}
	if len(uniq) <= maxMiddle+2 {
		return uniq
	}
	out := []Evidence{uniq[0]}
	mid := uniq[1 : len(uniq)-1]
	for k := range maxMiddle {
		out = append(out, mid[(2*k+1)*len(mid)/(2*maxMiddle)])
	}
	return append(out, uniq[len(uniq)-1])
}

func mostFrequentKey[K int16 | int32](m map[K]int64) K {
	var best K
	var n int64 = -1
	for k, c := range m {
		if c > n || (c == n && k < best) {
			best, n = k, c
		}
	}
	return best
}

func appendIDsCapped(dst, src []int32) []int32 {
	if len(src) > maxStallReplicas {
		src = src[:maxStallReplicas]
	}
	return append(dst, src...)
}

func hasAddrPort(s []netip.AddrPort, a netip.AddrPort) bool {
	for _, x := range s {
		if x == a {
			return true
		}
	}
	return false
}

func hasInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func addrPortStrings(m map[netip.AddrPort]bool) []string {
	aps := make([]netip.AddrPort, 0, len(m))
	for a := range m {
		aps = append(aps, a)
	}
	sort.Slice(aps, func(i, j int) bool { return aps[i].Compare(aps[j]) < 0 })
	out := make([]string, len(aps))
	for i, a := range aps {
		out[i] = a.String()
	}
	return out
}

// serverNodeLabels renders "host:port" strings with the node advertised there.
func serverNodeLabels(env *Env, servers []string) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s
		if env == nil || env.Nodes == nil {
			continue
		}
		if ap, err := netip.ParseAddrPort(s); err == nil {
			out[i] = env.Nodes.Label(ap, true)
		}
	}
	return out
}

func idSubset(a, b idSet) bool {
	for id := range a {
		if !b[id] {
			return false
		}
	}
	return true
}

func idMinus(a, b idSet) idSet {
	out := idSet{}
	for id := range a {
		if !b[id] {
			out[id] = true
		}
	}
	return out
}

func firstOrElse(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}
