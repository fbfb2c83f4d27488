package internalerror_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/internalerror"
	"github.com/kfsniff/kfsniff/flows"
)

const broker = "10.1.0.10:9092"

// traffic opens a connection from client and sends n answered Metadata
// requests on it, 100 ms apart from a second in; the pipeline counts
// them in the connection's Requests.
func traffic(h *dt.Harness, client string, n int) *flows.Conn {
	c := h.Conn(client, broker)
	for i := range n {
		req, resp := dt.MetadataErrors(0)
		h.Call(c, dt.At(time.Second+time.Duration(i)*100*time.Millisecond), time.Millisecond, "app", req, resp)
	}
	c.Requests = n
	return c
}

// breakAt marks c abandoned at packet, as the pipeline does when a
// handler panics on one of its events.
func breakAt(c *flows.Conn, packet uint64, why string) {
	c.Broken, c.BrokenPacket, c.BrokenWhy = true, packet, why
}

func TestInternalError(t *testing.T) {
	for _, tc := range []struct {
		name    string
		traffic func(h *dt.Harness)
		want    []dt.Want
	}{
		{
			name: "a connection abandoned after its third request",
			traffic: func(h *dt.Harness) {
				breakAt(traffic(h, "10.2.0.5:40000", 3), 6, "index out of range [3] with length 3")
			},
			want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &internalerror.Finding{
					RequestsBefore: 3, Client: "10.2.0.5:40000", Server: broker,
					Error: "index out of range [3] with length 3",
				}, Exact: []string{"Server"},
				Summary:  []string{"internal error on connection #1 10.2.0.5:40000 -> " + broker + " at packet 6"},
				Evidence: []uint64{6},
			}},
		},
		{
			name: "two abandoned among healthy ones: one finding each, in connection order",
			traffic: func(h *dt.Harness) {
				traffic(h, "10.2.0.5:40000", 2)
				b := traffic(h, "10.2.0.6:40000", 2)
				c := traffic(h, "10.2.0.7:40000", 4)
				traffic(h, "10.2.0.8:40000", 2)
				breakAt(c, 14, "second")
				breakAt(b, 7, "first")
			},
			want: []dt.Want{
				{Severity: detectors.Error, Detail: &internalerror.Finding{
					Client: "10.2.0.6:40000", Error: "first", RequestsBefore: 2,
				},
					Summary: []string{"connection #2"}, Evidence: []uint64{7}},
				{Severity: detectors.Error, Detail: &internalerror.Finding{
					Client: "10.2.0.7:40000", Error: "second", RequestsBefore: 4,
				},
					Summary: []string{"connection #3"}, Evidence: []uint64{14}},
			},
		},
		{
			name: "near miss: a connection with framing and decoding problems is not abandoned",
			traffic: func(h *dt.Harness) {
				c := traffic(h, "10.2.0.5:40000", 3)
				c.FramingErrors, c.DecodeErrors = 2, 5
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, nil, internalerror.Analyzer)
			tc.traffic(h)
			dt.Check(t, h.Findings(), "internal-error", tc.want...)
		})
	}
}

// TestInternalErrorNext: the advice names the packet to cut the capture
// at, so that the bug can be reported with an excerpt.
func TestInternalErrorNext(t *testing.T) {
	h := dt.New(t, nil, internalerror.Analyzer)
	breakAt(traffic(h, "10.2.0.5:40000", 1), 2, "boom")
	fs := h.Findings()
	if len(fs) != 1 {
		t.Fatalf("findings:%s", dt.Describe(fs))
	}
	if want := "kfsniff -r FILE -c 2 -w excerpt.pcap"; !strings.Contains(fs[0].Next, want) {
		t.Errorf("next %q lacks %q", fs[0].Next, want)
	}
	if fs[0].Evidence[0].What != "internal error: boom" || fs[0].Evidence[0].Conn != 1 {
		t.Errorf("evidence %+v", fs[0].Evidence)
	}
}
