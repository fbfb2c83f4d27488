package correlate

import (
	"encoding/json"
	"testing"
	"time"
)

// benchValues are the records the exporter ships for a scenario capture
// with replication and consumers (mm2-replay: Produce and Fetch records
// with batches, connection events, findings).
func benchValues(b *testing.B) ([][]byte, int64) {
	vals := shipCapture(b, "../fixtures/pcaps/scenarios/mm2-replay.pcap", "bench")
	var n int64
	for _, v := range vals {
		n += int64(len(v))
	}
	return vals, n
}

// BenchmarkParse is Parse's cost per record on real shipped records.
func BenchmarkParse(b *testing.B) {
	vals, size := benchValues(b)
	b.SetBytes(size / int64(len(vals)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := Parse(vals[i]); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(vals) {
			i = 0
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// jsonRecord is what encoding/json would need for the same fields
// (pointers for the absent ones): the alternative Parse was measured
// against.
type jsonRecord struct {
	V, Conn, Parts, File, Attempts                  int
	Type, Agent, Cluster, Client, Server, Role      string
	Status, Group, Topic, Event, State              string
	TS                                              int64  `json:"ts_ns"`
	Latency                                         *int64 `json:"latency_ns"`
	Node, Replica                                   *int32
	ClientID                                        *string `json:"client_id"`
	TxnID                                           *string `json:"txn_id"`
	API                                             int16
	Ver                                             int16
	Corr, Partition                                 int32
	ReqPkt, RespPkt, Pkt                            int64
	Acks, Error                                     *int16
	Errors                                          [][2]int64
	BatchIndex                                      *int `json:"batch_index"`
	FetchOffset, Timestamp, Offset, CommittedOffset *int64
	HighWatermark, LastStableOffset, LogStartOffset *int64
	BaseOffset                                      *int64
	OffsetEpoch, Leader, LeaderEpoch                *int32
	Batches                                         []struct {
		Offset, BaseOffset               *int64
		LastOffsetDelta, Records         int32
		CRC                              uint32
		CRCOK                            *bool
		Magic                            int8
		LeaderEpoch, BaseSequence, Bytes int32
		ProducerID, FirstTS, MaxTS       int64
		ProducerEpoch, Attributes        int16
	}
	Finding json.RawMessage
}

// BenchmarkParseEncodingJSON is encoding/json into a struct, for
// comparison.
func BenchmarkParseEncodingJSON(b *testing.B) {
	vals, size := benchValues(b)
	b.SetBytes(size / int64(len(vals)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		var r jsonRecord
		if err := json.Unmarshal(vals[i], &r); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(vals) {
			i = 0
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkStats is the correlator's cost per record besides reading it:
// Stats.Add of two agents' records of a real client's capture (clocks
// matched, batches remembered and fetched), in a steady state: the
// capture's records again and again, each round's correlation ids,
// times and offsets moved on so that they are new exchanges and batches
// (windows full, evicting). Parse included in BenchmarkParseAndAdd.
func BenchmarkStats(b *testing.B) {
	recs := benchRecords(b)
	b.ReportAllocs()
	st := NewStats(Limits{})
	var batches []Batch
	i, round := 0, int64(0)
	for b.Loop() {
		r := recs[i]
		r.Corr += int32(round << 12)
		r.TS += round * int64(10*time.Second)
		batches = append(batches[:0], r.Batches...)
		for j := range batches {
			batches[j].Offset.V += round << 20
			batches[j].BaseOffset.V += round << 20
		}
		r.Batches = batches
		st.Add(&r)
		if i++; i == len(recs) {
			i = 0
			round++
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkParseAndAdd is Parse then Stats.Add, per record: what the
// correlator spends per record of the topic before its detectors.
func BenchmarkParseAndAdd(b *testing.B) {
	by := splitCapture(b, "../fixtures/pcaps/clients/mm2-replay-kgo.pcap", 30,
		agentView{"host-a", func(s int) bool { return s%3 != 2 }, none},
		agentView{"host-b", func(s int) bool { return s%3 != 1 }, ahead(time.Second)})
	vals := append(by["host-a"], by["host-b"]...)
	var size int64
	for _, v := range vals {
		size += int64(len(v))
	}
	b.SetBytes(size / int64(len(vals)))
	b.ReportAllocs()
	st := NewStats(Limits{})
	i := 0
	for b.Loop() {
		r, err := Parse(vals[i])
		if err != nil {
			b.Fatal(err)
		}
		st.Add(&r)
		if i++; i == len(vals) {
			i = 0
			st = NewStats(Limits{})
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func benchRecords(b *testing.B) []Record {
	by := splitCapture(b, "../fixtures/pcaps/clients/mm2-replay-kgo.pcap", 30,
		agentView{"host-a", func(s int) bool { return s%3 != 2 }, none},
		agentView{"host-b", func(s int) bool { return s%3 != 1 }, ahead(time.Second)})
	return merged(b, by)
}
