package kafka40removedversions_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/kafka40removedversions"
)

const broker = "10.1.0.10:9092"

// send sends the requests from client on one connection, 100 ms apart,
// each answered (nil: not answered), from a second in.
func send(h *dt.Harness, client, id string, reqs ...kmsg.Request) {
	c := h.Conn(client, broker)
	for i, q := range reqs {
		h.Call(c, dt.At(time.Second+time.Duration(i)*100*time.Millisecond), time.Millisecond, id, q, nil)
	}
}

func TestKafka40RemovedVersions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		traffic  func(h *dt.Harness)
		want     []dt.Want
	}{
		{
			name: "kafka-python on Produce v1 and Metadata v0 (go-sniffer's capture): Produce v1 only",
			traffic: func(h *dt.Harness) {
				send(h, "10.2.0.5:40000", "kafka-python-producer-1", dt.MetadataAt(0), dt.Produce(1))
			},
			want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &kafka40removedversions.Finding{
					Requests: 1, ClientID: "kafka-python-producer-1", Host: "10.2.0.5", Library: "kafka-python",
					Removed: []string{"Produce v1"}, Servers: []string{broker},
					ByVersion: map[string]int64{"Produce v1": 1},
				},
				Summary:  []string{`client "kafka-python-producer-1" on 10.2.0.5 sends Produce v1, removed in Kafka 4.0 (KIP-896): it will fail on 4.0; kafka-python by its default client id`},
				Evidence: []uint64{2},
			}},
		},
		{
			name: "near miss: the lowest versions Kafka 4.0 still serves, and versions 3.7 deprecated but 4.0 kept",
			traffic: func(h *dt.Harness) {
				send(h, "10.2.0.6:40000", "rdkafka", dt.ApiVersionsAt(0, "", ""), dt.MetadataAt(0), dt.MetadataAt(2), dt.Produce(3),
					dt.FetchAt(4), dt.JoinGroupAt(2, "g"))
			},
		},
		{
			name: "a Java 2.0 client that says so, on Fetch v3 and Produce v2 over two connections",
			traffic: func(h *dt.Harness) {
				send(h, "10.2.0.7:40000", "producer-1", dt.ApiVersionsAt(3, "apache-kafka-java", "2.0.0"), dt.Produce(2), dt.Produce(2))
				send(h, "10.2.0.7:40001", "producer-1", dt.ApiVersionsAt(3, "apache-kafka-java", "2.0.0"), dt.FetchAt(3))
			},
			want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &kafka40removedversions.Finding{
					Requests: 3, Software: "apache-kafka-java 2.0.0", Library: "Apache Kafka Java client",
					Removed:   []string{"Produce v2", "Fetch v3"},
					ByVersion: map[string]int64{"Produce v2": 2, "Fetch v3": 1},
				},
				Summary: []string{"sends Produce v2, Fetch v3, removed in Kafka 4.0", "Apache Kafka Java client (apache-kafka-java 2.0.0)"},
			}},
		},
		{
			name: "JoinGroup v1 fails on 4.0.0 only: info",
			traffic: func(h *dt.Harness) {
				send(h, "10.2.0.8:40000", "rdkafka", dt.JoinGroupAt(1, "g"), dt.Produce(3))
			},
			want: []dt.Want{{
				Severity: detectors.Info,
				Detail:   &kafka40removedversions.Finding{Library: "librdkafka", Removed: []string{"JoinGroup v1"}},
				Summary:  []string{"sends JoinGroup v1, refused by Kafka 4.0.0 only (served again from 4.0.1, KAFKA-19444)"},
			}},
		},
		{
			name:     "restored=false: JoinGroup v1 is not reported",
			settings: map[string]string{"restored": "false"},
			traffic:  func(h *dt.Harness) { send(h, "10.2.0.8:40000", "rdkafka", dt.JoinGroupAt(1, "g")) },
		},
		{
			name:     "min-requests=3: two old Produce requests are info",
			settings: map[string]string{"min-requests": "3"},
			traffic:  func(h *dt.Harness) { send(h, "10.2.0.9:40000", "legacy", dt.Produce(0), dt.Produce(0)) },
			want: []dt.Want{{Severity: detectors.Info, Detail: &kafka40removedversions.Finding{
				Requests: 2, Removed: []string{"Produce v0"},
			}}},
		},
		{
			name:     "min-requests=3: three are a warning",
			settings: map[string]string{"min-requests": "3"},
			traffic:  func(h *dt.Harness) { send(h, "10.2.0.9:40000", "legacy", dt.Produce(0), dt.Produce(0), dt.Produce(0)) },
			want:     []dt.Want{{Severity: detectors.Warning, Detail: &kafka40removedversions.Finding{Requests: 3}}},
		},
		{
			name: "per client id and host: one id on two hosts, two ids on one host; an unknown library",
			traffic: func(h *dt.Harness) {
				send(h, "10.2.0.20:40000", "billing", dt.Produce(2))
				send(h, "10.2.0.21:40000", "billing", dt.Produce(2))
				send(h, "10.2.0.21:40001", "audit", func() kmsg.Request {
					r := kmsg.NewPtrListOffsetsRequest()
					r.Version, r.ReplicaID = 0, -1
					return r
				}())
			},
			want: []dt.Want{
				{Severity: detectors.Warning, Detail: &kafka40removedversions.Finding{ClientID: "billing", Host: "10.2.0.20"}},
				{Severity: detectors.Warning, Detail: &kafka40removedversions.Finding{
					ClientID: "audit", Host: "10.2.0.21", Removed: []string{"ListOffsets v0"},
				}},
				{Severity: detectors.Warning, Detail: &kafka40removedversions.Finding{ClientID: "billing", Host: "10.2.0.21"}},
			},
		},
		{
			name: "a broker's replica fetcher on Fetch v3",
			traffic: func(h *dt.Harness) {
				f := dt.FetchAt(3)
				f.ReplicaID = 2
				send(h, "10.1.0.12:50000", "broker-2-fetcher-0", f)
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &kafka40removedversions.Finding{Library: "Apache Kafka broker (replica fetcher)"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, map[string]map[string]string{"kafka40-removed-versions": tc.settings}, kafka40removedversions.Analyzer)
			tc.traffic(h)
			dt.Check(t, h.Findings(), "kafka40-removed-versions", tc.want...)
		})
	}
}

// What to do is per library, and the text says how the library is known.
func TestKafka40Advice(t *testing.T) {
	for _, tc := range []struct {
		id, software, version string
		want                  []string
	}{
		{"kafka-python-producer-1", "", "", []string{"kafka-python to 2.0.2 or later", "api_version", "its client id is kafka-python's default"}},
		{"rdkafka", "", "", []string{"librdkafka", "1.8.2 or later", "api.version.request=true"}},
		{"app", "confluent-kafka-python", "1.0.0", []string{"librdkafka", "named itself confluent-kafka-python 1.0.0 in ApiVersions"}},
		{"sarama", "", "", []string{"Sarama to 1.30.1 or later", "Config.Version"}},
		{"console-producer", "", "", []string{"kafka-clients", "2.1 or later"}},
		{"billing", "", "", []string{"releases KIP-896 checked", "ask its owner which library"}},
	} {
		h := dt.New(t, nil, kafka40removedversions.Analyzer)
		c := h.Conn("10.2.0.5:40000", broker)
		if tc.software != "" {
			h.Call(c, dt.At(time.Second), time.Millisecond, tc.id, dt.ApiVersionsAt(3, tc.software, tc.version), nil)
		}
		h.Call(c, dt.At(2*time.Second), time.Millisecond, tc.id, dt.Produce(1), nil)
		fs := h.Findings()
		if len(fs) != 1 {
			t.Fatalf("%s: %d findings", tc.id, len(fs))
		}
		all := fs[0].Explanation + " " + fs[0].Next
		for _, w := range tc.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: %q lacks %q", tc.id, all, w)
			}
		}
		if !strings.Contains(fs[0].Next, "--fail-on warning") || !strings.Contains(fs[0].Next, "DeprecatedRequestsPerSec,request=Produce,version=1") {
			t.Errorf("%s: next does not say how to check again: %s", tc.id, fs[0].Next)
		}
	}
}
