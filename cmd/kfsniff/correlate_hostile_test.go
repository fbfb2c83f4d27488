package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Issue 31: records written into the export topic by anyone with write
// access to it are hostile input (ROBUSTNESS.md, "The correlator's
// input").

// produceValues writes raw record values into the export topic.
func produceValues(t *testing.T, seeds []string, values ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("corr"), kgo.ProducerBatchMaxBytes(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs := make([]*kgo.Record, len(values))
	for i, v := range values {
		rs[i] = &kgo.Record{Key: []byte("forged"), Value: []byte(v)}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// runFor runs kfsniff with args, cancels it (Ctrl-C) after cancelAfter
// when positive, and fails if it has not returned within limit; it
// returns the exit code, outputs and the time taken.
func runFor(t *testing.T, cancelAfter, limit time.Duration, args ...string) (int, string, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	began := time.Now()
	go func() { done <- run(ctx, args, strings.NewReader(""), &out, &errb) }()
	var timer <-chan time.Time
	if cancelAfter > 0 {
		timer = time.After(cancelAfter)
	}
	deadline := time.After(limit)
	for {
		select {
		case code := <-done:
			return code, out.String(), errb.String(), time.Since(began)
		case <-timer:
			cancel()
			timer = nil
		case <-deadline:
			t.Fatalf("kfsniff %s: still running after %v (cancelled after %v)", strings.Join(args, " "), limit, cancelAfter)
		}
	}
}

// TestCorrelateForgedAttempts: a connection event claiming 2^31-1
// refused attempts made reconnect-storm loop over that count (52 s of
// CPU per record, Ctrl-C ignored). Three such records are read in well
// under a second of rules' time, and their attempts are counted whole.
func TestCorrelateForgedAttempts(t *testing.T) {
	url, seeds := newSink(t, 1)
	const forged = `{"v":1,"type":"conn","agent":"mallory","ts_ns":1767225600000000000,"client":"10.0.0.9:4000","server":"10.0.0.1:9092","event":"refused","attempts":2147483647,"pkt":1}`
	produceValues(t, seeds, forged, forged, forged)
	code, stdout, stderr, took := runFor(t, 0, 20*time.Second, "-r", url, "--until-end", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if took > 8*time.Second {
		t.Errorf("3 forged records took %v", took)
	}
	if !bytes.Contains([]byte(stdout), []byte(`"refused": 6442450941`)) {
		t.Errorf("the refused attempts are not counted whole (3 x 2^31-1):\n%.2000s", stdout)
	}
	t.Logf("3 records of 2^31-1 attempts: %v", took)
}
