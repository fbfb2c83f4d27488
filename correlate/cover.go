package correlate

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The end of a group's run (--until-end): a member that has read its own
// partitions to their end may end only once every other partition of
// the topic is read to the end by someone. A member's offsets are
// committed after its report (Commit): a partition whose committed
// offset is at the end was reported. A member at its end marks its
// partitions read, committing again the offset it began at (what the
// group's next reader reads from does not change) with markPrefix and
// the offset read to as the commit's metadata: two members at their end
// then wait for no report of each other. A member killed before its mark
// holds its partitions until the group's session timeout evicts it; they
// then come to the members still waiting, which read them. Past
// CoverWait the input ends and Uncovered names the partitions left.

// markPrefix begins the metadata of a commit that marks a partition read
// to the offset that follows, markGen the group's generation it was made
// in (for the end, a mark of another generation, an earlier run's or
// made before the last rebalance, is not read), markBy the member that
// made it.
const (
	markPrefix = "kfsniff read to "
	markGen    = " in generation "
	markBy     = " by "
)

// covered marks this member's partitions read (once per assignment) and
// reports whether every other partition of the topic is read to the end
// by a member (or CoverWait passed: then s.uncovered). Called with s.mu
// held, at most every second past the first.
func (s *Source) covered(ctx context.Context) bool {
	now := time.Now()
	if s.waitFrom.Before(s.changed) {
		s.waitFrom, s.marked, s.checked = now, false, time.Time{}
	}
	if !s.marked {
		if err := s.mark(ctx); err != nil {
			if ctx.Err() == nil {
				s.warn(err)
			}
			return false
		}
		s.marked = true
	}
	if now.Sub(s.checked) < time.Second {
		return false
	}
	s.checked = now
	left, err := s.others(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.warn(err)
		}
		left = nil
		if now.Sub(s.waitFrom) < s.cfg.CoverWait {
			return false
		}
		// Unknown past the bound: every partition not held is left.
		for p := range s.want {
			if s.parts[p] == nil {
				left = append(left, p)
			}
		}
		slices.Sort(left)
	}
	if len(left) == 0 {
		return true
	}
	if now.Sub(s.waitFrom) >= s.cfg.CoverWait {
		s.uncovered = left
		return true
	}
	if msg := fmt.Sprintf("partitions %s of %s are another member's, not read to their end yet: waiting up to %s for it (a member that died is evicted after the session timeout, %s, and its partitions come to those still here)",
		partitions(left), s.cfg.Topic, s.cfg.CoverWait, s.cfg.SessionTimeout); msg != s.said && s.cfg.Note != nil {
		s.said = msg
		s.cfg.Note(msg)
	}
	return false
}

// mark commits, for each partition held, the offset reading began at,
// with the offset read to in the commit's metadata.
func (s *Source) mark(ctx context.Context) error {
	member, gen := s.cl.GroupMetadata()
	offs := map[int32]int64{}
	meta := map[int32]string{}
	var held []int32
	for p, st := range s.parts {
		offs[p] = st.from
		meta[p] = markMeta(st.next, gen, member)
		held = append(held, p)
	}
	if len(held) == 0 {
		return nil
	}
	slices.Sort(held)
	if err := s.commit(ctx, offs, meta, -1); err != nil {
		return fmt.Errorf("group %s: marking partitions %s read: %w", s.cfg.Group, partitions(held), err)
	}
	if s.cfg.Note != nil {
		s.cfg.Note(fmt.Sprintf("partitions %s of %s read to their end", partitions(held), s.cfg.Topic))
	}
	return nil
}

// commit commits offs, with meta's metadata for the partitions it has
// (else kgo's: the member id); gen >= 0: in that generation of the group
// only (an error once it moved on).
func (s *Source) commit(ctx context.Context, offs map[int32]int64, meta map[int32]string, gen int32) error {
	eo := make(map[int32]kgo.EpochOffset, len(offs))
	for p, o := range offs {
		eo[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	cctx := kgo.PreCommitFnContext(ctx, func(r *kmsg.OffsetCommitRequest) error {
		if gen >= 0 && r.Generation != gen {
			return fmt.Errorf("the group moved on from generation %d to %d", gen, r.Generation)
		}
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				q := &r.Topics[i].Partitions[j]
				if m, ok := meta[q.Partition]; ok && r.Topics[i].Topic == s.cfg.Topic {
					q.Metadata = &m
				}
			}
		}
		return nil
	})
	var err error
	s.cl.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{s.cfg.Topic: eo},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, e error) {
			if e != nil {
				err = e
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if e := kerr.ErrorForCode(p.ErrorCode); e != nil && err == nil {
						err = e
					}
				}
			}
		})
	return err
}

// others returns the partitions of the topic not held that no member
// has read to the end offset they had when first asked: neither
// committed there (reported) nor marked read there.
func (s *Source) others(ctx context.Context) ([]int32, error) {
	resp, err := s.metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("group %s: listing the partitions of %s: %w", s.cfg.Group, s.cfg.Topic, err)
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("group %s: listing the partitions of %s: no such topic", s.cfg.Group, s.cfg.Topic)
	}
	var ps, fresh []int32
	for _, p := range resp.Topics[0].Partitions {
		if _, ok := s.want[p.Partition]; !ok {
			fresh = append(fresh, p.Partition)
		}
		if s.parts[p.Partition] == nil {
			ps = append(ps, p.Partition)
		}
	}
	if len(fresh) > 0 {
		end, err := s.offsets(ctx, fresh, -1)
		if err != nil {
			return nil, err
		}
		for _, p := range fresh {
			if e, ok := end[p]; ok {
				s.want[p] = e
			}
		}
	}
	if len(ps) == 0 {
		return nil, nil
	}
	done, err := s.readTo(ctx, ps, true)
	if err != nil {
		return nil, err
	}
	var left []int32
	for _, p := range ps {
		w, ok := s.want[p]
		if !ok || done[p] < w {
			left = append(left, p)
		}
	}
	slices.Sort(left)
	return left, nil
}

// readTo fetches how far the group read each of parts: its committed
// offset, or the offset a mark of the current generation says,
// whichever is further (-1: none).
func (s *Source) readTo(ctx context.Context, parts []int32, marks bool) (map[int32]int64, error) {
	cs, err := s.commits(ctx, parts)
	if err != nil {
		return nil, err
	}
	_, gen := s.cl.GroupMetadata()
	out := map[int32]int64{}
	for _, p := range parts {
		c, ok := cs[p]
		if !ok {
			out[p] = -1
			continue
		}
		out[p] = c.offset
		if m, ok := parseMark(c.meta); marks && ok && m.gen == gen {
			out[p] = max(out[p], m.to)
		}
	}
	return out, nil
}

// committedAt is a partition's committed offset and its metadata.
type committedAt struct {
	offset int64
	meta   *string
}

// commits fetches the group's committed offsets of parts, with their
// metadata (those without an offset committed are left out).
func (s *Source) commits(ctx context.Context, parts []int32) (map[int32]committedAt, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = s.cfg.Group
	t := kmsg.NewOffsetFetchRequestTopic()
	t.Topic = s.cfg.Topic
	t.Partitions = parts
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, s.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return nil, fmt.Errorf("fetching group %s's offsets: %w", s.cfg.Group, err)
	}
	out := map[int32]committedAt{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode == 0 && rp.Offset >= 0 {
				out[rp.Partition] = committedAt{rp.Offset, rp.Metadata}
			}
		}
	}
	return out, nil
}

// Uncovered are the partitions of the topic that, at the end of a
// group's run (UntilEnd), no member had read to their end within
// CoverWait: the report does not cover them.
func (s *Source) Uncovered() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.uncovered)
}

func partitions(ps []int32) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}

// The group's settling (--until-end, after the report): a member stays
// in the group until every partition of the topic is reported, its
// offset committed by the member that reported it (a commit without a
// mark). A partition still marked by a member no longer in the group
// (killed between its mark and its report) that the group gives this
// member is taken over: claimed by a mark of this member's, in the
// generation it was given in (two members never claim it both), read
// again from the offset the mark kept to the offset it names, reported
// in a report of its own, then committed as reported.

// Range is the records of one partition to read: from From to To (not
// included).
type Range struct {
	Partition int32
	From, To  int64
}

// Takeover is what a member that left the group before its report had
// marked read: Member, its member id, and the ranges of its partitions
// given to this member.
type Takeover struct {
	Member string
	Ranges []Range
	gen    int32
}

// Partitions are the takeover's partitions, in order.
func (t Takeover) Partitions() []int32 {
	ps := make([]int32, len(t.Ranges))
	for i, r := range t.Ranges {
		ps[i] = r.Partition
	}
	return ps
}

// mark is what a mark's metadata says: the offset read to, the
// generation and the member that made it.
type mark struct {
	to     int64
	gen    int32
	member string
}

func markMeta(to int64, gen int32, member string) string {
	return markPrefix + strconv.FormatInt(to, 10) + markGen + strconv.Itoa(int(gen)) + markBy + member
}

// parseMark reads a commit's metadata as a mark.
func parseMark(m *string) (mark, bool) {
	if m == nil || !strings.HasPrefix(*m, markPrefix) {
		return mark{}, false
	}
	to, rest, _ := strings.Cut(strings.TrimPrefix(*m, markPrefix), markGen)
	g, member, _ := strings.Cut(rest, markBy)
	v, err1 := strconv.ParseInt(to, 10, 64)
	n, err2 := strconv.ParseInt(g, 10, 32)
	if err1 != nil || err2 != nil {
		return mark{}, false
	}
	return mark{v, int32(n), member}, true
}

// Settle, once this member's report is written and its offsets
// committed, waits until every partition of the topic is reported,
// taking over (take) those the group gives it that a member no longer
// in the group marked read (Takeover); once take returns nil they are
// committed as reported. It returns the partitions still unreported
// when ctx ends. Only after an end by UntilEnd in a group with nothing
// Uncovered.
func (s *Source) Settle(ctx context.Context, take func(Takeover) error) []int32 {
	var left []int32
	for {
		var orphans []Takeover
		var err error
		left, orphans, err = s.unreported(ctx)
		if err == nil && len(left) == 0 {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			s.warn(err)
		}
		for _, t := range orphans {
			if err := s.claim(ctx, t); err != nil {
				if ctx.Err() == nil {
					s.warn(fmt.Errorf("group %s: taking over partitions %s of %s: %w", s.cfg.Group, partitions(t.Partitions()), s.cfg.Topic, err))
				}
				continue
			}
			if err := take(t); err != nil {
				// Claimed by this member, alive: no other takes them;
				// they are named at the end.
				s.warn(fmt.Errorf("group %s: taking over partitions %s of %s: %w", s.cfg.Group, partitions(t.Partitions()), s.cfg.Topic, err))
				continue
			}
			offs := map[int32]int64{}
			for _, r := range t.Ranges {
				offs[r.Partition] = r.To
			}
			if err := s.commit(ctx, offs, nil, -1); err != nil && ctx.Err() == nil {
				s.warn(fmt.Errorf("group %s: committing partitions %s of %s, taken over and reported: %w", s.cfg.Group, partitions(t.Partitions()), s.cfg.Topic, err))
			}
		}
		select {
		case <-ctx.Done():
			return left
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// unreported returns the partitions of the topic not reported (their
// last commit a mark), and among them those this member holds whose mark
// is a member's no longer in the group: to take over.
func (s *Source) unreported(ctx context.Context) ([]int32, []Takeover, error) {
	s.mu.Lock()
	ps := make([]int32, 0, len(s.want))
	for p := range s.want {
		ps = append(ps, p)
	}
	s.mu.Unlock()
	slices.Sort(ps)
	cs, err := s.commits(ctx, ps)
	if err != nil {
		return ps, nil, err
	}
	var left []int32
	marks := map[int32]mark{}
	for _, p := range ps {
		c, ok := cs[p]
		if m, marked := parseMark(c.meta); !ok || marked {
			left = append(left, p)
			if marked {
				marks[p] = m
			}
		}
	}
	if len(marks) == 0 {
		return left, nil, nil
	}
	live, err := s.members(ctx)
	if err != nil {
		return left, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, gen := s.cl.GroupMetadata()
	by := map[string]*Takeover{}
	var order []string
	for _, p := range left {
		m, ok := marks[p]
		if !ok || live[m.member] || s.parts[p] == nil {
			continue
		}
		t := by[m.member]
		if t == nil {
			t = &Takeover{Member: m.member, gen: gen}
			by[m.member] = t
			order = append(order, m.member)
		}
		t.Ranges = append(t.Ranges, Range{Partition: p, From: cs[p].offset, To: m.to})
	}
	var out []Takeover
	for _, m := range order {
		out = append(out, *by[m])
	}
	return left, out, nil
}

// members are the member ids of the group now.
func (s *Source) members(ctx context.Context) (map[string]bool, error) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{s.cfg.Group}
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil, fmt.Errorf("describing group %s: %w", s.cfg.Group, err)
	}
	out := map[string]bool{}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, fmt.Errorf("describing group %s: %w", s.cfg.Group, err)
		}
		for _, m := range g.Members {
			out[m.MemberID] = true
		}
	}
	return out, nil
}

// claim marks t's partitions as this member's, in the generation of the
// group they were given to it in: a member given them in a later
// generation sees this one's mark, alive, and waits for its report.
func (s *Source) claim(ctx context.Context, t Takeover) error {
	member, _ := s.cl.GroupMetadata()
	offs := map[int32]int64{}
	meta := map[int32]string{}
	for _, r := range t.Ranges {
		offs[r.Partition] = r.From
		meta[r.Partition] = markMeta(r.To, t.gen, member)
	}
	return s.commit(ctx, offs, meta, t.gen)
}
