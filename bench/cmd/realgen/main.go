// Command realgen records real-client benchmark captures: franz-go kgo
// clients against a franz-go kfake cluster, through fixtures/record's
// recording proxy on 127.0.0.1, streamed to a pcap as they run (bounded
// memory, no root, the deterministic addresses of the committed fixtures:
// brokers 127.0.0.1:9092-9094, clients 127.0.0.1:40001 upwards).
//
//	realgen -o DIR [flags] [bulk] [storm]
//
// bulk  (DIR/bulk.pcap): an idempotent kgo producer (acks=all, kgo's default
//
//	snappy compression) writes -records records of -record-size bytes,
//	half random and half text, one record per Produce request
//	(ProducerBatchMaxBytes), to 3 partitions, one on each broker, while
//	-groups consumer groups of two kgo members each read every record
//	back. About 730 MB and 100k Produce requests at the defaults.
//
// storm (DIR/storm.pcap): every Produce to the topic is answered with
//
//	NOT_LEADER_OR_FOLLOWER (6) by a kfake control function, naming the
//	partition's own leader and epoch (as fixtures/clients/notleader does);
//	-storm-clients kgo producers retry with -storm-backoff between tries and
//	refresh Metadata as often as kgo allows (MetadataMinAge 10ms). The run
//	stops once the brokers have refused -storm-produce Produce requests.
//
// The captures are not deterministic (they carry real timings and the
// clients' own pace) but their content is: record values come from a
// seeded generator. Each pcap is written to NAME.pcap.tmp and renamed when
// complete. realgen prints one line per capture: its path, size, packets,
// what the clients did and how long it took. bench/e2e.sh calls it.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/fixtures/record"
)

type config struct {
	dir          string
	records      int
	recordSize   int
	groups       int
	stormProduce int
	stormClients int
	stormBackoff time.Duration
	timeout      time.Duration
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("realgen", flag.ContinueOnError)
	var c config
	fs.StringVar(&c.dir, "o", "", "write the captures into `DIR` (created if missing)")
	fs.IntVar(&c.records, "records", 100000, "bulk: records to produce and consume, one per Produce request")
	fs.IntVar(&c.recordSize, "record-size", 7000, "bulk: bytes of each record's value (half of it compresses)")
	fs.IntVar(&c.groups, "groups", 1, "bulk: consumer groups reading every record back (each batch fetched once per group)")
	fs.IntVar(&c.stormProduce, "storm-produce", 60000, "storm: stop once this many Produce requests were refused")
	fs.IntVar(&c.stormClients, "storm-clients", 4, "storm: kgo producer clients")
	fs.DurationVar(&c.stormBackoff, "storm-backoff", time.Millisecond, "storm: the clients' retry backoff (kgo.RetryBackoffFn)")
	fs.DurationVar(&c.timeout, "timeout", 15*time.Minute, "give up on a capture after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	which := fs.Args()
	if len(which) == 0 {
		which = []string{"bulk", "storm"}
	}
	if c.dir == "" || c.records < 1 || c.recordSize < 16 || c.groups < 1 || c.stormProduce < 1 || c.stormClients < 1 {
		fmt.Fprintln(os.Stderr, "realgen: usage: realgen -o DIR [-records N] [-record-size B] [-groups N] [-storm-produce N] [-storm-clients N] [-storm-backoff D] [bulk] [storm]")
		return 2
	}
	for _, w := range which {
		if w != "bulk" && w != "storm" {
			fmt.Fprintf(os.Stderr, "realgen: unknown capture %q: want bulk or storm\n", w)
			return 2
		}
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "realgen: %v\n", err)
		return 1
	}
	for _, w := range which {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		t0 := time.Now()
		path := filepath.Join(c.dir, w+".pcap")
		what, packets, err := recordCapture(ctx, path, func(ctx context.Context, env *record.Env) (string, error) {
			if w == "bulk" {
				return bulk(ctx, env, c)
			}
			return storm(ctx, env, c)
		}, w == "bulk")
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "realgen: %s: %v\n", w, err)
			return 1
		}
		st, err := os.Stat(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "realgen: %v\n", err)
			return 1
		}
		fmt.Printf("%s: %d bytes, %d packets; %s; %.1fs\n", path, st.Size(), packets, what, time.Since(t0).Seconds())
	}
	return 0
}

// recordCapture runs fn against a 3-broker kfake cluster behind a streaming proxy
// writing path, and renames the pcap into place once it is complete.
func recordCapture(ctx context.Context, path string, fn func(context.Context, *record.Env) (string, error), isBulk bool) (what string, packets int, err error) {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", 0, err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	var opts []kfake.Opt
	if isBulk {
		opts = append(opts, kfake.SeedTopics(3, "bulk"))
	} else {
		opts = append(opts, kfake.SeedTopics(6, "storm"))
	}
	env, err := record.NewStreamingEnv(3, bw, record.PcapOptions(), opts...)
	if err != nil {
		f.Close()
		return "", 0, err
	}
	what, err = fn(ctx, env)
	cerr := env.Proxy.Close() // flushes the pcap writer
	env.Close()
	packets = env.Proxy.Packets()
	err = errors.Join(err, cerr, bw.Flush(), f.Close())
	if err != nil {
		return "", 0, err
	}
	return what, packets, os.Rename(tmp, path)
}

// value is record i's value: size bytes, the first half from a generator
// seeded with i (does not compress), the rest text (compresses well), so
// snappy batches are about half the records' size, as real payloads often
// are.
func value(i, size int) []byte {
	v := make([]byte, size)
	half := size / 2
	var seed [32]byte
	seed[0], seed[1], seed[2], seed[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
	rand.NewChaCha8(seed).Read(v[:half])
	text := fmt.Appendf(nil, `{"order":%d,"customer":"c-%05d","status":"shipped","lines":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}]} `, i, i%50000)
	for off := half; off < size; off += copy(v[off:], text) {
	}
	return v
}

// bulk produces c.records records with one kgo producer while c.groups
// groups of two kgo consumers read them back, and returns once every group
// has seen every record the broker acknowledged.
func bulk(ctx context.Context, env *record.Env, c config) (string, error) {
	const topic, group, partitions = "bulk", "realgen-bulk", 3
	// Partition p led by broker p: each Produce request carries one batch.
	for p := range int32(partitions) {
		if err := env.Cluster.MoveTopicPartition(topic, p, p); err != nil {
			return "", fmt.Errorf("move %s/%d to node %d: %w", topic, p, p, err)
		}
	}
	prod, err := kgo.NewClient(append(env.ClientOpts("realgen-producer"),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		// One record per batch, so one record per Produce request to
		// each broker: two records are twice the size, over the limit.
		kgo.ProducerBatchMaxBytes(int32(c.recordSize+1024)),
	)...)
	if err != nil {
		return "", fmt.Errorf("producer: %w", err)
	}
	defer prod.Close()

	var (
		mu          sync.Mutex
		seen        = make([][partitions][]bool, c.groups)
		distinct    = make([]int, c.groups)
		redelivered int
	)
	for g := range seen {
		for p := range seen[g] {
			seen[g][p] = make([]bool, c.records)
		}
	}
	var acked, failed atomic.Int64
	var produced = make(chan struct{}) // closed when every record has its ack
	allSeen := make(chan struct{})
	var allOnce sync.Once
	check := func() { // under mu
		select {
		case <-produced:
			if int64(slices.Min(distinct)) >= acked.Load() {
				allOnce.Do(func() { close(allSeen) })
			}
		default:
		}
	}

	cctx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var consumers sync.WaitGroup
	var firstConsumeErr atomic.Value
	for m := range 2 * c.groups {
		g := m / 2
		name := group
		if g > 0 {
			name = fmt.Sprintf("%s-%d", group, g+1)
		}
		cl, err := kgo.NewClient(append(env.ClientOpts(fmt.Sprintf("realgen-consumer-%d", m)),
			kgo.ConsumerGroup(name),
			kgo.ConsumeTopics(topic),
			kgo.FetchMaxWait(200*time.Millisecond),
		)...)
		if err != nil {
			return "", fmt.Errorf("consumer %d: %w", m, err)
		}
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			defer cl.Close() // leaves the group
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				fs.EachError(func(t string, p int32, err error) {
					if !errors.Is(err, context.Canceled) {
						firstConsumeErr.CompareAndSwap(nil, fmt.Errorf("%s/%d: %w", t, p, err))
					}
				})
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					if r.Partition < 0 || r.Partition >= partitions || r.Offset < 0 || r.Offset >= int64(c.records) {
						return
					}
					if seen[g][r.Partition][r.Offset] {
						redelivered++
						return
					}
					seen[g][r.Partition][r.Offset] = true
					distinct[g]++
				})
				check()
				mu.Unlock()
			}
		}()
	}

	for i := range c.records {
		r := &kgo.Record{Key: fmt.Appendf(nil, "order-%07d", i), Value: value(i, c.recordSize)}
		prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				return
			}
			acked.Add(1)
		})
	}
	if err := prod.Flush(ctx); err != nil {
		return "", fmt.Errorf("flush: %w", err)
	}
	close(produced)
	mu.Lock()
	check()
	mu.Unlock()
	select {
	case <-allSeen:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		return "", fmt.Errorf("the groups read %v of %d records: %w", distinct, acked.Load(), ctx.Err())
	}
	stopConsumers()
	consumers.Wait()
	if failed.Load() > 0 {
		return "", fmt.Errorf("%d of %d records failed", failed.Load(), c.records)
	}
	var cerr error
	if e, ok := firstConsumeErr.Load().(error); ok {
		cerr = e // reported, not fatal: the groups read everything
	}
	mu.Lock()
	defer mu.Unlock()
	what := fmt.Sprintf("%d records of %d bytes produced and acknowledged, %d read back by group %s (%d redelivered)",
		acked.Load(), c.recordSize, distinct[0], group, redelivered)
	if c.groups > 1 {
		what = fmt.Sprintf("%d records of %d bytes produced and acknowledged, %v read back by %d groups %s... (%d redelivered)",
			acked.Load(), c.recordSize, distinct, c.groups, group, redelivered)
	}
	if cerr != nil {
		what += fmt.Sprintf(", first fetch error %v", cerr)
	}
	return what, nil
}

// storm refuses every Produce to its topic with NOT_LEADER_OR_FOLLOWER while
// c.stormClients kgo producers keep retrying, until c.stormProduce Produce
// requests were refused.
func storm(ctx context.Context, env *record.Env, c config) (string, error) {
	const topic = "storm"
	// Two partitions led by each broker, so every recording has the same
	// shape: each Produce request carries two partitions.
	for p := range int32(6) {
		if err := env.Cluster.MoveTopicPartition(topic, p, p%3); err != nil {
			return "", fmt.Errorf("move %s/%d to node %d: %w", topic, p, p%3, err)
		}
	}
	ti := env.Cluster.TopicInfo(topic)
	pis := env.Cluster.PartitionInfos(topic)
	if ti == nil || len(pis) == 0 {
		return "", errors.New("kfake has no storm topic")
	}
	leaders := make(map[int32]*kfake.PartitionInfo, len(pis))
	for _, pi := range pis {
		leaders[pi.Partition] = pi
	}

	var refused atomic.Int64
	stop := make(chan struct{})
	var stopOnce sync.Once
	env.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		env.Cluster.KeepControl()
		resp, ok := refuse(req.(*kmsg.ProduceRequest), topic, ti.TopicID, leaders)
		if !ok {
			return nil, nil, false
		}
		if refused.Add(1) >= int64(c.stormProduce) {
			stopOnce.Do(func() { close(stop) })
		}
		return resp, nil, true
	})

	backoff := c.stormBackoff
	clients := make([]*kgo.Client, 0, c.stormClients)
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	var failed atomic.Int64
	for n := range c.stormClients {
		cl, err := kgo.NewClient(append(env.ClientOpts(fmt.Sprintf("realgen-storm-%d", n)),
			kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.RetryBackoffFn(func(int) time.Duration { return backoff }),
			kgo.MetadataMinAge(10*time.Millisecond), // kgo's lowest
		)...)
		if err != nil {
			return "", fmt.Errorf("storm client %d: %w", n, err)
		}
		clients = append(clients, cl)
		// A record for every partition, retried until the run stops.
		for i := range len(pis) {
			r := &kgo.Record{Key: fmt.Appendf(nil, "storm-%d-%d", n, i), Value: value(n*1000+i, 100)}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) { failed.Add(1) })
		}
	}
	start := time.Now()
	select {
	case <-stop:
	case <-ctx.Done():
		return "", fmt.Errorf("%d Produce refused of %d: %w", refused.Load(), c.stormProduce, ctx.Err())
	}
	wall := time.Since(start)
	for _, cl := range clients {
		cl.Close() // fails the records still being retried
	}
	clients = nil
	return fmt.Sprintf("%d Produce refused with NOT_LEADER_OR_FOLLOWER in %.1fs (%d clients, backoff %v, %d partitions)",
		refused.Load(), wall.Seconds(), c.stormClients, backoff, len(pis)), nil
}

// refuse answers a Produce whose topics are all topic with
// NOT_LEADER_OR_FOLLOWER for every partition, naming (from v10, KIP-951)
// the partition's own leader and epoch as the current leader: the broker
// that refuses. Other requests are left to kfake (ok false).
func refuse(req *kmsg.ProduceRequest, topic string, id [16]byte, leaders map[int32]*kfake.PartitionInfo) (kmsg.Response, bool) {
	if len(req.Topics) == 0 {
		return nil, false
	}
	for _, t := range req.Topics {
		if t.Topic != topic && t.TopicID != id {
			return nil, false
		}
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	named := make(map[int32]bool)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			if pi := leaders[p.Partition]; pi != nil && req.Version >= 10 {
				rp.CurrentLeader.LeaderID = pi.Leader
				rp.CurrentLeader.LeaderEpoch = pi.Epoch
				named[pi.Leader] = true
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for node := range int32(3) {
		if named[node] {
			b := kmsg.NewProduceResponseBroker()
			b.NodeID = node
			b.Host = "127.0.0.1"
			b.Port = int32(record.FirstBrokerPort) + node
			resp.Brokers = append(resp.Brokers, b)
		}
	}
	return resp, true
}
