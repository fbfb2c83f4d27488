// Command exportsize reads an --export topic from the start and says how
// many bytes a record takes in the log: the batches' sizes as stored
// (compressed), and uncompressed, per record; for sizing the export
// topic (docs/export.md, Deploying).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type sizes struct {
	mu                             sync.Mutex
	batches, records, comp, uncomp int64
}

func (s *sizes) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	s.mu.Lock()
	s.batches++
	s.records += int64(m.NumRecords)
	s.comp += int64(m.CompressedBytes)
	s.uncomp += int64(m.UncompressedBytes)
	s.mu.Unlock()
}

func main() {
	brokers := flag.String("b", "127.0.0.1:9092", "the sink's broker")
	topic := flag.String("t", "kfsniff", "the export topic")
	flag.Parse()
	s := &sizes{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(*brokers), kgo.ConsumeTopics(*topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(s))
	if err != nil {
		fmt.Fprintln(os.Stderr, "exportsize:", err)
		os.Exit(1)
	}
	defer cl.Close()
	var values int64
	n, empty := 0, 0
	for empty < 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			empty++
			continue
		}
		empty = 0
		fs.EachRecord(func(r *kgo.Record) { n++; values += int64(len(r.Key) + len(r.Value)) })
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records == 0 {
		fmt.Println("no records")
		return
	}
	fmt.Printf("%d records in %d batches: %.1f bytes a record in the log (compressed batches), %.1f uncompressed, %.1f of key and JSON value\n",
		s.records, s.batches, float64(s.comp)/float64(s.records), float64(s.uncomp)/float64(s.records), float64(values)/float64(n))
}
