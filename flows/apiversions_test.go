package flows_test

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
)

// refusalFrame is a broker's answer to an ApiVersions version it does not
// know: UNSUPPORTED_VERSION in the v0 layout, naming max as ApiVersions'
// highest version (KIP-511), cut to cut body bytes if cut > 0.
func refusalFrame(corr int32, max int16, cut int) []byte {
	r := kmsg.NewPtrApiVersionsResponse() // v0
	r.ErrorCode = 35
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MaxVersion = 18, max
	r.ApiKeys = append(r.ApiKeys, k)
	body := r.AppendTo(nil)
	if cut > 0 {
		body = body[:cut]
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	return append(b, body...)
}

// TestApiVersionsRefusedThenRetried: a client asks ApiVersions v5 (and, on
// another connection, a version kmsg does not know), the broker refuses in
// the v0 layout, the client asks again at v3. The refusals pair with their
// requests and keep the requests' versions, carry the v0 body and
// UNSUPPORTED_VERSION, and are no decode error; the retry pairs normally.
// A refusal cut short stays a decode error that names the layout.
func TestApiVersionsRefusedThenRetried(t *testing.T) {
	unknown := kmsg.NewPtrApiVersionsRequest().MaxVersion() + 1
	id := kmsg.StringPtr("newer-client")
	a, col := analyse(t, flows.DefaultConfig(), func(w *gen.Writer) {
		at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
		c := w.Conn(client, broker, t0, gen.ConnOptions{})
		c.Request(at(1), 0, id, apiVersions(5))
		c.Send(gen.ServerToClient, at(2), refusalFrame(0, 3, 0))
		c.Request(at(3), 1, id, apiVersions(3))
		c.Response(at(4), 1, apiVersionsResp(3))
		c.Close(at(5))

		c = w.Conn(netip.AddrPortFrom(client.Addr(), client.Port()+1), broker, at(10), gen.ConnOptions{})
		c.Send(gen.ClientToServer, at(11), rawFrame(18, unknown, 0, nil))
		c.Send(gen.ServerToClient, at(12), refusalFrame(0, 4, 0))
		c.Request(at(13), 1, id, apiVersions(4))
		c.Send(gen.ServerToClient, at(14), refusalFrame(1, 3, 8)) // cut after the key
		c.Close(at(15))
	})
	if len(col.exchanges) != 4 {
		t.Fatalf("%d exchanges, want 4", len(col.exchanges))
	}
	type want struct {
		version, layout int16
		errors          []flows.ErrorCount
		decodeErr       string
	}
	unsupported := []flows.ErrorCount{{Code: 35, Count: 1}}
	for i, w := range []want{
		{version: 5, layout: 0, errors: unsupported},
		{version: 3, layout: 3},
		{version: unknown, layout: 0, errors: unsupported},
		{version: 4, layout: -1, decodeErr: "v0 layout"},
	} {
		x := col.exchanges[i]
		if x.Req == nil || x.Resp == nil {
			t.Errorf("exchange %d: request %v response %v: want both, paired", i, x.Req != nil, x.Resp != nil)
			continue
		}
		m := x.Resp
		layout := int16(-1)
		if m.Resp != nil {
			layout = m.Resp.GetVersion()
		}
		if m.Key != 18 || m.Version != w.version || layout != w.layout || !slices.Equal(m.ErrorCodes, w.errors) {
			t.Errorf("exchange %d: ApiVersions? key %d v%d, body in the v%d layout, errors %v; want v%d, layout v%d, errors %v",
				i, m.Key, m.Version, layout, m.ErrorCodes, w.version, w.layout, w.errors)
		}
		switch {
		case w.decodeErr == "" && m.Err != nil:
			t.Errorf("exchange %d: decode error %v", i, m.Err)
		case w.decodeErr != "" && (m.Err == nil || !strings.Contains(m.Err.Error(), w.decodeErr)):
			t.Errorf("exchange %d: decode error %v, want one saying %q", i, m.Err, w.decodeErr)
		}
		if r, ok := m.Resp.(*kmsg.ApiVersionsResponse); ok && layout == 0 &&
			(len(r.ApiKeys) != 1 || r.ApiKeys[0].ApiKey != 18 || r.ApiKeys[0].MaxVersion >= w.version) {
			t.Errorf("exchange %d: keys %+v, want ApiVersions' own range below v%d", i, r.ApiKeys, w.version)
		}
	}
	conns := a.Conns()
	if len(conns) != 2 {
		t.Fatalf("%d connections, want 2", len(conns))
	}
	if c := conns[0]; c.DecodeErrors != 0 || c.ErrorResponses != 1 || c.Responses != 2 {
		t.Errorf("first connection: %d decode errors, %d error responses, %d responses; want 0, 1, 2", c.DecodeErrors, c.ErrorResponses, c.Responses)
	}
	if c := conns[1]; c.DecodeErrors != 1 || c.ErrorResponses != 1 || len(c.Problems) != 2 {
		t.Errorf("second connection: %d decode errors, %d error responses, problems %v; want 1, 1, the unknown version and the cut refusal",
			c.DecodeErrors, c.ErrorResponses, c.Problems)
	}
	if n := a.Stats().UnknownAPIs[flows.UnknownAPI{Key: 18, Version: unknown}]; n != 1 {
		t.Errorf("ApiVersions v%d counted unknown %d times, want once (the request)", unknown, n)
	}
}
