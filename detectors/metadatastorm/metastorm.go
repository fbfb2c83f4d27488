// Package metadatastorm reports metadata storms: a client sending Metadata
// requests, often for all topics, far more often than its periodic refresh
// (metadata.max.age.ms, 5 minutes by default) and its refreshes after
// errors explain. Clients that refresh metadata once per partition rather
// than once per error (sarama before Metadata.SingleFlight, IBM/sarama
// 3224) send producers x partitions requests when a broker fails, and the
// brokers spend their request threads building large responses.
//
// Per client id and client host (many processes on one host often share a
// library's default client id), the rule counts Metadata requests in a
// sliding window. A request sent less than explain-within after the client
// got an error response is a refresh on error: each error response
// explains one. A storm is min-requests other requests within window: a
// warning (a misconfiguration or client bug that loads the cluster), an
// error when it lasted 30 s or was still going on at the end of the
// capture after 10 s (the severity policy's bounds). Periodic refreshes
// and the few requests of a client starting give nothing.
package metadatastorm

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/burst"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "metadata-storm",
	Recorded: []string{"fixtures/pcaps/clients/metadata-storm-kgo.pcap"},
	Severity: detectors.Error,
	Doc: "Metadata requests far above what the periodic refresh (metadata.max.age.ms, 5 min) and refreshes after " +
		"errors explain (IBM/sarama 3224: one refresh per partition per producer). Per client id and client host: " +
		"the requests, the share asking for all topics, the response sizes, the peak rate. A request less than " +
		"explain-within after an error response to the client is a refresh on error (one per error response). " +
		"min-requests other Metadata requests within window are a storm: a warning, an error when it lasted 30 s " +
		"or was still going on at the end after 10 s. Periodic refreshes give nothing.",
}, Params{Window: 10 * time.Second, MinRequests: 50, ExplainWithin: 2 * time.Second}, New)

// Params are the rule's thresholds.
type Params struct {
	Window        time.Duration `param:"window" doc:"the sliding window Metadata requests are counted in"`
	MinRequests   int           `param:"min-requests" doc:"Metadata requests of one client id and host within window, beyond refreshes on error, that make a storm"`
	ExplainWithin time.Duration `param:"explain-within" unit:"ms" doc:"how soon after an error response a Metadata request counts as a refresh on that error"`
}

// Bounds of what the rule keeps.
const (
	maxClients = 1024
	maxCredit  = 3 // error responses remembered as explaining refreshes
)

// New makes the rule.
func New(p Params) detectors.Rule {
	p.MinRequests = min(max(p.MinRequests, 2), burst.MaxN)
	if p.Window <= 0 {
		p.Window = time.Second
	}
	return &rule{p: p, clients: map[cluster.Client]*client{}}
}

type rule struct {
	p       Params
	clients map[cluster.Client]*client
	dropped int64
	// With Pass.KeepClosed (live), the connections a client is named
	// with that have been closed for longer are dropped from its set
	// and counted in its folded, so that the sets level within minutes
	// (1,000 short-lived clients' ids used every 20 s filled 256 each
	// over 85 minutes of the soak): closedOld are the ids closed before
	// the last sweep, closedNew since; a sweep every KeepClosed drops
	// closedOld's.
	closedOld, closedNew []int
	swept                time.Time
}

type client struct {
	key       cluster.Client
	win       *burst.Window
	requests  int64
	allTopics int64
	onError   int64
	respBytes int64
	respMax   int
	responses int64
	// credit is how many refreshes the last error responses explain,
	// until creditUntil.
	credit      int
	creditUntil time.Time
	first, last time.Time
	conns       tally.Conns
	folded      int64 // connections dropped from conns, closed KeepClosed before
	ev          detectors.Sampler[evid]
}

type evid struct {
	file   int
	packet uint64
	conn   int
	all    bool
	topics int
	ver    int16
}

func (e evid) Evidence() detectors.Evidence {
	what := "Metadata v" + strconv.Itoa(int(e.ver)) + " request for "
	if e.all {
		what += "all topics"
	} else {
		what += text.Plural(e.topics, "topic", "topics")
	}
	return detectors.Evidence{File: e.file, Packet: e.packet, Conn: e.conn, What: what}
}

func (r *rule) client(p *detectors.Pass, m *flows.Message) *client {
	k := m.Client
	cl := r.clients[k]
	if cl == nil {
		if len(r.clients) >= maxClients {
			r.dropped++
			return nil
		}
		cl = &client{key: k, win: burst.New(r.p.MinRequests, r.p.Window)}
		if p.KeepClosed > 0 {
			// Live: the times of a client asking slower than a storm
			// are let go (1,000 short-lived clients' ids filled their
			// rings over 17 minutes of the soak).
			cl.win.Forget()
		}
		r.clients[k] = cl
	}
	return cl
}

// ConnEvent implements detectors.ConnHook: with KeepClosed, the
// connections closed, for the sweep.
func (r *rule) ConnEvent(p *detectors.Pass, e *detectors.ConnEvent) {
	if p.KeepClosed <= 0 {
		return
	}
	if e.Kind == flows.ConnClosed && e.Conn != nil {
		r.closedNew = append(r.closedNew, e.Conn.ID)
	}
	r.sweep(p.KeepClosed, e.Time)
}

// sweep drops from every client's set the connections closed before the
// last sweep, at least keep ago, once keep has passed since it.
func (r *rule) sweep(keep time.Duration, now time.Time) {
	if r.swept.IsZero() {
		r.swept = now
	}
	if now.Sub(r.swept) < keep {
		return
	}
	r.swept = now
	if len(r.closedOld) > 0 {
		slices.Sort(r.closedOld)
		gone := func(id int) bool { _, ok := slices.BinarySearch(r.closedOld, id); return ok }
		for _, cl := range r.clients {
			cl.folded += int64(cl.conns.Fold(gone))
		}
	}
	r.closedOld, r.closedNew = append(r.closedOld[:0], r.closedNew...), r.closedNew[:0]
}

// Exchange implements detectors.ExchangeHook: error responses give
// credit, Metadata exchanges are counted.
func (r *rule) Exchange(p *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil {
		return
	}
	if x.Req.Key != int16(kmsg.Metadata) {
		if x.Resp == nil || len(x.Resp.ErrorCodes) == 0 {
			return
		}
		// A client not seen asking for Metadata yet is added:
		// the error is remembered for its first refreshes.
		cl := r.client(p, x.Req)
		if cl == nil {
			return
		}
		if x.Resp.Time.After(cl.creditUntil) {
			cl.credit = 0
		}
		cl.credit = min(cl.credit+1, maxCredit)
		cl.creditUntil = x.Resp.Time.Add(r.p.ExplainWithin)
		return
	}
	cl := r.client(p, x.Req)
	if cl == nil {
		return
	}
	t := x.Req.Time
	if cl.requests == 0 {
		cl.first = t
	}
	cl.requests++
	cl.last = t
	cl.conns.Add(x.Conn)
	req, _ := x.Req.Req.(*kmsg.MetadataRequest)
	all := req != nil && (req.Topics == nil && req.Version >= 1 || len(req.Topics) == 0 && req.Version == 0)
	if all {
		cl.allTopics++
	}
	if x.Resp != nil {
		cl.responses++
		cl.respBytes += int64(x.Resp.Size)
		cl.respMax = max(cl.respMax, x.Resp.Size)
	}
	if cl.credit > 0 && !t.After(cl.creditUntil) {
		cl.credit--
		cl.onError++
		return
	}
	cl.win.Add(t)
	n := 0
	if req != nil {
		n = len(req.Topics)
	}
	cl.ev.Add(evid{file: x.Req.File, packet: x.Req.Packet, conn: x.Conn.ID, all: all, topics: n, ver: x.Req.Version})
}

// Findings implements detectors.Rule: one per client id and host that
// stormed.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	var out []detectors.Finding
	for _, cl := range r.clients {
		best, ongoing, storms := cl.win.Result(p.End)
		if storms == 0 {
			continue
		}
		out = append(out, r.finding(p, cl, best, ongoing, storms))
	}
	slices.SortFunc(out, func(x, y detectors.Finding) int {
		a, b := x.Detail.(*Finding), y.Detail.(*Finding)
		return cmp.Or(cmp.Compare(a.ClientID, b.ClientID), cmp.Compare(a.ClientHost, b.ClientHost))
	})
	return out
}

func (r *rule) finding(p *detectors.Pass, cl *client, best burst.Episode, ongoing bool, storms int) detectors.Finding {
	sev := max(detectors.Warning, detectors.Grade(best.Duration(), ongoing))
	peak, peakAt := cl.win.Peak()
	f := &Finding{
		ClientID: cl.key.ID, ClientHost: cl.key.Host.String(), Servers: cl.conns.ServerLabels(p.Nodes),
		StormS: text.Seconds(best.Duration()), StormRate: best.Rate(), PeakPerSecond: peak, Ongoing: ongoing,
		AllTopicsShare: share(cl.allTopics, cl.requests), MeanResponseBytes: mean(cl.respBytes, cl.responses),
		MaxResponseBytes: cl.respMax,
		Storm:            best, Storms: int64(storms), PeakAt: peakAt, Requests: cl.requests, OnError: cl.onError, Conns: cl.conns.Len() + int(cl.folded),
		First: cl.first, Last: cl.last, Params: r.p, Dropped: r.dropped,
	}
	f.MetadataRequests = cl.requests
	f.StormRequests = int64(best.Events)
	f.AllTopicsRequests = cl.allTopics
	f.RefreshesAfterError = cl.onError
	f.ResponseBytes = cl.respBytes
	f.Connections = int64(cl.conns.Len()) + cl.folded
	return detectors.Finding{
		Severity: sev,
		First:    best.Start,
		Last:     best.End,
		Conns:    cl.conns.IDs(),
		Nodes:    cl.conns.Nodes(p.Nodes),
		Evidence: cl.ev.List(),
		Subject:  detectors.Subject{ClientIDs: []string{cl.key.ID}, Clients: []netip.Addr{cl.key.Host}, Servers: cl.conns.ServerAddrs()},
		Detail:   f,
	}
}
