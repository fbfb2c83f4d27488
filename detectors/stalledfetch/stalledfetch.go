// Package stalledfetch reports a fetcher that asks for the same offset of
// a partition over and over while the answers bring no records and the
// high watermark stands still, though there is something to fetch (high
// watermark above the offset) or the answers carry errors. Requests and
// responses keep flowing, so the connection looks busy; the partition's
// consumer or replica is not moving.
//
// Per fetcher (host and client id) and partition, a window is an unbroken
// run of such fetches at one offset. A fetch that brings records, moves the
// offset, sees the high watermark move, or finds nothing to fetch without
// an error (a caught-up consumer's idle long poll) ends the window, so an
// idle consumer never opens one. For read_committed fetches the bound is
// the last stable offset: waiting on an open transaction is not a stall.
//
// A stall held the fetcher up from its first stuck fetch to the fetch that
// ended it (or to its last stuck fetch, if none followed promptly); the
// severity is detectors.Grade's: what the consumer or replica felt.
package stalledfetch

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
	"github.com/kfsniff/kfsniff/detectors/internal/spell"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "stalled-fetch",
	Recorded: []string{"fixtures/pcaps/kafka/kraft-observer-loop.pcap.gz", "fixtures/pcaps/clients/stalled-fetch-kgo.pcap", "fixtures/pcaps/clients/stalled-fetch-sarama.pcap"},
	Severity: detectors.Error,
	Doc: "A fetcher's fetchOffset for a partition does not advance over many fetches while the answers bring no " +
		"records and the high watermark does not move, though there is data to fetch (high watermark above the " +
		"offset) or the answers carry errors: traffic is not health. Graded by how long the fetcher was held up, " +
		"from its first stuck fetch to the fetch that moved it (or to its last stuck fetch): min-fetches fetches " +
		"over min-duration (3 s) or more is a warning; 30 s or more, or still stuck when the capture ended after " +
		"10 s or more, an error. An idle consumer caught up with the high watermark is not reported.",
}, Params{MinFetches: 2, MinDuration: detectors.FeltAfter}, New)

// Params are the rule's thresholds.
type Params struct {
	MinFetches  int           `param:"min-fetches" doc:"fetches of one partition at one offset, each with no records and the same high watermark, before it is a stall: asked again and stuck again (on an error sarama retries every 2 s; kgo backs off 250 ms doubling to 5 s)"`
	MinDuration time.Duration `param:"min-duration" doc:"how long the stall held the fetcher up (first stuck fetch to the fetch that moved it, or to the last stuck one) before it is reported, as a warning"`
}

// New makes the rule.
func New(p Params) detectors.Rule {
	r := &rule{p: p, session: make(map[peers.Key]int64)}
	r.wins = peers.NewEpisodes(func(w *window) int64 { return w.fetches }, r.qualifies)
	return r
}

type rule struct {
	p    Params
	wins *peers.Episodes[window]
	free []*window // windows that ended short, for reuse
	// session holds the fetch offsets of fetch-session partitions:
	// incremental requests name a partition only when its offset
	// changes, while the answers keep naming it when it has an error.
	session map[peers.Key]int64
}

// maxFree bounds the windows kept for reuse.
const maxFree = 256

// window is one run of fetches stuck at one offset.
type window struct {
	key         peers.Key
	offset      int64
	hw, lso     int64 // last known (>= 0), or -1
	committed   bool  // read_committed
	first, last time.Time
	fetches     int64
	errors      int64
	codes       tally.Codes
	servers     peers.Servers
	conns       tally.Conns
	fetcher     int32 // the node the fetcher speaks for, -1 if none
	role        cluster.Role
	throttled   int64
	// moved is the answer of the fetch that ended the stall (records
	// came, the offset moved, or nothing was left to fetch); zero if
	// none did.
	moved time.Time
	ev    detectors.Sampler[stuck]
}

func (w *window) duration() time.Duration { return w.last.Sub(w.first) }

// held is how long the stall held the fetcher up: from its first stuck
// fetch to the fetch that moved it (healed), or to its last stuck fetch if
// none followed promptly (spell.Ended).
func (w *window) held() (d time.Duration, healed bool) { return spell.Ended(w.first, w.last, w.moved) }

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.Fetch}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.Resp == nil {
		return
	}
	if resp, ok := x.Resp.Resp.(*kmsg.FetchResponse); ok {
		if req, ok := x.Req.Req.(*kmsg.FetchRequest); ok {
			r.fetch(x, req, resp)
		}
	}
}

func (r *rule) fetch(x *detectors.Exchange, req *kmsg.FetchRequest, resp *kmsg.FetchResponse) {
	c := x.Req.Client
	nodes := x.Conn.Nodes()
	committed := req.IsolationLevel == 1
	if req.Version >= 7 && req.SessionEpoch >= 0 {
		decode.FetchOffsets(req, func(p cluster.Partition, offset int64) {
			k := peers.Key{C: c, P: p.Key(nodes)}
			if _, ok := r.session[k]; ok || len(r.session) < peers.MaxKeys {
				r.session[k] = offset
			}
		})
	}
	// A fetcher with no window open has nothing to end: only its stuck
	// partitions need a look.
	idle := r.wins.Idle(c)
	// Batches are in wire order, as the partitions: walk them with a
	// cursor to count each partition's records.
	cur := 0
	batches := x.Resp.Batches
	for _, a := range x.Answers() {
		var records int64
		for cur < len(batches) && batches[cur].Partition == a.Num && batches[cur].TopicID == a.TopicID &&
			(a.Topic == "" || batches[cur].Topic == a.Topic) {
			records += int64(batches[cur].Records)
			cur++
		}
		bound := a.HighWatermark
		if committed && a.LastStableOffset >= 0 {
			bound = a.LastStableOffset
		}
		// A topic id that no longer exists: nothing to fetch there, and
		// topic-recreated reports the client asking for a deleted topic,
		// graded the same way. Such answers neither stall a partition nor
		// end its stall.
		if cluster.TopicGone(a.ErrorCode) {
			continue // not this partition stuck: its topic id is gone (topic-recreated's)
		}
		stuckAt := func(offset int64) bool {
			return records == 0 && (a.ErrorCode != 0 || (bound >= 0 && bound > offset))
		}
		offset, inReq := decode.FetchOffsetAt(req, a.TopicIndex, a.Index, a.Partition)
		if inReq && !stuckAt(offset) && idle {
			continue // the common, healthy case: nothing to follow
		}
		k := peers.Key{C: c, P: x.PartitionKey(a.Partition)}
		if !inReq {
			// A fetch session's partition, unchanged since the request
			// that last named it.
			if offset, inReq = r.session[k]; !inReq && k.P.Topic != "" && a.TopicID != [16]byte{} {
				// Named since the request that put it in the session.
				offset, inReq = r.session[peers.Key{C: c, P: cluster.Partition{TopicID: a.TopicID, Num: a.Num}}]
			}
			if !inReq {
				continue
			}
		}
		w := peers.OpenNamed(r.wins, k, a.Partition, func(w *window) { w.key = k })
		if !stuckAt(offset) {
			if w != nil {
				w.moved = x.Resp.Time
				r.finish(k)
			}
			continue
		}
		// An answer with an error says nothing of the high watermark
		// (Kafka sends -1; kfake, 0).
		hw := a.HighWatermark
		if a.ErrorCode != 0 {
			hw = -1
		}
		if w != nil && (w.offset != offset || (hw >= 0 && w.hw >= 0 && hw != w.hw)) {
			r.finish(k)
			w = nil
		}
		if w == nil {
			if w = r.start(k, x, offset, committed); w == nil {
				continue
			}
			idle = false
		}
		w.fetches++
		w.last = x.Resp.Time
		if hw >= 0 {
			w.hw = hw
		}
		if a.LastStableOffset >= 0 {
			w.lso = a.LastStableOffset
		}
		if a.ErrorCode != 0 {
			w.errors++
			w.codes.Add(a.ErrorCode)
		}
		if resp.ThrottleMillis > 0 {
			w.throttled++
		}
		w.servers.Add(x.Conn.Server, 1, 0)
		w.conns.Add(x.Conn)
		w.ev.Add(stuck{file: int32(x.Resp.File), packet: x.Resp.Packet, conn: x.Conn, version: x.Req.Version,
			corr: x.Req.Correlation, offset: offset, hw: hw, code: a.ErrorCode})
	}
}

// start opens k's window at offset, reusing one that ended short; nil if
// the table is full.
func (r *rule) start(k peers.Key, x *detectors.Exchange, offset int64, committed bool) *window {
	var w *window
	if n := len(r.free); n > 0 {
		w, r.free = r.free[n-1], r.free[:n-1]
	} else {
		w = new(window)
	}
	servers, conns := w.servers, w.conns
	servers.Reset()
	conns.Reset()
	conns.Max = peers.MaxConns
	*w = window{key: k, offset: offset, hw: -1, lso: -1, committed: committed, first: x.Req.Time,
		fetcher: x.Req.Fetcher.ID(), role: x.Req.Role, servers: servers, conns: conns}
	if !r.wins.Start(k, w) {
		r.recycle(w)
		return nil
	}
	return w
}

// finish ends k's window; one that did not qualify is kept for reuse.
func (r *rule) finish(k peers.Key) {
	if w, qualified := r.wins.Finish(k); w != nil && !qualified {
		r.recycle(w)
	}
}

func (r *rule) recycle(w *window) {
	if len(r.free) < maxFree {
		r.free = append(r.free, w) // nothing else holds it
	}
}

func (r *rule) qualifies(w *window) bool {
	held, _ := w.held()
	return w.fetches >= int64(r.p.MinFetches) && held >= r.p.MinDuration
}

// Findings implements detectors.Rule: one per stalled fetcher and
// partition.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	ws := r.wins.Report(func(a, b *window) bool {
		if !a.first.Equal(b.first) {
			return a.first.Before(b.first)
		}
		return a.key.Less(b.key)
	})
	// Past the findings the Set lists (Pass.MaxFindings), the rest are
	// counted as they are made, not kept: tens of thousands of stalled
	// partitions would otherwise be as many findings in memory at once.
	var cut detectors.NotListed
	n := len(ws)
	if p.MaxFindings > 0 {
		n = min(n, p.MaxFindings)
	}
	out := make([]detectors.Finding, 0, n)
	for _, w := range ws {
		f := finding(p, w.E, w.Open)
		if p.MaxFindings > 0 && len(out) >= p.MaxFindings {
			cut.Add(&f)
			continue
		}
		out = append(out, f)
	}
	return append(out, cut.Summary()...)
}
