package pipeline

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/packet"
)

// The sharded engine runs one deferred flows.Analyzer per worker, each on
// the connections that hash to it, and delivers their events to the
// handlers on one goroutine in the order one analyzer of every packet
// would: by packet, a flush on the clock after the packet's own events,
// and the events of the end ordered as flows.Analyzer.Close orders them.
//
//	reader (this goroutine): read, filter, sinks, shard by connection,
//	    put packets (views of the file's blocks) into the round's batch,
//	    decide flushes
//	  -> worker i: flows (reassembly, framing, decoding, pairing)
//	  -> merger: events in packet order -> node identities, collector,
//	     detectors, --frames
//
// The reader cuts the packets into rounds (roundPackets packets or
// roundBytes bytes); each worker answers every round with its events, so
// the merger can order a round's events as soon as all workers are done
// with it, while the workers go on with the next ones.
//
// Connections never affect each other inside flows except through bounds
// (MaxConns, MaxStreams and the budgets, divided among the workers) and
// the flush of every connection when an ACK proves a hole lost; only then
// can the output differ from one worker's.
const (
	roundPackets = 256
	roundBytes   = 256 << 10
	maxWorkers   = 8
	inflight     = 2 // rounds queued per worker and per result channel
	// blockSize is the size of the blocks the files are read into
	// (blockPool), as capture's own. Blocks and rounds of 256 KiB
	// rather than 1 MiB keep the packets in flight (a few rounds per
	// worker) near the cache that read them: with 1 MiB, two workers
	// spent 10-20 % more CPU on bulk and large copying and checking
	// them, and peak RSS was 10-20 MiB higher.
	blockSize = 256 << 10
)

// workers returns how many workers Options.Workers asks for.
func workers(n int) int {
	if n <= 0 {
		n = min(runtime.GOMAXPROCS(0), maxWorkers)
	}
	return max(1, min(n, maxWorkers))
}

// shardItem is one packet, datagram, loss or flush of a round. A loss
// (rare: a datagram's fragments given up) is kept beside the items, in
// shardIn.losses at index loss: with it in the item (120 bytes of
// addresses and a reason), every packet's item was 224 bytes, written by
// the reader and read and cleared by a worker on the other core; 104
// now.
type shardItem struct {
	seq   uint64
	flush bool
	kind  packet.WorkKind
	loss  int32
	p     capture.Packet
}

// shardIn is one round of packets for one worker, or the end. The
// packets' bytes are views of the capture files' blocks (blockPool),
// except those of datagrams reassembled from fragments, copied into data.
// retire, in worker 0's, holds the blocks the files left during the
// round: they go back to the pool once the round is delivered.
type shardIn struct {
	items  []shardItem
	losses []packet.FragLoss
	data   []byte
	retire [][]byte
	end    *endPos
}

type endPos struct {
	file int
	n    uint64
	t    time.Time
}

// stamped is an event with its place: the packet that caused it, after
// the packet's own events for a flush.
type stamped struct {
	seq   uint64
	flush bool
	ev    flows.Event
}

type brokenConn struct {
	c      *flows.Conn
	file   int
	packet uint64
	why    string
}

type sharded struct {
	n int
	// stopped, set when the run is interrupted, makes the workers skip
	// the rounds still queued (see interrupt).
	stopped atomic.Bool
	sharder *packet.Sharder
	routeFn func(int, *packet.Work) // route, made once
	clock   flows.FlushClock
	window  time.Duration
	workers []*worker
	cur     []*shardIn
	free    chan *shardIn
	// views says that packets' bytes are views of blocks from pool (the
	// source took it: capture.File.UseBlocks), which route need not copy
	views  bool
	pool   blockPool
	seq    uint64
	roundN int
	roundB int
	done   chan struct{}
	closed bool

	// reader's counters, for progress and the end position
	packets, bytes int64
	first, last    time.Time
	lastPkt        endPos

	dl        *flows.Delivery
	listeners *flows.Listeners
	kafka     atomic.Int64
	broken    map[*flows.Conn]*brokenConn
	order     []*brokenConn

	stats flows.Stats
	conns []*flows.Conn
	// merged counts the rounds whose events were delivered.
	merged atomic.Uint64
}

// sharderBounds are the Sharder's bounds of cfg: its IP reassembly's
// and its table's (connections with TLS key logs by their pair of hosts).
func sharderBounds(cfg flows.Config) packet.Bounds {
	return packet.Bounds{FragTimeout: cfg.FragTimeout, MaxFragDatagrams: cfg.MaxFragDatagrams, MaxFragBytes: cfg.MaxFragBytes,
		IdleTimeout: cfg.IdleTimeout, ReorderWindow: cfg.ReorderWindow, ByHosts: cfg.TLSKeys != nil}
}

func newSharded(n int, cfg flows.Config, handlers []flows.Handler) *sharded {
	s := &sharded{
		n:       n,
		sharder: packet.NewSharder(n, sharderBounds(cfg)),
		window:  cfg.ReorderWindow,
		free:    make(chan *shardIn, 4*n*inflight),
		done:    make(chan struct{}),
		broken:  make(map[*flows.Conn]*brokenConn),
		pool:    blockPool{free: make(chan []byte, 4*n*inflight), lists: make(chan [][]byte, 4*n*inflight)},
	}
	s.routeFn = s.route
	s.dl = flows.NewDelivery(handlers...)
	s.dl.Broken = func(c *flows.Conn, file int, packet uint64, p any) {
		if s.broken[c] == nil {
			b := &brokenConn{c: c, file: file, packet: packet, why: fmt.Sprint(p)}
			s.broken[c] = b
			s.order = append(s.order, b)
		}
	}
	// A round's packets stay until its events are delivered (run). The
	// reader learns the listening endpoints for every worker, at each
	// packet's place, so that all agree on what was known when. IP
	// fragments are reassembled here, before sharding (route).
	s.listeners = flows.NewListeners()
	wopt := flows.Worker{StablePackets: true, Listeners: s.listeners, Shards: n, Defragmented: true}
	wcfg := cfg
	wcfg.MaxConns = share(cfg.MaxConns, n)
	wcfg.MaxStreams = share(cfg.MaxStreams, n)
	wcfg.MaxPendingTotal = share(cfg.MaxPendingTotal, n)
	wcfg.BufferBudget = share(cfg.BufferBudget, n)
	for i := 0; i < n; i++ {
		w := &worker{stopped: &s.stopped, in: make(chan *shardIn, inflight), out: make(chan shardOut, inflight), free: s.free, spent: make(chan []stamped, inflight+2),
			pf: s.dl.Prefinger(), merged: &s.merged}
		o := wopt
		o.Sink = w.sink
		w.an = flows.NewWorker(wcfg, o)
		s.workers = append(s.workers, w)
		s.cur = append(s.cur, s.batch())
		go w.run(i)
	}
	go s.merge()
	return s
}

// share divides a bound among n workers (0 stays unbounded).
func share(total, n int) int {
	if total <= 0 {
		return total
	}
	return max(1, (total+n-1)/n)
}

func (s *sharded) batch() *shardIn {
	select {
	case b := <-s.free:
		return b
	default:
		return &shardIn{items: make([]shardItem, 0, roundPackets+8)}
	}
}

// Packet hands p to its worker; p.Data is copied unless it is a view of
// a block (views).
func (s *sharded) Packet(p *capture.Packet) {
	s.seq++
	s.packets++
	s.bytes += int64(p.Len)
	if s.first.IsZero() || p.Time.Before(s.first) {
		s.first = p.Time
	}
	if p.Time.After(s.last) {
		s.last = p.Time
	}
	s.listeners.Observe(p, s.seq)
	s.sharder.Route(p, s.routeFn)
	s.lastPkt = endPos{file: p.File, n: p.N}
	if s.clock.Due(p.Time, s.window) {
		f := shardItem{seq: s.seq, flush: true, p: *p}
		f.p.Data = nil
		for _, b := range s.cur {
			b.items = append(b.items, f)
		}
	}
	s.roundN++
	s.roundB += len(p.Data)
	if s.roundN >= roundPackets || s.roundB >= roundBytes {
		s.send()
	}
}

// route adds what the sharder routes to worker w to the round, copying
// the bytes of a packet that is not a view of a block.
func (s *sharded) route(w int, wk *packet.Work) {
	b := s.cur[w]
	it := shardItem{seq: s.seq, kind: wk.Kind}
	if wk.Kind == packet.WorkLoss {
		it.loss = int32(len(b.losses))
		b.losses = append(b.losses, wk.Loss)
	}
	if p := wk.Packet; p != nil {
		it.p = *p
		if !s.views || wk.Kind != packet.WorkPacket {
			start := len(b.data)
			b.data = append(b.data, p.Data...)
			it.p.Data = b.data[start:len(b.data):len(b.data)]
		}
	}
	b.items = append(b.items, it)
}

// send ends the round.
func (s *sharded) send() {
	s.cur[0].retire, s.pool.retired = s.pool.retired, nil
	for w, b := range s.cur {
		s.workers[w].in <- b
		s.cur[w] = s.batch()
	}
	s.roundN, s.roundB = 0, 0
}

// Tick is not used: live captures run one analyzer (see run).
func (s *sharded) Tick(time.Time) {}

// interrupt makes the workers skip the packets read but not yet
// analysed: the rounds queued for them (a few MiB of packets) can take
// seconds on hostile traffic, and a run stops within a second of Ctrl-C.
// The report is of the packets analysed (Stats.Packets).
func (s *sharded) interrupt() { s.stopped.Store(true) }

// Close ends the analysis: the workers close their analyzers at the
// capture's last TCP packet and the merger delivers what is left.
func (s *sharded) Close() {
	if s.closed {
		return
	}
	s.closed = true
	// Datagrams still missing fragments are lost, counted before the
	// analyzers end, as one analyzer counts them (Analyzer.Close).
	s.sharder.End(s.routeFn)
	s.send()
	end := &endPos{file: s.lastPkt.file, n: s.lastPkt.n, t: s.last}
	for _, w := range s.workers {
		w.in <- &shardIn{end: end}
		close(w.in)
	}
	<-s.done
	// The rounds' buffers are not needed for the report.
	for len(s.free) > 0 {
		<-s.free
	}
	for len(s.pool.free) > 0 {
		<-s.pool.free
	}
	s.cur = nil
	for _, w := range s.workers {
		w.held = nil
		s.stats.Add(w.an.Stats())
		s.conns = append(s.conns, w.an.Conns()...)
	}
	// The workers' analyzers deliver nothing themselves: what was kept
	// for the handlers was kept here.
	s.stats.KeptDropped += s.dl.KeptDropped()
	slices.SortFunc(s.conns, func(a, b *flows.Conn) int { return a.ID - b.ID })
	for _, b := range s.order {
		s.stats.InternalErrors++
		b.c.Abandon(b.file, b.packet, b.why)
	}
}

// shardOut is a worker's answer to one round: its events, and the
// chunks their frames were copied into, which the merger gives back to
// the worker's analyzer once it has delivered them (flows.Analyzer.Seal),
// and the round's retire, which it gives back to the pool then.
type shardOut struct {
	evs    []stamped
	chunks [][]byte
	retire [][]byte
}

// worker runs one analyzer over its rounds.
type worker struct {
	an      *flows.Analyzer
	work    packet.Work
	stopped *atomic.Bool
	in      chan *shardIn
	out     chan shardOut
	evs     []stamped
	at      stamped // the place of the events now sunk
	free    chan<- *shardIn
	// spent takes event slices back from the merger for reuse
	spent chan []stamped
	// pf fingerprints the records of requests here rather than in the
	// merger (flows.Prefinger)
	pf *flows.Prefinger
	// held are the rounds whose events the merger may not have
	// delivered yet (their frames may be views of their packets:
	// flows.Config.StablePackets); rounds counts the rounds sent, merged
	// those the merger delivered.
	held   []*shardIn
	rounds uint64
	merged *atomic.Uint64
}

// take returns an empty event slice, a used one if the merger gave one
// back.
func (w *worker) take() []stamped {
	select {
	case evs := <-w.spent:
		return evs[:0]
	default:
		return nil
	}
}

// closeChunk is how many events of the end go to the merger at a time.
const closeChunk = 4096

func (w *worker) sink(ev flows.Event) {
	if ev.Req != nil {
		w.pf.Request(ev.Req)
	}
	st := w.at
	st.ev = ev
	w.evs = append(w.evs, st)
	if st.seq == endSeq && len(w.evs) >= closeChunk {
		w.out <- shardOut{evs: w.evs}
		w.evs = nil
	}
}

// run answers each round with its events (possibly none), and the end
// with the events of Close in chunks; then closes out.
func (w *worker) run(i int) {
	defer close(w.out)
	label("worker-" + strconv.Itoa(i))
	for b := range w.in {
		if b.end != nil {
			w.at = stamped{seq: endSeq}
			w.an.CloseAt(b.end.file, b.end.n, b.end.t)
			if len(w.evs) > 0 {
				w.out <- shardOut{evs: w.evs}
			}
			return
		}
		for i := range b.items {
			if w.stopped.Load() {
				break // interrupted: the rest of what was read is not analysed
			}
			it := &b.items[i]
			w.at = stamped{seq: it.seq, flush: it.flush}
			switch {
			case it.flush:
				w.an.Flush(&it.p)
			case it.kind == packet.WorkLoss:
				w.work = packet.Work{Kind: it.kind, Loss: b.losses[it.loss], Seq: it.seq}
				w.an.Do(&w.work)
			default:
				w.work = packet.Work{Kind: it.kind, Packet: &it.p, Seq: it.seq}
				w.an.Do(&w.work)
			}
		}
		w.out <- shardOut{evs: w.evs, chunks: w.an.Seal(nil), retire: b.retire}
		b.retire = nil
		w.evs = w.take()
		w.rounds++
		w.held = append(w.held, b)
		for len(w.held) > 0 && w.rounds-uint64(len(w.held)) < w.merged.Load() {
			b := w.held[0]
			w.held = append(w.held[:0], w.held[1:]...)
			clear(b.items) // no references into old data
			clear(b.losses)
			b.items, b.losses, b.data = b.items[:0], b.losses[:0], b.data[:0]
			select {
			case w.free <- b:
			default:
			}
		}
	}
}

// merge delivers the workers' events in packet order: a round at a time
// (each worker sends one slice per round), then the events of the end,
// merged as the workers send them.
func (s *sharded) merge() {
	defer close(s.done)
	label("merger")
	cur := make([][]stamped, s.n)
	idx := make([]int, s.n)
	closed := make([]bool, s.n)
	chunks := make([][][]byte, s.n)
	retire := make([][][]byte, s.n)
	// next makes worker w's cursor point at an event, if any is left in
	// this round (or, at the end, at all).
	next := func(w int, end bool) bool {
		for idx[w] >= len(cur[w]) {
			if !end || closed[w] {
				return false
			}
			o, ok := <-s.workers[w].out
			if !ok {
				closed[w] = true
				return false
			}
			cur[w], idx[w] = o.evs, 0
		}
		return true
	}
	for {
		end := false
		for w, wk := range s.workers {
			o, ok := <-wk.out
			if !ok {
				closed[w] = true
			}
			evs := o.evs
			cur[w], idx[w], chunks[w], retire[w] = evs, 0, o.chunks, o.retire
			if len(evs) > 0 && evs[0].seq == endSeq || !ok {
				end = true
			}
		}
		// Every worker gets every round, so they end their rounds together:
		// once one sends events of the end (or closes), all do.
		for {
			best := -1
			for w := range cur {
				if !next(w, end) {
					continue
				}
				if best < 0 || before(&cur[w][idx[w]], &cur[best][idx[best]]) {
					best = w
				}
			}
			if best < 0 {
				break
			}
			s.deliver(&cur[best][idx[best]].ev)
			cur[best][idx[best]] = stamped{}
			idx[best]++
		}
		if end {
			return
		}
		s.merged.Add(1)
		for w, evs := range cur {
			if len(chunks[w]) > 0 {
				s.workers[w].an.Recycle(chunks[w])
				chunks[w] = nil
			}
			if len(retire[w]) > 0 {
				// Every worker is done with the round and its events
				// are delivered: no frame is a view of these blocks.
				s.pool.recycle(retire[w])
				retire[w] = nil
			}
			if cap(evs) > 0 {
				select {
				case s.workers[w].spent <- evs:
				default:
				}
			}
		}
	}
}

// label names the goroutine's part in CPU profiles (pprof tags
// "stage"), so that a profile tells the reader, the workers and the
// merger apart.
func label(stage string) {
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("stage", stage)))
}

// endSeq places the events of Close after every packet.
const endSeq = ^uint64(0)

// before orders two events of different workers; equal ones keep the
// order of the workers.
func before(a, b *stamped) bool {
	if a.seq != b.seq {
		return a.seq < b.seq
	}
	if a.seq == endSeq {
		return flows.CloseLess(&a.ev, &b.ev)
	}
	if a.flush != b.flush {
		return !a.flush
	}
	// Events of a flush come from several streams, each analyzer's in
	// the order of their streams' first packets.
	return a.flush && a.ev.Order < b.ev.Order
}

// deliver hands one event to the handlers, unless its connection was
// abandoned after a handler panicked on it.
func (s *sharded) deliver(ev *flows.Event) {
	if c := ev.Connection(); c != nil && s.broken[c] != nil {
		return
	}
	opened := s.dl.Opened
	s.dl.Deliver(ev)
	if s.dl.Opened != opened {
		s.kafka.Store(int64(s.dl.Opened))
	}
}

// blockPool lends the capture files the blocks they read into
// (capture.Blocks), so that a round's packets are views of them rather
// than copies. A block a file leaves (Done) is retired with the round
// being built, which holds its last packets, and reused once that round
// is delivered (merge): every worker is done with it, and the frames
// handed on as views of its packets (flows.Config.StablePackets) are
// delivered. The blocks in flight are bounded by the rounds in flight.
//
// The lists of retired blocks come back too (lists): a new list a round
// was about 150 KB of garbage a GB on bench's large shape (a block left
// nearly every round), most of what a run made once its tables were
// full.
type blockPool struct {
	free chan []byte
	// retired are the blocks left during the round being built (reader)
	retired [][]byte
	lists   chan [][]byte
}

// Get implements capture.Blocks.
func (p *blockPool) Get(n int) []byte {
	if n <= blockSize {
		select {
		case b := <-p.free:
			return b[:0]
		default:
		}
	}
	return make([]byte, 0, max(n, blockSize))
}

// Done implements capture.Blocks.
func (p *blockPool) Done(b []byte) {
	if p.retired == nil {
		select {
		case p.retired = <-p.lists:
		default:
		}
	}
	p.retired = append(p.retired, b)
}

// recycle makes blocks of a delivered round free for Get (merger).
// The list itself is cleared and kept for a round to come.
func (p *blockPool) recycle(bs [][]byte) {
	for _, b := range bs {
		if cap(b) != blockSize {
			continue // a record's block of its own: left to the collector
		}
		select {
		case p.free <- b:
		default:
		}
	}
	clear(bs)
	select {
	case p.lists <- bs[:0]:
	default:
	}
}
