package electionstall

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// Findings implements detectors.Rule: per topic, one error for the
// partitions leaderless for MinDuration or longer, one info for the
// shorter ones.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	var out []detectors.Finding
	for _, name := range slices.Sorted(maps.Keys(r.topics)) {
		st := r.topics[name]
		var long []ref
		var short []int32
		for _, id := range slices.Sorted(maps.Keys(st.parts)) {
			sp := st.parts[id]
			if sp.long != nil {
				long = append(long, ref{id, sp.long, false})
			}
			if sp.open != nil && sp.open.dur() >= r.p.MinDuration {
				long = append(long, ref{id, sp.open, true})
			} else if sp.open != nil || sp.shortN > 0 {
				short = append(short, id)
			}
		}
		if len(long) > 0 {
			out = append(out, r.stall(p, name, long))
		}
		if len(short) > 0 {
			out = append(out, r.election(name, st, short))
		}
	}
	return out
}

// ref is a stretch of one partition that makes a stall, open if it lasted
// to the end of the capture.
type ref struct {
	partition int32
	l         *stretch
	open      bool
}

func (r *rule) stall(p *detectors.Pass, topic string, refs []ref) detectors.Finding {
	parts, replicas, isr, offline := tally.IDs{}, tally.IDs{}, tally.IDs{}, tally.IDs{}
	conns := tally.Conns{Max: len(refs) * maxConns}
	errs := map[int16]int64{}
	leaders := map[int32]int64{}
	f := &Finding{Topic: topic, offlineKnown: true, dropped: r.dropped}
	var longest time.Duration
	var evs [][]detectors.Evidence
	intervals := make([][2]int64, 0, len(refs))
	for i, rf := range refs {
		l := rf.l
		parts.Add(rf.partition)
		if i == 0 || l.first.Before(f.first) {
			f.first = l.first
		}
		if l.last.After(f.last) {
			f.last = l.last
		}
		longest = max(longest, l.dur())
		f.Ongoing = f.Ongoing || rf.open
		f.offlineKnown = f.offlineKnown && l.offlineKnown
		for _, e := range l.errs {
			errs[e.code] += e.n
		}
		leaders[l.leader] += l.n
		replicas.AddAll(l.replicas)
		isr.AddAll(l.isr)
		offline.AddAll(l.offline)
		for _, c := range l.conns.List() {
			conns.Add(c)
		}
		f.connsMore += l.conns.More
		evs = append(evs, l.ev.List())
		intervals = append(intervals, [2]int64{l.firstSeq, l.lastSeq})
	}
	f.responses = unionLen(intervals)
	f.errCode = mostFrequent(errs)
	f.Error = decode.ErrorName(f.errCode)
	f.LeaderID = mostFrequent(leaders)
	servers := conns.ServerAddrs()
	f.Servers, f.labels = tally.AddrStrings(servers), tally.Labels(p.Nodes, servers)
	f.Partitions = parts.Sorted()
	f.Replicas, f.ISR, f.OfflineReplicas = replicas.Sorted(), isr.Sorted(), offline.Sorted()
	f.nodes = f.OfflineReplicas
	if len(f.nodes) == 0 {
		f.nodes = f.Replicas
	}
	f.DurationS, f.dur = seconds(longest)
	f.allOffline = f.offlineKnown && len(replicas) > 0 && replicas.Within(offline)
	f.isrOffline = f.offlineKnown && len(offline) > 0 && len(isr) > 0 && isr.Within(offline)
	f.online = replicas.Minus(offline).Sorted()
	f.onlineISR = isr.Minus(offline).Sorted()
	partitions := make([]detectors.TopicPartition, len(f.Partitions))
	for i, id := range f.Partitions {
		partitions[i] = detectors.TopicPartition{Topic: topic, Partition: id}
	}
	return detectors.Finding{
		Severity: detectors.Error,
		First:    f.first,
		Last:     f.last,
		Conns:    conns.IDs(),
		Nodes:    f.nodes,
		Counts:   map[string]int64{"responses": f.responses, "partitions": int64(len(f.Partitions))},
		Evidence: mergeEvidence(evs...),
		Subject:  detectors.Subject{Servers: servers, Nodes: f.nodes, Partitions: partitions, Error: f.errCode},
		Detail:   f,
	}
}

func (r *rule) election(topic string, st *topic, ids []int32) detectors.Finding {
	f := &Election{Topic: topic, Partitions: ids, min: r.p.MinDuration, dropped: r.dropped}
	var first, last time.Time
	var longest time.Duration
	var answers int64
	var evs []detectors.Evidence
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
		if l := sp.open; l != nil && l.dur() < r.p.MinDuration {
			f.Ongoing = true
			if first.IsZero() || l.first.Before(first) {
				first = l.first
			}
			if l.last.After(last) {
				last = l.last
			}
			longest = max(longest, l.dur())
			answers += l.n
			evs = append(evs, l.firstEv)
			for _, e := range l.errs {
				errs[e.code] += e.n
			}
		}
	}
	f.DurationS, f.dur = seconds(longest)
	code := mostFrequent(errs)
	f.Error = decode.ErrorName(code)
	partitions := make([]detectors.TopicPartition, len(ids))
	for i, id := range ids {
		partitions[i] = detectors.TopicPartition{Topic: topic, Partition: id}
	}
	return detectors.Finding{
		Severity: detectors.Info,
		First:    first,
		Last:     last,
		Counts:   map[string]int64{"partition_answers": answers, "partitions": int64(len(ids))},
		Evidence: mergeEvidence(evs),
		Subject:  detectors.Subject{Partitions: partitions, Error: code},
		Detail:   f,
	}
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
