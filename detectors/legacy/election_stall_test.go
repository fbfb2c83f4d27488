package legacy_test

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// Helpers shared by the election stall, connection refused and listener
// conflict tests: scripted traffic through the whole analysis.

var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// kafkaPeer is a scripted client connection with its correlation ids.
type kafkaPeer struct {
	c    *gen.Conn
	corr int32
	id   string
}

func dial(w *gen.Writer, client, server string, t time.Time) *kafkaPeer {
	return &kafkaPeer{c: w.Conn(ap(client), ap(server), t, gen.ConnOptions{}), id: "detector-test"}
}

// exchange writes a request at t and its response 2 ms later.
func (p *kafkaPeer) exchange(t time.Time, req kmsg.Request, resp kmsg.Response) {
	p.corr++
	p.c.Request(t, p.corr, &p.id, req)
	p.c.Response(t.Add(2*time.Millisecond), p.corr, resp)
}

// trafficFindings writes the traffic script into an in-memory pcap, runs
// the analysis with every detector (thresholds changed by overrides) and
// returns the findings of detector id.
func trafficFindings(t *testing.T, id string, overrides map[string]float64, script func(w *gen.Writer)) []detectors.Finding {
	t.Helper()
	return findingsOf(analyseScript(t, overrides, script), id)
}

// atLeast returns the findings of severity s or above.
func atLeast(fs []detectors.Finding, s detectors.Severity) []detectors.Finding {
	var out []detectors.Finding
	for _, f := range fs {
		if f.Severity >= s {
			out = append(out, f)
		}
	}
	return out
}

// asJSON renders a field value as JSON, the way gen.Expect compares them.
func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func describeFindings(fs []detectors.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("\n  " + f.Severity.String() + " " + f.Summary + " counts=" + asJSON(f.Counts) + " fields=" + asJSON(f.Fields) + " nodes=" + asJSON(f.Nodes))
	}
	return b.String()
}

// checkFinding compares a finding's counts and fields (as JSON) and nodes.
func checkFinding(t *testing.T, f detectors.Finding, sev detectors.Severity, nodes []int32, counts map[string]int64, fields map[string]any) {
	t.Helper()
	if f.Severity != sev {
		t.Errorf("severity %s, want %s: %s", f.Severity, sev, f.Summary)
	}
	if nodes != nil && !slices.Equal(f.Nodes, nodes) {
		t.Errorf("nodes %v, want %v", f.Nodes, nodes)
	}
	for k, v := range counts {
		if got, ok := f.Counts[k]; !ok || got != v {
			t.Errorf("count %s = %d (present %v), want %d", k, got, ok, v)
		}
	}
	for k, v := range fields {
		if got := asJSON(f.Fields[k]); got != asJSON(v) {
			t.Errorf("field %s = %s, want %s", k, got, asJSON(v))
		}
	}
	if len(f.Evidence) == 0 {
		t.Errorf("no evidence: %s", f.Summary)
	}
	if f.Summary == "" || f.Explanation == "" || f.Next == "" {
		t.Errorf("summary, explanation or next missing: %+v", f)
	}
}

// Metadata builders.

func mdBroker(id int32, host string, port int32) kmsg.MetadataResponseBroker {
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = id, host, port
	return b
}

type mdPart struct {
	p, leader               int32
	err                     int16
	replicas, isr, offlined []int32
}

func mdTopic(name string, parts ...mdPart) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr(name)
	for _, p := range parts {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.ErrorCode = p.p, p.leader, p.err
		mp.Replicas, mp.ISR, mp.OfflineReplicas = p.replicas, p.isr, p.offlined
		if mp.OfflineReplicas == nil {
			mp.OfflineReplicas = []int32{}
		}
		t.Partitions = append(t.Partitions, mp)
	}
	return t
}

func metadata(brokers []kmsg.MetadataResponseBroker, topics ...kmsg.MetadataResponseTopic) (*kmsg.MetadataRequest, *kmsg.MetadataResponse) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = t.Topic
		req.Topics = append(req.Topics, rt)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 12
	resp.Brokers = brokers
	resp.ClusterID = kmsg.StringPtr("test-cluster")
	resp.ControllerID = 1
	resp.Topics = topics
	return req, resp
}

var threeBrokers = []kmsg.MetadataResponseBroker{mdBroker(1, "10.0.0.2", 9092), mdBroker(2, "10.0.0.3", 9092), mdBroker(3, "10.0.0.4", 9092)}

// led is a partition with leader l and replicas 1, 2, 3 in sync.
func led(p, l int32) mdPart {
	return mdPart{p: p, leader: l, replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}}
}

// lna is a partition answered LEADER_NOT_AVAILABLE whose only replica,
// node r, is offline.
func lna(p, r int32) mdPart {
	return mdPart{p: p, leader: -1, err: 5, replicas: []int32{r}, isr: []int32{r}, offlined: []int32{r}}
}

// poll writes one Metadata exchange per second from from to to (seconds),
// each answered with the partitions parts(s) returns.
func poll(p *kafkaPeer, from, to float64, topic string, parts func(s float64) []mdPart) {
	for s := from; s <= to+1e-9; s++ {
		req, resp := metadata(threeBrokers, mdTopic(topic, parts(s)...))
		p.exchange(at(s), req, resp)
	}
}

func TestLeaderElectionStall(t *testing.T) {
	const id = "leader-election-stall"
	client, server := "10.0.0.1:40000", "10.0.0.2:9092"
	healthy := func(float64) []mdPart { return []mdPart{led(0, 1), led(1, 2), led(2, 3)} }
	// stalled returns a script where partition 1 is leaderless from
	// second from to second to, polled once a second from 0 to end.
	stalled := func(from, to, end float64) func(w *gen.Writer) {
		return func(w *gen.Writer) {
			p := dial(w, client, server, at(0))
			poll(p, 0, end, "orders", func(s float64) []mdPart {
				if s >= from && s <= to {
					return []mdPart{led(0, 1), lna(1, 2), led(2, 3)}
				}
				return healthy(s)
			})
		}
	}
	tests := []struct {
		name      string
		overrides map[string]float64
		script    func(w *gen.Writer)
		// want: the error finding's key values; nil for no finding at
		// warning or above.
		want      map[string]any
		counts    map[string]int64
		nodes     []int32
		wantInfo  bool // an info finding for a short stretch
		mustQuiet bool // no finding at all
	}{
		{
			name:   "leaderless for 60 s and still at the end",
			script: stalled(10, 70, 70),
			want: map[string]any{"topic": "orders", "partitions": []int32{1}, "error": "LEADER_NOT_AVAILABLE", "leader_id": -1,
				"servers": []string{server}, "duration_s": 60.0, "ongoing": true, "offline_replicas": []int32{2}},
			counts: map[string]int64{"responses": 61, "partitions": 1},
			nodes:  []int32{2},
		},
		{
			name:   "leaderless for 45 s, then a leader",
			script: stalled(10, 55, 80),
			want:   map[string]any{"partitions": []int32{1}, "duration_s": 45.0, "ongoing": false},
			counts: map[string]int64{"responses": 46},
			nodes:  []int32{2},
		},
		{
			name:     "a short election after a restart: 3 s",
			script:   stalled(10, 13, 30),
			wantInfo: true,
		},
		{
			name:     "near miss: 29 s, then a leader",
			script:   stalled(10, 39, 60),
			wantInfo: true,
		},
		{
			name:      "near miss lowered below the threshold: 29 s with min-duration 20",
			overrides: map[string]float64{id + ".min-duration": 20},
			script:    stalled(10, 39, 60),
			want:      map[string]any{"partitions": []int32{1}, "duration_s": 29.0},
			counts:    map[string]int64{"responses": 30},
		},
		{
			name:      "threshold raised above a 60 s stall",
			overrides: map[string]float64{id + ".min-duration": 90},
			script:    stalled(10, 70, 80),
			wantInfo:  true,
		},
		{
			name: "a leader in between splits two 20 s stretches",
			script: func(w *gen.Writer) {
				p := dial(w, client, server, at(0))
				poll(p, 0, 60, "orders", func(s float64) []mdPart {
					if s == 30 {
						return healthy(s)
					}
					return []mdPart{led(0, 1), lna(1, 2), led(2, 3)}
				})
			},
			wantInfo: true,
		},
		{
			name:      "healthy metadata for two minutes",
			script:    func(w *gen.Writer) { poll(dial(w, client, server, at(0)), 0, 120, "orders", healthy) },
			mustQuiet: true,
		},
		{
			name: "leader -1 without an error code and NOT_LEADER_OR_FOLLOWER count too",
			script: func(w *gen.Writer) {
				p := dial(w, client, server, at(0))
				poll(p, 0, 40, "orders", func(s float64) []mdPart {
					return []mdPart{
						{p: 0, leader: -1, replicas: []int32{1, 2}, isr: []int32{1}, offlined: []int32{1}},
						{p: 1, leader: 2, err: 6, replicas: []int32{2, 3}, isr: []int32{2, 3}},
						led(2, 3),
					}
				})
			},
			want:   map[string]any{"partitions": []int32{0, 1}, "duration_s": 40.0, "replicas": []int32{1, 2, 3}, "offline_replicas": []int32{1}},
			counts: map[string]int64{"responses": 41, "partitions": 2},
			nodes:  []int32{1},
		},
		{
			name: "overlapping stretches count each response once",
			script: func(w *gen.Writer) {
				p := dial(w, client, server, at(0))
				poll(p, 0, 100, "orders", func(s float64) []mdPart {
					parts := []mdPart{led(0, 1), led(1, 2), led(2, 3)}
					if s <= 40 {
						parts[0] = lna(0, 1)
					}
					if s >= 20 && s <= 80 {
						parts[2] = lna(2, 3)
					}
					return parts
				})
			},
			// responses 0..80: 81 distinct, not 41+61.
			want:   map[string]any{"partitions": []int32{0, 2}, "duration_s": 60.0, "offline_replicas": []int32{1, 3}},
			counts: map[string]int64{"responses": 81},
			nodes:  []int32{1, 3},
		},
		{
			name: "two brokers answering, one healthy topic beside",
			script: func(w *gen.Writer) {
				a := dial(w, client, server, at(0))
				b := dial(w, "10.0.0.1:40001", "10.0.0.3:9092", at(0))
				for s := 0.0; s <= 40; s++ {
					p := a
					if int(s)%2 == 1 {
						p = b
					}
					req, resp := metadata(threeBrokers, mdTopic("orders", led(0, 1), lna(1, 2)), mdTopic("payments", led(0, 3)))
					p.exchange(at(s), req, resp)
				}
			},
			want:   map[string]any{"topic": "orders", "partitions": []int32{1}, "servers": []string{"10.0.0.2:9092", "10.0.0.3:9092"}},
			counts: map[string]int64{"responses": 41},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := trafficFindings(t, id, tc.overrides, tc.script)
			if tc.mustQuiet {
				if len(fs) != 0 {
					t.Fatalf("findings on healthy traffic:%s", describeFindings(fs))
				}
				return
			}
			errs := atLeast(fs, detectors.Warning)
			if tc.want == nil {
				if len(errs) != 0 {
					t.Errorf("want nothing at warning or above, got:%s", describeFindings(errs))
				}
			} else {
				if len(errs) != 1 {
					t.Fatalf("want one error, got:%s", describeFindings(fs))
				}
				checkFinding(t, errs[0], detectors.Error, tc.nodes, tc.counts, tc.want)
			}
			var infos []detectors.Finding
			for _, f := range fs {
				if f.Severity == detectors.Info {
					infos = append(infos, f)
				}
			}
			if tc.wantInfo && len(infos) != 1 {
				t.Errorf("want one info finding for the short stretch, got:%s", describeFindings(fs))
			}
		})
	}
}

// TestLeaderElectionStallExplains checks that the explanation says what the
// replicas allow: nobody to elect when every replica is offline, the
// controller when in-sync replicas are online.
func TestLeaderElectionStallExplains(t *testing.T) {
	tests := []struct {
		name string
		part mdPart
		want string
	}{
		{"only replica offline", lna(0, 4), "no candidate to elect"},
		{"in-sync replicas offline", mdPart{p: 0, leader: -1, err: 5, replicas: []int32{1, 2, 3}, isr: []int32{1}, offlined: []int32{1}}, "unclean.leader.election.enable"},
		{"in-sync replica online", mdPart{p: 0, leader: -1, err: 5, replicas: []int32{1, 2, 3}, isr: []int32{1, 2}, offlined: []int32{1}}, "not completing the election"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := trafficFindings(t, "leader-election-stall", nil, func(w *gen.Writer) {
				poll(dial(w, "10.0.0.1:40000", "10.0.0.2:9092", at(0)), 0, 35, "orders", func(float64) []mdPart { return []mdPart{tc.part} })
			})
			if len(fs) != 1 || fs[0].Severity != detectors.Error {
				t.Fatalf("want one error:%s", describeFindings(fs))
			}
			if !strings.Contains(fs[0].Explanation, tc.want) {
				t.Errorf("explanation lacks %q: %s", tc.want, fs[0].Explanation)
			}
		})
	}
}
