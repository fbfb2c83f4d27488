package leaderelectionstall

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// Findings implements detectors.Rule: per topic and severity, one finding
// for the partitions whose worst stretch has that severity.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	var out []detectors.Finding
	for _, name := range slices.Sorted(maps.Keys(r.topics)) {
		st := r.topics[name]
		var bySev [detectors.Error + 1][]ref
		for _, id := range slices.Sorted(maps.Keys(st.parts)) {
			if rf, ok := r.worst(p, id, st.parts[id]); ok {
				bySev[rf.sev] = append(bySev[rf.sev], rf)
			}
		}
		for sev := detectors.Error; sev >= detectors.Info; sev-- {
			if refs := bySev[sev]; len(refs) > 0 {
				out = append(out, r.finding(p, name, sev, refs))
			}
		}
	}
	return out
}

// ref is the stretch of one partition a finding reports: its worst.
type ref struct {
	partition int32
	l         *stretch
	d         time.Duration
	ongoing   bool // open at the end of the capture
	sev       detectors.Severity
}

// worst is the stretch of a partition that grades highest (the longer on a
// tie): the longest finished one, or the one open at the end. ok is false
// when neither is reported (both shorter than Brief).
func (r *rule) worst(p *detectors.Pass, id int32, sp *partition) (best ref, ok bool) {
	for _, l := range []*stretch{sp.worst, sp.open} {
		if l == nil {
			continue
		}
		c := ref{partition: id, l: l, d: l.dur(p.End), ongoing: l.healed.IsZero()}
		var reported bool
		if c.sev, reported = r.p.grade(c.d, c.ongoing); !reported {
			continue
		}
		if !ok || c.sev > best.sev || c.sev == best.sev && c.d > best.d {
			best, ok = c, true
		}
	}
	return best, ok
}

func (r *rule) finding(p *detectors.Pass, topic string, sev detectors.Severity, refs []ref) detectors.Finding {
	parts, replicas, isr, offline, leaders := tally.IDs{}, tally.IDs{}, tally.IDs{}, tally.IDs{}, tally.IDs{}
	conns := tally.Conns{Max: len(refs) * maxConns}
	errs := map[int16]int64{}
	leaderCounts := map[int32]int64{}
	waiting := map[cluster.Client]*waiter{}
	f := &Finding{Topic: topic, OfflineKnown: true, Dropped: r.dropped, Severity: sev, Params: r.p}
	var evs [][]detectors.Evidence
	intervals := make([][2]int64, 0, len(refs))
	for i, rf := range refs {
		l := rf.l
		parts.Add(rf.partition)
		if i == 0 || l.first.Before(f.First) {
			f.First = l.first
		}
		f.last = maxTime(f.last, l.last)
		if rf.d > f.Span {
			f.Span, f.Longest = rf.d, rf.partition
		}
		if rf.ongoing {
			f.Ongoing = true
			f.End = p.End
			f.LastAnswer = maxTime(f.LastAnswer, l.last)
		} else {
			f.Healed = maxTime(f.Healed, l.healed)
			leaders.Add(l.newLeader)
		}
		f.OfflineKnown = f.OfflineKnown && l.offlineKnown
		for _, e := range l.errs {
			errs[e.code] += e.n
		}
		leaderCounts[l.leader] += l.n
		replicas.AddAll(l.replicas)
		isr.AddAll(l.isr)
		offline.AddAll(l.offline)
		for _, c := range l.conns.List() {
			conns.AddKey(c)
		}
		f.ConnsMore += l.conns.More
		f.WaitersMore += l.waitersMore
		for _, w := range l.waiters {
			m := waiting[w.Client]
			if m == nil {
				m = &waiter{Client: w.Client}
				waiting[w.Client] = m
			}
			// One answer names several partitions: a client sent at
			// least as many requests as for any one of them (exactly
			// that many when each request named them all, as a
			// producer's to one leader does).
			m.metadata = max(m.metadata, w.metadata)
			m.produce = max(m.produce, w.produce)
			m.fetch = max(m.fetch, w.fetch)
		}
		evs = append(evs, append(l.ev.List(), l.healEv)) // a zero healEv (open) is skipped
		intervals = append(intervals, [2]int64{l.firstSeq, l.lastSeq})
	}
	f.Responses = unionLen(intervals)
	f.ErrCode = mostFrequent(errs)
	f.Error = decode.ErrorName(f.ErrCode)
	f.LeaderID = mostFrequent(leaderCounts)
	servers := conns.ServerAddrs()
	f.Servers, f.Labels = tally.AddrStrings(servers), tally.Labels(p.Nodes, servers)
	f.Partitions = parts.Sorted()
	f.Replicas, f.ISR, f.OfflineReplicas = replicas.Sorted(), isr.Sorted(), offline.Sorted()
	f.NewLeaders = leaders.Sorted()
	f.Nodes = f.OfflineReplicas
	if len(f.Nodes) == 0 {
		f.Nodes = f.Replicas
	}
	f.DurationS, f.Span = seconds(f.Span)
	f.AllOffline = f.OfflineKnown && len(replicas) > 0 && replicas.Within(offline)
	f.ISROffline = f.OfflineKnown && len(offline) > 0 && len(isr) > 0 && isr.Within(offline)
	f.Online = replicas.Minus(offline).Sorted()
	f.OnlineISR = isr.Minus(offline).Sorted()
	f.Waited = waiters(waiting)
	var ids []string
	var hosts []netip.Addr
	for _, w := range f.Waited {
		f.Refused += w.ProduceRefused + w.FetchRefused
	}
	for k := range waiting {
		if !slices.Contains(ids, k.ID) {
			ids = append(ids, k.ID)
		}
		if !slices.Contains(hosts, k.Host) {
			hosts = append(hosts, k.Host)
		}
	}
	slices.Sort(ids)
	slices.SortFunc(hosts, netip.Addr.Compare)
	partitions := make([]cluster.Partition, len(f.Partitions))
	for i, id := range f.Partitions {
		partitions[i] = cluster.Partition{Topic: topic, Num: id}
	}
	last := maxTime(f.last, f.Healed)
	if f.Ongoing {
		last = p.End
	}
	return detectors.Finding{
		Severity: sev,
		First:    f.First,
		Last:     last,
		Conns:    conns.IDs(),
		Nodes:    f.Nodes,
		Evidence: mergeEvidence(evs...),
		Subject:  detectors.Subject{ClientIDs: ids, Clients: hosts, Servers: servers, Nodes: f.Nodes, Partitions: partitions, Error: f.ErrCode},
		Detail:   f,
	}
}

// waiters lists the clients that waited, those that waited most first.
func waiters(m map[cluster.Client]*waiter) []Waiter {
	out := make([]Waiter, 0, len(m))
	for _, w := range m {
		out = append(out, Waiter{ClientID: w.ID, Host: w.Host.String(), MetadataAnswers: w.metadata, ProduceRefused: w.produce, FetchRefused: w.fetch})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		return cmp.Or(cmp.Compare(b.requests(), a.requests()), cmp.Compare(a.ClientID, b.ClientID), cmp.Compare(a.Host, b.Host)) < 0
	})
	return out
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// seconds is a stretch's length to the millisecond below, in seconds (the
// "duration_s" field) and as the duration the text shows.
func seconds(d time.Duration) (float64, time.Duration) {
	s := float64(d.Milliseconds()) / 1000
	return s, time.Duration(s * float64(time.Second))
}

// unionLen is the number of integers covered by closed intervals: the
// responses of several stretches, each counted once.
func unionLen(iv [][2]int64) int64 {
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

// mergeEvidence merges evidence lists into one in packet order without
// repeats, thinned to the first, the last and a few spread in between.
func mergeEvidence(lists ...[]detectors.Evidence) []detectors.Evidence {
	var all []detectors.Evidence
	for _, l := range lists {
		for _, e := range l {
			if e.Packet != 0 {
				all = append(all, e)
			}
		}
	}
	detectors.SortEvidence(all)
	uniq := all[:0]
	for i, e := range all {
		if i > 0 && e.File == all[i-1].File && e.Packet == all[i-1].Packet {
			continue
		}
		uniq = append(uniq, e)
	}
	const mid = detectors.MaxMiddle
	if len(uniq) <= mid+2 {
		return uniq
	}
	out := []detectors.Evidence{uniq[0]}
	between := uniq[1 : len(uniq)-1]
	for k := range mid {
		out = append(out, between[(2*k+1)*len(between)/(2*mid)])
	}
	return append(out, uniq[len(uniq)-1])
}

// mostFrequent is the key counted most, the smallest on a tie.
func mostFrequent[K int16 | int32](m map[K]int64) K {
	var best K
	var n int64 = -1
	for k, c := range m {
		if c > n || (c == n && k < best) {
			best, n = k, c
		}
	}
	return best
}
