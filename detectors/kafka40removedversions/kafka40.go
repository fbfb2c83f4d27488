// Package kafka40removedversions reports clients that send request versions Apache Kafka
// 4.0 removed (KIP-896; the versions are decode.RemovedInKafka40): such a
// client stops working the moment its brokers run 4.0. One finding per
// client (client id and host), naming the APIs and versions, the client
// software when the client told it (ApiVersions v3+) or its client id
// suggests it, and what to upgrade to. It is a warning, a misconfiguration
// that will bite, so that a CI job can run `kfsniff -r capture --fail-on
// warning` before an upgrade; info for versions that only 4.0.0 refuses
// (JoinGroup v0-v1, served again from 4.0.1) and below min-requests.
package kafka40removedversions

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "kafka40-removed-versions",
	Severity: detectors.Warning,
	Recorded: []string{"fixtures/pcaps/clients/kafka40-sarama.pcap", "fixtures/pcaps/clients/kafka40-librdkafka.pcap"},
	Doc: "Clients sending request versions that Apache Kafka 4.0 removed (KIP-896: Produce v0-v2, Fetch v0-v3, " +
		"ListOffsets v0, OffsetCommit v0-v1, OffsetFetch v0, CreateTopics v0-v1, DeleteTopics v0, " +
		"OffsetForLeaderEpoch v0-v1, DescribeConfigs v0, the ACL, log-dir and delegation-token APIs' v0, " +
		"WriteTxnMarkers v0; JoinGroup v0-v1 in 4.0.0 only). Per client id and host: a warning from min-requests " +
		"such requests (the client will fail on 4.0; for `--fail-on warning` before an upgrade), with the client " +
		"software and what to upgrade to; info below min-requests, and for versions only 4.0.0 refuses when " +
		"restored is set.",
}, Params{MinRequests: 1, Restored: true}, New)

// Params are the rule's thresholds.
type Params struct {
	MinRequests int  `param:"min-requests" doc:"requests of one client at removed versions that make a warning"`
	Restored    bool `param:"restored" doc:"also report, as info, versions that Kafka 4.0.0 refused but 4.0.1 serves again (JoinGroup v0-v1, KAFKA-19444)"`
}

// Bounds: clients tracked (with removed versions; with software told), and
// per client the API versions.
const (
	maxClients  = 1024
	maxSoftware = 4096
	maxVersions = 16
)

// New makes the rule.
func New(p Params) detectors.Rule {
	return &rule{p: Params{MinRequests: max(p.MinRequests, 1), Restored: p.Restored},
		clients: map[cluster.Client]*client{}, software: map[cluster.Client]software{}}
}

type software struct{ name, version string }

type rule struct {
	p       Params
	clients map[cluster.Client]*client
	// software is what each client told in ApiVersions v3+, kept for
	// every client (not only those with old versions, which often do
	// not tell), bounded.
	software map[cluster.Client]software
	// dropped counts the requests of clients past maxClients.
	dropped int64
}

type client struct {
	key         cluster.Client
	versions    []Version
	moreVers    int64
	n           int64
	first, last time.Time
	replication bool
	conns       tally.Conns
	ev          detectors.Sampler[sample]
}

// sample is a request kept as evidence, formatted only if listed.
type sample struct {
	file         int
	packet       uint64
	conn         int
	key, version int16
}

// Evidence implements detectors.Evidencer.
func (s sample) Evidence() detectors.Evidence {
	return detectors.Evidence{File: s.file, Packet: s.packet, Conn: s.conn,
		What: decode.Name(s.key) + " v" + strconv.Itoa(int(s.version)) + " request, a version Kafka 4.0 removed"}
}

type Version struct {
	key, version int16
	N            int64
	Removed      decode.Removed
}

// Request implements detectors.RequestHook.
func (r *rule) Request(_ *detectors.Pass, m *flows.Message) {
	if m.Conn == nil {
		return
	}
	if m.Key == 18 && m.Version >= 3 {
		r.told(m)
		return
	}
	rm, ok := decode.RemovedIn40(m.Key, m.Version)
	if !ok || rm.RestoredIn != "" && !r.p.Restored {
		return
	}
	k := m.Client
	c := r.clients[k]
	if c == nil {
		if len(r.clients) >= maxClients {
			r.dropped++
			return
		}
		c = &client{key: k, first: m.Time}
		r.clients[k] = c
	}
	c.n++
	c.last = m.Time
	c.replication = c.replication || m.Role == cluster.RoleReplication
	c.conns.Add(m.Conn)
	c.ev.Add(sample{m.File, m.Packet, m.Conn.ID, m.Key, m.Version})
	for i := range c.versions {
		if v := &c.versions[i]; v.key == m.Key && v.version == m.Version {
			v.N++
			return
		}
	}
	if len(c.versions) >= maxVersions {
		c.moreVers++
		return
	}
	c.versions = append(c.versions, Version{key: m.Key, version: m.Version, N: 1, Removed: rm})
}

// Findings implements detectors.Rule: one per client, by host then client
// id.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	return detectors.FindingsOf(maps.Values(r.clients), nil, func(a, b *client) bool { return a.key.Less(b.key) },
		func(c *client) detectors.Finding { return r.finding(p, c) })
}

func (r *rule) finding(p *detectors.Pass, c *client) detectors.Finding {
	vs := slices.Clone(c.versions)
	slices.SortFunc(vs, func(a, b Version) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.version, b.version))
	})
	sw := r.software[c.key]
	f := &Finding{
		ClientID: c.key.ID, Host: c.key.Host.String(), Servers: c.conns.Servers(),
		First: c.first, Last: c.last, MoreVersions: c.moreVers, Dropped: r.dropped,
		ServerLabels: c.conns.ServerLabels(p.Nodes), MinRequests: r.p.MinRequests,
	}
	if sw.name != "" || sw.version != "" {
		f.Software = sw.name + " " + sw.version
	}
	lib, told := identify(sw.name, c.key.ID)
	switch {
	case c.replication:
		f.Library, f.Upgrade = "Apache Kafka broker (replica fetcher)", brokerAdvice
	case lib != nil:
		f.Library, f.Upgrade, f.LibraryTold = lib.name, lib.advice, told
	default:
		f.Upgrade = genericAdvice
	}
	f.Requests, f.ByVersion = c.n, map[string]int64{}
	sev := detectors.Info
	for _, v := range vs {
		name := decode.Name(v.key) + " v" + strconv.Itoa(int(v.version))
		f.Removed = append(f.Removed, name)
		f.Versions = append(f.Versions, v)
		f.ByVersion[name] = v.N
		if v.Removed.RestoredIn == "" && c.n >= int64(r.p.MinRequests) {
			sev = detectors.Warning
		}
	}
	f.Warning = sev == detectors.Warning
	return detectors.Finding{
		Severity: sev,
		First:    c.first,
		Last:     c.last,
		Conns:    c.conns.IDs(),
		Nodes:    c.conns.Nodes(p.Nodes),
		Evidence: c.ev.List(),
		Subject:  detectors.Subject{ClientIDs: []string{c.key.ID}, Clients: []netip.Addr{c.key.Host}, Servers: c.conns.ServerAddrs()},
		Detail:   f,
	}
}
