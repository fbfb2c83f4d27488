package correlate

import (
	"cmp"
	"container/heap"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
)

// SourceConfig says which topic to read back and how.
type SourceConfig struct {
	Brokers []string
	Topic   string
	// Group, if set, shares the topic's partitions with the other
	// correlators of the consumer group; else every partition is read
	// from its start.
	Group string
	// UntilEnd ends the input when every partition assigned has reached
	// the end offset it had when assigned; in a group, once no
	// rebalance came for Quiet after that.
	UntilEnd bool
	// SessionTimeout is the group session's (45 s when 0); Quiet is
	// SessionTimeout plus 2 s when 0.
	SessionTimeout time.Duration
	Quiet          time.Duration
	// CoverWait (in a group, with UntilEnd; DefaultCoverWait when 0)
	// bounds how long, once its own partitions are read to their end
	// and the group quiet, the input waits for every other partition of
	// the topic to be read to the end by a member (its offset committed
	// after its report, or marked read by a member about to report), or
	// to come to it when the session timeout evicts a member that died.
	// Past it the input ends, and Uncovered names those left.
	CoverWait time.Duration
	// Note is told, in a group with UntilEnd, what the end waits for.
	Note func(string)
	// Ranges, without a group, are the partitions to read and from and
	// to which offsets (a takeover, Source.Settle), each in a lane of
	// its own as in a group; UntilEnd ends at their To.
	Ranges []Range
	// Window is the reorder window of the merge by time (DefaultReorderWindow
	// when 0); MaxHeld bounds the records it holds (DefaultMaxHeld).
	Window  time.Duration
	MaxHeld int
	// MaxHeldBytes bounds the bytes the records held take
	// (DefaultMaxHeldBytes): half of it for each partition's merge, half
	// for the merge across partitions; past it the earliest go before
	// their time (Counts.Early).
	MaxHeldBytes int64
	TLS          *tls.Config
	SASL         sasl.Mechanism
	// Warn is told of each record that cannot be used (malformed, of
	// another schema version): the first maxWarnings of them; and, once
	// per agent, of an agent whose batches come without the record
	// fingerprints PrintKey makes.
	Warn func(error)
	// PrintKey is the key the agents make record fingerprints with
	// (nil: keyless); fingerprints made otherwise are not compared.
	PrintKey []byte
	// Assigned is told of the partitions a group gave or took.
	Assigned func(assigned, revoked []int32)
	// Timeout: Next returns ErrNoAnswer when the cluster has not
	// answered within it of Open (DefaultTimeout when 0): a broker that
	// never answers is an error, not an empty input.
	Timeout time.Duration
	Opts    []kgo.Opt
}

// Defaults of the merge.
const (
	DefaultReorderWindow = 2 * time.Second
	DefaultMaxHeld       = 200000
	DefaultMaxHeldBytes  = 64 << 20
	// firstPollRecords and maxPollRecords bound Source.pollMax.
	firstPollRecords = 256
	maxPollRecords   = 1 << 16
	DefaultTimeout   = 30 * time.Second
	DefaultCoverWait = 2 * time.Minute
	maxWarnings      = 20
	// maxIdentities is how many records' identities (agent, run, seq)
	// are remembered to recognise one read twice (about 100 bytes each).
	maxIdentities = 1 << 18
)

// ErrNoAnswer is Next's error when the cluster did not answer within
// SourceConfig.Timeout of Open.
var ErrNoAnswer = errors.New("no answer")

// Counts are what the source read.
type Counts struct {
	Records, Bytes int64
	// Exchanges and ConnEvents were rebuilt; Findings and Other skipped
	// (finding records belong on the findings topic, other types are a
	// later schema's).
	Exchanges, ConnEvents, Findings, Other int64
	// Malformed records are not JSON of the schema, or of another
	// version (Version); Unusable parsed but could not be rebuilt.
	Malformed, Version, Unusable int64
	// Late were released out of order, past the reorder window.
	Late int64
	// Dropped were held for a partition revoked before their turn.
	Dropped int64
	// The bounds of hostile records (issue 31): Duplicates were read
	// again (the same agent, run and seq) and skipped; TooLarge and
	// BadTime were refused (and are in Malformed); Clipped had strings
	// cut to MaxString; Early were released before their reorder window
	// for MaxHeldBytes; Folded are connections folded into the totals
	// past the connection table's bound.
	Duplicates, TooLarge, BadTime, Clipped, Early, Folded int64
	// Twice were a second agent's view of an exchange or connection
	// event another agent's records showed (the client's host and the
	// broker's): skipped, after the clock skew took both.
	Twice  int64
	Agents []string
	// Partitions are those read (held at the end, in a group).
	Partitions []int32
}

// Routed is a record's events and its lane.
type Routed struct {
	Lane   int32
	Events Events
}

// Ready is what one Next gives: the lanes whose state must be forgotten
// (partitions revoked), then the records to deliver, in order.
type Ready struct {
	Revoked []int32
	Items   []Routed
}

// Source reads an export topic back as events.
type Source struct {
	cfg   SourceConfig
	cl    *kgo.Client
	name  string
	nodes *cluster.Nodes
	rb    *Rebuilder
	// mergers merge each Kafka partition's records by time: one
	// partition holds every agent's records of its keys.
	mergers map[int32]*Merger
	late    int64 // of mergers dropped
	// across holds what the partitions' merges released until no
	// partition still behind could give an earlier record: the
	// partitions' records, merged in time across them.
	across Merger
	// pushed is when each partition's merge last took a record (wall
	// clock): one quiet for Window gives what it holds.
	pushed map[int32]time.Time
	// Skew, if set, is the records' clock correction (Stats' Skew);
	// Observe, if set, sees every record parsed, Unreadable every error
	// of Parse (Stats.Add, Stats.Unreadable).
	Skew       func(agent string) (time.Duration, bool)
	Observe    func(r *Record)
	Unreadable func(err error)

	mu      sync.Mutex
	parts   map[int32]*partState
	revoked []int32
	changed time.Time // last assignment change
	joined  bool
	// The end in a group (covered): waitFrom is when this member was
	// first at its end since the last change, marked whether its
	// partitions were marked read since; want are the end offsets the
	// others' partitions must be read to; checked when they were last
	// asked; uncovered those left at the end; said the last Note.
	waitFrom  time.Time
	marked    bool
	want      map[int32]int64
	checked   time.Time
	uncovered []int32
	said      string
	// final are the offsets read of the partitions held at the end
	// (UntilEnd, in a group): what Commit commits.
	final map[int32]int64
	// opened is when Open ran; answered whether the cluster ever
	// answered (a Metadata response, a group's assignment, a record);
	// noAnswer why not, the last error met.
	opened   time.Time
	answered bool
	noAnswer error
	ended    bool
	counts   Counts
	agents   map[string]bool
	out      []Item
	// pollMax is how many records a poll takes, adapted after each poll
	// so that one poll's records hold about a quarter of MaxHeldBytes: a
	// fetch is bounded in compressed bytes, and all it brought, parsed
	// at once and released early together, went far past the bound.
	pollMax  int
	warnings int
	first    time.Time
	last     time.Time
	// seen are the identities of the last maxIdentities records read,
	// and their partitions: a partition revoked forgets its own, read
	// again by right when it comes back.
	seen   recent[identity, int32]
	idSeed maphash.Seed
	// assembling are the split exchanges waiting for their records
	// (assemble.go), queue them in the order begun.
	assembling map[exKey]*assembly
	queue      []*assembly
	// answers are the exchanges rebuilt whose answer comes later than
	// the records released so far (routed), by the answer's time.
	answers   answerHeap
	answerSeq uint64
	// lastAnswer is, per connection, the time of its latest exchange
	// waiting in answers.
	lastAnswer map[*flows.ConnInfo]int64
}

// identity is a record's agent and run (hashed) and seq.
type identity struct {
	run uint64
	seq int64
}

// partState follows one partition for --until-end.
type partState struct {
	next    int64 // next offset to read
	from    int64 // where reading began (committed, or the log start)
	end     int64 // end offset when assigned, -1 until known
	hw      int64 // the high watermark the last fetch gave
	pending bool  // its start and end are still to be asked
}

// Open makes the consumer. It connects lazily; an unreachable Kafka shows
// as no records (and the client's errors through Next).
func Open(cfg SourceConfig) (*Source, error) {
	if len(cfg.Brokers) == 0 || cfg.Topic == "" {
		return nil, errors.New("no brokers or no topic")
	}
	orDefault(&cfg.Window, DefaultReorderWindow)
	orDefault(&cfg.MaxHeld, DefaultMaxHeld)
	orDefault(&cfg.SessionTimeout, 45*time.Second)
	orDefault(&cfg.Quiet, cfg.SessionTimeout+2*time.Second)
	orDefault(&cfg.Timeout, DefaultTimeout)
	orDefault(&cfg.CoverWait, DefaultCoverWait)
	orDefault(&cfg.MaxHeldBytes, DefaultMaxHeldBytes)
	s := &Source{cfg: cfg, nodes: cluster.NewNodes(), parts: map[int32]*partState{}, agents: map[string]bool{},
		seen: newRecent[identity, int32](maxIdentities), idSeed: maphash.MakeSeed(), want: map[int32]int64{},
		assembling: map[exKey]*assembly{}, lastAnswer: map[*flows.ConnInfo]int64{}}
	s.name = "kafka://" + strings.Join(cfg.Brokers, ",") + "/" + cfg.Topic
	s.rb = NewRebuilder(s.nodes)
	s.rb.PrintFn = decode.PrintFunc(cfg.PrintKey)
	s.rb.NoPrints = func(agent, why string) {
		if s.cfg.Warn != nil {
			s.cfg.Warn(fmt.Errorf("agent %q %s: duplicate-batches compares its batches by CRC only, not records re-batched (MirrorMaker 2); "+
				"counted in bounds_reached as duplicate-batches.batches_without_fingerprints", agent, why))
		}
	}
	s.rb.Skew = func(agent string) (time.Duration, bool) {
		if s.Skew == nil {
			return 0, false
		}
		return s.Skew(agent)
	}
	s.mergers, s.pushed = map[int32]*Merger{}, map[int32]time.Time{}
	s.pollMax = firstPollRecords
	s.across = Merger{Window: math.MaxInt64, Max: cfg.MaxHeld, MaxBytes: cfg.MaxHeldBytes / 2}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID("kfsniff-correlate"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	if len(cfg.Ranges) > 0 && cfg.Group == "" {
		from := map[int32]kgo.Offset{}
		for _, r := range cfg.Ranges {
			from[r.Partition] = kgo.NewOffset().At(r.From)
			s.parts[r.Partition] = &partState{next: r.From, from: r.From, end: r.To}
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: from}))
		s.joined = true
	} else {
		opts = append(opts, kgo.ConsumeTopics(cfg.Topic))
	}
	if cfg.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(cfg.TLS))
	}
	if cfg.SASL != nil {
		opts = append(opts, kgo.SASL(cfg.SASL))
	}
	if cfg.Group != "" {
		opts = append(opts,
			kgo.ConsumerGroup(cfg.Group),
			// Offsets are committed at the end, after the report, for
			// the partitions held then: a correlator killed mid-way
			// committed nothing, and its partitions are read again
			// from the last report by whoever takes them.
			kgo.DisableAutoCommit(),
			kgo.SessionTimeout(cfg.SessionTimeout),
			kgo.HeartbeatInterval(min(3*time.Second, cfg.SessionTimeout/3)),
			kgo.BlockRebalanceOnPoll(),
			kgo.OnPartitionsAssigned(s.assigned),
			kgo.OnPartitionsRevoked(s.revoke),
			kgo.OnPartitionsLost(s.revoke),
		)
	}
	opts = append(opts, cfg.Opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	s.cl = cl
	s.changed = time.Now()
	s.opened = s.changed
	return s, nil
}

// orDefault sets *v to def when it is 0 or less (not set).
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Name is the input as the report names it.
func (s *Source) Name() string { return s.name }

// Nodes are the node identities the records taught.
func (s *Source) Nodes() *cluster.Nodes { return s.nodes }

// Conns are the connections rebuilt.
func (s *Source) Conns() []*flows.Conn { return s.rb.Conns() }

// End is where the capture of an agent's records delivered so far ended
// (Rebuilder.End), false for an agent not read.
func (s *Source) End(agent string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rb.End(agent)
}

// Span is the corrected capture time of the first and last record.
func (s *Source) Span() (first, last time.Time) { return s.first, s.last }

func (s *Source) assigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var got []int32
	for _, p := range m[s.cfg.Topic] {
		s.parts[p] = &partState{end: -1, pending: true}
		got = append(got, p)
	}
	s.joined, s.changed, s.answered = true, time.Now(), true
	if s.cfg.Assigned != nil && len(got) > 0 && !s.ended {
		slices.Sort(got)
		s.cfg.Assigned(got, nil)
	}
}

// revoke forgets what a partition taken away gave: its records held,
// and (through Next's Revoked) its lane's state. Its offsets were not
// committed: its next owner reads it again from the last report.
func (s *Source) revoke(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lost []int32
	for _, p := range m[s.cfg.Topic] {
		if _, ok := s.parts[p]; !ok {
			continue
		}
		delete(s.parts, p)
		if m := s.mergers[p]; m != nil {
			s.counts.Dropped += int64(m.Held())
			s.late += m.Late
			delete(s.mergers, p)
		}
		if s.cfg.Group != "" {
			s.counts.Dropped += int64(s.across.Drop(p))
			for k, a := range s.assembling {
				if n := a.drop(p); n > 0 {
					s.counts.Dropped += int64(n)
					if len(a.recs) == 0 {
						a.done = true
						delete(s.assembling, k)
					}
				}
			}
			n := len(s.answers)
			s.answers = slices.DeleteFunc(s.answers, func(a answer) bool { return a.lane == p })
			if len(s.answers) != n {
				s.counts.Dropped += int64(n - len(s.answers))
				heap.Init(&s.answers)
				clear(s.lastAnswer)
				for _, a := range s.answers {
					c := &a.x.X.Conn.ConnInfo
					s.lastAnswer[c] = max(s.lastAnswer[c], a.at)
				}
			}
		}
		for id, q := range s.seen.set {
			if q == p {
				delete(s.seen.set, id)
			}
		}
		s.revoked = append(s.revoked, p)
		lost = append(lost, p)
	}
	s.changed = time.Now()
	if s.cfg.Assigned != nil && len(lost) > 0 && !s.ended {
		slices.Sort(lost)
		s.cfg.Assigned(nil, lost)
	}
}

// Next waits for records (at most about a second, so that the caller
// sees its context and clock) and returns those ready to deliver. At the
// end of the input (UntilEnd) it returns what is left and io.EOF.
func (s *Source) Next(ctx context.Context) (Ready, error) {
	if err := s.silent(); err != nil {
		return Ready{}, err
	}
	if s.cfg.Group == "" && !s.joined {
		// Bounded by the time-out: kgo retries an unreachable broker
		// for longer.
		sctx, cancel := context.WithDeadline(ctx, s.opened.Add(s.cfg.Timeout))
		err := s.startAll(sctx)
		cancel()
		if err != nil {
			s.mu.Lock()
			if !s.answered {
				s.noAnswer = err
			}
			s.mu.Unlock()
			return Ready{}, cmp.Or(s.silent(), err)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	fs := s.cl.PollRecords(pctx, s.pollMax)
	cancel()
	defer s.cl.AllowRebalance()
	s.mu.Lock()
	defer s.mu.Unlock()
	var b Ready
	b.Revoked, s.revoked = s.revoked, nil
	s.out = s.out[:0]
	var parsed, parsedBytes int64
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		s.warn(fmt.Errorf("reading %s partition %d: %w", t, p, err))
	})
	fs.EachRecord(func(r *kgo.Record) {
		s.answered = true
		st := s.parts[r.Partition]
		if s.cfg.Group != "" && st == nil {
			return // revoked since the fetch
		}
		if st == nil {
			st = &partState{end: -1, pending: true}
			s.parts[r.Partition] = st
		}
		if len(s.cfg.Ranges) > 0 && r.Offset >= st.end {
			return // past the range taken over
		}
		if r.Offset+1 > st.next {
			st.next = r.Offset + 1
		}
		s.counts.Records++
		s.counts.Bytes += int64(len(r.Value))
		rec, err := Parse(r.Value)
		parsed++
		parsedBytes += int64(rec.Size())
		if err != nil {
			if s.Unreadable != nil {
				s.Unreadable(err)
			}
			switch {
			case errors.Is(err, ErrVersion):
				s.counts.Version++
			case errors.Is(err, ErrTooLarge):
				s.counts.TooLarge++
				s.counts.Malformed++
			case errors.Is(err, ErrTime):
				s.counts.BadTime++
				s.counts.Malformed++
			default:
				s.counts.Malformed++
			}
			s.warn(fmt.Errorf("%s partition %d offset %d: %w", r.Topic, r.Partition, r.Offset, err))
			return
		}
		if s.again(&rec, r.Partition) {
			s.counts.Duplicates++
			s.warn(fmt.Errorf("%s partition %d offset %d: agent %q run %s record %d read again: skipped", r.Topic, r.Partition, r.Offset,
				rec.Agent, rec.Run, rec.Seq))
			return
		}
		if rec.Clipped > 0 {
			s.counts.Clipped++
		}
		if s.Observe != nil {
			s.Observe(&rec)
		}
		s.rb.Learn(&rec)
		switch rec.Type {
		case TypeExchange, TypeConn:
		case TypeFinding:
			s.counts.Findings++
			return
		default:
			s.counts.Other++
			return
		}
		if !s.agents[rec.Agent] && len(s.agents) < 4096 {
			s.agents[rec.Agent] = true
		}
		lane := int32(0)
		if s.cfg.Group != "" || len(s.cfg.Ranges) > 0 {
			lane = r.Partition
		}
		at := s.rb.Time(&rec).UnixNano()
		if rec.Type == TypeConn && rec.Event == EventEnd {
			// Not merged: it would move its partition's time on and
			// release the records before it that wait for a name.
			s.captureEnd(at, &rec)
			return
		}
		m := s.mergers[r.Partition]
		if m == nil {
			m = &Merger{Window: s.cfg.Window, Max: s.cfg.MaxHeld, MaxBytes: s.cfg.MaxHeldBytes / 2}
			s.mergers[r.Partition] = m
		}
		s.out = m.Push(Item{Lane: lane, At: at, Rec: &rec}, s.out)
		s.pushed[r.Partition] = time.Now()
	})
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if st := s.parts[p.Partition]; st != nil && p.HighWatermark > st.hw {
			st.hw = p.HighWatermark
		}
	})
	if parsed > 0 {
		s.pollMax = int(min(max(s.cfg.MaxHeldBytes/4*parsed/max(parsedBytes, 1), 1), maxPollRecords))
	}
	s.counts.Late, s.counts.Early = s.late, s.across.Early
	for _, m := range s.mergers {
		s.counts.Late += m.Late
		s.counts.Early += m.Early
	}
	if err := s.resolve(ctx); err != nil && ctx.Err() == nil {
		s.warn(err)
	}
	var end error
	if s.cfg.UntilEnd && s.atEnd(ctx) {
		s.out = s.flush(s.out)
		s.ended = true
		end = io.EOF
		if s.cfg.Group != "" {
			s.final = map[int32]int64{}
			for p, st := range s.parts {
				s.final[p] = st.next
			}
		}
	} else {
		s.out = s.release(s.out)
	}
	b.Items = s.rebuild(s.out, b.Items, end == io.EOF)
	return b, end
}

// again tells a record whose identity (agent, run, seq) was read among
// the last maxIdentities, and remembers this one's. Records of agents
// before run and seq have none: never taken for one read again.
func (s *Source) again(r *Record, part int32) bool {
	if r.Run == "" || r.Seq <= 0 {
		return false
	}
	return !s.seen.add(identity{run: maphash.Comparable(s.idSeed, [2]string{r.Agent, r.Run}), seq: r.Seq}, part)
}

// Bounds are the counts of what the bounds on hostile records kept out,
// by the names of the report's totals.bounds_reached (zero ones left out).
func (s *Source) Bounds() map[string]int64 {
	c := s.Counts()
	m := map[string]int64{
		"correlate_duplicate_records": c.Duplicates, "correlate_records_too_large": c.TooLarge,
		"correlate_records_time_refused": c.BadTime, "correlate_records_strings_cut": c.Clipped,
		"correlate_records_released_early": c.Early, "correlate_connections_folded": c.Folded,
	}
	maps.DeleteFunc(m, func(_ string, v int64) bool { return v <= 0 })
	return m
}

// Evicted sums the counters of the connections folded past the
// connection table's bound (pipeline's RunRemote puts them in the
// report's totals, as flows does for a file's).
func (s *Source) Evicted() flows.EvictedConns {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rb.Evicted()
}

// silent is ErrNoAnswer, with the last error met, once the cluster has
// not answered within the time-out.
func (s *Source) silent() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answered || time.Since(s.opened) < s.cfg.Timeout {
		return nil
	}
	why := ""
	if s.noAnswer != nil {
		why = ": " + s.noAnswer.Error()
	}
	return fmt.Errorf("%w from %s within %s%s", ErrNoAnswer, strings.Join(s.cfg.Brokers, ","), s.cfg.Timeout, why)
}

// Answered says whether the cluster ever answered.
func (s *Source) Answered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answered
}

// release moves what the partitions' merges let go into the merge
// across partitions, and returns what no partition still behind its
// high watermark (or not yet asked where it starts) can precede: a
// correlator catching up reads one partition's hours before another's,
// which must not make the second's records late.
func (s *Source) release(items []Item) []Item {
	s.across.held.add(items...)
	heap.Init(&s.across.held)
	bound := int64(math.MaxInt64)
	now := time.Now()
	for p, st := range s.parts {
		behind := st.pending || st.next < max(st.end, st.hw)
		m := s.mergers[p]
		if !behind && m != nil && m.Held() > 0 && now.Sub(s.pushed[p]) >= s.cfg.Window {
			// Quiet: what it holds can wait no longer.
			for _, it := range m.Flush(nil) {
				heap.Push(&s.across.held, it)
			}
		}
		if !behind && (m == nil || m.Held() == 0) {
			continue
		}
		if m == nil || !m.outSet {
			return items[:0] // nothing known of it yet
		}
		// Its later records come at m.out or after (or late).
		bound = min(bound, m.out)
	}
	out := items[:0]
	for s.across.held.Len() > 0 {
		switch {
		case s.across.held.first().At <= bound || s.across.held.Len() > s.across.Max:
		case s.across.held.bytes > s.across.MaxBytes:
			s.across.Early++
		default:
			return out
		}
		out = append(out, heap.Pop(&s.across.held).(Item))
	}
	return out
}

// Flush returns every record still held (the end of the run).
func (s *Source) Flush() Ready {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b Ready
	b.Revoked, s.revoked = s.revoked, nil
	s.out = s.flush(s.out[:0])
	b.Items = s.rebuild(s.out, nil, true)
	s.ended = true
	return b
}

// flush appends what every partition's merge holds, in time order
// across them.
func (s *Source) flush(out []Item) []Item {
	s.across.held.add(out...)
	out = out[:0]
	for _, m := range s.mergers {
		s.across.held.add(m.Flush(nil)...)
	}
	heap.Init(&s.across.held)
	return s.across.Flush(out)
}

// rebuild turns the items released into events, a split exchange's
// records into one exchange (assemble.go); final delivers the split
// exchanges still waiting for records.
func (s *Source) rebuild(items []Item, out []Routed, final bool) []Routed {
	for i := range items {
		it := &items[i]
		out = s.expire(it.At, out)
		if r := it.Rec; r.Type == TypeExchange && r.Parts > 1 {
			k := exKey{r.Agent, r.Run, r.Conn, r.Corr, r.API}
			a := s.assembling[k]
			if a == nil {
				if len(s.assembling) >= maxAssembling {
					out = s.expire(math.MaxInt64, out)
				}
				a = &assembly{key: k, at: it.At}
				s.assembling[k] = a
				s.queue = append(s.queue, a)
			}
			a.recs = append(a.recs, laned{r, it.Lane})
			items[i] = Item{}
			if len(a.recs) >= r.Parts {
				out = s.assembled(a, out)
			}
			continue
		}
		ev, err := s.rb.Rebuild(it.Rec)
		if err != nil {
			s.counts.Unusable++
			s.warn(fmt.Errorf("agent %q: %w", it.Rec.Agent, err))
			continue
		}
		if ev.X == nil && ev.Conn == nil && ev.Req == nil && ev.Opened == nil {
			continue // a second agent's view (Rebuilder.Twice)
		}
		out = s.routed(it.Lane, it.At, it.Rec.Type, ev, out)
		items[i] = Item{}
	}
	if final {
		out = s.expire(math.MaxInt64, out)
		out = s.releaseAnswers(math.MaxInt64, out)
	}
	return out
}

// captureEnd takes an agent's "end" record (at: its ts_ns, the capture's last
// packet, on the reference clock): the span of the records read reaches
// the capture's first and last packets, as a file's analysis spans them.
func (s *Source) captureEnd(at int64, r *Record) {
	s.rb.reached(r.Agent, r.TS)
	if t := time.Unix(0, at).UTC(); t.After(s.last) {
		s.last = t
	}
	if r.First.Set && r.First.V <= r.TS {
		if t := time.Unix(0, at-(r.TS-r.First.V)).UTC(); s.first.IsZero() || t.Before(s.first) {
			s.first = t
		}
	}
}

// expire delivers the split exchanges that waited for their records past
// the reorder window of capture time (all of them when at is
// math.MaxInt64), with the records that came.
func (s *Source) expire(at int64, out []Routed) []Routed {
	for len(s.queue) > 0 {
		a := s.queue[0]
		if !a.done && at != math.MaxInt64 && a.at >= at-int64(s.cfg.Window) {
			break
		}
		s.queue[0] = nil
		s.queue = s.queue[1:]
		if !a.done {
			out = s.assembled(a, out)
		}
	}
	if len(s.queue) == 0 {
		s.queue = nil
	}
	return out
}

// assembled delivers a split exchange, whole or with what came: one
// piece per lane its records came in (in a group, the export partition
// each was keyed to), so that each partition's rules see its partitions'
// batches. The piece with the exchange's first record (by seq) comes
// first and stands for the exchange; the others are marked
// flows.Exchange.Again, counted once as the file counts it. Without a
// group there is one lane, and one piece.
func (s *Source) assembled(a *assembly, out []Routed) []Routed {
	a.done = true
	delete(s.assembling, a.key)
	slices.SortStableFunc(a.recs, func(x, y laned) int { return cmp.Compare(x.rec.Seq, y.rec.Seq) })
	var lanes []int32
	for _, r := range a.recs {
		if !slices.Contains(lanes, r.lane) {
			lanes = append(lanes, r.lane)
		}
	}
	first := true
	recs := make([]*Record, 0, len(a.recs))
	for _, lane := range lanes {
		recs = recs[:0]
		for _, r := range a.recs {
			if r.lane == lane {
				recs = append(recs, r.rec)
			}
		}
		ev, errs := s.rb.RebuildSplit(recs)
		for _, err := range errs {
			s.counts.Unusable++
			s.warn(fmt.Errorf("agent %q: %w", a.key.agent, err))
		}
		if ev.X == nil {
			continue
		}
		ev.X.X.Again = !first
		first = false
		out = s.routed(lane, a.at, TypeExchange, ev, out)
	}
	return out
}

// routed counts what a record (or a split exchange's records) gave and
// appends it: its request at the request's time, its exchange at the
// response's, as a capture's analysis hands them to the rules (a
// Metadata answer that came before a refused Produce's answer is read
// first, whichever request was sent first). An exchange answered later
// than the records released waits in s.answers.
func (s *Source) routed(lane int32, at int64, typ string, ev Events, out []Routed) []Routed {
	out = s.releaseAnswers(at, out)
	if typ == TypeExchange {
		if ev.X == nil || !ev.X.X.Again {
			s.counts.Exchanges++ // a split exchange's pieces once
		}
	} else {
		s.counts.ConnEvents++
	}
	t := time.Unix(0, at).UTC()
	if s.first.IsZero() || t.Before(s.first) {
		s.first = t
	}
	if t.After(s.last) {
		s.last = t
	}
	if x := ev.X; x != nil && x.X.Conn != nil {
		// Kafka answers a connection's requests in order: an exchange
		// is not handed over before one of an earlier request of its
		// connection (an unanswered request is overtaken by the next
		// answer, not by an earlier request answered late).
		when := at
		if x.X.Resp != nil && x.X.Req != nil {
			when = max(when, x.X.Resp.Time.UnixNano())
		}
		if x.X.AtEnd {
			// Still waiting when the agent's capture ended: handed
			// over after its last packet, as a capture's analysis
			// hands over the requests left at its end.
			when = max(when, at+int64(x.X.Waited)+1)
		}
		c := &x.X.Conn.ConnInfo
		if last, ok := s.lastAnswer[c]; ok {
			when = max(when, last)
		}
		if when > at {
			s.lastAnswer[c] = when
			s.answerSeq++
			heap.Push(&s.answers, answer{lane: lane, at: when, seq: s.answerSeq, x: x})
			ev.X = nil
			if ev.Opened == nil && ev.Req == nil && ev.Conn == nil {
				return out
			}
		}
	}
	return append(out, Routed{Lane: lane, Events: ev})
}

// releaseAnswers appends the exchanges waiting in s.answers answered by at
// (all of them when at is math.MaxInt64), in the order of their answers.
func (s *Source) releaseAnswers(at int64, out []Routed) []Routed {
	for s.answers.Len() > 0 && s.answers[0].at <= at {
		a := heap.Pop(&s.answers).(answer)
		if c := &a.x.X.Conn.ConnInfo; s.lastAnswer[c] == a.at {
			delete(s.lastAnswer, c)
		}
		out = append(out, Routed{Lane: a.lane, Events: Events{X: a.x}})
	}
	return out
}

func (s *Source) warn(err error) {
	s.warnings++
	if s.cfg.Warn != nil && s.warnings <= maxWarnings {
		s.cfg.Warn(err)
	}
}

// Counts returns what was read so far.
func (s *Source) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts
	c.Folded = int64(s.rb.Evicted().Conns)
	c.Twice = s.rb.Twice
	c.Agents = slices.Sorted(maps.Keys(s.agents))
	c.Partitions = slices.Sorted(maps.Keys(s.parts))
	return c
}

// startAll assigns every partition of the topic without a group, to
// know the end offsets --until-end waits for.
func (s *Source) startAll(ctx context.Context) error {
	resp, err := s.metadata(ctx)
	if err != nil {
		return fmt.Errorf("reading %s: %w", s.name, err)
	}
	s.mu.Lock()
	s.answered = true
	s.mu.Unlock()
	if len(resp.Topics) != 1 {
		return fmt.Errorf("reading %s: no such topic", s.name)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) && s.cfg.UntilEnd {
			// Nothing shipped yet: the end is reached at once.
			s.mu.Lock()
			s.joined = true
			s.mu.Unlock()
			s.warn(fmt.Errorf("reading %s: topic %s does not exist (yet): nothing to read", s.name, s.cfg.Topic))
			return nil
		}
		return fmt.Errorf("reading %s: topic %s: %w", s.name, s.cfg.Topic, err)
	}
	s.mu.Lock()
	for _, p := range resp.Topics[0].Partitions {
		s.parts[p.Partition] = &partState{end: -1, pending: true}
	}
	s.joined = true
	s.mu.Unlock()
	return nil
}

// metadata asks the cluster for the topic's partitions (never creating
// the topic).
func (s *Source) metadata(ctx context.Context) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(s.cfg.Topic)
	req.Topics = append(req.Topics, t)
	req.AllowAutoTopicCreation = false
	return req.RequestWith(ctx, s.cl)
}

// resolve asks the start and end offsets of the partitions newly held:
// the committed offset (or the log start) and the end offset. Called
// with s.mu held.
func (s *Source) resolve(ctx context.Context) error {
	var pending []int32
	for p, st := range s.parts {
		if st.pending {
			pending = append(pending, p)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	start, err := s.offsets(ctx, pending, -2)
	if err != nil {
		return err
	}
	end, err := s.offsets(ctx, pending, -1)
	if err != nil {
		return err
	}
	var committed map[int32]committedAt
	if s.cfg.Group != "" {
		if committed, err = s.commits(ctx, pending); err != nil {
			return err
		}
	}
	for _, p := range pending {
		st := s.parts[p]
		e, ok := end[p]
		if st == nil || !ok {
			continue
		}
		from := start[p]
		if c, ok := committed[p]; ok {
			from = c.offset
		}
		st.end, st.pending, st.from = e, false, from
		st.next = max(st.next, from)
	}
	return nil
}

// offsets lists the offsets of partitions at ts (-2 the log start, -1
// the end).
func (s *Source) offsets(ctx context.Context, parts []int32, ts int64) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = s.cfg.Topic
	for _, p := range parts {
		q := kmsg.NewListOffsetsRequestTopicPartition()
		q.Partition, q.Timestamp, q.CurrentLeaderEpoch = p, ts, -1
		t.Partitions = append(t.Partitions, q)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil, fmt.Errorf("listing the offsets of %s: %w", s.name, err)
	}
	out := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode == 0 {
				out[rp.Partition] = rp.Offset
			}
		}
	}
	return out, nil
}

// atEnd reports whether every partition held has reached its end; in a
// group, also that no rebalance came for Quiet and that the other
// partitions of the topic are covered (covered). Called with s.mu held.
func (s *Source) atEnd(ctx context.Context) bool {
	if !s.joined {
		return false
	}
	for _, st := range s.parts {
		if st.pending || st.next < st.end {
			return false
		}
	}
	if s.cfg.Group != "" {
		return time.Since(s.changed) >= s.cfg.Quiet && s.covered(ctx)
	}
	return true
}

// Commit commits, in a group, the offsets of the records read of the
// partitions held: to be called once their findings are reported. At an
// end by UntilEnd, those of the partitions held then, even if a
// rebalance took them since (the report has them).
func (s *Source) Commit(ctx context.Context) error {
	if s.cfg.Group == "" {
		return nil
	}
	s.mu.Lock()
	final := s.final
	s.mu.Unlock()
	if final != nil {
		return s.commit(ctx, final, nil, -1)
	}
	return s.cl.CommitUncommittedOffsets(ctx)
}

// Close leaves the group and closes the client.
func (s *Source) Close() {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	s.cl.Close()
}

// answer is an exchange waiting for its answer's time (Source.routed).
type answer struct {
	lane int32
	at   int64
	seq  uint64 // order of arrival, among answers at one time
	x    *flows.Event
}

// answerHeap is the answers waiting, earliest first.
type answerHeap []answer

func (h answerHeap) Len() int { return len(h) }
func (h answerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h answerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *answerHeap) Push(x any)   { *h = append(*h, x.(answer)) }
func (h *answerHeap) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = answer{}
	*h = old[:len(old)-1]
	return a
}

// Lag is, per partition held, how many records the last fetch's high
// watermark is past the next offset to read (the correlator's metrics).
// Called on the goroutine that calls Next.
func (s *Source) Lag() map[int32]int64 {
	out := make(map[int32]int64, len(s.parts))
	for p, st := range s.parts {
		out[p] = max(0, st.hw-st.next)
	}
	return out
}
