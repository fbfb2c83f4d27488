package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// mirrorHalves writes two hosts' captures of a MirrorMaker replay to
// "orders" (3 partitions): worker-1's producer (Produce v13, the topic
// by id; its host never saw a Metadata answer) writes a batch to each
// partition; after a restart worker-2's producer, whose host saw a
// Metadata answer naming the topic and its id, writes the same batches
// again. Worker-1's agent ships the topic by its id, worker-2's by name.
func mirrorHalves(t *testing.T) (first, second string) {
	t.Helper()
	id := [16]byte{0x5f, 0x3d, 0x3b, 0x9e, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	topic := "orders"
	broker := netip.MustParseAddrPort("10.2.0.1:9092")
	at := time.Date(2026, 8, 1, 9, 0, 0, 0, time.UTC)
	batches := make([][]byte, 3)
	for p := range batches {
		batches[p], _ = detectortest.ZeroBatch(0, 10+p, -1, -1)
	}
	produce := func(c *gen.Conn, at time.Time, corr int32, base int64) {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 13, -1, 30000
		rt := kmsg.NewProduceRequestTopic()
		rt.TopicID = id
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 13
		st := kmsg.NewProduceResponseTopic()
		st.TopicID = id
		for p := range batches {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = int32(p), batches[p]
			rt.Partitions = append(rt.Partitions, rp)
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.BaseOffset = int32(p), base
			st.Partitions = append(st.Partitions, sp)
		}
		req.Topics = append(req.Topics, rt)
		resp.Topics = append(resp.Topics, st)
		clientID := "connector-producer-MirrorSourceConnector-0"
		c.Request(at, corr, &clientID, req)
		c.Response(at.Add(3*time.Millisecond), corr, resp)
	}
	write := func(name string, script func(w *gen.Writer)) string {
		pcap, err := gen.Script(script)
		if err != nil {
			t.Fatal(err)
		}
		return writeFile(t, name, pcap)
	}
	first = write("worker-1.pcap", func(w *gen.Writer) {
		c := w.Conn(netip.MustParseAddrPort("10.1.0.1:50000"), broker, at, gen.ConnOptions{})
		produce(c, at.Add(time.Millisecond), 1, 0)
		c.Close(at.Add(100 * time.Millisecond))
	})
	second = write("worker-2.pcap", func(w *gen.Writer) {
		later := at.Add(5 * time.Second)
		c := w.Conn(netip.MustParseAddrPort("10.1.0.2:50001"), broker, later, gen.ConnOptions{})
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &topic
		req.Topics = append(req.Topics, rt)
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 12
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = 1, "10.2.0.1", 9092
		resp.Brokers = append(resp.Brokers, mb)
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = &topic, id
		for p := range batches {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.Replicas, mp.ISR = int32(p), 1, []int32{1}, []int32{1}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
		clientID := "connector-producer-MirrorSourceConnector-0"
		c.Request(later.Add(time.Millisecond), 1, &clientID, req)
		c.Response(later.Add(2*time.Millisecond), 1, resp)
		produce(c, later.Add(10*time.Millisecond), 2, 100)
		c.Close(later.Add(100 * time.Millisecond))
	})
	return first, second
}

// replayed is the partitions of "orders" duplicate-batches reports
// written twice, sorted ("orders-0"...).
func replayed(fs []corrFinding) []string {
	var out []string
	for _, f := range findingsOf(fs, "duplicate-batches", nil) {
		out = append(out, strings.SplitN(f.Summary, ":", 2)[0])
	}
	slices.Sort(out)
	return out
}

// TestCorrelateTopicByIDAndName (issue 28 point 1): one host's agent
// ships a partition by its topic's id, another by name; the correlator
// joins them without a group, in a group alone, and in a group of two,
// where every partition's halves land in one member: the replay of
// each of the 3 partitions is found once.
func TestCorrelateTopicByIDAndName(t *testing.T) {
	first, second := mirrorHalves(t)
	want := []string{"orders-0", "orders-1", "orders-2"}
	// Shipped in both orders: a Produce split over export partitions 2
	// and 3 is one exchange in two lanes, each partition's batches in its
	// own lane whichever of its records is read first (one order lost
	// every replay in a group when the whole exchange went to the lane
	// its first-released record came in).
	var url string
	for _, order := range [][2]string{{"worker-1", "worker-2"}, {"worker-2", "worker-1"}} {
		url, _ = newSink(t, 6)
		for _, name := range order {
			path := map[string]string{"worker-1": first, "worker-2": second}[name]
			if got := replayed(agentFile(t, url, path, name)); len(got) > 0 {
				t.Fatalf("%s's half alone shows a replay: %v", name, got)
			}
		}
		alone, stderr := correlateJSON(t, "-r", url, "--until-end")
		if got := replayed(alone.Findings); !slices.Equal(got, want) {
			t.Fatalf("%s shipped first, one correlator: replays %v, want %v\n%v\n%s", order[0], got, want, alone.Findings, stderr)
		}
		solo, stderr := correlateJSON(t, groupArgs(url, "solo")[:7]...)
		if got := replayed(solo.Findings); !slices.Equal(got, want) {
			t.Errorf("%s shipped first, one correlator in a group: replays %v, want %v\n%s", order[0], got, want, stderr)
		}
	}

	var outA, errA, outB, errB syncBuffer
	var wg sync.WaitGroup
	codes := make([]int, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		codes[0] = run(context.Background(), groupArgs(url, "pair"), strings.NewReader(""), &outA, &errA)
	}()
	waitFor(t, &errA, "reading partitions", 20*time.Second)
	go func() {
		defer wg.Done()
		codes[1] = run(context.Background(), groupArgs(url, "pair"), strings.NewReader(""), &outB, &errB)
	}()
	wg.Wait()
	if codes[0] != exitOK || codes[1] != exitOK {
		t.Fatalf("exit %v:\n%s\n%s", codes, errA.String(), errB.String())
	}
	if !strings.Contains(errB.String(), "reading partitions") || !strings.Contains(errA.String(), "went to another correlator") {
		t.Fatalf("the partitions were not shared:\nA: %s\nB: %s", errA.String(), errB.String())
	}
	var a, b corrReport
	if err := json.Unmarshal([]byte(outA.String()), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(outB.String()), &b); err != nil {
		t.Fatal(err)
	}
	if got := replayed(append(append([]corrFinding{}, a.Findings...), b.Findings...)); !slices.Equal(got, want) {
		t.Errorf("two correlators in a group: replays %v, want %v, each once\nA: %s\nB: %s", got, want, errA.String(), errB.String())
	}
}

// TestCorrelateAgentRestarted (issue 28 point 2): an agent restarted with
// the same --agent-id (systemd's Restart=on-failure, the host name as the
// id) numbers its connections from 1 again; the correlator keeps them
// apart by the run: the connections and findings are those of two agents
// of their own.
func TestCorrelateAgentRestarted(t *testing.T) {
	before, after := "scenarios/healthy-group.pcap", "recorded-kgo-kfake-group.pcap"
	clean, _ := newSink(t, 3)
	agent(t, clean, before, "host-a")
	agent(t, clean, after, "host-b")
	want, _ := correlateJSON(t, "-r", clean, "--until-end")

	restarted, _ := newSink(t, 3)
	agent(t, restarted, before, "host")
	agent(t, restarted, after, "host")
	got, stderr := correlateJSON(t, "-r", restarted, "--until-end")

	fileA, _ := correlateJSON(t, "-r", fixture(before))
	fileB, _ := correlateJSON(t, "-r", fixture(after))
	if n := len(fileA.Connections) + len(fileB.Connections); len(got.Connections) != n || len(want.Connections) != n {
		t.Errorf("connections: %d after a restart, %d from two agents; the files have %d", len(got.Connections), len(want.Connections), n)
	}
	if g, w := summaries(got.Findings), summaries(want.Findings); !slices.Equal(g, w) {
		t.Errorf("an agent restarted:\n  %s\ntwo agents:\n  %s\n%s", strings.Join(g, "\n  "), strings.Join(w, "\n  "), stderr)
	}
}

// totalsReport is what TestCorrelateTwoViews compares of a report: the
// totals and the per-API table (counts and latency percentiles).
type totalsReport struct {
	Totals struct {
		KafkaConnections int64 `json:"kafka_connections"`
		Requests         int64 `json:"requests"`
		Responses        int64 `json:"responses"`
		ErrorResponses   int64 `json:"error_responses"`
		Unanswered       int64 `json:"unanswered_requests"`
	} `json:"totals"`
	APIs []struct {
		Name      string             `json:"name"`
		Version   int                `json:"version"`
		Requests  int64              `json:"requests"`
		Responses int64              `json:"responses"`
		Errors    map[string]int64   `json:"errors"`
		Latency   map[string]float64 `json:"latency_ms"`
	} `json:"apis"`
}

func totalsOf(t *testing.T, args ...string) (totalsReport, corrReport) {
	t.Helper()
	rep, _ := correlateJSON(t, args...)
	code, out, stderr := kfsniff(t, append(args, "--json")...)
	if code != exitOK && code != exitFindings {
		t.Fatalf("kfsniff %v: exit %d: %s", args, code, stderr)
	}
	var tr totalsReport
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		t.Fatal(err)
	}
	return tr, rep
}

// TestCorrelateTwoViews (issue 28 points 4 and 7): the agents of a
// client's host and of its broker's host capture the same connections;
// the correlator counts each exchange and connection once (totals, the
// per-API table with its latency percentiles, per exchange and not per
// partition record: the file's) and gives one agent's findings (no
// reconnect storm of doubled openings), both views feeding the clock
// skew.
func TestCorrelateTwoViews(t *testing.T) {
	for _, capture := range []string{"scenarios/healthy-group.pcap", "clients/slow-kgo.pcap", "kafka/kraft-listener-conflict.pcap.gz"} {
		t.Run(capture, func(t *testing.T) {
			file, _ := totalsOf(t, "-r", fixture(capture))
			one, _ := newSink(t, 3)
			agent(t, one, capture, "client-host")
			_, oneRep := totalsOf(t, "-r", one, "--until-end")
			url, _ := newSink(t, 3)
			agent(t, url, capture, "client-host")
			agent(t, url, capture, "broker-host")
			got, rep := totalsOf(t, "-r", url, "--until-end")
			if g, w := fmt.Sprintf("%+v", got.Totals), fmt.Sprintf("%+v", file.Totals); g != w {
				t.Errorf("totals %s, the file's %s", g, w)
			}
			if g, w := fmt.Sprintf("%+v", got.APIs), fmt.Sprintf("%+v", file.APIs); g != w {
				t.Errorf("per API:\n  %s\nthe file's:\n  %s", g, w)
			}
			if g, w := summaries(rep.Findings), summaries(oneRep.Findings); !slices.Equal(g, w) {
				t.Errorf("findings:\n  %s\none agent's:\n  %s", strings.Join(g, "\n  "), strings.Join(w, "\n  "))
			}
			if rep.Correlation == nil || len(rep.Correlation.Agents) != 2 {
				t.Errorf("correlation %+v: want both agents", rep.Correlation)
			}
		})
	}
}

// TestCorrelateGroupAloneAsFile (issue 28 point 7): one correlator in a
// group gives the findings of one without (reconnect-storm's severity
// was lowered: a connection's opening and close were keyed apart and
// landed in different lanes).
func TestCorrelateGroupAloneAsFile(t *testing.T) {
	for _, capture := range []string{"clients/reconnect-storm-kgo.pcap", "kafka/kraft-election-stall.pcap.gz"} {
		t.Run(capture, func(t *testing.T) {
			url, _ := newSink(t, 6)
			agent(t, url, capture, "host-a")
			plain, _ := correlateJSON(t, "-r", url, "--until-end")
			group, stderr := correlateJSON(t, groupArgs(url, "alone")[:7]...)
			if len(findingsOf(plain.Findings, "reconnect-storm", nil)) == 0 {
				t.Fatalf("no reconnect-storm without a group: %v", plain.Findings)
			}
			if g, w := summaries(findingsOf(group.Findings, "reconnect-storm", nil)), summaries(findingsOf(plain.Findings, "reconnect-storm", nil)); !slices.Equal(g, w) {
				t.Errorf("in a group:\n  %s\nwithout:\n  %s\n%s", strings.Join(g, "\n  "), strings.Join(w, "\n  "), stderr)
			}
		})
	}
}
