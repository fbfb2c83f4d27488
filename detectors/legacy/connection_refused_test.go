package legacy_test

import (
	"net/netip"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// advertise writes a connection at second 0 with a Metadata exchange that
// advertises brokers.
func advertise(w *gen.Writer, client, server string, brokers ...kmsg.MetadataResponseBroker) {
	advertiseAt(w, 0, client, server, brokers...)
}

func advertiseAt(w *gen.Writer, s float64, client, server string, brokers ...kmsg.MetadataResponseBroker) {
	p := dial(w, client, server, at(s))
	req, resp := metadata(brokers, mdTopic("orders", led(0, 1)))
	p.exchange(at(s+0.01), req, resp)
}

// refusedEvery writes n refused attempts from client host to server, from
// second from, every seconds apart, from source ports 50000 up.
func refusedEvery(w *gen.Writer, client, server string, from float64, n int, every float64) {
	for i := range n {
		src := netip.AddrPortFrom(netip.MustParseAddr(client), uint16(50000+i))
		w.Refused(src, ap(server), at(from+float64(i)*every))
	}
}

func TestConnectionRefused(t *testing.T) {
	const id = "connection-refused"
	b2 := mdBroker(2, "10.0.0.3", 9092)
	tests := []struct {
		name      string
		overrides map[string]float64
		script    func(w *gen.Writer)
		sev       detectors.Severity
		nodes     []int32
		counts    map[string]int64
		fields    map[string]any
	}{
		{
			name: "advertised broker refuses every attempt",
			script: func(w *gen.Writer) {
				advertise(w, "10.0.0.1:40000", "10.0.0.2:9092", mdBroker(1, "10.0.0.2", 9092), b2)
				refusedEvery(w, "10.0.0.1", "10.0.0.3:9092", 1, 10, 1)
			},
			sev:    detectors.Warning,
			nodes:  []int32{2},
			counts: map[string]int64{"attempts": 10, "refused": 10, "unanswered": 0, "syns": 10},
			fields: map[string]any{"endpoint": "10.0.0.3:9092", "advertised": true, "advertised_as": []string{"10.0.0.3:9092"},
				"clients": []string{"10.0.0.1"}, "recovered": false},
		},
		{
			name: "loopback advertised as localhost matches 127.0.0.1",
			script: func(w *gen.Writer) {
				advertise(w, "127.0.0.1:40000", "127.0.0.1:9692", mdBroker(4, "localhost", 9492), mdBroker(5, "localhost", 9492))
				refusedEvery(w, "127.0.0.1", "127.0.0.1:9492", 1, 5, 1)
			},
			sev:    detectors.Warning,
			nodes:  []int32{4, 5},
			counts: map[string]int64{"attempts": 5},
			fields: map[string]any{"endpoint": "127.0.0.1:9492", "advertised": true, "advertised_as": []string{"localhost:9492"}, "clients": []string{"127.0.0.1"}},
		},
		{
			name: "one refused attempt, then the connection works",
			script: func(w *gen.Writer) {
				refusedEvery(w, "10.0.0.1", "10.0.0.2:9092", 0, 1, 1)
				advertiseAt(w, 0.2, "10.0.0.1:40000", "10.0.0.2:9092", mdBroker(1, "10.0.0.2", 9092))
			},
			sev:    detectors.Info,
			counts: map[string]int64{"attempts": 1},
			fields: map[string]any{"recovered": true, "advertised": true},
		},
		{
			name: "an earlier connection does not make it recovered",
			script: func(w *gen.Writer) {
				advertise(w, "10.0.0.1:40000", "10.0.0.2:9092", mdBroker(1, "10.0.0.2", 9092))
				refusedEvery(w, "10.0.0.1", "10.0.0.2:9092", 1, 3, 1)
			},
			sev:    detectors.Warning,
			fields: map[string]any{"recovered": false, "advertised": true},
		},
		{
			name:   "near miss: two attempts, under min-attempts",
			script: func(w *gen.Writer) { refusedEvery(w, "10.0.0.1", "10.0.0.2:9092", 0, 2, 1) },
			sev:    detectors.Info,
			counts: map[string]int64{"attempts": 2},
			fields: map[string]any{"advertised": false, "kafka_endpoint": true},
		},
		{
			name:      "two attempts with min-attempts 2",
			overrides: map[string]float64{id + ".min-attempts": 2},
			script:    func(w *gen.Writer) { refusedEvery(w, "10.0.0.1", "10.0.0.2:9092", 0, 2, 1) },
			sev:       detectors.Warning,
			counts:    map[string]int64{"attempts": 2},
		},
		{
			name: "broker restart: 8 refusals in 4 s, then a connection opens",
			script: func(w *gen.Writer) {
				refusedEvery(w, "10.0.0.1", "10.0.0.2:9092", 0, 8, 0.5)
				p := dial(w, "10.0.0.1:40000", "10.0.0.2:9092", at(5))
				req, resp := metadata([]kmsg.MetadataResponseBroker{mdBroker(1, "10.0.0.2", 9092)}, mdTopic("orders", led(0, 1)))
				p.exchange(at(5.01), req, resp)
			},
			sev:    detectors.Info,
			counts: map[string]int64{"attempts": 8},
			fields: map[string]any{"recovered": true},
		},
		{
			name:      "the same restart with recovery 2 s is too long",
			overrides: map[string]float64{id + ".recovery": 2},
			script: func(w *gen.Writer) {
				refusedEvery(w, "10.0.0.1", "10.0.0.2:9092", 0, 8, 0.5)
				p := dial(w, "10.0.0.1:40000", "10.0.0.2:9092", at(5))
				req, resp := metadata([]kmsg.MetadataResponseBroker{mdBroker(1, "10.0.0.2", 9092)}, mdTopic("orders", led(0, 1)))
				p.exchange(at(5.01), req, resp)
			},
			sev:    detectors.Warning,
			fields: map[string]any{"recovered": true},
		},
		{
			name: "a long outage that recovers is still a warning",
			script: func(w *gen.Writer) {
				refusedEvery(w, "10.0.0.1", "10.0.0.2:9092", 0, 60, 1)
				advertiseAt(w, 60, "10.0.0.1:40000", "10.0.0.2:9092", mdBroker(1, "10.0.0.2", 9092))
			},
			sev:    detectors.Warning,
			counts: map[string]int64{"attempts": 60},
			fields: map[string]any{"recovered": true},
		},
		{
			name: "SYNs never answered, from two clients",
			script: func(w *gen.Writer) {
				advertise(w, "10.0.0.1:40000", "10.0.0.2:9092", mdBroker(1, "10.0.0.2", 9092), b2)
				for i := range 4 {
					src := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.5"), uint16(51000+i))
					w.SynUnanswered(src, ap("10.0.0.3:9092"), at(1+float64(10*i)), 2)
				}
				w.SynUnanswered(ap("10.0.0.1:51000"), ap("10.0.0.3:9092"), at(45), 0)
			},
			sev:    detectors.Warning,
			nodes:  []int32{2},
			counts: map[string]int64{"attempts": 5, "unanswered": 5, "refused": 0, "syns": 4*3 + 1},
			fields: map[string]any{"clients": []string{"10.0.0.1", "10.0.0.5"}, "advertised": true},
		},
		{
			name:   "a port that is not Kafka",
			script: func(w *gen.Writer) { refusedEvery(w, "10.0.0.1", "10.0.0.2:8080", 0, 20, 1) },
			sev:    detectors.Info,
			counts: map[string]int64{"attempts": 20},
			fields: map[string]any{"kafka_endpoint": false, "advertised": false},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := trafficFindings(t, id, tc.overrides, tc.script)
			if len(fs) != 1 {
				t.Fatalf("want one finding, got:%s", describeFindings(fs))
			}
			checkFinding(t, fs[0], tc.sev, tc.nodes, tc.counts, tc.fields)
		})
	}
}

// TestConnectionRefusedQuiet: traffic without failed attempts yields nothing.
func TestConnectionRefusedQuiet(t *testing.T) {
	fs := trafficFindings(t, "connection-refused", nil, func(w *gen.Writer) {
		advertise(w, "10.0.0.1:40000", "10.0.0.2:9092", mdBroker(1, "10.0.0.2", 9092))
		advertise(w, "10.0.0.1:40001", "10.0.0.2:9092", mdBroker(1, "10.0.0.2", 9092))
	})
	if len(fs) != 0 {
		t.Errorf("findings without any failed attempt:%s", describeFindings(fs))
	}
}
