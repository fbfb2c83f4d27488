package decode_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

// recordSet returns about size bytes of 16 KiB magic-2 batches.
func recordSet(size int) []byte {
	var out []byte
	for off := int64(0); len(out) < size; off += 16 {
		out = append(out, batch(off, 16, 1000)...)
	}
	return out
}

func BenchmarkParseRequestHeader(b *testing.B) {
	id := "console-producer-1"
	frame := requestFrame(1, &id, &kmsg.ProduceRequest{Version: 9, Acks: -1, TimeoutMillis: 30000})[4:]
	h, err := decode.ParseRequestHeader(frame)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(h.Len))
	for b.Loop() {
		if _, err := decode.ParseRequestHeader(frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	produce := &kmsg.ProduceRequest{Version: 9, Acks: -1, TimeoutMillis: 30000, Topics: []kmsg.ProduceRequestTopic{{
		Topic:      "orders",
		Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 3, Records: recordSet(64 << 10)}},
	}}}

	fetch := &kmsg.FetchResponse{Version: 17, SessionID: 12, Topics: []kmsg.FetchResponseTopic{{
		TopicID: [16]byte{1, 2, 3},
		Partitions: []kmsg.FetchResponseTopicPartition{{
			Partition: 0, HighWatermark: 1 << 20, LastStableOffset: 1 << 20,
			PreferredReadReplica: -1, RecordBatches: recordSet(1 << 20),
		}},
	}}}

	metadata := &kmsg.MetadataResponse{Version: 12, ClusterID: kmsg.StringPtr("kfsniff-bench"), ControllerID: 1}
	for i := int32(0); i < 6; i++ {
		metadata.Brokers = append(metadata.Brokers, kmsg.MetadataResponseBroker{NodeID: i, Host: fmt.Sprintf("broker-%d.kafka.svc", i), Port: 9092, Rack: kmsg.StringPtr("rack-a")})
	}
	for i := 0; i < 100; i++ {
		t := kmsg.MetadataResponseTopic{Topic: kmsg.StringPtr(fmt.Sprintf("topic-%03d", i)), TopicID: [16]byte{byte(i), 9}, AuthorizedOperations: -2147483648}
		for p := int32(0); p < 12; p++ {
			t.Partitions = append(t.Partitions, kmsg.MetadataResponseTopicPartition{
				Partition: p, Leader: p % 6, LeaderEpoch: 4, Replicas: []int32{p % 6, (p + 1) % 6, (p + 2) % 6}, ISR: []int32{p % 6, (p + 1) % 6, (p + 2) % 6},
			})
		}
		metadata.Topics = append(metadata.Topics, t)
	}

	heartbeat := &kmsg.BrokerHeartbeatRequest{Version: 1, BrokerID: 3, BrokerEpoch: 1 << 30, CurrentMetadataOffset: 123456, OfflineLogDirs: [][16]byte{{1}}}

	for _, bc := range []struct {
		name string
		msg  interface {
			Key() int16
			GetVersion() int16
			AppendTo([]byte) []byte
		}
		response bool
	}{
		{"ProduceRequest v9 64KiB", produce, false},
		{"FetchResponse v17 1MiB", fetch, true},
		{"MetadataResponse v12 100x12", metadata, true},
		{"BrokerHeartbeatRequest v1", heartbeat, false},
	} {
		body := bc.msg.AppendTo(nil)
		key, version := bc.msg.Key(), bc.msg.GetVersion()
		run := func() error {
			if bc.response {
				_, err := decode.DecodeResponse(key, version, body)
				return err
			}
			_, err := decode.DecodeRequest(key, version, body)
			return err
		}
		if err := run(); err != nil {
			b.Fatalf("%s: %v", bc.name, err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkScanBatches(b *testing.B) {
	records := recordSet(1 << 20)
	want, err := decode.ScanBatches(records, nil)
	if err != nil || want.Truncated || want.BadCRC != 0 {
		b.Fatalf("scan %+v, %v", want, err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(records)))
	n := 0
	for b.Loop() {
		s, _ := decode.ScanBatches(records, func(*decode.Batch) { n++ })
		if s.Batches != want.Batches {
			b.Fatalf("%d batches, want %d", s.Batches, want.Batches)
		}
	}
}
