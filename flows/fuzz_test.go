package flows_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/fuzzing"
	"github.com/kfsniff/kfsniff/internal/kmsgtest"
)

// The framer has no exported hook: these targets reach it the way traffic
// does, through a capture written by fixtures/gen (one TCP connection, its
// bytes cut into segments where the fuzzer says) and the Analyzer.

// exchangePool is one request and response frame for every (key, version)
// kmsg knows, filled with non-default values, correlation id 0.
var exchangePool = sync.OnceValue(func() [][2][]byte {
	f := &kmsgtest.Filler{Batch: gen.RecordBatch(0, time.Unix(1700000000, 0), []gen.Record{
		{Key: []byte("k0"), Value: []byte("v0")},
		{Value: []byte("v1"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}},
	})}
	id := "fuzz"
	var pool [][2][]byte
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		if kmsg.RequestForKey(key) == nil {
			continue
		}
		for v := int16(0); v <= kmsg.RequestForKey(key).MaxVersion(); v++ {
			req := f.Request(key, v)
			if p, ok := req.(*kmsg.ProduceRequest); ok {
				p.Acks = -1 // acks=0 gets no response
			}
			pool = append(pool, [2][]byte{
				appendRequest(nil, 0, &id, req),
				appendResponse(nil, 0, f.Response(key, v)),
			})
		}
	}
	if f.Err != nil {
		panic(f.Err)
	}
	return pool
})

func appendRequest(dst []byte, corr int32, id *string, req kmsg.Request) []byte {
	return appendFrame(dst, corr, id, req, nil)
}

func appendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	return appendFrame(dst, corr, nil, nil, resp)
}

// appendFrame encodes a request (header v0 for ControlledShutdown v0, v2
// when flexible, else v1) or a response (header v1 when flexible, except
// ApiVersions) by the protocol's rules, independently of decode.
func appendFrame(dst []byte, corr int32, id *string, req kmsg.Request, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	if req != nil {
		dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
		dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
		dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
		if req.Key() != 7 || req.GetVersion() != 0 {
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(*id)))
			dst = append(dst, *id...)
			if req.IsFlexible() {
				dst = append(dst, 0)
			}
		}
		dst = req.AppendTo(dst)
	} else {
		dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
		if resp.IsFlexible() && resp.Key() != 18 {
			dst = append(dst, 0)
		}
		dst = resp.AppendTo(dst)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

var (
	fuzzClient = netip.MustParseAddrPort("10.0.0.1:50000")
	fuzzBroker = netip.MustParseAddrPort("10.0.0.2:9092")
	fuzzOther  = netip.MustParseAddrPort("10.0.0.2:7777") // not a Kafka port
)

// splitter writes two byte streams on one connection, cut where cuts say.
type splitter struct {
	c    *gen.Conn
	t    time.Time
	cuts []byte
}

// next returns the next cut: a direction and a length of 1 to 4096 bytes.
func (s *splitter) next() (gen.Dir, int, bool) {
	if len(s.cuts) < 2 {
		return 0, 0, false
	}
	b0, b1 := s.cuts[0], s.cuts[1]
	s.cuts = s.cuts[2:]
	return gen.Dir(b0 & 1), 1 + int(binary.BigEndian.Uint16([]byte{b0, b1})>>1)%4096, true
}

func (s *splitter) send(d gen.Dir, b []byte) {
	s.t = s.t.Add(time.Millisecond)
	s.c.Send(d, s.t, b)
}

// analysePcap reads a classic little-endian microsecond Ethernet pcap as
// gen writes it (without capture.File, whose 1 MiB read buffer would
// dominate each fuzz input) into a fresh Analyzer.
func analysePcap(t *testing.T, pcap []byte, cfg flows.Config, h ...flows.Handler) *flows.Analyzer {
	return analyseWith(t, pcap, flows.New(cfg, h...))
}

// analyseWith gives a the packets of pcap and closes it.
func analyseWith(t *testing.T, pcap []byte, a *flows.Analyzer) *flows.Analyzer {
	var p capture.Packet
	p.Link = capture.LinkEthernet
	for b := pcap[24:]; len(b) >= 16; {
		n := int(binary.LittleEndian.Uint32(b[8:]))
		p.N++
		p.Time = time.Unix(int64(binary.LittleEndian.Uint32(b)), int64(binary.LittleEndian.Uint32(b[4:]))*1000).UTC()
		p.Len = int(binary.LittleEndian.Uint32(b[12:]))
		p.Data = b[16 : 16+n]
		a.Packet(&p)
		b = b[16+n:]
	}
	a.Close()
	return a
}

// tally checks each message as it is delivered and adds up the bytes
// framed.
type tally struct {
	t         *testing.T
	want      [][2][]byte // expected frames, in order (FuzzFrameSplit)
	requests  int
	responses int
	dropped   int // responses paired but dropped for the buffer budget
	other     int // exchanges that are not a matched pair
	framed    int64
}

func (ta *tally) OnRequest(m *flows.Message) {
	if m.Size != len(m.Frame)+4 {
		ta.t.Fatalf("request corr %d: size %d for a %d-byte frame", m.Correlation, m.Size, len(m.Frame))
	}
	if ta.want != nil {
		i := ta.requests
		if i >= len(ta.want) || !bytes.Equal(m.Frame, ta.want[i][0][4:]) {
			ta.t.Fatalf("request %d (key %d v%d corr %d, %d bytes) is not the one sent: %v", i, m.Key, m.Version, m.Correlation, m.Size, m.Err)
		}
		if m.Err != nil || m.Req == nil {
			ta.t.Fatalf("request %d (key %d v%d) not decoded: %v", i, m.Key, m.Version, m.Err)
		}
	}
	ta.requests++
	ta.framed += int64(m.Size)
}

func (ta *tally) OnExchange(x *flows.Exchange) {
	if x.Req == nil && x.Resp != nil && x.Resp.Inferred {
		// Unmatched, decoded as the connection's requests' API: its
		// bytes are framed, not skipped.
		if x.Resp.Resp == nil || x.Resp.Err != nil || x.Resp.Key < 0 {
			ta.t.Fatalf("response corr %d inferred as key %d v%d but not decoded: %v", x.Resp.Correlation, x.Resp.Key, x.Resp.Version, x.Resp.Err)
		}
		ta.other++
		ta.framed += int64(x.Resp.Size)
		return
	}
	if x.Req == nil || x.Resp == nil {
		ta.other++
		return
	}
	m := x.Resp
	if errors.Is(m.Err, flows.ErrDropped) {
		// Paired, its bytes skipped as "budget", not framed.
		if m.Frame != nil || m.Resp != nil || m.Correlation != x.Req.Correlation {
			ta.t.Fatalf("response corr %d dropped for the budget: frame %d bytes, body %v, paired with corr %d", m.Correlation, len(m.Frame), m.Resp, x.Req.Correlation)
		}
		ta.responses++
		ta.dropped++
		return
	}
	if m.Size != len(m.Frame)+4 || m.Correlation != x.Req.Correlation {
		ta.t.Fatalf("response corr %d (size %d, frame %d) paired with request corr %d", m.Correlation, m.Size, len(m.Frame), x.Req.Correlation)
	}
	if ta.want != nil {
		i := ta.responses
		if i >= len(ta.want) || !bytes.Equal(m.Frame, ta.want[i][1][4:]) {
			ta.t.Fatalf("response %d (corr %d, %d bytes) is not the one sent", i, m.Correlation, m.Size)
		}
		if m.Err != nil || m.Resp == nil {
			ta.t.Fatalf("response %d (key %d v%d) not decoded: %v", i, m.Key, m.Version, m.Err)
		}
	}
	ta.responses++
	ta.framed += int64(m.Size)
}

// FuzzFrameSplit sends valid exchanges (requests and responses of any
// (key, version), chosen by pick) over one connection, cut into segments
// at arbitrary points by cuts, in both directions interleaved (a response
// never before its request is whole). Every frame must come out exactly
// once, in order, byte for byte and decoded, every response paired with
// its request, and nothing skipped: frames out = frames in.
func FuzzFrameSplit(f *testing.F) {
	f.Add([]byte{0, 0}, []byte{})
	f.Add([]byte{0, 1, 0, 2, 0, 3}, []byte{0, 1, 1, 3, 0, 5, 1, 7, 0, 0})
	f.Add([]byte{1, 0, 0, 50, 2, 0}, bytes.Repeat([]byte{0, 0, 1, 0}, 40))
	f.Add([]byte{3, 0, 3, 1, 3, 2}, []byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, pick, cuts []byte) {
		defer fuzzing.Input("FuzzFrameSplit", pick, cuts)()
		pool := exchangePool()
		var ex [][2][]byte
		var client, server []byte
		var reqEnd, respEnd []int
		for i := 0; i+1 < len(pick) && len(ex) < 64; i += 2 {
			p := pool[int(binary.BigEndian.Uint16(pick[i:]))%len(pool)]
			corr := int32(len(ex)) + 1
			req, resp := bytes.Clone(p[0]), bytes.Clone(p[1])
			binary.BigEndian.PutUint32(req[8:], uint32(corr))
			binary.BigEndian.PutUint32(resp[4:], uint32(corr))
			ex = append(ex, [2][]byte{req, resp})
			client = append(client, req...)
			server = append(server, resp...)
			reqEnd = append(reqEnd, len(client))
			respEnd = append(respEnd, len(server))
		}
		var pcap bytes.Buffer
		w, err := gen.NewWriter(&pcap, gen.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := &splitter{c: w.Conn(fuzzClient, fuzzBroker, t0, gen.ConnOptions{}), t: t0, cuts: cuts}
		var sent [2]int
		// allowed is how far the server may have answered: up to the
		// response of the last request sent whole.
		allowed := func() int {
			n := 0
			for i, e := range reqEnd {
				if e <= sent[0] {
					n = respEnd[i]
				}
			}
			return n
		}
		for sent[0] < len(client) || sent[1] < len(server) {
			d, n, ok := s.next()
			if !ok {
				s.send(gen.ClientToServer, client[sent[0]:])
				sent[0] = len(client)
				s.send(gen.ServerToClient, server[sent[1]:])
				sent[1] = len(server)
				break
			}
			if d == gen.ServerToClient && allowed() == sent[1] || sent[1] == len(server) {
				d = gen.ClientToServer
			}
			if d == gen.ClientToServer && sent[0] == len(client) {
				d = gen.ServerToClient
			}
			limit := len(client)
			if d == gen.ServerToClient {
				limit = allowed()
			}
			n = min(n, limit-sent[d])
			from := client
			if d == gen.ServerToClient {
				from = server
			}
			s.send(d, from[sent[d]:sent[d]+n])
			sent[d] += n
		}
		s.c.Close(s.t.Add(time.Millisecond))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		ta := &tally{t: t, want: ex}
		a := analysePcap(t, pcap.Bytes(), flows.DefaultConfig(), ta)
		if len(ex) == 0 {
			if len(a.Conns()) > 1 {
				t.Fatalf("%d connections from one without data", len(a.Conns()))
			}
			return
		}
		if len(a.Conns()) != 1 {
			t.Fatalf("%d Kafka connections, want 1", len(a.Conns()))
		}
		c := a.Conns()[0]
		if ta.requests != len(ex) || ta.responses != len(ex) || ta.other != 0 || c.Requests != len(ex) || c.Responses != len(ex) {
			t.Fatalf("%d exchanges sent; %d requests and %d responses delivered (conn: %d, %d), %d other exchanges",
				len(ex), ta.requests, ta.responses, c.Requests, c.Responses, ta.other)
		}
		if len(c.Skipped) != 0 || c.FramingErrors != 0 || c.DecodeErrors != 0 || c.Unmatched != 0 || c.Unanswered != 0 || c.Gaps != 0 {
			t.Fatalf("skipped %v, framing errors %d, decode errors %d, unmatched %d, unanswered %d, gaps %d; problems %v",
				c.Skipped, c.FramingErrors, c.DecodeErrors, c.Unmatched, c.Unanswered, c.Gaps, c.Problems)
		}
	})
}

// FuzzFrameStream sends arbitrary bytes each way over one connection, cut
// at arbitrary points, with or without the handshake, on a Kafka port or
// another, with the default or a small --max-frame, and with the default
// or a tiny buffer budget and total of waiting requests (so that frames
// are dropped and requests evicted). Besides not panicking
// and finishing: if the connection is taken for Kafka, every payload byte
// is either in a frame delivered (a request, or a response paired with
// its request) or counted as skipped with a reason, never both and never
// lost; there are no gaps (nothing was lost); counters agree with what
// was delivered; and problems carry packet numbers within the capture.
func FuzzFrameStream(f *testing.F) {
	pool := exchangePool()
	f.Add([]byte{}, []byte{}, []byte{}, uint8(0))
	f.Add(pool[0][0], pool[0][1], []byte{0, 7, 1, 9}, uint8(0))
	f.Add(append(bytes.Clone(pool[3][0]), pool[18][0]...), append(bytes.Clone(pool[3][1]), pool[18][1]...), []byte{}, uint8(1))
	f.Add(pool[5][0][3:], pool[5][1], []byte{0, 2, 1, 2}, uint8(2))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: kafka:9092\r\n\r\n"), []byte("HTTP/1.1 400 Bad Request\r\n\r\n"), []byte{}, uint8(0))
	f.Add(append([]byte{0x16, 0x03, 0x01, 0x00, 0x30, 0x01}, make([]byte, 60)...), []byte{0x16, 0x03, 0x03, 0, 4, 2, 0, 0, 0}, []byte{}, uint8(0))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0, 18, 0, 3}, []byte{0xff, 0xff, 0xff, 0xff}, []byte{}, uint8(4))
	f.Add(append([]byte{0, 0, 4, 1}, pool[1][0]...), pool[1][1], []byte{0, 3}, uint8(4))
	f.Add(append(bytes.Clone(pool[3][0]), pool[18][0]...), append(bytes.Clone(pool[3][1]), pool[18][1]...), []byte{0, 40, 1, 40, 0, 40, 1, 40}, uint8(8|16))
	f.Fuzz(func(t *testing.T, toServer, toClient, cuts []byte, mode uint8) {
		defer fuzzing.Input("FuzzFrameStream", toServer, toClient, cuts, mode)()
		opt := gen.ConnOptions{NoHandshake: mode&1 != 0}
		server := fuzzBroker
		if mode&2 != 0 {
			server = fuzzOther
		}
		cfg := flows.DefaultConfig()
		if mode&4 != 0 {
			cfg.MaxFrame = 1024
		}
		if mode&8 != 0 {
			cfg.BufferBudget = 64
		}
		if mode&16 != 0 {
			cfg.MaxPendingTotal = 2
		}
		var pcap bytes.Buffer
		w, err := gen.NewWriter(&pcap, gen.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := &splitter{c: w.Conn(fuzzClient, server, t0, opt), t: t0, cuts: cuts}
		streams := [2][]byte{toServer, toClient}
		for len(streams[0])+len(streams[1]) > 0 {
			d, n, ok := s.next()
			if !ok {
				for d := range streams {
					s.send(gen.Dir(d), streams[d])
					streams[d] = nil
				}
				break
			}
			if len(streams[d]) == 0 {
				d = 1 - d
			}
			n = min(n, len(streams[d]))
			s.send(d, streams[d][:n])
			streams[d] = streams[d][n:]
		}
		s.c.Close(s.t.Add(time.Millisecond))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		packets := uint64(w.Packets())
		ta := &tally{t: t}
		a := analysePcap(t, pcap.Bytes(), cfg, ta)
		st := a.Stats()
		if st.BadPackets != 0 || st.Packets != int64(packets) {
			t.Fatalf("%d packets read of %d, %d bad (%s)", st.Packets, packets, st.BadPackets, st.FirstBad.What)
		}
		conns := a.Conns()
		if len(conns) > 1 {
			t.Fatalf("%d Kafka connections from one TCP connection", len(conns))
		}
		if len(conns) == 0 {
			if ta.requests+ta.responses+ta.other != 0 {
				t.Fatalf("messages delivered without a Kafka connection")
			}
			return
		}
		c := conns[0]
		var skipped int64
		for reason, n := range c.Skipped {
			if n <= 0 {
				t.Fatalf("skipped %d bytes for %q", n, reason)
			}
			skipped += n
		}
		total := int64(len(toServer) + len(toClient))
		if got := c.Bytes[0] + c.Bytes[1]; got != total {
			t.Fatalf("connection carried %d payload bytes, %d were sent", got, total)
		}
		if ta.framed+skipped != total {
			t.Fatalf("%d bytes sent; %d in frames delivered + %d skipped %v = %d: bytes lost or counted twice (requests %d, responses %d, unmatched %d)",
				total, ta.framed, skipped, c.Skipped, ta.framed+skipped, ta.requests, ta.responses, c.Unmatched)
		}
		if c.Gaps != 0 {
			t.Fatalf("%d gaps in a capture that lost nothing", c.Gaps)
		}
		if c.Skipped[flows.SkipGap] != 0 {
			// Was a defect: a frame still incomplete at the end was
			// counted as a gap (testdata/fuzz/FuzzFrameStream/end-as-gap-*).
			t.Fatalf("%d bytes skipped as %q in a capture that lost nothing", c.Skipped[flows.SkipGap], flows.SkipGap)
		}
		if c.Requests != ta.requests || c.Responses != ta.responses {
			t.Fatalf("conn counts %d requests, %d responses; %d and %d delivered", c.Requests, c.Responses, ta.requests, ta.responses)
		}
		if c.Unmatched+c.Unanswered+c.NoResponse != ta.other {
			t.Fatalf("unmatched %d + unanswered %d + no response %d, but %d such exchanges delivered", c.Unmatched, c.Unanswered, c.NoResponse, ta.other)
		}
		if c.Pending() != 0 {
			t.Fatalf("%d requests still pending after Close", c.Pending())
		}
		for _, p := range c.Problems {
			if p.Packet == 0 || p.Packet > packets {
				t.Fatalf("problem at packet %d of %d: %s", p.Packet, packets, p.What)
			}
		}
	})
}
