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
// to the offset that follows.
// and markGen the group's generation it was made in: a mark of another
// generation (an earlier run's, or made before the last rebalance) is
// not read.
const (
	markPrefix = "kfsniff read to "
	markGen    = " in generation "
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
	_, gen := s.cl.GroupMetadata()
	offs := map[int32]kgo.EpochOffset{}
	meta := map[int32]string{}
	var held []int32
	for p, st := range s.parts {
		offs[p] = kgo.EpochOffset{Epoch: -1, Offset: st.from}
		meta[p] = markPrefix + strconv.FormatInt(st.next, 10) + markGen + strconv.Itoa(int(gen))
		held = append(held, p)
	}
	if len(held) == 0 {
		return nil
	}
	slices.Sort(held)
	var err error
	cctx := kgo.PreCommitFnContext(ctx, func(r *kmsg.OffsetCommitRequest) error {
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
	s.cl.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{s.cfg.Topic: offs},
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
	if err != nil {
		return fmt.Errorf("group %s: marking partitions %s read: %w", s.cfg.Group, partitions(held), err)
	}
	if s.cfg.Note != nil {
		s.cfg.Note(fmt.Sprintf("partitions %s of %s read to their end", partitions(held), s.cfg.Topic))
	}
	return nil
}

// others returns the partitions of the topic not held that no member
// has read to the end offset they had when first asked: neither
// committed there (reported) nor marked read there.
func (s *Source) others(ctx context.Context) ([]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	topic := s.cfg.Topic
	t.Topic = &topic
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil, fmt.Errorf("group %s: listing the partitions of %s: %w", s.cfg.Group, s.cfg.Topic, err)
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("group %s: listing the partitions of %s: no such topic", s.cfg.Group, s.cfg.Topic)
	}
	if s.want == nil {
		s.want = map[int32]int64{}
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
// offset, or the offset a mark says, whichever is further (-1: none).
func (s *Source) readTo(ctx context.Context, parts []int32, marks bool) (map[int32]int64, error) {
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
	_, gen := s.cl.GroupMetadata()
	out := map[int32]int64{}
	for _, p := range parts {
		out[p] = -1
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				continue
			}
			n := rp.Offset
			if m := rp.Metadata; marks && m != nil && strings.HasPrefix(*m, markPrefix) {
				to, in, _ := strings.Cut(strings.TrimPrefix(*m, markPrefix), markGen)
				v, err1 := strconv.ParseInt(to, 10, 64)
				g, err2 := strconv.Atoi(in)
				if err1 == nil && err2 == nil && int32(g) == gen {
					n = max(n, v)
				}
			}
			out[rp.Partition] = max(out[rp.Partition], n)
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

// Unreported waits, once this member's report is written and its
// offsets committed, until every other partition of the topic is
// committed at the end it was waited for (reported by its member), and
// returns those that are not when ctx ends: marked read by a member that
// ended (killed) before its report. Only after an end by UntilEnd in a
// group with nothing Uncovered.
func (s *Source) Unreported(ctx context.Context) []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ps []int32
	for p := range s.want {
		if s.parts[p] == nil {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	for len(ps) > 0 {
		if done, err := s.readTo(ctx, ps, false); err == nil {
			ps = slices.DeleteFunc(ps, func(p int32) bool { return done[p] >= s.want[p] })
		}
		if len(ps) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ps
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}
