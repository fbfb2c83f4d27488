package flows

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
)

// Messages made outside an Analyzer (tests, tools), filled as the analyzer
// fills those it decodes: size, role, record batches, error codes.

// MakeRequest returns a request on c with correlation id corr, sent at at
// (req's version must be set).
func MakeRequest(c *Conn, at time.Time, corr int32, clientID string, req kmsg.Request) *Message {
	m := &Message{Conn: &c.ConnInfo, conn: c, Time: at, FirstTime: at, Key: req.Key(), Version: req.GetVersion(), Correlation: corr,
		Client: cluster.Client{ID: clientID}, Req: req}
	id := clientID
	m.Size = len(decode.AppendRequestFrame(nil, corr, &id, req))
	scanBatches(m, req)
	m.Identify()
	return m
}

// MakeResponse returns the response to req, completed at at (resp's
// version must be set).
func MakeResponse(req *Message, at time.Time, resp kmsg.Response) *Message {
	m := &Message{Conn: req.Conn, conn: req.conn, Response: true, Time: at, FirstTime: at,
		Correlation: req.Correlation, Resp: resp}
	m.Answers(req)
	m.Size = len(decode.AppendResponseFrame(nil, req.Correlation, resp))
	scanBatches(m, resp)
	m.ErrorCodes = errorCounts(resp, nil)
	return m
}

// ErrorCounts are the non-zero error codes anywhere in resp, counted as
// the analyzer counts a response's (Message.ErrorCodes).
func ErrorCounts(resp kmsg.Response) []ErrorCount { return errorCounts(resp, nil) }
