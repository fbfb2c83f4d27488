// Package saslfailure reports SASL authentication failures and connections closed
// at re-authentication time.
//
// Failures: SaslHandshake answered UNSUPPORTED_SASL_MECHANISM (the client
// asks for a mechanism the listener does not enable) or ILLEGAL_SASL_STATE,
// SaslAuthenticate answered SASL_AUTHENTICATION_FAILED (wrong credentials,
// an unknown user, an expired token) or ILLEGAL_SASL_STATE, and
// authentication requests the broker answered by closing the connection.
// Per client id and client host: the mechanisms asked for and those the
// broker enables, the errors and the broker's messages, the brokers. A
// client that never authenticated after its failures is a warning (it
// cannot work: a misconfiguration), an error when it kept failing for 10 s
// to the end of the capture or for 30 s; failures that healed (the client
// authenticated afterwards) are graded by how long they lasted (info below
// 3 s).
//
// Re-authentication (KIP-368): a SaslAuthenticate response with a session
// lifetime (connections.max.reauth.ms) obliges the client to authenticate
// again on the connection before it sends a request after the lifetime; a
// broker closes the connection at the first request that comes after it
// without re-authentication, and that request is never answered. Such
// connections (closed, with a request sent after the session lifetime and
// never answered) are counted per client: min-reauth-closes of them are a
// warning, fewer info. Re-authentications that happen give nothing, and
// neither does a connection the client closes while idle after its
// lifetime (clients re-authenticate lazily, before their next request).
package saslfailure

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "sasl-failure",
	Recorded: []string{"fixtures/pcaps/clients/sasl-kgo.pcap"},
	Severity: detectors.Error,
	Doc: "SASL failures: SaslHandshake / SaslAuthenticate answered UNSUPPORTED_SASL_MECHANISM, " +
		"SASL_AUTHENTICATION_FAILED or ILLEGAL_SASL_STATE, or by closing the connection, and connections closed " +
		"after their KIP-368 session lifetime without re-authenticating. Per client id and client host, with the " +
		"mechanisms, the broker's messages and the brokers. A client that never authenticated afterwards is a " +
		"warning, an error when it kept failing for 10 s to the end or for 30 s; failures that healed are info " +
		"below 3 s, a warning from 3 s. min-reauth-closes connections closed at re-authentication time are a " +
		"warning, fewer info.",
}, Params{MinReauthCloses: 2, ReauthSlack: time.Second}, New)

// Params are the rule's thresholds.
type Params struct {
	MinReauthCloses int           `param:"min-reauth-closes" doc:"connections of one client closed after their session lifetime without re-authenticating that make a warning"`
	ReauthSlack     time.Duration `param:"reauth-slack" unit:"ms" doc:"how long before its session lifetime ends a connection's close counts as at re-authentication time"`
}

// Bounds of what the rule keeps.
const (
	maxClients  = 1024
	maxConns    = 1 << 16 // connections followed at once, the newest
	maxMessages = 3
)

// New makes the rule.
func New(p Params) detectors.Rule {
	p.MinReauthCloses = max(p.MinReauthCloses, 1)
	return &rule{p: p, clients: map[cluster.Client]*client{}, conns: tally.Newest[*conn]{Max: maxConns}}
}

type rule struct {
	p       Params
	clients map[cluster.Client]*client
	conns   tally.Newest[*conn] // by value: it pins no connection record; the newest maxConns
	dropped int64
}

// Cut implements detectors.Bounded: connections still followed when
// maxConns newer ones had authenticated, whose session is no longer
// judged (a close at re-authentication time goes uncounted).
func (r *rule) Cut() map[string]int64 {
	return map[string]int64{"connections_forgotten": r.conns.Forgotten}
}

// conn is a connection's SASL state.
type conn struct {
	client    *client
	mechanism string
	authAt    time.Time
	lifetime  time.Duration
	reauthed  bool
	// closed is when the connection closed, if after its lifetime;
	// expired is set when a request sent after the lifetime was never
	// answered. Both make a close at re-authentication time.
	closed     time.Time
	closedAt   detectors.Evidence
	expired    bool
	expiredReq detectors.Evidence
}

// expiredAt reports whether the session had run out at t (less
// reauth-slack) without a re-authentication.
func (c *conn) expiredAt(t time.Time, slack time.Duration) bool {
	return c.lifetime > 0 && !c.authAt.IsZero() && !c.reauthed && !t.Before(c.authAt.Add(c.lifetime-slack))
}

type client struct {
	key                   cluster.Client
	failures              int64
	closed                int64 // authentication answered by closing the connection
	codes                 tally.Codes
	messages              []string
	mechanisms            map[string]bool
	enabled               []string
	first                 time.Time // first failure
	last                  time.Time // last failure
	success               time.Time // last successful authentication
	successes             int64
	reauths               int64
	reauthClosed          int64
	lifetime              time.Duration
	firstClose, lastClose time.Time
	conns                 tally.Conns
	ev                    detectors.Sampler[detectors.Evidence]
}

func (r *rule) client(c *flows.ConnInfo, clientID string) *client {
	k := cluster.ClientAt(c.Client.Addr(), clientID)
	return tally.Entry(r.clients, k, maxClients, &r.dropped, func() *client { return &client{key: k, mechanisms: map[string]bool{}} })
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil {
		return
	}
	k := kmsg.Key(x.Req.Key)
	if k != kmsg.SASLHandshake && k != kmsg.SASLAuthenticate {
		if x.Unanswered && !x.OneSided {
			r.unanswered(x)
		}
		return
	}
	cl := r.client(x.Conn, x.Req.Client.ID)
	if cl == nil {
		return
	}
	ck := tally.KeyOf(x.Conn)
	cn := r.conns.Get(ck)
	if cn == nil {
		// Followed from here, forgetting the one followed maxConns
		// connections ago if it is still there.
		cn = &conn{client: cl}
		r.conns.Put(ck, cn)
	}
	if x.Unanswered {
		if x.OneSided {
			return
		}
		cl.closed++
		cn.authAt = time.Time{} // the session, if any, is over
		r.fail(cl, x.Conn, x.Req.Time, 0, detectors.EvidenceAt(x.Req, x.Req.Name()+" request never answered: the broker closed the connection"))
		return
	}
	if x.Resp == nil || x.Resp.Resp == nil {
		return
	}
	switch resp := x.Resp.Resp.(type) {
	case *kmsg.SASLHandshakeResponse:
		req, _ := x.Req.Req.(*kmsg.SASLHandshakeRequest)
		if req != nil {
			if len(cl.mechanisms) < 8 {
				cl.mechanisms[req.Mechanism] = true
			}
			if !cn.authAt.IsZero() {
				cn.reauthed = true // a handshake on an authenticated connection: re-authentication
			}
			cn.mechanism = req.Mechanism
		}
		if resp.ErrorCode != 0 {
			if len(resp.SupportedMechanisms) > 0 {
				cl.enabled = append(cl.enabled[:0], resp.SupportedMechanisms...)
			}
			r.fail(cl, x.Conn, x.Resp.Time, resp.ErrorCode, detectors.EvidenceAt(x.Resp, "SaslHandshake response "+detectors.ErrorName(resp.ErrorCode)+" for "+mech(req)))
		}
	case *kmsg.SASLAuthenticateResponse:
		if resp.ErrorCode != 0 {
			ev := detectors.EvidenceAt(x.Resp, "SaslAuthenticate response "+detectors.ErrorName(resp.ErrorCode))
			if resp.ErrorMessage != nil && len(cl.messages) < maxMessages && !slices.Contains(cl.messages, *resp.ErrorMessage) {
				cl.messages = append(cl.messages, *resp.ErrorMessage)
			}
			r.fail(cl, x.Conn, x.Resp.Time, resp.ErrorCode, ev)
			return
		}
		// SCRAM takes two round trips; the one that ends it names
		// the session lifetime (v1+), or the one that succeeds last.
		cl.success = x.Resp.Time
		cl.successes++
		if !cn.authAt.IsZero() && cn.reauthed {
			cl.reauths++
		}
		cn.authAt = x.Resp.Time
		cn.reauthed = false
		if resp.SessionLifetimeMillis > 0 {
			cn.lifetime = time.Duration(resp.SessionLifetimeMillis) * time.Millisecond
			cl.lifetime = cn.lifetime
		}
	}
}

func mech(req *kmsg.SASLHandshakeRequest) string {
	if req == nil {
		return "?"
	}
	return req.Mechanism
}

// fail counts a failed authentication step (code 0: the connection closed
// instead of an answer).
func (r *rule) fail(cl *client, c *flows.ConnInfo, t time.Time, code int16, ev detectors.Evidence) {
	if cl.failures == 0 {
		cl.first = t
	}
	cl.failures++
	cl.last = t
	if code != 0 {
		cl.codes.Add(code)
	}
	cl.conns.Add(c)
	cl.ev.Add(ev)
}

// unanswered notes a request never answered: on a connection whose
// session had run out, the broker closed it there.
func (r *rule) unanswered(x *detectors.Exchange) {
	cn := r.conns.Get(tally.KeyOf(x.Conn))
	if cn == nil || cn.expired || !cn.expiredAt(x.Req.Time, r.p.ReauthSlack) {
		return
	}
	cn.expired = true
	cn.expiredReq = detectors.EvidenceAt(x.Req, x.Req.Name()+" request "+text.Duration(x.Req.Time.Sub(cn.authAt))+
		" after authenticating (session lifetime "+text.Duration(cn.lifetime)+"), never answered")
	if !cn.closed.IsZero() {
		r.reauthClose(x.Conn, cn)
	}
}

// ConnEvent implements detectors.ConnHook: connections closed at
// re-authentication time.
func (r *rule) ConnEvent(_ *detectors.Pass, e *detectors.ConnEvent) {
	if e.Kind != flows.ConnClosed || e.Conn == nil {
		return
	}
	cn := r.conns.Get(tally.KeyOf(e.Conn))
	if cn == nil {
		return
	}
	if !cn.expiredAt(e.Time, r.p.ReauthSlack) {
		r.conns.Delete(tally.KeyOf(e.Conn))
		return
	}
	cn.closed = e.Time
	cn.closedAt = detectors.Evidence{File: e.File, Packet: e.Packet, Conn: e.Conn.ID,
		What: "connection closed " + text.Duration(e.Time.Sub(cn.authAt)) + " after authenticating, session lifetime " + text.Duration(cn.lifetime)}
	if cn.expired {
		r.reauthClose(e.Conn, cn)
	}
}

// reauthClose counts a connection closed at re-authentication time.
func (r *rule) reauthClose(c *flows.ConnInfo, cn *conn) {
	r.conns.Delete(tally.KeyOf(c))
	cl := cn.client
	if cl.reauthClosed == 0 || cn.closed.Before(cl.firstClose) {
		cl.firstClose = cn.closed
	}
	cl.reauthClosed++
	if cn.closed.After(cl.lastClose) {
		cl.lastClose = cn.closed
	}
	cl.conns.Add(c)
	cl.ev.Add(cn.expiredReq)
	cl.ev.Add(cn.closedAt)
}

// Findings implements detectors.Rule: one per client id and host with
// failures or connections closed at re-authentication time.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	return detectors.FindingsOf(maps.Values(r.clients), func(cl *client) bool { return cl.failures > 0 || cl.reauthClosed > 0 },
		func(a, b *client) bool {
			return a.key.ID < b.key.ID || a.key.ID == b.key.ID && a.key.Host.Less(b.key.Host)
		},
		func(cl *client) detectors.Finding { return r.finding(p, cl) })
}

func (r *rule) finding(p *detectors.Pass, cl *client) detectors.Finding {
	healed := cl.failures > 0 && cl.success.After(cl.last)
	sev := detectors.Info
	first, last := cl.first, cl.last
	if cl.failures > 0 {
		d := cl.last.Sub(cl.first)
		if healed {
			sev = detectors.Grade(d, false)
		} else {
			sev = max(detectors.Warning, detectors.Grade(d, p.End.Sub(cl.last) < detectors.HealAfter))
		}
	}
	if cl.reauthClosed >= int64(r.p.MinReauthCloses) {
		sev = max(sev, detectors.Warning)
	}
	if cl.reauthClosed > 0 {
		if first.IsZero() || cl.firstClose.Before(first) {
			first = cl.firstClose
		}
		if cl.lastClose.After(last) {
			last = cl.lastClose
		}
	}
	code, _ := cl.codes.Top()
	mechs := slices.AppendSeq(make([]string, 0, len(cl.mechanisms)), maps.Keys(cl.mechanisms))
	slices.Sort(mechs)
	f := &Finding{
		ClientID: cl.key.ID, ClientHost: cl.key.Host.String(), Servers: cl.conns.ServerLabels(p.Nodes),
		Mechanisms: mechs, Enabled: append([]string(nil), cl.enabled...), Errors: cl.codes.Parts(),
		Messages: append([]string(nil), cl.messages...), Healed: healed, ReauthCloses: cl.reauthClosed,
		SessionLifetimeMs: cl.lifetime.Milliseconds(),
		Failures:          cl.failures, Closed: cl.closed, Successes: cl.successes, Reauths: cl.reauths,
		FailFirst: cl.first, FailLast: cl.last, CloseFirst: cl.firstClose, CloseLast: cl.lastClose,
		Lifetime: cl.lifetime, Dropped: r.dropped, MinReauthCloses: r.p.MinReauthCloses,
	}
	return detectors.Finding{
		Severity: sev,
		First:    first,
		Last:     last,
		Conns:    cl.conns.IDs(),
		Nodes:    cl.conns.Nodes(p.Nodes),
		Evidence: cl.ev.List(),
		Subject:  detectors.Subject{ClientIDs: []string{cl.key.ID}, Clients: []netip.Addr{cl.key.Host}, Servers: cl.conns.ServerAddrs(), Error: code},
		Detail:   f,
	}
}
