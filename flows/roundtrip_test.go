package flows_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/internal/kmsgtest"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
)

// TestRoundTripEveryAPI sends every request and response kmsg knows, at
// every version, filled with non-default values, through one generated
// capture and the analyzer, and checks that what comes out is what went in:
// the decoded values re-encode to the original body bytes and equal what
// kmsg decodes from those bytes directly. A user would notice a failure as
// a decode error or wrong fields for that API in the report.
func TestRoundTripEveryAPI(t *testing.T) {
	f := &kmsgtest.Filler{Batch: gen.RecordBatch(0, time.Unix(1700000000, 0), []gen.Record{
		{Key: []byte("k0"), Value: []byte("v0")},
		{Key: nil, Value: []byte("v1"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}},
	})}
	clientID := "roundtrip"
	server := netip.MustParseAddrPort("10.0.0.2:9092")
	t0 := time.Date(2024, 5, 6, 14, 30, 0, 0, time.UTC)
	now := t0
	tick := func() time.Time { now = now.Add(time.Millisecond); return now }

	var pcap bytes.Buffer
	w, err := gen.NewWriter(&pcap, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pairs := make(map[int32]*pair)
	conns := 0
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		if kmsg.RequestForKey(key) == nil {
			continue
		}
		client := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), 40000+uint16(key))
		c := w.Conn(client, server, tick(), gen.ConnOptions{})
		conns++
		for v := int16(0); v <= kmsg.RequestForKey(key).MaxVersion(); v++ {
			p := &pair{key: key, version: v, corr: int32(key)*1000 + int32(v) + 1}
			req := kmsg.RequestForKey(key)
			f.Fill(reflect.ValueOf(req).Elem(), 0)
			req.SetVersion(v)
			resp := kmsg.ResponseForKey(key)
			f.Fill(reflect.ValueOf(resp).Elem(), 0)
			resp.SetVersion(v)
			p.reqBody = req.AppendTo(nil)
			p.respBody = resp.AppendTo(nil)
			p.reqFrame = c.Request(tick(), p.corr, &clientID, req)
			p.respFrame = c.Response(tick(), p.corr, resp)
			for _, fr := range [][]byte{p.reqFrame, p.respFrame} {
				if size := binary.BigEndian.Uint32(fr); int(size) != len(fr)-4 {
					t.Errorf("%s: decode.Append*Frame wrote size prefix %d for a %d-byte frame: % x", apiName(key, v), size, len(fr), head(fr))
				}
			}
			pairs[p.corr] = p
		}
		c.Close(tick())
	}
	if f.Err != nil {
		t.Fatalf("filler: %v", f.Err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	ck := &checker{t: t, pairs: pairs}
	file, err := capture.NewFile("roundtrip.pcap", 0, bytes.NewReader(pcap.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	a := flows.New(flows.DefaultConfig(), ck)
	var pkt capture.Packet
	for {
		err := file.Next(&pkt)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		a.Packet(&pkt)
	}
	a.Close()

	if st := a.Stats(); st.BadPackets != 0 || st.OtherTCP != 0 || len(st.UnknownAPIs) != 0 {
		t.Errorf("stats: %d bad packets (first %d: %s), %d non-Kafka connections, unknown APIs %v", st.BadPackets, st.FirstBad.Packet, st.FirstBad.What, st.OtherTCP, st.UnknownAPIs)
	}
	if got := len(a.Conns()); got != conns {
		t.Errorf("analyzer found %d Kafka connections, want %d (one per API key)", got, conns)
	}
	for _, c := range a.Conns() {
		for _, p := range c.Problems {
			t.Errorf("conn %d (%s) packet %d: %s", c.ID, c.Label(), p.Packet, p.What)
		}
	}
	tested := 0
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			p := pairs[int32(key)*1000+int32(v)+1]
			switch {
			case p == nil:
				t.Errorf("%s: not sent", apiName(key, v))
			case !p.reqSeen:
				t.Errorf("%s request (frame % x...): never delivered by the analyzer", apiName(key, v), head(p.reqFrame))
			case !p.respSeen:
				t.Errorf("%s response (frame % x...): never delivered by the analyzer", apiName(key, v), head(p.respFrame))
			default:
				tested++
			}
		}
	}
	if want := knownPairs(); tested != want || len(pairs) != want {
		t.Errorf("%d (key, version) pairs went through the capture and %d were sent; kmsg knows %d", tested, len(pairs), want)
	}
	t.Logf("%d (key, version) pairs, %d connections, %d capture bytes", tested, conns, pcap.Len())
}

// knownPairs counts the (key, version) pairs kmsg knows, independently of
// the loop that builds the capture.
func knownPairs() int {
	n := 0
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		if req, resp := kmsg.RequestForKey(key), kmsg.ResponseForKey(key); req != nil && resp != nil {
			n += int(min(req.MaxVersion(), resp.MaxVersion())) + 1
		}
	}
	return n
}

// pair is one (key, version) under test: what was sent, and whether the
// analyzer delivered each side (checked or not).
type pair struct {
	key, version        int16
	corr                int32
	reqBody, respBody   []byte
	reqFrame, respFrame []byte
	reqSeen, respSeen   bool
}

func apiName(key, version int16) string {
	return fmt.Sprintf("%s (key %d) v%d", kmsg.NameForKey(key), key, version)
}

func head(b []byte) []byte { return b[:min(len(b), 24)] }

// checker compares every message the analyzer delivers with what was sent.
// Record bytes alias the frame, so everything is checked inside the call.
type checker struct {
	t     *testing.T
	pairs map[int32]*pair
}

func (ck *checker) OnRequest(m *flows.Message) {
	t := ck.t
	p := ck.pairs[m.Correlation]
	if p == nil {
		t.Errorf("request key %d v%d with unexpected correlation id %d", m.Key, m.Version, m.Correlation)
		return
	}
	name := apiName(p.key, p.version) + " request"
	if p.reqSeen {
		t.Errorf("%s: delivered twice", name)
		return
	}
	p.reqSeen = true
	if m.Key != p.key || m.Version != p.version {
		t.Errorf("%s: delivered as key %d v%d", name, m.Key, m.Version)
		return
	}
	wantID := "roundtrip"
	if p.key == 7 && p.version == 0 {
		wantID = "" // header v0 has no client id
	}
	if m.Client.ID != wantID {
		t.Errorf("%s: client id %q, want %q", name, m.Client.ID, wantID)
	}
	if !bytes.Equal(m.Frame, p.reqFrame[4:]) {
		t.Errorf("%s: frame differs from the one sent: %s", name, kmsgtest.DiffBytes(m.Frame, p.reqFrame[4:]))
	}
	if m.Err != nil || m.Req == nil {
		t.Errorf("%s: not decoded: %v", name, m.Err)
		return
	}
	if got := m.Req.AppendTo(nil); !bytes.Equal(got, p.reqBody) {
		t.Errorf("%s: re-encoded body differs from the original: %s", name, kmsgtest.DiffBytes(got, p.reqBody))
	}
	want := kmsg.RequestForKey(p.key)
	want.SetVersion(p.version)
	if err := want.ReadFrom(p.reqBody); err != nil {
		t.Errorf("%s: kmsg cannot decode the original body: %v", name, err)
		return
	}
	if !reflect.DeepEqual(want, m.Req) {
		t.Errorf("%s: decoded through the capture differs from kmsg's direct decoding at %s", name, kmsgtest.FirstDiff(reflect.ValueOf(m.Req), reflect.ValueOf(want), "req"))
	}
}

func (ck *checker) OnExchange(x *flows.Exchange) {
	t := ck.t
	switch {
	case x.Unanswered:
		t.Errorf("%s corr %d: no response paired", apiName(x.Req.Key, x.Req.Version), x.Req.Correlation)
		return
	case x.NoResponse:
		t.Errorf("%s corr %d: treated as expecting no response", apiName(x.Req.Key, x.Req.Version), x.Req.Correlation)
		return
	case x.Req == nil:
		t.Errorf("response corr %d: no request paired", x.Resp.Correlation)
		return
	}
	m := x.Resp
	p := ck.pairs[m.Correlation]
	if p == nil {
		t.Errorf("response with unexpected correlation id %d", m.Correlation)
		return
	}
	name := apiName(p.key, p.version) + " response"
	if p.respSeen {
		t.Errorf("%s: delivered twice", name)
		return
	}
	p.respSeen = true
	if x.Req.Correlation != m.Correlation || m.Key != p.key || m.Version != p.version {
		t.Errorf("%s: paired with request corr %d, delivered as key %d v%d", name, x.Req.Correlation, m.Key, m.Version)
		return
	}
	if !bytes.Equal(m.Frame, p.respFrame[4:]) {
		t.Errorf("%s: frame differs from the one sent: %s", name, kmsgtest.DiffBytes(m.Frame, p.respFrame[4:]))
	}
	if m.Err != nil || m.Resp == nil {
		t.Errorf("%s: not decoded: %v", name, m.Err)
		return
	}
	if got := m.Resp.AppendTo(nil); !bytes.Equal(got, p.respBody) {
		t.Errorf("%s: re-encoded body differs from the original: %s", name, kmsgtest.DiffBytes(got, p.respBody))
	}
	want := kmsg.ResponseForKey(p.key)
	want.SetVersion(p.version)
	if err := want.ReadFrom(p.respBody); err != nil {
		t.Errorf("%s: kmsg cannot decode the original body: %v", name, err)
		return
	}
	if !reflect.DeepEqual(want, m.Resp) {
		t.Errorf("%s: decoded through the capture differs from kmsg's direct decoding at %s", name, kmsgtest.FirstDiff(reflect.ValueOf(m.Resp), reflect.ValueOf(want), "resp"))
	}
}
