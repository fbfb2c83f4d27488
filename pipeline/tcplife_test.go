package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/packet"
	"github.com/kfsniff/kfsniff/report"
)

// runBytes analyses a capture held in memory on n workers, as kfsniff -r
// does.
func runBytes(t *testing.T, name string, b []byte, n int) *Result {
	t.Helper()
	return runBytesWith(t, name, b, n, flows.DefaultConfig())
}

func runBytesWith(t *testing.T, name string, b []byte, n int, cfg flows.Config) *Result {
	t.Helper()
	f, err := capture.NewFile(name, 0, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return Run(context.Background(), []*capture.File{f}, Options{
		Flows: cfg, Workers: n,
		Warn: func(err error) { t.Errorf("input broke: %v", err) },
	})
}

// TestTCPLife runs the captures of ordinary TCP life (gen.Life: reused
// 4-tuples, simultaneous open, keep-alives, zero-window probes, window
// updates, IPv6 extension headers, IP fragments) and compares what a user
// sees with what the generator wrote: requests and responses per API, the
// connections one by one, gaps and skipped bytes. Two and three workers
// must give the same report as one.
func TestTCPLife(t *testing.T) {
	for _, fx := range gen.Life() {
		t.Run(fx.Name, func(t *testing.T) {
			b, err := fx.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			res := runBytes(t, fx.Name, b, 1)
			checkWant(t, res.Report, fx.Want)
			checkFragments(t, res.Report, fx)
			one, err := json.MarshalIndent(res.Report, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{2, 3} {
				got, err := json.MarshalIndent(runBytes(t, fx.Name, b, n).Report, "", " ")
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, one) {
					t.Errorf("report with %d workers differs from one worker's:\n%s", n, firstDiff(one, got))
				}
			}
		})
	}
}

// checkFragments compares what a report says of IP fragments with what
// the generator fragmented: every fragment counted, every whole datagram
// reassembled, every spoilt one counted lost for its reason, and on its
// connection when its first fragment (the one with the ports) is in the
// capture.
func checkFragments(t *testing.T, r *report.Report, fx gen.Fixture) {
	t.Helper()
	st, err := fx.FragmentStats()
	if err != nil {
		t.Fatal(err)
	}
	tot := r.Totals
	if tot.Fragments != int64(st.Fragments) || tot.Reassembled != int64(st.Whole) {
		t.Errorf("%d IP fragments, %d datagrams reassembled; the capture has %d fragments, %d whole datagrams",
			tot.Fragments, tot.Reassembled, st.Fragments, st.Whole)
	}
	want := map[string]int64{}
	for f, n := range st.Faulty {
		why := map[gen.FragmentFault]string{gen.FragMissing: packet.FragMissing, gen.FragMissingFirst: packet.FragMissing, gen.FragOverlap: packet.FragOverlap}[f]
		want[why] += int64(n)
	}
	if !maps.Equal(tot.DatagramsLost, want) {
		t.Errorf("IP datagrams lost %v, want %v", tot.DatagramsLost, want)
	}
	named := 0
	for _, c := range r.Connections {
		named += c.DatagramsLost
		if c.DatagramsLost > 0 && c.FragBytesLost == 0 {
			t.Errorf("connection %d: %d datagrams lost, no bytes", c.ID, c.DatagramsLost)
		}
	}
	if wantNamed := st.Faulty[gen.FragMissing] + st.Faulty[gen.FragOverlap]; named != wantNamed {
		t.Errorf("%d lost datagrams counted on their connections, want %d (those whose first fragment was captured)", named, wantNamed)
	}
}

// TestFragmentBoundsSharded: reassembly's bounds are shared by every
// connection, so one connection's datagrams stuck without their last
// fragment are dropped for another's; that must come out the same on one
// worker and on several (the pipeline reassembles before sharding), and
// the drops are counted on the connection whose datagrams they were.
func TestFragmentBoundsSharded(t *testing.T) {
	var buf bytes.Buffer
	w, err := gen.NewWriter(&buf, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2024, 5, 6, 14, 30, 0, 0, time.UTC)
	broker := netip.MustParseAddrPort("10.0.0.2:9092")
	stuck := map[int]gen.FragmentFault{1: gen.FragMissing, 2: gen.FragMissing, 3: gen.FragMissing}
	// Connection a's first request gets through; the three datagrams of
	// its second one stay without their last fragment.
	a := w.Conn(netip.MustParseAddrPort("10.0.0.1:40001"), broker, t0, gen.ConnOptions{MSS: 1000, FragmentSize: 400, FragmentFaults: stuck})
	a.Request(t0, 0, kmsg.StringPtr("id"), kmsg.NewPtrMetadataRequest())
	a.Send(gen.ClientToServer, t0.Add(time.Millisecond), make([]byte, 3000))
	var clients []*gen.Conn
	for i := range 4 {
		c := w.Conn(netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), uint16(40002+i)), broker, t0.Add(2*time.Millisecond), gen.ConnOptions{MSS: 1000, FragmentSize: 400})
		c.Request(t0.Add(3*time.Millisecond), 1, kmsg.StringPtr("id"), bulkMetadata())
		clients = append(clients, c)
	}
	for _, c := range clients {
		c.Response(t0.Add(4*time.Millisecond), 1, kmsg.NewPtrMetadataResponse())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := flows.DefaultConfig()
	cfg.MaxFragDatagrams = 2
	one := runBytesWith(t, "bounds", buf.Bytes(), 1, cfg)
	tot := one.Report.Totals
	if tot.DatagramsLost[packet.FragBound] == 0 || tot.Requests != 5 || tot.Responses != 4 {
		t.Fatalf("lost %v, %d requests, %d responses; want drops for the bound, 5 requests, 4 responses", tot.DatagramsLost, tot.Requests, tot.Responses)
	}
	for _, c := range one.Report.Connections {
		if want := c.Client == "10.0.0.1:40001"; want != (int64(c.DatagramsLost) == tot.DatagramsLost[packet.FragBound]+tot.DatagramsLost[packet.FragMissing]) {
			t.Errorf("connection %s: %d datagrams lost of %v", c.Client, c.DatagramsLost, tot.DatagramsLost)
		}
	}
	rep1, _ := json.MarshalIndent(one.Report, "", " ")
	for _, n := range []int{2, 3} {
		rep, _ := json.MarshalIndent(runBytesWith(t, "bounds", buf.Bytes(), n, cfg).Report, "", " ")
		if !bytes.Equal(rep, rep1) {
			t.Errorf("%d workers differ from one:\n%s", n, firstDiff(rep1, rep))
		}
	}
}

// bulkMetadata is a Metadata request of about 1.5 KB: two segments of
// fragments.
func bulkMetadata() *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = 12
	for i := range 60 {
		tp := kmsg.NewMetadataRequestTopic()
		tp.Topic = kmsg.StringPtr(fmt.Sprintf("topic-%03d-abcdef", i))
		r.Topics = append(r.Topics, tp)
	}
	return r
}
