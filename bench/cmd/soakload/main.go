// Command soakload is the live traffic of the soak (bench/soak.sh): real
// franz-go kgo clients against a 3-broker kfake cluster listening on
// 127.0.0.1:9092-9094 (run it in a network namespace of its own, so its
// loopback carries nothing else), until interrupted or -duration:
//
//   - bulk: one kgo producer writing -bulk-rate records a second of
//     -record-size bytes (one record per Produce request) to topic bulk,
//     read back by a consumer group of two kgo members;
//   - storm: -storm-clients kgo producers whose every Produce to topic storm
//     is refused with NOT_LEADER_OR_FOLLOWER, retrying after -storm-backoff
//     and refreshing Metadata as often as kgo allows;
//   - groups: -groups more consumer groups of two members on topic bulk;
//     every -rejoin one member of one of them leaves and a new one joins
//     (a rebalance);
//   - churn: -churn short-lived kgo clients a second, each opening its
//     connection, asking for Metadata and closing.
//
// The brokers keep at most -retain bytes per partition (retention.bytes,
// applied every 10 s), so an hour does not fill the memory. Every 10 s it
// prints one line of counters on stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type config struct {
	duration     time.Duration
	bulkRate     int
	recordSize   int
	stormClients int
	stormBackoff time.Duration
	groups       int
	rejoin       time.Duration
	churn        int
	retain       int64
}

type counters struct {
	produced, consumed, refused, churned, churnFailed, rejoins atomic.Int64
}

func main() {
	var c config
	flag.DurationVar(&c.duration, "duration", 0, "stop after this long (0: until interrupted)")
	flag.IntVar(&c.bulkRate, "bulk-rate", 200, "bulk: records a second, one per Produce request")
	flag.IntVar(&c.recordSize, "record-size", 7000, "bulk: bytes of each record's value (half of it compresses)")
	flag.IntVar(&c.stormClients, "storm-clients", 2, "storm: kgo producers retrying refused Produce requests")
	flag.DurationVar(&c.stormBackoff, "storm-backoff", 5*time.Millisecond, "storm: the producers' retry backoff")
	flag.IntVar(&c.groups, "groups", 2, "consumer groups of two members besides bulk's own")
	flag.DurationVar(&c.rejoin, "rejoin", 30*time.Second, "every this long a member of one of the groups leaves and another joins (0: never)")
	flag.IntVar(&c.churn, "churn", 50, "short-lived clients a second (connect, Metadata, close)")
	flag.Int64Var(&c.retain, "retain", 64<<20, "bytes kept per partition (retention.bytes)")
	flag.Parse()
	if c.bulkRate < 0 || c.recordSize < 16 || c.stormClients < 0 || c.groups < 0 || c.churn < 0 || c.retain < 1<<20 {
		fmt.Fprintln(os.Stderr, "soakload: bad flags (see -h)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "soakload:", err)
		os.Exit(1)
	}
}

var seeds = []string{"127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"}

func run(ctx context.Context, c config) error {
	cl, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.Ports(9092, 9093, 9094),
		kfake.SeedTopics(3, "bulk"), kfake.SeedTopics(6, "storm"),
		kfake.BrokerConfigs(map[string]string{"log.retention.bytes": strconv.FormatInt(c.retain, 10)}))
	if err != nil {
		return err
	}
	defer cl.Close()
	for p := range int32(3) {
		if err := cl.MoveTopicPartition("bulk", p, p); err != nil {
			return err
		}
	}
	for p := range int32(6) {
		if err := cl.MoveTopicPartition("storm", p, p%3); err != nil {
			return err
		}
	}
	var n counters
	var wg sync.WaitGroup
	start := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	start(func() { tick(ctx, 10*time.Second, cl.ApplyRetention) })
	start(func() {
		t0 := time.Now()
		tick(ctx, 10*time.Second, func() {
			fmt.Fprintf(os.Stderr, "soakload: %4.0fs produced %d consumed %d refused %d churned %d (failed %d) rejoins %d\n",
				time.Since(t0).Seconds(), n.produced.Load(), n.consumed.Load(), n.refused.Load(), n.churned.Load(), n.churnFailed.Load(), n.rejoins.Load())
		})
	})
	if c.bulkRate > 0 {
		start(func() { bulk(ctx, c, &n) })
		for m := range 2 {
			start(func() { member(ctx, "soak-bulk", fmt.Sprintf("soak-bulk-%d", m), &n) })
		}
	}
	if c.stormClients > 0 {
		stormControl(cl, &n)
		for i := range c.stormClients {
			start(func() { stormProducer(ctx, c, i) })
		}
	}
	for g := range c.groups {
		start(func() { group(ctx, c, g, &n) })
	}
	if c.churn > 0 {
		start(func() { churn(ctx, c, &n) })
	}
	<-ctx.Done()
	wg.Wait()
	fmt.Fprintf(os.Stderr, "soakload: done: produced %d consumed %d refused %d churned %d (failed %d) rejoins %d\n",
		n.produced.Load(), n.consumed.Load(), n.refused.Load(), n.churned.Load(), n.churnFailed.Load(), n.rejoins.Load())
	return nil
}

func tick(ctx context.Context, every time.Duration, f func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

func opts(clientID string, more ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(clientID)}, more...)
}

// value is record i's value: half random (does not compress), half text.
func value(i, size int) []byte {
	v := make([]byte, size)
	half := size / 2
	var seed [32]byte
	seed[0], seed[1], seed[2], seed[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
	rand.NewChaCha8(seed).Read(v[:half])
	text := fmt.Appendf(nil, `{"order":%d,"customer":"c-%05d","status":"shipped"} `, i, i%50000)
	for off := half; off < size; off += copy(v[off:], text) {
	}
	return v
}

// bulk produces c.bulkRate records a second, paced every 10 ms.
func bulk(ctx context.Context, c config, n *counters) {
	prod, err := kgo.NewClient(opts("soak-producer",
		kgo.DefaultProduceTopic("bulk"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchMaxBytes(int32(c.recordSize+1024)),
	)...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soakload: producer:", err)
		return
	}
	defer prod.Close()
	vals := make([][]byte, 64)
	for i := range vals {
		vals[i] = value(i, c.recordSize)
	}
	t0 := time.Now()
	sent := 0
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due := int(time.Since(t0).Seconds() * float64(c.bulkRate))
		for ; sent < due; sent++ {
			r := &kgo.Record{Key: fmt.Appendf(nil, "order-%09d", sent), Value: vals[sent%len(vals)]}
			prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err == nil {
					n.produced.Add(1)
				}
			})
		}
	}
}

// member consumes topic bulk in group until ctx ends, then leaves.
func member(ctx context.Context, group, id string, n *counters) {
	cl, err := kgo.NewClient(opts(id, kgo.ConsumerGroup(group), kgo.ConsumeTopics("bulk"),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soakload: member:", err)
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		n.consumed.Add(int64(fs.NumRecords()))
	}
}

// group runs two members of group g; every c.rejoin (g's turn among the
// groups) the older member leaves and a new one joins.
func group(ctx context.Context, c config, g int, n *counters) {
	name := fmt.Sprintf("soak-group-%d", g)
	var wg sync.WaitGroup
	defer wg.Wait()
	spawn := func(k int) context.CancelFunc {
		mctx, cancel := context.WithCancel(ctx)
		wg.Add(1)
		go func() { defer wg.Done(); member(mctx, name, fmt.Sprintf("%s-m%d", name, k), n) }()
		return cancel
	}
	members := []context.CancelFunc{spawn(0), spawn(1)}
	if c.rejoin <= 0 {
		<-ctx.Done()
		return
	}
	every := c.rejoin * time.Duration(max(c.groups, 1))
	select {
	case <-ctx.Done():
		return
	case <-time.After(c.rejoin * time.Duration(g+1)):
	}
	k := 2
	tick(ctx, every, func() {
		members[0]()
		members = append(members[1:], spawn(k))
		k++
		n.rejoins.Add(1)
	})
	for _, m := range members {
		m()
	}
}

// stormControl refuses every Produce to topic storm with
// NOT_LEADER_OR_FOLLOWER, naming the partition's own leader.
func stormControl(cl *kfake.Cluster, n *counters) {
	ti := cl.TopicInfo("storm")
	leaders := make(map[int32]*kfake.PartitionInfo)
	for _, pi := range cl.PartitionInfos("storm") {
		leaders[pi.Partition] = pi
	}
	cl.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		if len(pr.Topics) == 0 {
			return nil, nil, false
		}
		for _, t := range pr.Topics {
			if t.Topic != "storm" && t.TopicID != ti.TopicID {
				return nil, nil, false
			}
		}
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range pr.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER
				rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
				if pi := leaders[p.Partition]; pi != nil && pr.Version >= 10 {
					rp.CurrentLeader.LeaderID = pi.Leader
					rp.CurrentLeader.LeaderEpoch = pi.Epoch
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		n.refused.Add(1)
		return resp, nil, true
	})
}

// stormProducer keeps one record per storm partition retrying until ctx
// ends (the records never succeed; a failed one is produced again).
func stormProducer(ctx context.Context, c config, i int) {
	backoff := c.stormBackoff
	cl, err := kgo.NewClient(opts(fmt.Sprintf("soak-storm-%d", i),
		kgo.DefaultProduceTopic("storm"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return backoff }),
		kgo.MetadataMinAge(10*time.Millisecond),
		kgo.RecordDeliveryTimeout(time.Minute),
	)...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soakload: storm:", err)
		return
	}
	defer cl.Close()
	var produce func(k int)
	produce = func(k int) {
		if ctx.Err() != nil {
			return
		}
		r := &kgo.Record{Key: fmt.Appendf(nil, "storm-%d-%d", i, k), Value: value(i*1000+k, 100)}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil && !errors.Is(err, context.Canceled) {
				go produce(k)
			}
		})
	}
	for k := range 6 {
		produce(k)
	}
	<-ctx.Done()
}

// churn opens c.churn short-lived clients a second: each asks one broker
// for Metadata on a connection of its own and closes.
func churn(ctx context.Context, c config, n *counters) {
	every := time.Second / time.Duration(c.churn)
	t := time.NewTicker(every)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	var inflight atomic.Int64
	k := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if inflight.Load() > int64(c.churn) { // the brokers are slow: do not pile up
			n.churnFailed.Add(1)
			continue
		}
		k++
		inflight.Add(1)
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			defer inflight.Add(-1)
			cl, err := kgo.NewClient(kgo.SeedBrokers(seeds[k%len(seeds)]), kgo.ClientID(fmt.Sprintf("soak-admin-%d", k%1000)))
			if err != nil {
				n.churnFailed.Add(1)
				return
			}
			defer cl.Close()
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			req := kmsg.NewPtrMetadataRequest()
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr("bulk")
			req.Topics = append(req.Topics, t)
			if _, err := cl.Request(rctx, req); err != nil {
				n.churnFailed.Add(1)
				return
			}
			n.churned.Add(1)
		}(k)
	}
}
