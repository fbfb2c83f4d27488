// Package flowstest makes flows Messages outside an Analyzer, for tests
// of the packages that read them: filled as the analyzer fills those it
// decodes (size, role, record batches, error codes).
package flowstest

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/kmsgtest"
)

// MakeRequest returns a request on c with correlation id corr, sent at at
// (req's version must be set).
func MakeRequest(c *flows.Conn, at time.Time, corr int32, clientID string, req kmsg.Request) *flows.Message {
	m := &flows.Message{Time: at, FirstTime: at, Key: req.Key(), Version: req.GetVersion(), Correlation: corr,
		Client: cluster.Client{ID: clientID}, Req: req}
	c.Attach(m)
	id := clientID
	m.Size = len(kmsgtest.AppendRequestFrame(nil, corr, &id, req))
	flows.ScanBatches(m, req)
	m.Identify()
	return m
}

// MakeResponse returns the response to req, completed at at (resp's
// version must be set).
func MakeResponse(req *flows.Message, at time.Time, resp kmsg.Response) *flows.Message {
	m := &flows.Message{Response: true, Time: at, FirstTime: at, Correlation: req.Correlation, Resp: resp}
	m.Answers(req)
	m.Size = len(kmsgtest.AppendResponseFrame(nil, req.Correlation, resp))
	flows.ScanBatches(m, resp)
	m.ErrorCodes = flows.ErrorCounts(resp)
	return m
}
