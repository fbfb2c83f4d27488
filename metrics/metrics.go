// Package metrics exposes what kfsniff sees as Prometheus metrics: a flows
// handler (registered in the pipeline beside the report's Collector) that
// counts requests, responses, error codes, bytes and latency per API,
// version and broker, requests per client id, connections per role, and,
// fed by the pipeline's callbacks, the capture's counters and the findings
// as they stand. Label values are bounded (see Config); nothing
// per-request (correlation ids, offsets) ever becomes a label.
//
// Everything but the scrape runs on the goroutine that runs the analysis:
// the handler's own tables are not locked; the metrics it updates are
// client_golang's, which are safe to read while they change.
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/collect"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// Other is the label value that series beyond a cap are folded into.
const Other = "other"

// Config bounds the label values. Zero fields take the defaults.
type Config struct {
	// MaxBrokers is how many broker endpoints (server host:port) get a
	// label value of their own, the first seen; connections to the others
	// are counted under broker="other". Default 64.
	MaxBrokers int
	// MaxClientIDs is how many client ids get a label value of their own
	// in the per-client metrics, the first seen; the rest are
	// client_id="other". Default 100.
	MaxClientIDs int
	// MaxSeries bounds the (api, version, broker) combinations; past it,
	// exchanges are counted under api, version and broker "other".
	// Default 1024.
	MaxSeries int
	// MaxErrorNames is how many error names one (api, version, broker)
	// series counts under a label value of their own in
	// kfsniff_response_errors_total, the first seen; MaxErrorSeries how
	// many such (api, version, broker, error) series there are in all.
	// The rest are error="other" (one per series). Defaults 8 and 1024:
	// without them the wire's error codes fanned out to 64 brokers x 16
	// API versions x 136 codes.
	MaxErrorNames, MaxErrorSeries int
	// MaxScrapes bounds the scrapes served at once (the rest are told
	// 503); Default 2.
	MaxScrapes int
	// MaxConns is how many connections are followed for the per-role
	// gauge; past it, new connections are counted everywhere else but not
	// in kfsniff_connections. Default 65536.
	MaxConns int
	// IdleAfter: a connection with no request for this long (capture
	// time) no longer counts as open in kfsniff_connections, even without
	// a FIN or RST captured. Default 10 minutes, Kafka's
	// connections.max.idle.ms: the broker has closed it by then. The
	// connections are looked at as requests come, every eighth of it.
	IdleAfter time.Duration
	// Live registers the kernel's counters of a live capture.
	Live bool
	// Detectors are the rules' names, whose findings gauges start at 0 so
	// that a dashboard can tell "none" from "not watched".
	Detectors []string
}

func (c *Config) defaults() {
	c.MaxBrokers = orDefault(c.MaxBrokers, 64)
	c.MaxClientIDs = orDefault(c.MaxClientIDs, 100)
	c.MaxSeries = orDefault(c.MaxSeries, 1024)
	c.MaxConns = orDefault(c.MaxConns, 65536)
	c.MaxErrorNames = orDefault(c.MaxErrorNames, 8)
	c.MaxErrorSeries = orDefault(c.MaxErrorSeries, 1024)
	c.MaxScrapes = orDefault(c.MaxScrapes, 2)
	c.IdleAfter = orDefault(c.IdleAfter, 10*time.Minute)
}

// orDefault is v, or def when v is not positive.
func orDefault[T ~int | ~int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// LatencyBuckets are the classic buckets of the latency histogram, in
// seconds: from half a millisecond (a loopback Metadata) to 30 s (a
// rebalance's JoinGroup). Scrapers that negotiate native histograms get
// exponential buckets instead (factor 1.1, at most 160 buckets).
var LatencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Metrics is the flows handler and its registry.
type Metrics struct {
	cfg Config
	reg *prometheus.Registry

	requests, responses, errorResponses, unanswered *prometheus.CounterVec // api, version, broker
	errorCodes                                      *prometheus.CounterVec // api, version, broker, error
	reqBytes, respBytes                             *prometheus.CounterVec // api, broker
	latency                                         *prometheus.HistogramVec
	unmatched                                       *prometheus.CounterVec // broker
	clientRequests, clientErrors                    *prometheus.CounterVec // client_id
	connsByRole                                     [numRoles]prometheus.Gauge
	opened, closed                                  prometheus.Counter
	attempts                                        *prometheus.CounterVec // reason
	findings                                        *prometheus.GaugeVec   // detector, severity
	tableSize, tableBound                           *prometheus.GaugeVec   // table
	packets, bytes                                  prometheus.Counter
	kernelReceived, kernelDropped                   prometheus.Counter
	folded                                          [numFolds]prometheus.Counter

	brokers    map[string]*broker // by server endpoint
	nbrokers   int
	otherBroke *broker
	nseries    int
	nerrs      int     // (api, version, broker, error) series but "other"
	nkeys      int     // API keys decode knows: 0..nkeys-1
	overflow   *series // api, version, broker "other"
	clients    map[string]*client
	otherCli   *client
	conns      map[*flows.ConnInfo]*connState
	// recent is a direct-mapped cache in front of conns, by connection
	// number: with thousands of connections interleaved, the map lookup
	// was a cache miss per event.
	recent     []recentConn
	scratch    connState // for connections past MaxConns
	findingSet map[findingKey]int
	nextAge    time.Time // capture time of the next look for idle connections
	// the capture's counters as last added
	sawPackets, sawBytes int64
	sawLive              capture.LiveStats
}

// What folded counts: requests whose label values were folded into
// "other" because of a cap.
const (
	foldBroker = iota
	foldClient
	foldSeries
	foldError
	numFolds
)

var foldNames = [numFolds]string{"broker", "client_id", "series", "error"}

// numRoles is flows' roles (cluster.Role is a uint8 below 16).
const numRoles = 16

// recentSize is the number of entries of Metrics.recent (a power of 2).
const recentSize = 4096

type recentConn struct {
	ci *flows.ConnInfo
	cs *connState
}

type findingKey struct {
	detector string
	severity detectors.Severity
}

// broker is one server endpoint's label value and its series, indexed by
// API key and version (the last slot of each is the unknown ones).
type broker struct {
	label     string
	keys      [][]*series
	unmatched prometheus.Counter
	other     bool
}

// series is the children of one (api, version, broker), resolved once:
// a collect.Tally, counted as the report and the terminal UI count.
type series struct {
	m                    *Metrics
	api, version, broker string
	requests, responses  prometheus.Counter
	errorResponses       prometheus.Counter
	unanswered           prometheus.Counter
	reqBytes, respBytes  prometheus.Counter
	latency              prometheus.Observer
	errs                 []errChild // by code, a cache
	names                []errName  // the error label values of its own
	otherErr             prometheus.Counter
	folded               bool
}

type errChild struct {
	code  int16
	c     prometheus.Counter
	other bool
}

type errName struct {
	name string
	c    prometheus.Counter
}

// maxErrChildren bounds a series' error codes found by code; past it a
// code's label is found again among the series' names each time.
const maxErrChildren = 64

type client struct {
	requests, errors prometheus.Counter
	other            bool
}

// connState is what is kept per connection: its broker, its client id's
// children, the roles counted in the gauge, its last request.
type connState struct {
	broker   *broker
	clientID string
	client   *client
	roles    uint16
	last     time.Time
	tracked  bool
}

// New returns the metrics, registered in a registry of their own with Go's
// and the process's collectors.
func New(cfg Config) *Metrics {
	cfg.defaults()
	m := &Metrics{
		cfg:        cfg,
		reg:        prometheus.NewRegistry(),
		brokers:    map[string]*broker{},
		clients:    map[string]*client{},
		conns:      map[*flows.ConnInfo]*connState{},
		recent:     make([]recentConn, recentSize),
		findingSet: map[findingKey]int{},
		nkeys:      keysKnown(),
	}
	f := factory{m.reg}
	avb := []string{"api", "version", "broker"}
	m.requests = f.counterVec("kfsniff_requests_total", "Kafka request frames, by API, version and broker (server endpoint).", avb)
	m.responses = f.counterVec("kfsniff_responses_total", "Kafka responses paired with their request, by API, version and broker.", avb)
	m.errorResponses = f.counterVec("kfsniff_error_responses_total", "Responses carrying at least one non-zero error code, by API, version and broker.", avb)
	m.unanswered = f.counterVec("kfsniff_unanswered_requests_total", "Requests known never to have been answered (a later response on the connection passed them, or a bound dropped them), by API, version and broker.", avb)
	m.errorCodes = f.counterVec("kfsniff_response_errors_total", "Non-zero error codes in responses (one per partition, group or resource that carries one), by API, version, broker and error name (UNKNOWN_ERROR_CODE for codes Kafka does not define).", append(avb, "error"))
	m.reqBytes = f.counterVec("kfsniff_request_bytes_total", "Bytes of Kafka request frames (size prefix included), by API and broker.", []string{"api", "broker"})
	m.respBytes = f.counterVec("kfsniff_response_bytes_total", "Bytes of Kafka response frames paired with their request (size prefix included), by API and broker.", []string{"api", "broker"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:                            "kfsniff_response_latency_seconds",
		Help:                            "Time from a request's last packet to its response's last packet, by API and broker.",
		Buckets:                         LatencyBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}, []string{"api", "broker"})
	m.reg.MustRegister(m.latency)
	m.unmatched = f.counterVec("kfsniff_unmatched_responses_total", "Responses whose request was not captured, by broker.", []string{"broker"})
	m.clientRequests = f.counterVec("kfsniff_client_requests_total", "Kafka requests by client id (the first "+strconv.Itoa(cfg.MaxClientIDs)+" seen; the rest under \"other\").", []string{"client_id"})
	m.clientErrors = f.counterVec("kfsniff_client_error_responses_total", "Responses carrying at least one error code, by the request's client id (capped as kfsniff_client_requests_total).", []string{"client_id"})
	roles := f.gaugeVec("kfsniff_connections", "Open Kafka connections that carried requests of each role (a connection counts once in each of its roles); closed by FIN or RST, or idle for "+cfg.IdleAfter.String()+" of capture time.", []string{"role"})
	for r := cluster.RoleLiveness; r < cluster.Role(len(m.connsByRole)) && r.String() != "?"; r++ {
		m.connsByRole[r] = roles.WithLabelValues(r.String())
	}
	m.opened = f.counter("kfsniff_connections_opened_total", "Kafka connections seen opening (or, for those the capture joined, first seen).")
	m.closed = f.counter("kfsniff_connections_closed_total", "Kafka connections closed by FIN or RST.")
	m.attempts = f.counterVec("kfsniff_connection_attempts_failed_total", "Connection attempts to Kafka endpoints that failed: refused (SYN answered by RST) or syn-unanswered.", []string{"reason"})
	m.attempts.WithLabelValues(flows.ConnRefused.String())
	m.attempts.WithLabelValues(flows.ConnUnanswered.String())
	m.findings = f.gaugeVec("kfsniff_findings", "Findings as they stand, by detector and severity (the detectors' live snapshot, updated every 2 s).", []string{"detector", "severity"})
	for _, d := range cfg.Detectors {
		for _, s := range []detectors.Severity{detectors.Info, detectors.Warning, detectors.Error} {
			m.findings.WithLabelValues(d, s.String())
			m.findingSet[findingKey{d, s}] = 0
		}
	}
	m.tableSize = f.gaugeVec("kfsniff_table_size", "Entries (bytes for buffered_bytes) of the analysis's tables that grow with the traffic, as they stand (live capture on one worker; the metrics' own per-connection table as metrics_connections).", []string{"table"})
	m.tableBound = f.gaugeVec("kfsniff_table_bound", "The bound of each table of kfsniff_table_size (0: none).", []string{"table"})
	m.packets = f.counter("kfsniff_capture_packets_total", "Packets analysed (after the capture filter).")
	m.bytes = f.counter("kfsniff_capture_bytes_total", "Bytes of the packets analysed, as captured.")
	if cfg.Live {
		m.kernelReceived = f.counter("kfsniff_capture_kernel_received_total", "Packets the kernel passed to the live capture's filter (PACKET_STATISTICS).")
		m.kernelDropped = f.counter("kfsniff_capture_kernel_drops_total", "Packets the kernel dropped because the capture ring was full (PACKET_STATISTICS): traffic kfsniff never saw.")
	}
	folded := f.counterVec("kfsniff_metrics_folded_total", "Requests (error codes, for the label error) counted under the label value \"other\" because a cap on label values was reached, by the label that was capped.", []string{"label"})
	for i, n := range foldNames {
		m.folded[i] = folded.WithLabelValues(n)
	}
	m.otherBroke = &broker{label: Other, other: true, unmatched: m.unmatched.WithLabelValues(Other)}
	m.overflow = m.newSeries(Other, Other, m.otherBroke)
	m.overflow.folded = true
	m.otherCli = &client{requests: m.clientRequests.WithLabelValues(Other), errors: m.clientErrors.WithLabelValues(Other), other: true}
	// prometheus's own constructors, which collectors.NewGoCollector and
	// NewProcessCollector only call (their deprecation moved the names, not
	// the code): importing collectors put its init (regexps compiled) and
	// database/sql into every run of the binary (start-up, issue 29).
	m.reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

type factory struct{ reg *prometheus.Registry }

func (f factory) counterVec(name, help string, labels []string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(v)
	return v
}

func (f factory) gaugeVec(name, help string, labels []string) *prometheus.GaugeVec {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(v)
	return v
}

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

// Registry is where the metrics are registered (for tests and for adding
// more, e.g. shipping's once --export exists).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the format the scraper asks for: the text
// format, OpenMetrics, or protobuf (which carries native histograms).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true, MaxRequestsInFlight: m.cfg.MaxScrapes, Timeout: 10 * time.Second})
}

// state returns the connection's state, made on its first message.
func (m *Metrics) state(ci *flows.ConnInfo) *connState {
	e := &m.recent[ci.ID&(recentSize-1)]
	if e.ci == ci {
		return e.cs
	}
	cs := m.conns[ci]
	if cs == nil {
		if len(m.conns) >= m.cfg.MaxConns {
			// Not followed: resolved again at each message.
			m.scratch = connState{broker: m.broker(ci.Server.String()), clientID: m.scratch.clientID, client: m.scratch.client}
			return &m.scratch
		}
		cs = &connState{broker: m.broker(ci.Server.String()), tracked: true}
		m.conns[ci] = cs
	}
	e.ci, e.cs = ci, cs
	return cs
}

func (m *Metrics) broker(endpoint string) *broker {
	if b := m.brokers[endpoint]; b != nil {
		return b
	}
	if m.nbrokers >= m.cfg.MaxBrokers {
		return m.otherBroke
	}
	m.nbrokers++
	b := &broker{label: endpoint, unmatched: m.unmatched.WithLabelValues(endpoint)}
	m.brokers[endpoint] = b
	return b
}

// series returns the children of (key, version) at broker b.
func (m *Metrics) series(b *broker, key, version int16) *series {
	if b.keys == nil {
		b.keys = make([][]*series, m.nkeys+1)
	}
	ki := int(key)
	if !decode.KnownKey(key) {
		key, ki = -1, len(b.keys)-1
	}
	vs := b.keys[ki]
	if vs == nil {
		vs = make([]*series, decode.MaxVersion(key)+2)
		b.keys[ki] = vs
	}
	vi := int(version)
	if !decode.KnownVersion(key, version) {
		vi = len(vs) - 1
	}
	s := vs[vi]
	if s == nil {
		if m.nseries >= m.cfg.MaxSeries {
			return m.overflow
		}
		api, ver := "unknown", "unknown"
		if key >= 0 {
			api = decode.Name(key)
			if vi < len(vs)-1 {
				ver = strconv.Itoa(vi)
			}
		}
		s = m.newSeries(api, ver, b)
		s.folded = b.other
		m.nseries++
		vs[vi] = s
	}
	return s
}

func (m *Metrics) newSeries(api, version string, b *broker) *series {
	return &series{
		m: m, api: api, version: version, broker: b.label,
		requests:       m.requests.WithLabelValues(api, version, b.label),
		responses:      m.responses.WithLabelValues(api, version, b.label),
		errorResponses: m.errorResponses.WithLabelValues(api, version, b.label),
		unanswered:     m.unanswered.WithLabelValues(api, version, b.label),
		reqBytes:       m.reqBytes.WithLabelValues(api, b.label),
		respBytes:      m.respBytes.WithLabelValues(api, b.label),
		latency:        m.latency.WithLabelValues(api, b.label),
	}
}

// keysKnown is one more than the highest API key decode knows.
func keysKnown() int {
	n := 0
	for k := 0; k <= 1<<12; k++ {
		if decode.KnownKey(int16(k)) {
			n = k + 1
		}
	}
	return n
}

func (s *series) errCounter(m *Metrics, code int16) (prometheus.Counter, bool) {
	for i := range s.errs {
		if s.errs[i].code == code {
			return s.errs[i].c, s.errs[i].other
		}
	}
	name := decode.ErrorName(code)
	if strings.HasPrefix(name, "UNKNOWN_ERROR_CODE_") {
		name = "UNKNOWN_ERROR_CODE"
	}
	var c prometheus.Counter
	for _, n := range s.names {
		if n.name == name {
			c = n.c
		}
	}
	other := false
	if c == nil {
		if len(s.names) < m.cfg.MaxErrorNames && m.nerrs < m.cfg.MaxErrorSeries {
			c = m.errorCodes.WithLabelValues(s.api, s.version, s.broker, name)
			s.names = append(s.names, errName{name, c})
			m.nerrs++
		} else {
			if s.otherErr == nil {
				s.otherErr = m.errorCodes.WithLabelValues(s.api, s.version, s.broker, Other)
			}
			c, other = s.otherErr, true
		}
	}
	if len(s.errs) < maxErrChildren {
		s.errs = append(s.errs, errChild{code, c, other})
	}
	return c, other
}

// client returns the children of a client id, cached on the connection.
func (m *Metrics) client(cs *connState, id string) *client {
	if cs.client != nil && cs.clientID == id {
		return cs.client
	}
	c := m.clients[id]
	if c == nil {
		if len(m.clients) >= m.cfg.MaxClientIDs {
			c = m.otherCli
		} else {
			label := "(none)"
			if id != "" {
				label = report.Clean(id)
			}
			c = &client{requests: m.clientRequests.WithLabelValues(label), errors: m.clientErrors.WithLabelValues(label)}
			m.clients[id] = c
		}
	}
	cs.clientID, cs.client = id, c
	return c
}

// OnRequest counts a request frame: per API, version and broker, per
// client id, and the connection's role.
func (m *Metrics) OnRequest(msg *flows.Message) {
	if msg.Conn == nil {
		return
	}
	cs := m.state(msg.Conn)
	s := m.series(cs.broker, msg.Key, msg.Version)
	collect.CountRequest(s, msg)
	s.reqBytes.Add(float64(msg.Size))
	cl := m.client(cs, msg.Client.ID)
	cl.requests.Inc()
	if s.folded {
		m.folded[foldSeries].Inc()
		if cs.broker.other {
			m.folded[foldBroker].Inc()
		}
	}
	if cl.other {
		m.folded[foldClient].Inc()
	}
	cs.last = msg.Time
	m.age(msg.Time)
	if r := msg.Role; r > cluster.RoleNone && int(r) < numRoles && cs.tracked && m.connsByRole[r] != nil {
		if bit := uint16(1) << r; cs.roles&bit == 0 {
			cs.roles |= bit
			m.connsByRole[r].Inc()
		}
	}
}

// OnExchange counts a response, its error codes, bytes and latency, or an
// unanswered request.
func (m *Metrics) OnExchange(x *flows.Exchange) {
	if x.Conn == nil {
		return
	}
	cs := m.state(&x.Conn.ConnInfo)
	if x.Req == nil {
		if x.Resp != nil {
			cs.broker.unmatched.Inc()
		}
		return
	}
	s := m.series(cs.broker, x.Req.Key, x.Req.Version)
	switch collect.CountExchange(s, x) {
	case collect.AnsweredErrors:
		m.client(cs, x.Req.Client.ID).errors.Inc()
		fallthrough
	case collect.Answered:
		s.respBytes.Add(float64(x.Resp.Size))
	}
}

// AddRequest implements collect.Tally.
func (s *series) AddRequest(bool) { s.requests.Inc() }

// AddUnanswered implements collect.Tally.
func (s *series) AddUnanswered() { s.unanswered.Inc() }

// AddAnswered implements collect.Tally: the response, its latency, and
// its error codes by name.
func (s *series) AddAnswered(latency time.Duration, codes []flows.ErrorCount, _ bool) {
	s.responses.Inc()
	s.latency.Observe(latency.Seconds())
	if len(codes) == 0 {
		return
	}
	s.errorResponses.Inc()
	for _, e := range codes {
		c, other := s.errCounter(s.m, e.Code)
		c.Add(float64(e.Count))
		if other {
			s.m.folded[foldError].Add(float64(e.Count))
		}
	}
}

// OnConnEvent counts connections opened and closed, and failed attempts.
func (m *Metrics) OnConnEvent(e *flows.ConnEvent) {
	switch e.Kind {
	case flows.ConnOpened:
		m.opened.Inc()
	case flows.ConnClosed:
		m.closed.Inc()
		if e.Conn != nil {
			m.forget(&e.Conn.ConnInfo)
		}
	case flows.ConnRefused, flows.ConnUnanswered:
		m.attempts.WithLabelValues(e.Kind.String()).Inc()
	}
}

// forget drops a connection's state and its roles from the gauge.
func (m *Metrics) forget(ci *flows.ConnInfo) {
	cs := m.conns[ci]
	if cs == nil {
		return
	}
	m.drop(ci, cs)
}

// drop forgets a connection: its state, and its roles in the gauge.
func (m *Metrics) drop(ci *flows.ConnInfo, cs *connState) {
	for r := 1; r < numRoles; r++ {
		if cs.roles&(1<<r) != 0 {
			m.connsByRole[r].Dec()
		}
	}
	cs.roles = 0
	delete(m.conns, ci)
	if e := &m.recent[ci.ID&(recentSize-1)]; e.ci == ci {
		*e = recentConn{}
	}
}

// Capture takes the analysis's counters as they stand (cumulative:
// packets and bytes analysed, and the kernel's counters of a live capture,
// nil otherwise). It touches nothing the handler does, so it may run on
// another goroutine than the handler's (pipeline.Options.Progress runs on
// the reading goroutine, the handlers on the merging one when sharded),
// but not concurrently with itself.
func (m *Metrics) Capture(packets, bytes int64, live *capture.LiveStats) {
	addNew(m.packets, packets, &m.sawPackets)
	addNew(m.bytes, bytes, &m.sawBytes)
	if live != nil && m.kernelReceived != nil {
		addNew(m.kernelReceived, live.Received, &m.sawLive.Received)
		addNew(m.kernelDropped, live.Dropped, &m.sawLive.Dropped)
	}
}

// addNew adds to c what a cumulative count now has past *saw.
func addNew[T int64 | uint64](c prometheus.Counter, now T, saw *T) {
	if now > *saw {
		c.Add(float64(now - *saw))
		*saw = now
	}
}

// Tables sets kfsniff_table_size and kfsniff_table_bound to the
// analyzer's tables (flows.Analyzer.Tables) and the metrics' own
// per-connection table. It reads that table, so it must run on the
// goroutine of the handlers (pipeline.Progress carries tables only when
// one analyzer runs on the reading goroutine).
func (m *Metrics) Tables(ts []flows.Table) {
	for _, t := range ts {
		m.tableSize.WithLabelValues(t.Name).Set(float64(t.Size))
		m.tableBound.WithLabelValues(t.Name).Set(float64(t.Bound))
	}
	m.tableSize.WithLabelValues("metrics_connections").Set(float64(len(m.conns)))
	m.tableBound.WithLabelValues("metrics_connections").Set(float64(m.cfg.MaxConns))
}

// age takes the connections idle for Config.IdleAfter at capture time now
// out of kfsniff_connections, every eighth of IdleAfter at most.
func (m *Metrics) age(now time.Time) {
	if now.Before(m.nextAge) {
		return
	}
	m.nextAge = now.Add(m.cfg.IdleAfter / 8)
	cut := now.Add(-m.cfg.IdleAfter)
	for ci, cs := range m.conns {
		if cs.last.Before(cut) {
			m.drop(ci, cs)
		}
	}
}

// Findings sets the findings gauges to the findings as they stand
// (pipeline.Options.LiveFindings, and the report's at the end): a
// detector's count can go down, as a snapshot is not a log.
func (m *Metrics) Findings(fs []detectors.Finding) {
	for k := range m.findingSet {
		m.findingSet[k] = 0
	}
	for _, f := range fs {
		m.findingSet[findingKey{f.Detector, f.Severity}]++
	}
	for k, n := range m.findingSet {
		m.findings.WithLabelValues(k.detector, k.severity.String()).Set(float64(n))
	}
}
