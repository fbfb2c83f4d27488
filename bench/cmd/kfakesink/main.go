// Command kfakesink runs a kfake cluster (franz-go's Kafka protocol
// server, in memory) as a sink for --export: for trying the export and
// measuring its cost (BENCHMARKS.md) without a Kafka cluster. It prints
// its address, then serves until interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 0, "listen on this port (0: any free port)")
	partitions := flag.Int("partitions", 8, "partitions of each topic")
	topics := flag.String("topics", "kfsniff,kfsniff.findings", "topics to create, comma-separated")
	flag.Parse()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(*port), kfake.AllowAutoTopicCreation(),
		kfake.SeedTopics(int32(*partitions), strings.Split(*topics, ",")...))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfakesink:", err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Println(c.ListenAddrs()[0])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	<-ctx.Done()
}
