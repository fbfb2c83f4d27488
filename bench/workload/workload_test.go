package workload_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/bench/workload"
	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
)

// offsets checks, per partition, that the offsets the generated brokers
// hand out never go back: Produce base offsets and Fetch high watermarks.
type offsets struct {
	t    *testing.T
	last map[string]int64
	bad  int
}

func (o *offsets) OnExchange(x *flows.Exchange) {
	if x.Resp == nil || x.Resp.Resp == nil {
		return
	}
	see := func(kind, topic string, p int32, v int64) {
		k := fmt.Sprintf("%s/%s/%d", kind, topic, p)
		if v < o.last[k] && o.bad < 5 {
			o.t.Errorf("%s %s-%d went back from %d to %d", kind, topic, p, o.last[k], v)
			o.bad++
		}
		o.last[k] = v
	}
	switch r := x.Resp.Resp.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 {
					see("produce", t.Topic, p.Partition, p.BaseOffset)
				}
			}
		}
	case *kmsg.FetchResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 {
					see("hw", t.Topic+fmt.Sprintf("%x", t.TopicID), p.Partition, p.HighWatermark) // name up to v12, id from v13
				}
			}
		}
	}
}

// TestShapes generates each shape at a small size and analyses it: every
// frame must decode and pair, the counts must match what the generator
// wrote, and each shape must hold the traffic it promises.
func TestShapes(t *testing.T) {
	small := workload.Small(30000)
	small.Conns = 120
	smallTshark := small
	smallTshark.Versions = workload.Tshark
	largeTshark := workload.Large(10e6)
	largeTshark.Versions = workload.Tshark
	tests := []struct {
		name  string
		shape workload.Shape
		apis  []kmsg.Key
	}{
		{"small", small, []kmsg.Key{kmsg.ApiVersions, kmsg.Metadata, kmsg.Produce, kmsg.Fetch, kmsg.FindCoordinator, kmsg.Heartbeat, kmsg.OffsetCommit}},
		// All 2,000 connections, so that each partition has its
		// producers and consumers as in the benchmark.
		{"small-all-conns", workload.Small(200000), []kmsg.Key{kmsg.ApiVersions, kmsg.Metadata, kmsg.Produce, kmsg.Fetch, kmsg.FindCoordinator, kmsg.Heartbeat, kmsg.OffsetCommit}},
		{"large", workload.Large(30e6), []kmsg.Key{kmsg.ApiVersions, kmsg.Metadata, kmsg.Produce, kmsg.Fetch}},
		{"small-tshark", smallTshark, []kmsg.Key{kmsg.ApiVersions, kmsg.Metadata, kmsg.Produce, kmsg.Fetch, kmsg.FindCoordinator, kmsg.Heartbeat, kmsg.OffsetCommit}},
		{"large-tshark", largeTshark, []kmsg.Key{kmsg.ApiVersions, kmsg.Metadata, kmsg.Produce, kmsg.Fetch}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			st, err := tt.shape.Write(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if int64(buf.Len()) != st.Bytes {
				t.Errorf("Stats.Bytes = %d, wrote %d", st.Bytes, buf.Len())
			}
			f, err := capture.NewFile(tt.name, 0, bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			off := &offsets{t: t, last: map[string]int64{}}
			dets, err := detectors.NewSet(all.Analyzers(), nil)
			if err != nil {
				t.Fatal(err)
			}
			res := pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{
				Flows:     flows.DefaultConfig(),
				Handlers:  []flows.Handler{off},
				Detectors: dets,
				Warn:      func(err error) { t.Error(err) },
			})
			r := res.Report
			tot := r.Totals
			if r.Capture.Packets != int64(st.Packets) || tot.KafkaConnections != st.Conns ||
				tot.Requests != int64(st.Exchanges) || tot.Responses != int64(st.Exchanges) {
				t.Errorf("analysed %d packets, %d connections, %d requests, %d responses; generated %d, %d, %d exchanges",
					r.Capture.Packets, tot.KafkaConnections, tot.Requests, tot.Responses, st.Packets, st.Conns, st.Exchanges)
			}
			if tot.DecodeErrors+tot.FramingErrors+tot.Gaps+tot.UnmatchedResponses+tot.UnansweredRequests != 0 {
				t.Errorf("not clean: %+v", tot)
			}
			// The traffic is healthy but for its few, isolated error
			// responses: a finding means the generator wrote something
			// a real cluster would not (or a detector is wrong).
			for _, fd := range r.Findings {
				if fd.Detector == "reconnect-storm" && fd.Severity == detectors.Info {
					// Every connection opens in the first second (a
					// cold start): a burst, rightly info.
					continue
				}
				if fd.Detector == "replica-divergence" && fd.Severity == detectors.Info && fd.Counts["mismatches"] == 0 && fd.Counts["bad_crcs"] == 0 {
					// Consumers read the batches producers wrote:
					// the replicas verified identical, said at info.
					continue
				}
				t.Errorf("finding on benchmark traffic: %s %s: %s", fd.Severity, fd.Detector, fd.Summary)
			}
			// Consumers keep up: their lag may shrink (catching up
			// with the log before the capture) but does not grow by
			// more than a few fetches (the biggest batches are 8
			// records, a Fetch reads up to 3), as it does for a
			// consumer reading less than its partition's producers
			// write.
			for _, l := range r.Lag {
				if l.Role == "consumer" && l.Max.Lag-l.First.Lag > 50 {
					t.Errorf("%s on %s-%d: lag from %d (packet %d) up to %d (packet %d): the consumer does not keep up",
						l.ClientID, l.Topic, l.Partition, l.First.Lag, l.First.Packet, l.Max.Lag, l.Max.Packet)
					break
				}
			}
			seen := map[int16]bool{}
			want := tt.shape.Versions.String()
			for _, a := range r.APIs {
				seen[a.Key] = true
				if a.Key == int16(kmsg.Produce) && (a.Version == 9) != (want == "current") {
					t.Errorf("Produce v%d in %s versions", a.Version, want)
				}
			}
			for _, k := range tt.apis {
				if !seen[int16(k)] {
					t.Errorf("no %s traffic", kmsg.NameForKey(int16(k)))
				}
			}
			switch tt.shape.Name {
			case "small":
				if tot.ErrorResponses == 0 {
					t.Error("no error responses")
				}
				if per := float64(st.Bytes) / float64(st.Packets); per > 400 {
					t.Errorf("%.0f bytes per packet: not a small-packet capture", per)
				}
			case "large":
				if st.Bytes < tt.shape.Bytes {
					t.Errorf("%d bytes, want at least %d", st.Bytes, tt.shape.Bytes)
				}
				if per := float64(st.Bytes) / float64(st.Packets); per < 30000 {
					t.Errorf("%.0f bytes per packet: not a large-segment capture", per)
				}
			}
		})
	}
}

// TestDeterministic: the same shape gives the same bytes.
func TestDeterministic(t *testing.T) {
	s := workload.Small(5000)
	s.Conns = 40
	var a, b bytes.Buffer
	if _, err := s.Write(&a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two runs of the small shape differ")
	}
}
