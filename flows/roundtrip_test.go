package flows_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"strconv"
	"testing"
	"time"

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
	f := &filler{batch: gen.RecordBatch(0, time.Unix(1700000000, 0), []gen.Record{
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
			f.fill(reflect.ValueOf(req).Elem(), 0)
			req.SetVersion(v)
			resp := kmsg.ResponseForKey(key)
			f.fill(reflect.ValueOf(resp).Elem(), 0)
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
	if f.err != nil {
		t.Fatalf("filler: %v", f.err)
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
		t.Errorf("stats: %d bad packets (first %d: %s), %d non-Kafka connections, unknown APIs %v", st.BadPackets, st.FirstBad, st.FirstBadWhy, st.OtherTCP, st.UnknownAPIs)
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
	if m.ClientID != wantID {
		t.Errorf("%s: client id %q, want %q", name, m.ClientID, wantID)
	}
	if !bytes.Equal(m.Frame, p.reqFrame[4:]) {
		t.Errorf("%s: frame differs from the one sent: %s", name, diffBytes(m.Frame, p.reqFrame[4:]))
	}
	if m.Err != nil || m.Req == nil {
		t.Errorf("%s: not decoded: %v", name, m.Err)
		return
	}
	if got := m.Req.AppendTo(nil); !bytes.Equal(got, p.reqBody) {
		t.Errorf("%s: re-encoded body differs from the original: %s", name, diffBytes(got, p.reqBody))
	}
	want := kmsg.RequestForKey(p.key)
	want.SetVersion(p.version)
	if err := want.ReadFrom(p.reqBody); err != nil {
		t.Errorf("%s: kmsg cannot decode the original body: %v", name, err)
		return
	}
	if !reflect.DeepEqual(want, m.Req) {
		t.Errorf("%s: decoded through the capture differs from kmsg's direct decoding at %s", name, firstDiff(reflect.ValueOf(m.Req), reflect.ValueOf(want), "req"))
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
		t.Errorf("%s: frame differs from the one sent: %s", name, diffBytes(m.Frame, p.respFrame[4:]))
	}
	if m.Err != nil || m.Resp == nil {
		t.Errorf("%s: not decoded: %v", name, m.Err)
		return
	}
	if got := m.Resp.AppendTo(nil); !bytes.Equal(got, p.respBody) {
		t.Errorf("%s: re-encoded body differs from the original: %s", name, diffBytes(got, p.respBody))
	}
	want := kmsg.ResponseForKey(p.key)
	want.SetVersion(p.version)
	if err := want.ReadFrom(p.respBody); err != nil {
		t.Errorf("%s: kmsg cannot decode the original body: %v", name, err)
		return
	}
	if !reflect.DeepEqual(want, m.Resp) {
		t.Errorf("%s: decoded through the capture differs from kmsg's direct decoding at %s", name, firstDiff(reflect.ValueOf(m.Resp), reflect.ValueOf(want), "resp"))
	}
}

// diffBytes describes where got first differs from want.
func diffBytes(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("%d bytes, want %d; first difference at offset %d: got % x, want % x",
		len(got), len(want), i, got[i:min(len(got), i+8)], want[i:min(len(want), i+8)])
}

// firstDiff returns the path of the first difference between a and b.
func firstDiff(a, b reflect.Value, path string) string {
	if a.Type() != b.Type() {
		return fmt.Sprintf("%s: types %s and %s", path, a.Type(), b.Type())
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return fmt.Sprintf("%s: nil %v vs %v", path, a.IsNil(), b.IsNil())
		}
		return firstDiff(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if !a.Type().Field(i).IsExported() {
				continue
			}
			fa, fb := a.Field(i), b.Field(i)
			if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
				return firstDiff(fa, fb, path+"."+a.Type().Field(i).Name)
			}
		}
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return fmt.Sprintf("%s: len %d (nil %v) vs %d (nil %v)", path, a.Len(), a.IsNil(), b.Len(), b.IsNil())
		}
		for i := 0; i < a.Len(); i++ {
			if !reflect.DeepEqual(a.Index(i).Interface(), b.Index(i).Interface()) {
				return firstDiff(a.Index(i), b.Index(i), path+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	return fmt.Sprintf("%s: %#v vs %#v", path, a.Interface(), b.Interface())
}

// filler sets every exported field of a kmsg message to a deterministic,
// non-default value: strings "sN", integers 1..100, true, one or two
// elements per slice, nullable strings and structs set, ids 16 counting
// bytes. Record fields get a real record batch; other byte fields a few
// bytes. The top-level Version and every UnknownTags are left alone.
type filler struct {
	n     int
	batch []byte
	err   error
}

var tagsType = reflect.TypeFor[kmsg.Tags]()

func (f *filler) next() int { f.n++; return f.n }

func (f *filler) fill(v reflect.Value, depth int) {
	if depth > 16 {
		f.fail(fmt.Errorf("%s nests deeper than 16", v.Type()))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			if !sf.IsExported() || sf.Type == tagsType || depth == 0 && sf.Name == "Version" {
				continue
			}
			fv := v.Field(i)
			if sf.Type.Kind() == reflect.Slice && sf.Type.Elem().Kind() == reflect.Uint8 {
				switch sf.Name {
				case "Records", "RecordBatches":
					fv.SetBytes(bytes.Clone(f.batch))
				default:
					fv.SetBytes([]byte{0xca, 0xfe, byte(f.next())})
				}
				continue
			}
			f.fill(fv, depth+1)
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		n := 1 + f.next()%2
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n; i++ {
			f.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			f.fill(v.Index(i), depth+1)
		}
	case reflect.String:
		v.SetString("s" + strconv.Itoa(f.next()))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(1 + f.next()%100))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(1 + f.next()%100))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.next()) + 0.5)
	default:
		f.fail(fmt.Errorf("cannot fill %s (kind %s)", v.Type(), v.Kind()))
	}
}

func (f *filler) fail(err error) {
	if f.err == nil {
		f.err = err
	}
}
