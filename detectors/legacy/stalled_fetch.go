package legacy

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// stalled-fetch: a fetcher asks for the same offset of a partition over and
// over, the answers bring no records and the high watermark stands still,
// though there is something to fetch (high watermark above the offset) or
// the answers carry errors. Requests and responses keep flowing, so the
// connection looks busy; the partition's consumer or replica is not moving.
//
// Per fetcher (host and client id) and partition, a window is an unbroken
// run of such fetches at one offset. A fetch that brings records, moves the
// offset, sees the high watermark move, or finds nothing to fetch without
// an error (a caught-up consumer's idle long poll) ends the window, so an
// idle consumer never opens one. For read_committed fetches the bound is
// the last stable offset: waiting on an open transaction is not a stall.
func stalledFetchSpec() Spec {
	return Spec{
		ID:       "stalled-fetch",
		Severity: Warning,
		Summary: "A fetcher's fetchOffset for a partition does not advance over many fetches while the answers bring no " +
			"records and the high watermark does not move, though there is data to fetch (high watermark above the " +
			"offset) or the answers carry errors: traffic is not health. An idle consumer caught up with the high " +
			"watermark is not reported.",
		Params: []Param{
			{Name: "min-fetches", Default: 20, Meaning: "fetches of one partition at one offset, each with no records and the same high watermark, before it is a stall"},
			{Name: "min-duration", Default: 10, Meaning: "seconds from the first to the last of those fetches"},
		},
		New: func(p Params) Detector {
			return &stalledFetch{
				minFetches:  int64(p.Int("min-fetches")),
				minDuration: p.Seconds("min-duration"),
				wins:        make(map[nlKey]*sfWindow),
				open:        make(map[nlClient]int),
				done:        make(map[nlKey]*sfWindow),
				session:     make(map[nlKey]int64),
			}
		},
	}
}

// sfWindow is one run of fetches stuck at one offset.
type sfWindow struct {
	key         nlKey
	offset      int64
	hw, lso     int64 // last known (>= 0), or -1
	committed   bool  // read_committed
	first, last time.Time
	fetches     int64
	errors      int64
	codes       codeTally
	servers     nlServers
	conns       nlConnSet
	replicaID   int32
	role        flows.Role
	throttled   int64
	ev          sampler[sfEv]
}

// sfEv is the evidence of one stuck fetch, formatted if it is listed.
type sfEv struct {
	packet  uint64
	file    int32
	conn    int32
	corr    int32
	version int16
	code    int16
	server  netip.AddrPort
	offset  int64
	hw      int64
}

func (e sfEv) evidence() Evidence {
	what := fmt.Sprintf("Fetch v%d corr %d to %s at offset %d: 0 records, high watermark %d", e.version,
		e.corr, nlAddr(e.server), e.offset, e.hw)
	if e.code != 0 {
		what += ", " + decode.ErrorName(e.code)
	}
	return Evidence{File: int(e.file), Packet: e.packet, Conn: int(e.conn), What: what}
}

func (w *sfWindow) duration() time.Duration { return w.last.Sub(w.first) }

func (w *sfWindow) addCode(code int16) { w.codes.add(code) }

// topError is the most frequent error of the window, or 0.
func (w *sfWindow) topError() (int16, int64) { return w.codes.top() }

type stalledFetch struct {
	minFetches  int64
	minDuration time.Duration

	topics nlTopics
	wins   map[nlKey]*sfWindow
	open   map[nlClient]int    // windows open per fetcher
	done   map[nlKey]*sfWindow // the longest finished window per key that qualified
	free   []*sfWindow         // windows that ended short, for reuse
	// session holds the fetch offsets of fetch-session partitions:
	// incremental requests name a partition only when its offset
	// changes, while the answers keep naming it when it has an error.
	session map[nlKey]int64
}

// OnExchange implements flows.ExchangeHandler.
func (d *stalledFetch) OnExchange(x *flows.Exchange) {
	if x.Req == nil || x.Resp == nil {
		return
	}
	d.topics.conn = x.Conn // its Nodes are read only for a topic named by id
	switch r := x.Resp.Resp.(type) {
	case *kmsg.FetchResponse:
		if req, ok := x.Req.Req.(*kmsg.FetchRequest); ok {
			d.fetch(x, req, r)
		}
	}
}

// sfOffset finds a partition's fetch offset in the request; responses list
// partitions in the order of the request, so the same position is tried
// first.
func sfOffset(req *kmsg.FetchRequest, ti, pi int, topic string, id [16]byte, part int32) (int64, bool) {
	match := func(t *kmsg.FetchRequestTopic) bool { return t.Topic == topic && t.TopicID == id }
	if ti < len(req.Topics) && match(&req.Topics[ti]) {
		ps := req.Topics[ti].Partitions
		if pi < len(ps) && ps[pi].Partition == part {
			return ps[pi].FetchOffset, true
		}
	}
	for i := range req.Topics {
		if !match(&req.Topics[i]) {
			continue
		}
		for _, p := range req.Topics[i].Partitions {
			if p.Partition == part {
				return p.FetchOffset, true
			}
		}
	}
	return 0, false
}

func (d *stalledFetch) fetch(x *flows.Exchange, req *kmsg.FetchRequest, r *kmsg.FetchResponse) {
	c := nlClientOf(x)
	replica := int32(-1)
	if req.Version >= 15 {
		replica = req.ReplicaState.ID
	} else {
		replica = req.ReplicaID
	}
	committed := req.IsolationLevel == 1
	if req.Version >= 7 && req.SessionEpoch >= 0 {
		for i := range req.Topics {
			t := &req.Topics[i]
			for _, p := range t.Partitions {
				k := nlKey{c, d.topics.tp(t.Topic, t.TopicID, p.Partition)}
				if _, ok := d.session[k]; ok || len(d.session) < nlMaxKeys {
					d.session[k] = p.FetchOffset
				}
			}
		}
	}
	// A fetcher with no window open has nothing to end: only its
	// stuck partitions need a look.
	idle := len(d.wins) == 0 || d.open[c] == 0
	// Batches are in wire order, as the partitions: walk them with a
	// cursor to count each partition's records.
	cur := 0
	batches := x.Resp.Batches
	for i := range r.Topics {
		t := &r.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			var records int64
			for cur < len(batches) && batches[cur].Partition == p.Partition && batches[cur].TopicID == t.TopicID &&
				(t.Topic == "" || batches[cur].Topic == t.Topic) {
				records += int64(batches[cur].Records)
				cur++
			}
			bound := p.HighWatermark
			if committed && p.LastStableOffset >= 0 {
				bound = p.LastStableOffset
			}
			offset, inReq := sfOffset(req, i, j, t.Topic, t.TopicID, p.Partition)
			stuck := func(offset int64) bool {
				return records == 0 && (p.ErrorCode != 0 || (bound >= 0 && bound > offset))
			}
			if inReq && !stuck(offset) && idle {
				continue // the common, healthy case: nothing to follow
			}
			k := nlKey{c, d.topics.tp(t.Topic, t.TopicID, p.Partition)}
			w := d.wins[k]
			if !inReq {
				// A fetch session's partition, unchanged since the
				// request that last named it.
				if offset, inReq = d.session[k]; !inReq {
					continue
				}
			}
			if !stuck(offset) {
				if w != nil {
					d.finish(w)
				}
				continue
			}
			if w != nil && (w.offset != offset || (p.HighWatermark >= 0 && w.hw >= 0 && p.HighWatermark != w.hw)) {
				d.finish(w)
				w = nil
			}
			if w == nil {
				if len(d.wins) >= nlMaxKeys {
					continue
				}
				w = d.newWindow()
				*w = sfWindow{key: k, offset: offset, hw: -1, lso: -1, committed: committed, first: x.Req.Time, replicaID: replica, role: x.Req.Role,
					servers: nlServers{list: w.servers.list[:0]}, conns: w.conns[:0]}
				d.wins[k] = w
				d.open[c]++
				idle = false
			}
			w.fetches++
			w.last = x.Resp.Time
			if p.HighWatermark >= 0 {
				w.hw = p.HighWatermark
			}
			if p.LastStableOffset >= 0 {
				w.lso = p.LastStableOffset
			}
			if p.ErrorCode != 0 {
				w.errors++
				w.addCode(p.ErrorCode)
			}
			if r.ThrottleMillis > 0 {
				w.throttled++
			}
			w.servers.add(x.Conn.Server, 1, 0)
			w.conns.add(x.Conn.ID)
			w.ev.add(sfEv{file: int32(x.Resp.File), packet: x.Resp.Packet, conn: int32(x.Resp.Conn.ID), version: x.Req.Version,
				corr: x.Req.Correlation, server: x.Conn.Server, offset: offset, hw: p.HighWatermark, code: p.ErrorCode})
		}
	}
}

// newWindow returns a window to fill: one that ended short, or a new one.
func (d *stalledFetch) newWindow() *sfWindow {
	if n := len(d.free); n > 0 {
		w := d.free[n-1]
		d.free = d.free[:n-1]
		return w
	}
	return new(sfWindow)
}

func (d *stalledFetch) qualifies(w *sfWindow) bool {
	return w.fetches >= d.minFetches && w.duration() >= d.minDuration
}

func (d *stalledFetch) finish(w *sfWindow) {
	delete(d.wins, w.key)
	if d.open[w.key.c]--; d.open[w.key.c] == 0 {
		delete(d.open, w.key.c)
	}
	if !d.qualifies(w) {
		if len(d.free) < 256 {
			d.free = append(d.free, w) // nothing else holds it
		}
		return
	}
	if old := d.done[w.key]; old != nil && old.fetches >= w.fetches {
		return
	}
	if _, ok := d.done[w.key]; ok || len(d.done) < nlMaxKeys {
		d.done[w.key] = w
	}
}

// Findings implements Detector.
func (d *stalledFetch) Findings(env *Env) []Finding {
	var ws []*sfWindow
	for k, w := range d.done {
		if open := d.wins[k]; open != nil && d.qualifies(open) && open.fetches > w.fetches {
			continue
		}
		ws = append(ws, w)
	}
	for k, w := range d.wins {
		if !d.qualifies(w) {
			continue
		}
		if old := d.done[k]; old != nil && old.fetches >= w.fetches {
			continue
		}
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool {
		a, b := ws[i], ws[j]
		if !a.first.Equal(b.first) {
			return a.first.Before(b.first)
		}
		if a.key.c != b.key.c {
			if a.key.c.host != b.key.c.host {
				return a.key.c.host.Less(b.key.c.host)
			}
			return a.key.c.id < b.key.c.id
		}
		if a.key.tp.name() != b.key.tp.name() {
			return a.key.tp.name() < b.key.tp.name()
		}
		return a.key.tp.part < b.key.tp.part
	})
	out := make([]Finding, 0, len(ws))
	for _, w := range ws {
		out = append(out, d.finding(env, w))
	}
	return out
}

func (d *stalledFetch) finding(env *Env, w *sfWindow) Finding {
	c := w.key.c
	dur := w.duration()
	span := text.Duration(dur)
	who := c.id
	if who == "" {
		who = "fetcher"
	}
	node := nlClientNode(env, c, w.replicaID)
	if node >= 0 {
		who += fmt.Sprintf(" (node %d, %s)", node, c.host)
	} else {
		who += " (" + c.host.String() + ")"
	}
	nodes := idSet{}
	nodes.add(node)
	var servers []string
	for _, s := range w.servers.list {
		if env.Nodes != nil {
			nodes.add(env.Nodes.Server(s.addr))
		}
		servers = append(servers, nlServerLabel(env, s.addr))
	}
	sort.Strings(servers)
	tp := w.key.tp.String()
	code, codeN := w.topError()

	fields := map[string]any{
		"client":         c.host.String(),
		"client_id":      c.id,
		"topic":          w.key.tp.name(),
		"partition":      w.key.tp.part,
		"fetch_offset":   w.offset,
		"high_watermark": w.hw,
		"duration_s":     text.Seconds(dur),
		"rate_per_s":     text.Rate(w.fetches, dur),
		"servers":        w.servers.strings(),
		"role":           w.role.String(),
	}
	if w.committed {
		fields["isolation"] = "read_committed"
		fields["last_stable_offset"] = w.lso
	}
	if code != 0 {
		fields["error"] = decode.ErrorName(code)
	}
	counts := map[string]int64{
		"fetches": w.fetches,
		"records": 0,
		"errors":  w.errors,
	}
	if w.throttled > 0 {
		counts["throttled"] = w.throttled
	}

	var state string
	switch {
	case w.errors == w.fetches && w.hw < 0:
		state = fmt.Sprintf("every answer was an error (%s) and none reported a high watermark", nlCodes(w))
	case w.errors > 0:
		state = fmt.Sprintf("%d answers were errors (%s); the high watermark stayed at %d", w.errors, nlCodes(w), w.hw)
	default:
		bound := fmt.Sprintf("the high watermark stayed at %d, %d records ahead of it", w.hw, w.hw-w.offset)
		if w.committed && w.lso >= 0 {
			bound = fmt.Sprintf("the last stable offset stayed at %d, %d records ahead of it", w.lso, w.lso-w.offset)
		}
		state = "no answer carried an error, yet " + bound
	}
	f := Finding{
		Severity: Warning,
		First:    w.first,
		Last:     w.last,
		Conns:    w.conns.sorted(),
		Nodes:    nodes.sorted(),
		Counts:   counts,
		Fields:   fields,
		Evidence: w.ev.list(),
	}
	hwText := fmt.Sprintf("high watermark %d", w.hw)
	if w.hw < 0 {
		hwText = "high watermark unknown"
	}
	if code != 0 {
		f.Summary = fmt.Sprintf("%s is stuck at offset %d of %s: %d fetches in %s brought 0 records (%s, %s x%d)",
			who, w.offset, tp, w.fetches, span, hwText, decode.ErrorName(code), codeN)
	} else {
		f.Summary = fmt.Sprintf("%s is stuck at offset %d of %s: %d fetches in %s brought 0 records though the %s",
			who, w.offset, tp, w.fetches, span, hwText)
	}
	f.Explanation = fmt.Sprintf("%s fetched %s %d times over %s (%.1f/s) from %s, and its position never moved: every fetch "+
		"asked for offset %d and every answer brought 0 records; %s. Request and response counters rising on this "+
		"connection is not health: the %s of this partition is not advancing.",
		who, tp, w.fetches, span, text.Rate(w.fetches, dur), strings.Join(servers, ", "), w.offset, state, nlFetcherKind(w))
	switch {
	case w.role == flows.RoleRaft:
		f.Next = fmt.Sprintf("This is the node's KRaft metadata log: kafka-metadata-quorum.sh describe --replication (node %d's LogEndOffset "+
			"and Lag), and on the node raft-metrics fetch-records-rate (0), high-watermark (frozen) and broker-metadata-metrics "+
			"last-applied-record-lag-ms (rising). A not-leader-loop finding says where its fetches go instead.", node)
	case w.role == flows.RoleReplication:
		f.Next = fmt.Sprintf("On the leader: kafka-topics.sh --describe --topic %s (is the follower still in the ISR?) and "+
			"kafka.server:type=FetcherLagMetrics on node %d; the follower's server.log for the partition's fetcher errors.", w.key.tp.name(), node)
	default:
		f.Next = fmt.Sprintf("kafka-consumer-groups.sh --describe --group <group> (CURRENT-OFFSET %d vs LOG-END-OFFSET for %s); "+
			"the consumer's logs for errors on the partition%s; if there is no error, a record larger than the fetch limits "+
			"(max.partition.fetch.bytes, fetch.max.bytes) or a consumer discarding what it receives.", w.offset, tp, nlErrHint(code))
	}
	return f
}

func nlFetcherKind(w *sfWindow) string {
	switch w.role {
	case flows.RoleRaft:
		return "metadata replication"
	case flows.RoleReplication:
		return "replication"
	}
	return "consumption"
}

func nlErrHint(code int16) string {
	if code == 0 {
		return ""
	}
	return " (" + decode.ErrorName(code) + ": act on it, e.g. the leader it names)"
}

func nlCodes(w *sfWindow) string {
	return strings.Join(w.codes.parts(), ", ")
}
