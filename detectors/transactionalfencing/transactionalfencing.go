// Package transactionalfencing reports producers fenced over one
// transactional.id: answers PRODUCER_FENCED or INVALID_PRODUCER_EPOCH to
// a transactional producer's Produce, AddPartitionsToTxn, AddOffsetsToTxn,
// TxnOffsetCommit or EndTxn. A producer is fenced when another called
// InitProducerId with its transactional.id: the coordinator bumped the
// epoch and aborted the open transaction. Once, that is fencing doing its
// job (a zombie stopped by its replacement); again and again, it is two
// live instances configured with one transactional.id, each restarted by
// its supervisor and fencing the other, every transaction of the fenced
// one aborted. Without this rule the wire shows a reconnect storm (the
// restarts) or an info producer-sequence.
//
// One finding per transactional.id: the producers (client ids and hosts)
// with their InitProducerId calls and fencing episodes, the fenced answers
// by API, and the transactions committed and aborted. A fencing episode is
// a producer's first fenced answer after its InitProducerId. Info for one
// episode; a warning from two (producers fencing each other), an error
// when they go on for 30 s or more (detectors.Grade). It explains the
// reconnect storm of the same hosts and servers.
package transactionalfencing

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "transactional-fencing",
	Severity: detectors.Error,
	Recorded: []string{"fixtures/pcaps/clients/fenced-kgo.pcap", "fixtures/pcaps/clients/fenced-sarama.pcap", "fixtures/pcaps/kafka/java-txn-fenced.pcap.gz"},
	Doc: "Transactional producers fenced over one transactional.id: PRODUCER_FENCED or INVALID_PRODUCER_EPOCH " +
		"answers to Produce, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit or EndTxn after another " +
		"InitProducerId with the same id. Per transactional.id: the producers (client ids and hosts), their " +
		"InitProducerId calls and fencing episodes (a producer's first fenced answer after its InitProducerId), " +
		"the fenced answers by API, the transactions committed and aborted. Info for one episode (a zombie " +
		"fenced by its replacement); a warning from min-episodes (two instances with one transactional.id " +
		"fencing each other), an error when that goes on for 30 s or more. Explains the reconnect storm of the " +
		"restarts.",
}, Params{MinEpisodes: 2}, New)

// Params are the rule's thresholds.
type Params struct {
	MinEpisodes int `param:"min-episodes" doc:"fencing episodes over one transactional.id (all its producers) for a warning"`
}

// The bounds.
const (
	maxTxns      = 1024
	maxProducers = 16 // per transactional.id; more are counted together
)

// New makes the rule.
func New(p Params) detectors.Rule {
	return &rule{p: Params{MinEpisodes: max(p.MinEpisodes, 1)}, txns: map[string]*txn{}}
}

type rule struct {
	p       Params
	txns    map[string]*txn
	dropped int64
}

type txn struct {
	id        string
	producers map[cluster.Client]*producer
	order     []cluster.Client
	more      int64
	fenced    int64
	episodes  int64
	byAPI     map[int16]int64
	codes     tally.Codes
	commits   int64
	aborts    int64
	refused   int64 // commits answered fenced
	// abortsRefused: aborts answered fenced (the coordinator had aborted)
	abortsRefused int64
	first, last   time.Time
	conns         tally.Conns
	ev            detectors.Sampler[detectors.Evidence]
}

type producer struct {
	inits, fenced, episodes int64
	epochs                  []int16
	fencedSinceInit         bool
	pid                     int64
}

// fencing reports the codes of a fenced producer.
func fencing(code int16) bool {
	return code == cluster.ProducerFenced || code == cluster.InvalidProducerEpoch
}

// ExchangeKeys implements detectors.KeyedExchangeHook: Exchange reads
// nothing else.
func (r *rule) ExchangeKeys() []kmsg.Key {
	return []kmsg.Key{kmsg.InitProducerID, kmsg.Produce, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn, kmsg.TxnOffsetCommit}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.Resp == nil || x.Resp.Resp == nil {
		return
	}
	id, ok := txnID(x.Req.Req)
	if !ok || id == "" {
		return
	}
	if init, ok := x.Resp.Resp.(*kmsg.InitProducerIDResponse); ok {
		r.initialised(x, id, init)
		return
	}
	var code int16
	decode.ErrorCodes(x.Resp.Resp, func(c int16) {
		if code == 0 && fencing(c) {
			code = c
		}
	})
	t := r.txns[id]
	if end, ok := x.Req.Req.(*kmsg.EndTxnRequest); ok && t != nil {
		switch {
		case code != 0 && end.Commit:
			t.refused++
		case code != 0:
			t.abortsRefused++
		case end.Commit:
			t.commits++
		default:
			t.aborts++
		}
	}
	if code == 0 {
		return
	}
	if t = r.txn(id); t == nil {
		return
	}
	pr := t.producer(x.Req.Client)
	tm := x.Resp.Time
	if t.fenced == 0 {
		t.first = tm
	}
	t.fenced++
	t.last = tm
	t.byAPI[x.Req.Key]++
	t.codes.Add(code)
	t.conns.Add(x.Conn)
	what := x.Req.Name() + " answer: " + detectors.ErrorName(code) + " for transactional.id " + strconv.Quote(id)
	if pr != nil {
		pr.fenced++
		if !pr.fencedSinceInit {
			pr.fencedSinceInit = true
			pr.episodes++
			t.episodes++
			what += " (fenced, episode " + strconv.FormatInt(t.episodes, 10) + ")"
		}
	}
	t.ev.Add(detectors.EvidenceAt(x.Resp, what))
}

func (r *rule) txn(id string) *txn {
	return tally.Entry(r.txns, id, maxTxns, &r.dropped, func() *txn {
		return &txn{id: id, producers: map[cluster.Client]*producer{}, byAPI: map[int16]int64{}}
	})
}

func (t *txn) producer(c cluster.Client) *producer {
	pr := t.producers[c]
	if pr == nil {
		if len(t.producers) >= maxProducers {
			t.more++
			return nil
		}
		pr = &producer{pid: -1}
		t.producers[c] = pr
		t.order = append(t.order, c)
	}
	return pr
}

func (r *rule) initialised(x *detectors.Exchange, id string, resp *kmsg.InitProducerIDResponse) {
	if resp.ErrorCode != 0 {
		return
	}
	t := r.txn(id)
	if t == nil {
		return
	}
	pr := t.producer(x.Req.Client)
	if pr == nil {
		return
	}
	pr.inits++
	pr.fencedSinceInit = false
	pr.pid = resp.ProducerID
	if len(pr.epochs) < 64 {
		pr.epochs = append(pr.epochs, resp.ProducerEpoch)
	}
	if len(t.producers) > 1 || pr.inits > 1 {
		t.ev.Add(detectors.EvidenceAt(x.Resp, "InitProducerId answer: transactional.id "+strconv.Quote(id)+" producer "+
			strconv.FormatInt(resp.ProducerID, 10)+" epoch "+strconv.Itoa(int(resp.ProducerEpoch))))
	}
}

// txnID is the transactional.id a request names.
func txnID(req kmsg.Request) (string, bool) {
	switch r := req.(type) {
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID != nil {
			return *r.TransactionalID, true
		}
	case *kmsg.ProduceRequest:
		if r.TransactionID != nil {
			return *r.TransactionID, true
		}
	case *kmsg.AddPartitionsToTxnRequest:
		if r.TransactionalID != "" {
			return r.TransactionalID, true
		}
		if len(r.Transactions) == 1 {
			return r.Transactions[0].TransactionalID, true
		}
	case *kmsg.AddOffsetsToTxnRequest:
		return r.TransactionalID, true
	case *kmsg.EndTxnRequest:
		return r.TransactionalID, true
	case *kmsg.TxnOffsetCommitRequest:
		return r.TransactionalID, true
	}
	return "", false
}

// Findings implements detectors.Rule: one per transactional.id fenced.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	return detectors.FindingsOf(maps.Values(r.txns), func(t *txn) bool { return t.fenced > 0 },
		func(a, b *txn) bool { return a.first.Before(b.first) || a.first.Equal(b.first) && a.id < b.id },
		func(t *txn) detectors.Finding { return r.finding(p, t) })
}

func (r *rule) finding(p *detectors.Pass, t *txn) detectors.Finding {
	f := &Finding{TransactionalID: t.id, Servers: t.conns.Servers(), Fenced: t.fenced, Episodes: t.episodes,
		Committed: t.commits, Aborted: t.aborts, CommitsRefused: t.refused, AbortsRefused: t.abortsRefused, Errors: t.codes.Names(),
		First: t.first, Last: t.last, ServerLabels: t.conns.ServerLabels(p.Nodes), More: t.more, Dropped: r.dropped, Params: r.p}
	var ids []string
	var hosts []netipAddr
	for _, c := range t.order {
		pr := t.producers[c]
		f.Producers = append(f.Producers, Producer{ClientID: c.ID, Host: c.Host.String(), Inits: pr.inits, Fenced: pr.fenced,
			Episodes: pr.episodes, Epochs: epochs(pr.epochs)})
		if !slices.Contains(ids, c.ID) {
			ids = append(ids, c.ID)
		}
		if !slices.Contains(hosts, c.Host) {
			hosts = append(hosts, c.Host)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.byAPI)) {
		f.ByAPI = append(f.ByAPI, decode.Name(k)+" x"+strconv.FormatInt(t.byAPI[k], 10))
	}
	sev := detectors.Info
	if t.episodes >= int64(r.p.MinEpisodes) {
		sev = max(detectors.Warning, detectors.Grade(t.last.Sub(t.first), false))
	}
	f.Severity = sev
	code, _ := t.codes.Top()
	f.ProducerCount = int64(len(t.order)) + t.more
	return detectors.Finding{
		Severity: sev,
		First:    t.first,
		Last:     t.last,
		Conns:    t.conns.IDs(),
		Nodes:    t.conns.Nodes(p.Nodes),
		Evidence: t.ev.List(),
		Subject: detectors.Subject{ClientIDs: ids, Clients: hosts, Servers: t.conns.ServerAddrs(), Error: code,
			Reconnects: sev >= detectors.Warning},
		Detail: f,
	}
}

type netipAddr = netip.Addr

func epochs(es []int16) []int {
	out := make([]int, len(es))
	for i, e := range es {
		out[i] = int(e)
	}
	return out
}
