package capture

import "io"

// Merge returns a Source yielding the packets of several sources as one
// timeline, ordered by timestamp (ties keep input order), holding one packet
// per source. An error from one source is returned once, with that source
// then treated as ended, so the others are still read to their end.
func Merge(srcs ...Source) *Merged {
	return &Merged{srcs: srcs, pend: make([]Packet, len(srcs)), state: make([]int8, len(srcs))}
}

// Merged is the Source returned by Merge.
type Merged struct {
	srcs  []Source
	pend  []Packet
	state []int8 // 0 need read, 1 pending, 2 ended
	last  int
}

const (
	mergeNeed int8 = iota
	mergePending
	mergeEnded
)

// Next implements Source.
func (m *Merged) Next(p *Packet) error {
	if m.last >= 0 && m.last < len(m.state) && m.state[m.last] == mergePending {
		// The packet handed out last time is consumed now.
		m.state[m.last] = mergeNeed
	}
	m.last = -1
	best := -1
	for i := range m.srcs {
		if m.state[i] == mergeNeed {
			if err := m.srcs[i].Next(&m.pend[i]); err != nil {
				m.state[i] = mergeEnded
				if err != io.EOF {
					return err
				}
				continue
			}
			m.state[i] = mergePending
		}
		if m.state[i] == mergePending && (best < 0 || m.pend[i].Time.Before(m.pend[best].Time)) {
			best = i
		}
	}
	if best < 0 {
		return io.EOF
	}
	*p = m.pend[best]
	m.last = best
	return nil
}

// UseBlocks gives b to every file merged (see File.UseBlocks); it reports
// whether all took it, so that every packet's Data is a view of a block.
func (m *Merged) UseBlocks(b Blocks) bool {
	all := true
	for _, s := range m.srcs {
		u, ok := s.(interface{ UseBlocks(Blocks) bool })
		all = ok && u.UseBlocks(b) && all
	}
	return all
}
